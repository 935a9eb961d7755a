"""``ember.version``: ``torch.version``'s fields, as environment-reporting code reads them.

``__version__`` is the PyTorch release whose API ember follows, with ember's own version as its
local label (``2.13.0+ember.0.1.0``), as vendor builds of PyTorch report theirs
(``2.1.0+rocm5.6``): programs gate features on ``torch.__version__ >= "2.0"``, and ember's own
0.x number would send them down code paths for PyTorch releases ember does not follow.
``ember_version`` is ember's own version alone.

>>> import ember
>>> ember.version.__version__ == ember.__version__, ember.version.hip
(True, None)
>>> ember.__version__ >= "2.0", ember.__version__.split("+")[1].startswith("ember.")
(True, True)
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__", "cuda", "hip", "debug", "git_version"]  # noqa: F822 - cuda: __getattr__


#: The PyTorch release whose API ember follows (the one its tests compare against).
TORCH_API_VERSION = "2.13.0"


def _ember_version() -> str:
    try:
        from ember._version import version
    except ImportError:  # a source tree that was never built by pip
        return "0.0.0"
    return version


def _version() -> str:
    import re

    from ember.torch_version import TorchVersion

    # A local version label holds only [a-z0-9] runs joined by dots ("0.1.dev5+g1a2b" -> its
    # own "+" becomes a dot).
    local = ".".join(p for p in re.split(r"[^a-z0-9]+", ember_version.lower()) if p)
    return TorchVersion(f"{TORCH_API_VERSION}+ember.{local}")


def _cuda_version() -> str | None:
    """The CUDA runtime's major.minor when ember was built with CUDA (found without loading
    it), else None."""
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("ember._C_cuda") is None:
        return None
    for dist in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13",
                 "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime"):
        try:
            return ".".join(importlib.metadata.version(dist).split(".")[:2])
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


ember_version = _ember_version()
__version__ = _version()
hip = None
debug = False
git_version = "unknown"


def __getattr__(name: str) -> Any:
    # `cuda` is looked up on first use: ember imports this module at startup for __version__,
    # and reading package metadata there would slow every import.
    if name == "cuda":
        globals()["cuda"] = value = _cuda_version()
        return value
    raise AttributeError(f"module 'ember.version' has no attribute {name!r}")
