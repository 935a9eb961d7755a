"""Helpers shared by the data tests (a module of its own: conftest.py files of several packages
collide when imported by name)."""

from __future__ import annotations

import os


def shm_segments() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("ember_")}
    except OSError:
        return set()


def foreign_segment(segment: str) -> bool:
    """A segment of a live process other than this one and its children: other test runs on
    the same machine (ember_<pid>_..., ember_dist_<pid>_...). This test's workers are gone when
    it is checked."""
    try:
        pid = int(next(p for p in segment.split("_")[1:] if p.isdigit()))
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (StopIteration, ValueError, OSError):
        return False
    state, ppid = fields[0], int(fields[1])
    return pid != os.getpid() and ppid != os.getpid() and state != "Z"
