"""Stateful: what dcp.save / dcp.load call on a value that is not a tensor (torch's protocol):
``state_dict()`` when saving, ``load_state_dict(sd)`` after loading. Modules and optimizers
are Stateful; so is any class with both methods (no need to subclass).

Example::

    >>> class AppState(Stateful):  # doctest: +SKIP
    ...     def __init__(self, model):
    ...         self.model = model
    ...     def state_dict(self):
    ...         return {"model": self.model.state_dict()}
    ...     def load_state_dict(self, state_dict):
    ...         self.model.load_state_dict(state_dict["model"])
    >>> dcp.save({"app": AppState(model)}, checkpoint_id="ckpt")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["Stateful", "StatefulT"]


@runtime_checkable
class Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]:
        ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        ...


StatefulT = Stateful
