"""Neural-network building blocks for ember: modules, layers, initialization, utilities.

>>> import ember
>>> from ember import nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
>>> model
Sequential(
  (0): Linear(in_features=4, out_features=8, bias=True)
  (1): Linear(in_features=8, out_features=2, bias=True)
)
"""

try:
    from ._version import __version__
except ImportError:  # not installed from a git checkout / sdist
    __version__ = "0.0.0"

# ruff: noqa: I001  (order matters: parameter, functional and init before the layers using them)
from ember.nn.parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter
from ember.nn import functional, init
from ember.nn.modules import *  # noqa: F403  (every layer; the list lives once, in modules/__init__.py)
from ember.nn.modules import __all__ as _modules_all
from ember.nn.modules.module import RemovableHandle
from ember.nn import utils
from ember.nn import parallel
from ember.nn.parallel import DataParallel

__all__ = [
    "__version__",
    "Parameter",
    "Buffer",
    "UninitializedParameter",
    "UninitializedBuffer",
    "RemovableHandle",
    "functional",
    "init",
    "utils",
    "parallel",
    "DataParallel",
    *_modules_all,
]

# Submodules PyTorch's torch.nn exposes without an import of their own (torch.nn.attention.
# sdpa_kernel in a program that only imported torch): loaded on first access.
_LAZY_SUBMODULES = ("attention", "common_types")


def __getattr__(name: str):  # noqa: ANN202  (module-level attribute hook)
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"ember.nn.{name}")
    raise AttributeError(f"module 'ember.nn' has no attribute {name!r}")
