"""CheckpointException: a save or load failed on some ranks (torch's class, a BaseException)."""

from __future__ import annotations

__all__ = ["CheckpointException"]


class CheckpointException(BaseException):
    """Raised on every rank when a checkpoint save or load failed on any; ``failures`` maps
    each failed rank to its error."""

    def __init__(self, msg: str, failures: dict[int, BaseException]) -> None:
        super().__init__(msg, failures)
        self._failures = failures

    @property
    def failures(self) -> dict[int, BaseException]:
        return self._failures

    def __str__(self) -> str:
        lines = [f"CheckpointException ranks:{self._failures.keys()}"]
        for rank, err in self._failures.items():
            lines.append(f"(RANK {rank}) {type(err).__name__}: {err}")
        return "\n".join(lines)
