"""``ember.utils.data`` is the same module object as ``ember.data`` (ember-data), and
``ember.utils.data.<sub>`` is ``ember.data.<sub>`` (torch.utils.data.distributed's path):
without the finder below, Python would load such a submodule a second time under the alias
name, with its own copies of the classes (a second Sampler, DistributedSampler, ...)."""

import importlib
import importlib.abc
import importlib.util
import sys

import ember.data as _data

_ALIAS = __name__ + "."


class _SubmoduleAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(_ALIAS):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("ember.data." + spec.name[len(_ALIAS):])

    def exec_module(self, module):
        pass


if not any(isinstance(f, _SubmoduleAlias) for f in sys.meta_path):
    sys.meta_path.insert(0, _SubmoduleAlias())
sys.modules[__name__] = _data
