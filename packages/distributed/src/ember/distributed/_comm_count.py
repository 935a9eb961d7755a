"""Who is told about the collectives this process issues: CommDebugMode
(ember.distributed.tensor.debug) registers itself here while it is active, and each collective
entry point reports the op name it counts under (torch's: ``c10d.allreduce_`` for
``dist.all_reduce``, ``c10d_functional.all_gather_into_tensor`` for a functional all-gather or a
DTensor redistribution). A collective made of others reports only its own name: the nested
calls are not counted again.

>>> from ember.distributed._comm_count import counted_as
>>> with counted_as("c10d_functional.all_reduce"):  # nobody listening: nothing happens
...     pass
"""

from __future__ import annotations

import functools
import inspect
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

import ember

F = TypeVar("F", bound=Callable[..., Any])

# objects with a _record_comm(packet) method; appended / removed by CommDebugMode
observers: list[Any] = []
_local = threading.local()


def _packet(name: str) -> Any:
    ns, op = name.split(".")
    return getattr(getattr(ember.ops, ns), op)


@contextmanager
def counted_as(name: str) -> Iterator[None]:
    """Reports one collective ``name`` ("namespace.op") to the observers, unless inside another
    reported collective; collectives issued inside this block are not reported."""
    if not observers:
        yield
        return
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        packet = _packet(name)
        for obs in list(observers):
            obs._record_comm(packet)
    _local.depth = depth + 1
    try:
        yield
    finally:
        _local.depth = depth


def _outside_group(sig: inspect.Signature, args: tuple, kwargs: dict) -> bool:
    """Whether this rank is not in the call's ``group`` argument (the collective then returns
    at once, issuing nothing)."""
    from . import distributed_c10d

    try:
        group = sig.bind_partial(*args, **kwargs).arguments.get("group")
        return distributed_c10d._pg(group) is None
    except Exception:  # noqa: BLE001  (the call itself reports bad arguments)
        return False


def counted(name: str, *, group_arg: bool = False) -> Callable[[F], F]:
    """Decorator: each call of the function is one collective ``name`` (see counted_as);
    group_arg: not on a rank outside the call's ``group`` (a ProcessGroup or None)."""

    def wrap(fn: F) -> F:
        sig = inspect.signature(fn) if group_arg else None

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not observers or (sig is not None and _outside_group(sig, args, kwargs)):
                return fn(*args, **kwargs)
            with counted_as(name):
                return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
