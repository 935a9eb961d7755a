"""Build C++ extensions against ember's engine (PyTorch's ``torch.utils.cpp_extension``).

An extension includes ember's headers (``core/tensor.h``, ``kernels/iterator.h``, the generated
``ops.h`` ...) and links ``libember_engine.so``, the engine ``ember._C`` itself uses, so whatever
it registers (a device backend's kernels, allocator and copy hooks, see ``core/backend.h``)
lands in the one engine. ``load`` compiles sources into a module and imports it, reusing the
build while the sources, flags and engine are unchanged.

>>> from ember.utils import cpp_extension
>>> any(p.endswith("include") for p in cpp_extension.include_paths())
True
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

__all__ = ["include_paths", "library_paths", "load"]


def _ember_dir() -> Path:
    from ember import _C

    return Path(_C.__file__).parent  # not resolved: a dev tree links its Python files


def include_paths() -> list[str]:
    """Directories to add to the include path: ember's headers and Python's.

    >>> from ember.utils import cpp_extension
    >>> len(cpp_extension.include_paths()) >= 2
    True
    """
    return [str(_ember_dir() / "include"), sysconfig.get_paths()["include"]]


def library_paths() -> list[str]:
    """Directories holding ``libember_engine.so`` (link with ``-lember_engine``)."""
    return [str(_ember_dir())]


def _compiler() -> str:
    return os.environ.get("CXX", "c++")


def load(
    name: str,
    sources: list[str] | str,
    extra_cflags: list[str] | None = None,
    extra_ldflags: list[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
) -> ModuleType:
    """Compile ``sources`` into the extension module ``name`` and import it.

    The module must define ``PyInit_<name>`` (plain CPython API or pybind11). The build is
    cached in ``build_directory`` (default: a per-user temporary directory) under a hash of the
    sources, flags and engine, so a second call only imports.

    Raises RuntimeError with the compiler's output when the build fails.
    """
    srcs = [sources] if isinstance(sources, str) else list(sources)
    cflags = list(extra_cflags or [])
    ldflags = list(extra_ldflags or [])
    engine = Path(library_paths()[0]) / "libember_engine.so"
    h = hashlib.sha256()
    for s in srcs:
        h.update(Path(s).read_bytes())
    h.update(repr((cflags, ldflags, _compiler(), sys.version)).encode())
    st = engine.stat()
    h.update(f"{engine}:{st.st_size}:{st.st_mtime_ns}".encode())
    for inc in include_paths()[:1]:
        # Header changes (ops.h is regenerated with the op set) rebuild too.
        for hdr in sorted(Path(inc).rglob("*.h")):
            h.update(hdr.read_bytes())
    digest = h.hexdigest()[:16]
    root = Path(build_directory or Path(tempfile.gettempdir()) / f"ember_extensions_{os.getuid()}")
    out_dir = root / f"{name}_{digest}"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = out_dir / f"{name}{suffix}"
    if not target.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        lib = library_paths()[0]
        cmd = [_compiler(), "-std=c++17", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra"]
        cmd += [f"-I{p}" for p in include_paths()]
        cmd += cflags + srcs
        cmd += [f"-L{lib}", "-lember_engine", f"-Wl,-rpath,{lib}"] + ldflags
        tmp = out_dir / f".{name}.{os.getpid()}{suffix}"
        cmd += ["-o", str(tmp)]
        if verbose:
            print(" ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"cpp_extension.load: building '{name}' failed (exit {proc.returncode}):\n"
                f"{' '.join(shlex.quote(c) for c in cmd)}\n{proc.stderr[-4000:]}"
            )
        os.replace(tmp, target)  # atomic: concurrent builders never import a half-written file
    spec = importlib.util.spec_from_file_location(name, target)
    if spec is None or spec.loader is None:
        raise ImportError(f"cpp_extension.load: cannot import {target}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module
