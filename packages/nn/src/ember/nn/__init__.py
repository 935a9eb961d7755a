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
    "factory_kwargs",
    *_modules_all,
]

_FACTORY_KEYS = ("device", "dtype", "memory_format")


def factory_kwargs(kwargs: dict | None) -> dict:
    """The factory keywords (``device``, ``dtype``, ``memory_format``) of a module's
    ``**kwargs`` as one dict for ``ember.empty(..., **factory_kwargs(kwargs))``: any other key
    is a TypeError; a nested ``factory_kwargs`` dict supplies keys that clash with the caller's
    own parameters, and naming a key in both places is a TypeError."""
    if kwargs is None:
        return {}
    unexpected = set(kwargs) - set(_FACTORY_KEYS) - {"factory_kwargs"}
    if unexpected:
        raise TypeError(f"unexpected kwargs {unexpected}")
    out = dict(kwargs.get("factory_kwargs", {}))
    for key in _FACTORY_KEYS:
        if key in kwargs:
            if key in out:
                raise TypeError(f"{key} specified twice, in **kwargs and in factory_kwargs")
            out[key] = kwargs[key]
    return out

# Submodules PyTorch's torch.nn exposes without an import of their own (torch.nn.attention.
# sdpa_kernel in a program that only imported torch): loaded on first access.
_LAZY_SUBMODULES = ("attention", "common_types", "quantized", "intrinsic", "qat")


def __getattr__(name: str):  # noqa: ANN202  (module-level attribute hook)
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"ember.nn.{name}")
    raise AttributeError(f"module 'ember.nn' has no attribute {name!r}")
