"""``ember.__config__``: how this ember was built, as ``torch.__config__`` reports PyTorch's
(environment reports and bug templates print ``show()`` and ``parallel_info()``).

>>> import ember
>>> ember.__config__.show().startswith("ember built with:")
True
>>> "get_num_threads() :" in ember.__config__.parallel_info()
True
"""

from __future__ import annotations

import os
import sys

__all__ = ["show", "parallel_info"]


def show() -> str:
    """The build's configuration: the versions, the CPU code path, BLAS and CUDA."""
    import ember

    cuda = ember.version.cuda
    lines = [
        "ember built with:",
        f"  - ember {ember.version.ember_version} (PyTorch API {ember.version.TORCH_API_VERSION})",
        f"  - Python {sys.version.split()[0]}",
        "  - C++ Version: 201703",
        f"  - CPU capability usage: {ember.backends.cpu.get_cpu_capability()}",
        "  - BLAS / LAPACK: OpenBLAS (scipy-openblas32)",
        f"  - CUDA: {'built, runtime ' + cuda if cuda else 'not built'}",
    ]
    if cuda:
        cudnn = ember.backends.cudnn.version() if ember.backends.cudnn.is_available() else None
        lines.append(f"  - cuDNN: {cudnn if cudnn else 'not found (loaded at run time)'}")
    return "\n".join(lines) + "\n"


def parallel_info() -> str:
    """The thread settings: ember's intra- and inter-op pools and the machine's cores."""
    import ember

    return (
        "ember/Parallel:\n"
        f"\tember.get_num_threads() : {ember.get_num_threads()}\n"
        f"\tember.get_num_interop_threads() : {ember.get_num_interop_threads()}\n"
        f"os.cpu_count() : {os.cpu_count()}\n"
    )
