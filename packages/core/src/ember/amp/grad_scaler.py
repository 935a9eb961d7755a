"""Loss scaling for mixed-precision training (PyTorch's ``GradScaler``).

Multiplying the loss by a large factor keeps small float16 gradients from flushing to zero;
``step`` unscales the gradients, skips the optimizer step when any of them is inf/NaN, and
``update`` shrinks the factor after such a step and grows it after ``growth_interval`` clean
ones. With ``enabled=False`` every method is a pass-through, so one script serves both modes.

The scale and the growth tracker are one-element tensors on the gradients' device, and the check
and the update are engine ops (``_amp_foreach_non_finite_check_and_unscale_`` over all the
gradients of a device and dtype at once, ``_amp_update_scale_``), so on a GPU nothing waits for
the device except the one read of the inf flag that decides whether ``step`` runs.

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
import operator
import warnings
from typing import Any

from ember import _C
from ember._C import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState:
    """Where an optimizer is in the current iteration (constants; no enum, to keep import light)."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _device_key(t: Tensor) -> str:
    return str(t.device)


def _is_count(v: Any) -> bool:
    """An int (a NumPy or 0-d integer tensor too), not a bool."""
    if isinstance(v, bool):
        return False
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _check_settings(where: str, scale: Any, growth_factor: Any, backoff_factor: Any,
                    growth_interval: Any) -> None:
    """The scaler's numbers must keep it working: a scale of 0, a negative or non-finite one, or
    a growth factor of inf, made every step look like an overflow and be skipped, silently."""
    def number(name: str, v: Any) -> float:
        # (a 0-d tensor too: torch's load_state_dict fills the scale from one)
        if isinstance(v, (bool, str, bytes, complex)) or not hasattr(v, "__float__"):
            raise TypeError(f"{where}: {name} must be a number, got {type(v).__name__}")
        return float(v)

    s, g, b = number("scale", scale), number("growth_factor", growth_factor), \
        number("backoff_factor", backoff_factor)
    if not (math.isfinite(s) and s > 0.0):
        raise ValueError(f"{where}: the scale must be a positive finite number, got {s}")
    if not (math.isfinite(g) and g > 1.0):
        raise ValueError(f"{where}: growth_factor must be a finite number > 1, got {g}")
    if not 0.0 < b < 1.0:
        raise ValueError(f"{where}: backoff_factor must be in (0, 1), got {b}")
    if not _is_count(growth_interval) or growth_interval <= 0:
        raise ValueError(f"{where}: growth_interval must be a positive int, got "
                         f"{growth_interval!r}")


