"""``ember.version``: ``torch.version``'s fields, as environment-reporting code reads them.

>>> import ember
>>> ember.version.__version__ == ember.__version__, ember.version.hip
(True, None)
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

__all__ = ["__version__", "cuda", "hip", "debug", "git_version"]


def _version() -> str:
    from ember.torch_version import TorchVersion

    try:
        from ember._version import version
    except ImportError:
        return TorchVersion("0.0.0")
    return TorchVersion(version)


def _cuda_version() -> str | None:
    """The CUDA runtime's major.minor when ember was built with CUDA (found without loading
    it), else None."""
    if importlib.util.find_spec("ember._C_cuda") is None:
        return None
    for dist in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13",
                 "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime"):
        try:
            return ".".join(importlib.metadata.version(dist).split(".")[:2])
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


__version__ = _version()
cuda = _cuda_version()
hip = None
debug = False
git_version = "unknown"
