"""Pieces shared by the backends: ReduceOp, errors, dtype codes and contiguous buffers."""

from __future__ import annotations

import contextlib
import enum
from typing import Any, Iterator

import ember

__all__ = ["DistBackendError", "DistError", "ReduceOp"]


class DistError(RuntimeError):
    """Base class of ember.distributed's errors."""


class DistBackendError(DistError):
    """A collective failed: a rank died, hung past the timeout, or the ranks disagree."""


class DistNetworkError(DistError):  # torch: DistNetworkError < DistError < RuntimeError
    """A network operation failed: a TCPStore client could not reach its server in time, or
    the server could not listen on its port."""


class ReduceOp(enum.IntEnum):
    """How all_reduce, reduce and reduce_scatter combine the ranks' tensors.

    Example::

        >>> dist.all_reduce(t, op=dist.ReduceOp.MAX)  # doctest: +SKIP
    """

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7

    # torch's names in messages: str(ReduceOp.MAX) is "RedOpType.MAX" (not "4")
    def __str__(self) -> str:
        return f"RedOpType.{self.name}"

    def __repr__(self) -> str:
        return f"<RedOpType.{self.name}: {int(self)}>"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    # torch spells the enum type ReduceOp.RedOpType.
    @classmethod
    def _missing_(cls, value: object) -> ReduceOp | None:
        if isinstance(value, str):
            return cls.__members__.get(value.upper())
        return None


ReduceOp.RedOpType = ReduceOp  # type: ignore[attr-defined]

_DTYPE_CODES = {
    ember.bool: 0, ember.uint8: 1, ember.int8: 2, ember.int16: 3, ember.int32: 4,
    ember.int64: 5, ember.float16: 6, ember.bfloat16: 7, ember.float32: 8, ember.float64: 9,
}


def dtype_code(dtype: Any) -> int:
    """The engine's ScalarType number of an ember dtype."""
    try:
        return _DTYPE_CODES[dtype]
    except KeyError:
        raise TypeError(f"ember.distributed: unsupported dtype {dtype}") from None


class CollectiveArgError(ValueError, RuntimeError):
    """A collective's argument of the wrong size or rank: a ValueError (ember's class for it),
    and a RuntimeError as PyTorch's gloo raises ("invalid tensor size", "invalid root rank")."""


class InitArgError(ValueError, AssertionError):
    """init_process_group's arguments that do not go together (a store and an init_method, a
    store without a world size, an unknown backend): a ValueError (ember's class for them), and
    an AssertionError as PyTorch raises."""


class InitRankError(ValueError, RuntimeError):
    """init_process_group's rank outside [0, world_size): a ValueError, and a RuntimeError as
    PyTorch's gloo raises ("rank < size")."""


class CollectiveListTypeError(ValueError, TypeError):
    """A collective's tensor list that is not a list: a ValueError (ember's class for it), and a
    TypeError as PyTorch raises."""


class ReduceOpDtypeError(TypeError, RuntimeError):
    """A reduction that the tensor's dtype cannot take: a TypeError, and a RuntimeError as
    PyTorch raises ("Cannot use ReduceOp.BAND with non-integral dtype")."""


def check_op_dtype(name: str, op: ReduceOp, dtype: Any) -> None:
    if op is ReduceOp.SUM:  # the common case, checked first
        return
    op = ReduceOp(op)
    if op == ReduceOp.AVG and not dtype.is_floating_point:
        raise ReduceOpDtypeError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got {dtype}")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype.is_floating_point:
        raise ReduceOpDtypeError(f"{name}: ReduceOp.{op.name} needs an integer or bool tensor, got "
                            f"{dtype}")


def check_tensor(name: str, t: Any, arg: str = "tensor") -> None:
    if not isinstance(t, ember.Tensor):
        raise TypeError(f"{name}: {arg} must be an ember.Tensor, got {type(t).__name__}")
    if getattr(type(t), "__torch_dispatch__", None) is not None:
        # a wrapper subclass (a DTensor) has no memory of its own for the backend to read
        raise TypeError(f"{name}: {arg} is a {type(t).__name__}; collectives take plain "
                        "tensors (a DTensor's piece is .to_local())")
    if t.device.type != "cpu":
        raise ValueError(f"{name}: {arg} is on {t.device}; this backend takes CPU tensors "
                         "(use the nccl backend for CUDA tensors)")


@contextlib.contextmanager
def src_buffer(t: Any, writeback: bool = False) -> Iterator[Any]:
    """t itself if contiguous, else a contiguous copy (copied back into t when writeback)."""
    if t.is_contiguous():
        yield t
        return
    c = t.contiguous()
    yield c
    if writeback:
        with ember.no_grad():
            t.copy_(c)


class out_buffer:  # noqa: N801  (used like a function)
    """A contiguous tensor to write an output into; finish() copies it to a strided output."""

    def __init__(self, t: Any) -> None:
        self.target = t
        self.tensor = t if t.is_contiguous() else ember.empty(t.shape, dtype=t.dtype)

    def finish(self) -> None:
        if self.tensor is not self.target:
            with ember.no_grad():
                self.target.copy_(self.tensor)
