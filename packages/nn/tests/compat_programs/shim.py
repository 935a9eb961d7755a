"""A `torch` -> `ember` import shim: inside ``torch_is_ember()``, ``import torch`` and
``import torch.<x>`` give ``ember`` and ``ember.<x>`` (the real torch modules, if loaded, are
put aside and restored afterwards), so a PyTorch script runs on ember with no change."""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import runpy
import sys
from typing import Iterator

# torch paths whose ember counterpart lives elsewhere
_RENAMES = {"ember.utils.data": "ember.data"}


class _TorchToEmber(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torch" or fullname.startswith("torch."):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        name = "ember" + spec.name[len("torch"):]
        return importlib.import_module(_RENAMES.get(name, name))

    def exec_module(self, module):
        pass


@contextlib.contextmanager
def torch_is_ember() -> Iterator[None]:
    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    for k in saved:
        del sys.modules[k]
    finder = _TorchToEmber()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def run_script(path: str, argv: list[str]) -> dict:
    """Runs a script as __main__ with sys.argv = [path, *argv]; returns its globals."""
    old = sys.argv
    sys.argv = [path, *argv]
    try:
        return runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv = old
