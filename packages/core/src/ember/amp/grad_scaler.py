"""Loss scaling for mixed-precision training (PyTorch's ``GradScaler``).

Multiplying the loss by a large factor keeps small float16 gradients from flushing to zero;
``step`` unscales the gradients, skips the optimizer step when any of them is inf/NaN, and
``update`` shrinks the factor after such a step and grows it after ``growth_interval`` clean
ones. With ``enabled=False`` every method is a pass-through, so one script serves both modes.

>>> import ember
>>> model = ember.nn.Linear(2, 1)
>>> opt = ember.optim.SGD(model.parameters(), lr=0.1)
>>> scaler = ember.amp.GradScaler("cpu", init_scale=1024.0)
>>> loss = model(ember.ones(4, 2)).pow(2).mean()
>>> scaler.scale(loss).backward()
>>> scaler.step(opt)
>>> scaler.update()
>>> scaler.get_scale()
1024.0
"""

from __future__ import annotations

import math
import struct
import warnings
from typing import Any

from ember._C import Tensor

__all__ = ["GradScaler", "OptState"]

_F32_MAX = 3.4028234663852886e38


def _f32(x: float) -> float:
    """x rounded to float32 (the scale is kept in float32, as PyTorch keeps it)."""
    if math.isnan(x) or abs(x) > _F32_MAX:
        return x if math.isnan(x) else math.copysign(math.inf, x)
    return struct.unpack("<f", struct.pack("<f", x))[0]


class OptState:
    """Where an optimizer is in the current iteration (constants; no enum, to keep import light)."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """Scales losses and unscales gradients for mixed-precision training.

    ``device`` is the device of the gradients ("cpu", or "cuda": without CUDA, a "cuda" scaler
    warns and disables itself, as PyTorch's does). Typical loop::

        scaler.scale(loss).backward()
        scaler.unscale_(opt)            # optional: e.g. before clipping gradients
        scaler.step(opt)                # skipped when a gradient is inf/NaN
        scaler.update()
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = str(device)
        self._enabled = bool(enabled)
        if self._enabled and self._device.startswith("cuda"):
            import ember

            if not ember.cuda.is_available():
                warnings.warn("ember.amp.GradScaler is enabled, but CUDA is not available; "
                              "disabling it (use GradScaler('cpu') for CPU training)",
                              UserWarning, stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
            if not 0.0 < backoff_factor < 1.0:
                raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got "
                                 f"{backoff_factor}")
            if not isinstance(growth_interval, int) or growth_interval <= 0:
                raise ValueError(f"GradScaler: growth_interval must be a positive int, got "
                                 f"{growth_interval!r}")
        self._init_scale = _f32(float(init_scale))
        self._scale = self._init_scale
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    # ---- scaling ----------------------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """outputs (a tensor, or nested lists/tuples/dicts of tensors) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            import ember

            return outputs * ember.tensor(self._scale, dtype=ember.float32)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        raise ValueError(f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, "
                         f"got {type(outputs).__name__}")

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": OptState.READY,
                                                              "found_inf": 0.0})

    def unscale_(self, optimizer: Any) -> None:
        """Divides the gradients of ``optimizer``'s parameters by the scale (in place) and
        records whether any is inf/NaN. At most once per optimizer between ``update`` calls."""
        if not self._enabled:
            return
        import ember

        st = self._state(optimizer)
        if st["stage"] is OptState.UNSCALED:
            raise RuntimeError("GradScaler.unscale_() has already been called on this optimizer "
                               "since the last update()")
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("GradScaler.unscale_() was called after step(); call it before")
        inv = _f32(1.0 / self._scale)
        found = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.dtype is ember.float16:
                    raise ValueError("GradScaler: attempting to unscale float16 gradients; keep "
                                     "the parameters in float32 (autocast casts them per op)")
                g.mul_(inv)
                if not found and not bool(ember.isfinite(g).all()):
                    found = True
        st["found_inf"] = 1.0 if found else 0.0
        st["stage"] = OptState.UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscales (unless ``unscale_`` already did) and runs ``optimizer.step(*args,
        **kwargs)`` unless a gradient was inf/NaN; returns what step returned (None if
        skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: a closure is not supported while the scaler is "
                               "enabled")
        st = self._state(optimizer)
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("GradScaler.step() has already been called since the last "
                               "update()")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        retval = None
        if not st["found_inf"]:
            retval = optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adjusts the scale for the next iteration (or sets it to ``new_scale``)."""
        if not self._enabled:
            return
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise ValueError("GradScaler.update: new_scale must be a 1-element tensor")
                new_scale = new_scale.item()
            self._scale = _f32(float(new_scale))
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values()
                     if s["stage"] is not OptState.READY]
            if not found:
                raise RuntimeError("GradScaler.update: no inf checks were recorded before "
                                   "update(); call step() (or unscale_()) first")
            if sum(found) > 0:
                self._scale = _f32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = _f32(self._scale * self._growth_factor)
                    if math.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer.clear()

    # ---- accessors --------------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def is_enabled(self) -> bool:
        return self._enabled

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def state_dict(self) -> dict[str, Any]:
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker ({} when
        disabled), the keys PyTorch uses."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty (saved from "
                               "a disabled GradScaler?)")
        self._init_scale = self._scale = _f32(float(state_dict["scale"]))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
