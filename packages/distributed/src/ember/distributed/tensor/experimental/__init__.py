"""torch.distributed.tensor.experimental: implicit_replication (plain tensors mixed with
DTensors count as replicated) and local_map (a function written for pieces, applied to
DTensors)."""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Sequence

import ember

from .._dtensor import _IMPLICIT_REPLICATION, DTensor
from ..placement_types import Placement

__all__ = ["implicit_replication", "local_map"]


@contextlib.contextmanager
def implicit_replication() -> Iterator[None]:
    """Inside, an op given DTensors and plain tensors treats the plain ones as Replicate
    DTensors (outside, a plain floating tensor next to a DTensor is refused).

    Example::

        >>> with implicit_replication():  # doctest: +SKIP
        ...     y = dtensor * ember.ones(4)  # the ones on every rank
    """
    saved = _IMPLICIT_REPLICATION[0]
    _IMPLICIT_REPLICATION[0] = True
    try:
        yield
    finally:
        _IMPLICIT_REPLICATION[0] = saved


def local_map(func: Callable | None = None, out_placements: Any = None,
              in_placements: Sequence[Sequence[Placement] | None] | None = None,
              in_grad_placements: Sequence[Sequence[Placement] | None] | None = None,
              device_mesh: Any = None, *, redistribute_inputs: bool = False) -> Callable:
    """func, which works on plain tensors, made to take DTensors: each DTensor argument is
    passed as its piece (moved to in_placements[i] first when redistribute_inputs, else a
    layout other than in_placements[i] is a ValueError), and each tensor func returns becomes
    a DTensor laid out as out_placements (one placement list, or one per output; None: left
    plain). Without DTensor arguments func runs as is. Usable as a decorator.

    Example::

        >>> @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)],))  # doctest: +SKIP
        ... def double(x):
        ...     return x * 2
    """
    if func is None:
        return functools.partial(local_map, out_placements=out_placements,
                                 in_placements=in_placements,
                                 in_grad_placements=in_grad_placements, device_mesh=device_mesh,
                                 redistribute_inputs=redistribute_inputs)

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        mesh = device_mesh
        seen_dtensor = False
        local_args = []
        for i, a in enumerate(args):
            wanted = in_placements[i] if in_placements is not None and i < len(
                in_placements) else None
            if isinstance(a, DTensor):
                seen_dtensor = True
                mesh = mesh or a.device_mesh
                if wanted is not None and tuple(wanted) != a.placements:
                    if not redistribute_inputs:
                        raise ValueError(
                            f"local_map: argument {i} has placements {a.placements} but "
                            f"in_placements asks for {tuple(wanted)} (pass "
                            "redistribute_inputs=True to move it)")
                    a = a.redistribute(mesh, wanted)
                grad = in_grad_placements[i] if in_grad_placements is not None and i < len(
                    in_grad_placements) else None
                a = a.to_local(grad_placements=grad)
            local_args.append(a)
        out = func(*local_args, **kwargs)
        if not seen_dtensor:
            return out
        return _wrap(out, out_placements, mesh)

    return wrapped


def _wrap(out: Any, out_placements: Any, mesh: Any) -> Any:
    per_output = isinstance(out, (tuple, list))
    outs = list(out) if per_output else [out]
    layouts = out_placements
    single = layouts is None or (len(layouts) > 0 and isinstance(layouts[0], Placement))
    if single:
        layouts = [layouts] * len(outs)
    if len(layouts) != len(outs):
        raise ValueError(f"local_map: {len(outs)} outputs but {len(layouts)} out_placements")
    wrapped = [DTensor.from_local(o, mesh, p, run_check=False)
               if isinstance(o, ember.Tensor) and p is not None else o
               for o, p in zip(outs, layouts)]
    if not per_output:
        return wrapped[0]
    return type(out)(wrapped) if not hasattr(out, "_fields") else type(out)(*wrapped)


