"""A `torch` package that is ember: with this directory first on PYTHONPATH, ``import torch``
and ``import torch.<x>`` give ``ember`` and ``ember.<x>`` in this process and in every process
it starts (spawned ranks, launcher workers, DataLoader workers), so a PyTorch distributed
program runs on ember unchanged."""

import importlib
import importlib.abc
import importlib.util
import sys

# torch paths whose ember counterpart lives elsewhere
_RENAMES = {"ember.utils.data": "ember.data"}


class _TorchToEmber(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("torch."):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        name = "ember" + spec.name[len("torch"):]
        for old, new in _RENAMES.items():
            if name == old or name.startswith(old + "."):
                name = new + name[len(old):]
        module = importlib.import_module(name)
        # submodules ember registered under a name its package also binds to a function
        # (ember.multiprocessing.spawn): known as torch.* up front, so importing them later
        # does not rebind the package's attribute to the module
        for sub, mod in list(sys.modules.items()):
            if sub.startswith(name + ".") and getattr(module, sub[len(name) + 1:], mod) is not mod:
                sys.modules.setdefault(spec.name + sub[len(name):], mod)
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _TorchToEmber())
sys.modules[__name__] = importlib.import_module("ember")
