"""Build C++ extensions against ember's engine (PyTorch's ``torch.utils.cpp_extension``).

An extension includes ``<torch/extension.h>`` (or ember's own ``extension/extension.h``): the C++
frontend -- ``torch::Tensor`` with every ember op (autograd included), ``TensorOptions``,
``TORCH_CHECK``, ``AT_DISPATCH_*`` -- and pybind11 casters that pass tensors to and from Python.
It links ``libember_engine.so``, the engine ``ember._C`` itself uses, so whatever it registers (a
device backend's kernels, allocator and copy hooks, see ``core/backend.h``) lands in the one
engine. ``load`` and ``load_inline`` compile sources into a module and import it, reusing the
build while the sources, flags and headers are unchanged; ``CppExtension`` and
``BuildExtension`` do the same from a ``setup.py``.

>>> from ember.utils import cpp_extension
>>> any(p.endswith("include") for p in cpp_extension.include_paths())
True
"""

from __future__ import annotations

import ctypes
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
from typing import Any

# BuildExtension is there too, made on first access (module __getattr__ below).
__all__ = ["CppExtension", "include_paths", "library_paths", "load", "load_inline"]


def _ember_dir() -> Path:
    from ember import _C

    return Path(_C.__file__).parent  # not resolved: a dev tree links its Python files


def include_paths() -> list[str]:
    """Directories to add to the include path: ember's headers and Python's.

    >>> from ember.utils import cpp_extension
    >>> len(cpp_extension.include_paths()) >= 2
    True
    """
    paths = [str(_ember_dir() / "include"), sysconfig.get_paths()["include"]]
    try:
        import pybind11

        paths.append(pybind11.get_include())
    except ImportError:  # only extensions that include extension/pybind.h need it
        pass
    return paths


def library_paths() -> list[str]:
    """Directories holding ``libember_engine.so`` (link with ``-lember_engine``)."""
    return [str(_ember_dir())]


def _compiler() -> str:
    return os.environ.get("CXX", "c++")


def _header_digest(h: Any) -> None:
    """Feeds every installed header into `h`: a changed header (ops.h and frontend_ops.h follow
    the op set) rebuilds the extensions that include it. The include tree of a development build
    links its directories, so the walk follows links."""
    root = include_paths()[0]
    for d, dirs, files in os.walk(root, followlinks=True):
        dirs.sort()
        for f in sorted(files):
            if f.endswith((".h", ".inc")):
                h.update(Path(d, f).read_bytes())


def _check_sources(what: str, srcs: list[str]) -> None:
    cuda = [s for s in srcs if s.endswith((".cu", ".cuh"))]
    if cuda:
        raise NotImplementedError(
            f"cpp_extension.{what}: CUDA sources are not supported yet ({', '.join(cuda)}); "
            "ember builds C++ extensions only (a CUDA kernel can live in a backend registered "
            "through core/backend.h)")


