"""Helpers shared by the data tests (a module of its own: conftest.py files of several packages
collide when imported by name)."""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
from typing import Callable, Iterator


def shm_segments() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("ember_")}
    except OSError:
        return set()


def segment_creator(segment: str) -> int | None:
    """The pid in a segment's name (ember_<pid>_..., ember_dist_<pid>_...)."""
    return next((int(p) for p in segment.split("_")[1:] if p.isdigit()), None)


@contextlib.contextmanager
def own_segments() -> Iterator[Callable[[], set[str]]]:
    """Yields a function listing the segments in /dev/shm made by this process or by a process
    it started (through multiprocessing) inside the block, dead or alive. Other test runs on the
    machine make and remove segments meanwhile: a killed tree's stay until its janitor sees the
    whole tree gone, so a dead process's segment need not be ours (telling them apart by "dead
    or a child of ours" made the leak checks flaky on a busy machine)."""
    pids = {os.getpid()}
    base = multiprocessing.process.BaseProcess
    start = base.start

    def recording_start(self):  # type: ignore[no-untyped-def]
        try:
            start(self)
        finally:
            if self.pid is not None:
                pids.add(self.pid)

    base.start = recording_start  # type: ignore[method-assign]
    try:
        yield lambda: {n for n in shm_segments() if segment_creator(n) in pids}
    finally:
        base.start = start  # type: ignore[method-assign]
