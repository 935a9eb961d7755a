"""ember.utils: ``ember.utils.data`` is ``ember.data`` (from the ember-data distribution), as in
PyTorch's ``torch.utils.data``."""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    if name in ("data", "checkpoint"):
        return importlib.import_module(f"ember.utils.{name}")
    raise AttributeError(f"module 'ember.utils' has no attribute {name!r}")