def load(
    name: str,
    sources: list[str] | str,
    extra_cflags: list[str] | None = None,
    extra_cuda_cflags: list[str] | None = None,
    extra_ldflags: list[str] | None = None,
    extra_include_paths: list[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    is_python_module: bool = True,
    is_standalone: bool = False,
    keep_intermediates: bool = True,
) -> ModuleType | None:
    """Compile ``sources`` into the extension module ``name`` and import it.

    The sources may include ``<torch/extension.h>`` and define the module with
    ``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)``, or define ``PyInit_<name>`` with the plain
    CPython API. The build is cached in ``build_directory`` (default: a per-user temporary
    directory) under a hash of the sources, flags, headers and engine, so a second call only
    imports. With ``is_python_module=False`` the library is loaded into the process (its
    static initializers run, e.g. a backend's registrations) and None is returned.

    Raises RuntimeError with the compiler's output when the build fails.

    >>> from ember.utils import cpp_extension
    >>> callable(cpp_extension.load)
    True
    """
    del extra_cuda_cflags, keep_intermediates  # no CUDA sources; one compiler call, no objects
    srcs = [sources] if isinstance(sources, str) else list(sources)
    _check_sources("load", srcs)
    if with_cuda:
        raise NotImplementedError("cpp_extension.load: with_cuda=True is not supported yet")
    if is_standalone:
        raise NotImplementedError("cpp_extension.load: is_standalone=True is not supported")
    cflags = list(extra_cflags or []) + [f"-I{p}" for p in (extra_include_paths or [])]
    ldflags = list(extra_ldflags or [])
    engine = Path(library_paths()[0]) / "libember_engine.so"
    h = hashlib.sha256()
    for s in srcs:
        h.update(Path(s).read_bytes())
    h.update(repr((name, cflags, ldflags, _compiler(), sys.version, is_python_module)).encode())
    st = engine.stat()
    h.update(f"{engine}:{st.st_size}:{st.st_mtime_ns}".encode())
    _header_digest(h)
    digest = h.hexdigest()[:16]
    root = Path(build_directory or Path(tempfile.gettempdir()) / f"ember_extensions_{os.getuid()}")
    out_dir = root / f"{name}_{digest}"
    suffix = (sysconfig.get_config_var("EXT_SUFFIX") or ".so") if is_python_module else ".so"
    target = out_dir / f"{name}{suffix}"
    if not target.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        lib = library_paths()[0]
        cmd = [_compiler(), "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
               "-Wall", "-Wextra", f"-DTORCH_EXTENSION_NAME={name}",
               "-DTORCH_API_INCLUDE_EXTENSION_H"]
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
    if not is_python_module:
        ctypes.CDLL(str(target), mode=ctypes.RTLD_GLOBAL)
        return None
    spec = importlib.util.spec_from_file_location(name, target)
    if spec is None or spec.loader is None:
        raise ImportError(f"cpp_extension.load: cannot import {target}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def load_inline(
    name: str,
    cpp_sources: str | list[str],
    cuda_sources: str | list[str] | None = None,
    functions: str | list[str] | dict[str, str] | None = None,
    extra_cflags: list[str] | None = None,
    extra_cuda_cflags: list[str] | None = None,
    extra_ldflags: list[str] | None = None,
    extra_include_paths: list[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    is_python_module: bool = True,
    with_pytorch_error_handling: bool = True,
    keep_intermediates: bool = True,
    use_pch: bool = False,
    no_implicit_headers: bool = False,
) -> ModuleType | None:
    """Compile C++ source strings into the extension module ``name`` and import it.

    ``<torch/extension.h>`` is included first (unless ``no_implicit_headers``). With
    ``functions`` (names, or a dict of name -> docstring) the module's ``PYBIND11_MODULE`` is
    written for you, binding each function under its name; otherwise the sources define it
    with ``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)``. Builds are cached as with ``load``.

    Example (not run here: it compiles)::

        scale = load_inline("scale_ext", "torch::Tensor scale(torch::Tensor x, double s) "
                            "{ return x * s; }", functions=["scale"])
        scale.scale(ember.ones(3), 2.0)  # tensor([2., 2., 2.])
    """
    del with_pytorch_error_handling, use_pch  # errors always map to ember's exceptions
    if cuda_sources:
        _check_sources("load_inline", ["<cuda_sources>.cu"])
    parts = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources)
    text = ("" if no_implicit_headers else "#include <torch/extension.h>\n") + "\n".join(parts)
    if functions is not None:
        if isinstance(functions, str):
            functions = [functions]
        docs = functions if isinstance(functions, dict) else {f: "" for f in functions}
        defs = "".join(f'  m.def("{f}", &{f}, {_c_string(doc)});\n' for f, doc in docs.items())
        text += ("\n\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
                 "  ::ember::api::detail::register_error_translator();\n" + defs + "}\n")
    root = Path(build_directory or Path(tempfile.gettempdir()) / f"ember_extensions_{os.getuid()}")
    src_dir = root / f"{name}_sources"
    src_dir.mkdir(parents=True, exist_ok=True)
    src = src_dir / "main.cpp"
    if not src.exists() or src.read_text() != text:
        tmp = src_dir / f".main.{os.getpid()}.cpp"
        tmp.write_text(text)
        os.replace(tmp, src)
    return load(name, [str(src)], extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags,
                extra_ldflags=extra_ldflags, extra_include_paths=extra_include_paths,
                build_directory=build_directory, verbose=verbose, with_cuda=with_cuda,
                is_python_module=is_python_module, keep_intermediates=keep_intermediates)


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _setuptools_build_ext() -> type:
    from setuptools.command.build_ext import build_ext

    return build_ext


def CppExtension(name: str, sources: list[str], *args: Any, **kwargs: Any) -> Any:  # noqa: N802
    """A ``setuptools.Extension`` for a C++ extension of ember (``torch.utils.cpp_extension``'s
    CppExtension): ember's and pybind11's headers, and ``libember_engine.so`` to link, found at
    run time by an rpath. Build it with ``BuildExtension``.

    >>> from ember.utils.cpp_extension import CppExtension
    >>> CppExtension("my_ext", ["my_ext.cpp"]).libraries
    ['ember_engine']
    """
    from setuptools import Extension

    kwargs["include_dirs"] = list(kwargs.get("include_dirs", [])) + include_paths()
    kwargs["library_dirs"] = list(kwargs.get("library_dirs", [])) + library_paths()
    kwargs["libraries"] = list(kwargs.get("libraries", [])) + ["ember_engine"]
    kwargs["runtime_library_dirs"] = (list(kwargs.get("runtime_library_dirs", []))
                                      + library_paths())
    kwargs["language"] = "c++"
    return Extension(name, sources, *args, **kwargs)


_BUILD_EXTENSION: type | None = None


def _build_extension_class() -> type:
    """The setuptools command class, made on first use (importing setuptools is slow)."""
    global _BUILD_EXTENSION
    if _BUILD_EXTENSION is not None:
        return _BUILD_EXTENSION
    build_ext = _setuptools_build_ext()

    class BuildExtension(build_ext):  # type: ignore[misc, valid-type]
        """The ``build_ext`` command for ``CppExtension`` modules (``cmdclass={"build_ext":
        BuildExtension}``): compiles as C++17 with ``TORCH_EXTENSION_NAME`` set to each
        module's name, and takes ``extra_compile_args`` as a list or as ``{"cxx": [...]}``.
        ``BuildExtension.with_options(no_python_abi_suffix=True)`` names the library
        ``<name>.so``."""

        @classmethod
        def with_options(cls, **options: Any) -> type:
            class BuildExtensionWithOptions(cls):  # type: ignore[misc, valid-type]
                def __init__(self, *args: Any, **kwargs: Any) -> None:
                    super().__init__(*args, **{**options, **kwargs})

            return BuildExtensionWithOptions

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.no_python_abi_suffix = kwargs.pop("no_python_abi_suffix", False)
            kwargs.pop("use_ninja", None)
            super().__init__(*args, **kwargs)

        def build_extensions(self) -> None:
            for ext in self.extensions:
                _check_sources("BuildExtension", list(ext.sources))
                args = ext.extra_compile_args
                if isinstance(args, dict):
                    args = list(args.get("cxx", []))
                short = ext.name.split(".")[-1]
                ext.extra_compile_args = ["-std=c++17", "-fvisibility=hidden",
                                          f"-DTORCH_EXTENSION_NAME={short}",
                                          "-DTORCH_API_INCLUDE_EXTENSION_H", *list(args or [])]
            super().build_extensions()

        def get_ext_filename(self, ext_name: str) -> str:
            name = super().get_ext_filename(ext_name)
            if self.no_python_abi_suffix:
                suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
                if name.endswith(suffix):
                    name = name[: -len(suffix)] + ".so"
            return name

    _BUILD_EXTENSION = BuildExtension
    return BuildExtension


def __getattr__(name: str) -> Any:
    # BuildExtension subclasses setuptools' build_ext, imported only when it is asked for.
    if name == "BuildExtension":
        return _build_extension_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
