"""The process tree's ``/dev/shm`` janitor lives in ``ember._shm_janitor`` (core), so that every
process that creates a named segment joins it, also without ``ember.multiprocessing``."""

from ember._shm_janitor import Handle, after_fork, ensure_started, running

__all__ = ["Handle", "after_fork", "ensure_started", "running"]