class GradScaler:
    """Scales losses and unscales gradients for mixed-precision training.

    ``device`` is the device type of the gradients ("cpu", or "cuda": without CUDA, a "cuda"
    scaler warns and disables itself, as PyTorch's does). Typical loop::

        scaler.scale(loss).backward()
        scaler.unscale_(opt)            # optional: e.g. before clipping gradients
        scaler.step(opt)                # skipped when a gradient is inf/NaN
        scaler.update()

    >>> import ember
    >>> scaler = ember.amp.GradScaler("cpu", init_scale=8.0, growth_interval=1)
    >>> w = ember.nn.Parameter(ember.ones(2))
    >>> opt = ember.optim.SGD([w], lr=0.1)
    >>> scaler.scale((w * 3).sum()).backward()
    >>> w.grad.tolist()
    [24.0, 24.0]
    >>> scaler.step(opt)
    >>> scaler.update()
    >>> scaler.get_scale()
    16.0
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
            _check_settings("GradScaler", init_scale, growth_factor, backoff_factor,
                            growth_interval)
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        # Created on the device of the first scaled output (the gradients' device).
        self._scale: Tensor | None = None
        self._growth_tracker: Tensor | None = None
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    def _lazy_init(self, device: Any) -> None:
        import ember

        self._scale = ember.full((), self._init_scale, dtype=ember.float32, device=device)
        self._growth_tracker = ember.full((), self._init_growth_tracker, dtype=ember.int32,
                                          device=device)

    def _check_initialized(self, what: str) -> tuple[Tensor, Tensor]:
        if self._scale is None or self._growth_tracker is None:
            raise RuntimeError(f"GradScaler.{what}: the scale is not initialized yet; call "
                               "scaler.scale(loss) earlier in the iteration")
        return self._scale, self._growth_tracker

    # ---- scaling ----------------------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """outputs (a tensor, or nested lists/tuples/dicts of tensors) times the scale (a
        float32 0-d tensor: outputs keep their dtype)."""
        if not self._enabled:
            return outputs
        copies: dict[str, Tensor] = {}

        def one(t: Tensor) -> Tensor:
            if self._scale is None:
                self._lazy_init(t.device)
            assert self._scale is not None
            key = _device_key(t)
            s = copies.get(key)
            if s is None:
                s = copies[key] = (self._scale if _device_key(self._scale) == key
                                   else self._scale.to(t.device))
            return t * s

        def walk(o: Any) -> Any:
            if isinstance(o, Tensor):
                return one(o)
            if isinstance(o, (list, tuple)):
                return type(o)(walk(v) for v in o)
            if isinstance(o, dict):
                return {k: walk(v) for k, v in o.items()}
            raise ValueError(f"GradScaler.scale: outputs must be a Tensor or an iterable of "
                             f"Tensors, got {type(o).__name__}")

        return walk(outputs)

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer.setdefault(id(optimizer), _fresh_state())

    def _unscale_grads(self, optimizer: Any, inv_scale: Tensor,
                       found_inf: Tensor) -> dict[str, Tensor]:
        """Unscales every gradient of optimizer in one engine call per (device, dtype); returns
        the inf flag of each device."""
        import ember

        groups: dict[tuple[str, Any], list[Tensor]] = {}
        devices: dict[str, Any] = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.dtype is ember.float16:
                    raise ValueError("GradScaler: attempting to unscale float16 gradients; keep "
                                     "the parameters in float32 (autocast casts them per op)")
                key = _device_key(g)
                devices.setdefault(key, g.device)
                groups.setdefault((key, g.dtype), []).append(g)
        flags: dict[str, Tensor] = {}
        invs: dict[str, Tensor] = {}
        home = _device_key(found_inf)
        for (key, _), grads in groups.items():
            if key not in flags:
                flags[key] = found_inf if key == home else found_inf.to(devices[key])
                invs[key] = inv_scale if key == home else inv_scale.to(devices[key])
            with ember.no_grad():
                _C._amp_foreach_non_finite_check_and_unscale_(grads, flags[key], invs[key])
        return flags

    def unscale_(self, optimizer: Any) -> None:
        """Divides the gradients of ``optimizer``'s parameters by the scale (in place) and
        records whether any is inf/NaN. At most once per optimizer between ``update`` calls."""
        if not self._enabled:
            return
        import ember

        scale, _ = self._check_initialized("unscale_")
        st = self._state(optimizer)
        if st["stage"] == OptState.UNSCALED:
            raise RuntimeError("GradScaler.unscale_() has already been called on this optimizer "
                               "since the last update()")
        if st["stage"] == OptState.STEPPED:
            raise RuntimeError("GradScaler.unscale_() was called after step(); call it before")
        # 1 / scale in float64, rounded to float32 (a power of two in practice: exact)
        inv_scale = scale.double().reciprocal().float()
        found_inf = ember.full((), 0.0, dtype=ember.float32, device=scale.device)
        st["found_inf_per_device"] = self._unscale_grads(optimizer, inv_scale, found_inf)
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
        self._check_initialized("step")
        st = self._state(optimizer)
        if st["stage"] == OptState.STEPPED:
            raise RuntimeError("GradScaler.step() has already been called since the last "
                               "update()")
        if st["stage"] == OptState.READY:
            self.unscale_(optimizer)
        if not st["found_inf_per_device"]:
            raise RuntimeError("GradScaler.step: no inf checks were recorded for this optimizer "
                               "(none of its parameters has a gradient)")
        retval = None
        # the one host read per step: whether any device saw an inf/NaN
        if not sum(v.item() for v in st["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adjusts the scale for the next iteration (or sets it to ``new_scale``, a float or a
        one-element float32 tensor that does not require grad)."""
        if not self._enabled:
            return
        scale, tracker = self._check_initialized("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                import ember

                if (new_scale.numel() != 1 or new_scale.dtype is not ember.float32
                        or new_scale.requires_grad):
                    raise ValueError("GradScaler.update: new_scale must be a float or a "
                                     "one-element float32 tensor with requires_grad=False")
                scale.copy_(new_scale.detach().reshape(()).to(scale.device))
            else:
                scale.fill_(float(new_scale))
        else:
            found = [f if _device_key(f) == _device_key(scale) else f.to(scale.device)
                     for s in self._per_optimizer.values()
                     for f in s["found_inf_per_device"].values()]
            if not found:
                raise RuntimeError("GradScaler.update: no inf checks were recorded before "
                                   "update(); call step() (or unscale_()) first")
            combined = found[0]
            for f in found[1:]:
                combined = combined + f
            _C._amp_update_scale_(scale, tracker, combined, self._growth_factor,
                                  self._backoff_factor, self._growth_interval)
        self._per_optimizer.clear()

    # ---- accessors --------------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled; reads the device's value: a sync on a GPU)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return int(self._growth_tracker.item())

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
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty (saved from "
                               "a disabled GradScaler?)")
        # every entry read and checked before any is applied: a bad state dict leaves the
        # scaler as it was (a scale of 0 or NaN skipped every later step without an error)
        keys = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
        missing = [k for k in keys if k not in state_dict]
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: the state dict lacks {missing} (keys: "
                           f"{sorted(state_dict)})")
        scale, growth, backoff, interval, tracker = (state_dict[k] for k in keys)
        _check_settings("GradScaler.load_state_dict", scale, growth, backoff, interval)
        if not _is_count(tracker) or tracker < 0:
            raise ValueError(f"GradScaler.load_state_dict: _growth_tracker must be an int >= 0, "
                             f"got {tracker!r}")
        self._init_scale = float(scale)
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
        self._growth_factor = float(growth)
        self._backoff_factor = float(backoff)
        self._growth_interval = int(interval)
        self._init_growth_tracker = int(tracker)
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(self._init_growth_tracker)

    def __getstate__(self) -> dict[str, Any]:
        """Pickles the scale and tracker as numbers (the tensors are re-created on use)."""
        state = self.__dict__.copy()
        if self._enabled:
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = state["_growth_tracker"] = None
        state["_per_optimizer"] = {}
        return state
