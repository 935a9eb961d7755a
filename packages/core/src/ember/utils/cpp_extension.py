"""Build C++ extensions against ember's engine (PyTorch's ``torch.utils.cpp_extension``).

An extension includes ``<torch/extension.h>`` (or ember's own ``extension/extension.h``): the C++
frontend -- ``torch::Tensor`` with every ember op (autograd included), ``TensorOptions``,
``TORCH_CHECK``, ``AT_DISPATCH_*`` -- and pybind11 casters that pass tensors to and from Python.
It links ``libember_engine.so``, the engine ``ember._C`` itself uses, so whatever it registers (a
device backend's kernels, allocator and copy hooks, see ``core/backend.h``) lands in the one
engine. ``load`` and ``load_inline`` compile sources into a module and import it, reusing the
build while the sources, flags and headers are unchanged; CUDA sources (``.cu``,
``cuda_sources=``) go through nvcc and launch on ember's current stream
(``at::cuda::getCurrentCUDAStream()``). ``CppExtension`` / ``CUDAExtension`` and
``BuildExtension`` build them from a ``setup.py``.

>>> from ember.utils import cpp_extension
>>> any(p.endswith("include") for p in cpp_extension.include_paths())
True
"""

from __future__ import annotations

import ctypes
import functools
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
__all__ = ["CUDAExtension", "CppExtension", "include_paths", "library_paths", "load",
           "load_inline"]


def _ember_dir() -> Path:
    from ember import _C

    return Path(_C.__file__).parent  # not resolved: a dev tree links its Python files


def include_paths() -> list[str]:
    """Directories to add to the include path: ember's headers and Python's.

    >>> from ember.utils import cpp_extension
    >>> len(cpp_extension.include_paths()) >= 2
    True
    """
    inc = _ember_dir() / "include"
    # torch_compat holds PyTorch's header names (<torch/extension.h>, <ATen/cuda/...>).
    paths = [str(inc), str(inc / "torch_compat"), sysconfig.get_paths()["include"]]
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


def _cuda_home() -> Path | None:
    """The CUDA toolkit (the directory with bin/nvcc and include/cuda_runtime.h): $CUDA_HOME or
    $CUDA_PATH, the toolkit of the nvcc on PATH, else /usr/local/cuda."""
    import shutil

    candidates = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    for home in candidates:
        if (home / "bin" / "nvcc").exists() and (home / "include" / "cuda_runtime.h").exists():
            return home
    return None


def _cuda_lib_dir(home: Path) -> Path:
    for d in (home / "lib64", home / "targets" / "x86_64-linux" / "lib", home / "lib"):
        if (d / "libcudart_static.a").exists() or (d / "libcudart.so").exists():
            return d
    raise RuntimeError(f"cpp_extension: no CUDA runtime library under {home}")


def _cuda_arch_flags() -> list[str]:
    """-gencode flags from TORCH_CUDA_ARCH_LIST ("8.0;9.0+PTX", as PyTorch reads it), else the
    visible GPU's capability, else sm_80 and sm_90 with PTX of 9.0 (what ember's own kernels
    build for)."""
    spec = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(" ", ";")
    archs = [a for a in spec.split(";") if a]
    if not archs:
        try:
            import ember

            if ember.cuda.is_available():
                major, minor = ember.cuda.get_device_capability(0)
                archs = [f"{major}.{minor}"]
        except Exception:  # noqa: BLE001 - no usable GPU: build for the defaults
            archs = []
    archs = archs or ["8.0", "9.0+PTX"]
    flags = []
    for a in archs:
        num = a.replace("+PTX", "").replace(".", "")
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if a.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags


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
    CPython API. ``.cu`` sources are compiled by nvcc (architectures from
    ``TORCH_CUDA_ARCH_LIST``, else the visible GPU's) and the CUDA runtime is linked statically.
    The build is cached in ``build_directory`` (default: a per-user temporary directory) under a
    hash of the sources, flags, headers and engine, so a second call only imports. With ``is_python_module=False`` the library is loaded into the process (its
    static initializers run, e.g. a backend's registrations) and None is returned.

    Raises RuntimeError with the compiler's output when the build fails.

    >>> from ember.utils import cpp_extension
    >>> callable(cpp_extension.load)
    True
    """
    del keep_intermediates
    srcs = [sources] if isinstance(sources, str) else list(sources)
    cu_srcs = [s for s in srcs if s.endswith(".cu")]
    srcs = [s for s in srcs if not s.endswith(".cu")]
    with_cuda = bool(cu_srcs) if with_cuda is None else with_cuda
    cuda_home = _cuda_home() if with_cuda else None
    if with_cuda and cuda_home is None:
        raise RuntimeError(f"cpp_extension.load: building '{name}' with CUDA needs nvcc (set "
                           "CUDA_HOME or put nvcc on PATH)")
    cuda_flags = (["-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xcompiler",
                   "-fPIC,-fvisibility=hidden", *_cuda_arch_flags(), *(extra_cuda_cflags or [])]
                  if cu_srcs else [])
    if is_standalone:
        raise NotImplementedError("cpp_extension.load: is_standalone=True is not supported")
    cflags = list(extra_cflags or []) + [f"-I{p}" for p in (extra_include_paths or [])]
    ldflags = list(extra_ldflags or [])
    engine = Path(library_paths()[0]) / "libember_engine.so"
    h = hashlib.sha256()
    for s in srcs + cu_srcs:
        h.update(Path(s).read_bytes())
    h.update(repr((name, cflags, ldflags, _compiler(), sys.version, is_python_module, cuda_flags,
                   str(cuda_home))).encode())
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
        defines = [f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
        incs = [f"-I{p}" for p in include_paths()]
        if cuda_home is not None:
            incs.append(f"-I{cuda_home / 'include'}")
        objs = []
        for i, cu in enumerate(cu_srcs):  # nvcc compiles each .cu; the C++ compiler links
            obj = out_dir / f".{Path(cu).stem}.{i}.{os.getpid()}.o"
            _run(name, [str(cuda_home / "bin" / "nvcc"), "-c", *cuda_flags, *defines, *incs,
                        *cflags, cu, "-o", str(obj)], verbose)
            objs.append(str(obj))
        cmd = [_compiler(), "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
               "-Wall", "-Wextra", *defines, *incs, *cflags, *srcs, *objs]
        cmd += [f"-L{lib}", "-lember_engine", f"-Wl,-rpath,{lib}"]
        if cuda_home is not None:
            # the runtime linked statically, as ember._C_cuda does: only the driver is needed
            cmd += [f"-L{_cuda_lib_dir(cuda_home)}", "-lcudart_static", "-ldl", "-lrt",
                    "-lpthread"]
        tmp = out_dir / f".{name}.{os.getpid()}{suffix}"
        _run(name, cmd + ldflags + ["-o", str(tmp)], verbose)
        for obj in objs:
            os.unlink(obj)
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


def _run(name: str, cmd: list[str], verbose: bool) -> None:
    if verbose:
        print(" ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"cpp_extension.load: building '{name}' failed (exit {proc.returncode}):\n"
            f"{' '.join(shlex.quote(c) for c in cmd)}\n{(proc.stderr + proc.stdout)[-4000:]}"
        )


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
    files = [_write_if_changed(src_dir / "main.cpp", text)]
    if cuda_sources:
        cu = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources)
        head = "" if no_implicit_headers else \
            "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
        files.append(_write_if_changed(src_dir / "cuda.cu", head + "\n".join(cu)))
    return load(name, files, extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags,
                extra_ldflags=extra_ldflags, extra_include_paths=extra_include_paths,
                build_directory=build_directory, verbose=verbose, with_cuda=with_cuda,
                is_python_module=is_python_module, keep_intermediates=keep_intermediates)


def _write_if_changed(path: Path, text: str) -> str:
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    return str(path)


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


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


def CUDAExtension(name: str, sources: list[str], *args: Any, **kwargs: Any) -> Any:  # noqa: N802
    """A ``setuptools.Extension`` with CUDA sources (``.cu`` files, compiled by nvcc under
    ``BuildExtension``): CppExtension's settings plus the CUDA toolkit's headers and its static
    runtime, as ``load`` links it. ``extra_compile_args`` may be ``{"cxx": [...], "nvcc":
    [...]}``.

    Raises RuntimeError when no CUDA toolkit (nvcc) is found.
    """
    home = _cuda_home()
    if home is None:
        raise RuntimeError(f"CUDAExtension({name!r}): no CUDA toolkit found (set CUDA_HOME or "
                           "put nvcc on PATH)")
    kwargs["include_dirs"] = list(kwargs.get("include_dirs", [])) + [str(home / "include")]
    kwargs["library_dirs"] = list(kwargs.get("library_dirs", [])) + [str(_cuda_lib_dir(home))]
    kwargs["libraries"] = list(kwargs.get("libraries", [])) + ["cudart_static", "dl", "rt",
                                                                "pthread"]
    return CppExtension(name, sources, *args, **kwargs)


@functools.cache
def _build_extension_class() -> type:
    """The setuptools command class, made on first use (importing setuptools is slow)."""
    from setuptools.command.build_ext import build_ext

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
            self._nvcc_args: list[str] = []
            for ext in self.extensions:
                args = ext.extra_compile_args
                nvcc = list(args.get("nvcc", [])) if isinstance(args, dict) else []
                if isinstance(args, dict):
                    args = list(args.get("cxx", []))
                short = ext.name.split(".")[-1]
                defines = [f"-DTORCH_EXTENSION_NAME={short}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
                ext.extra_compile_args = ["-std=c++17", "-fvisibility=hidden", *defines,
                                          *list(args or [])]
                ext._ember_nvcc_args = [  # type: ignore[attr-defined]
                    "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xcompiler",
                    "-fPIC,-fvisibility=hidden", *_cuda_arch_flags(), *defines, *nvcc]
            if any(s.endswith(".cu") for ext in self.extensions for s in ext.sources):
                self._compile_cu_with_nvcc()
            super().build_extensions()

        def build_extension(self, ext: Any) -> None:
            self._nvcc_args = getattr(ext, "_ember_nvcc_args", [])
            super().build_extension(ext)

        def _compile_cu_with_nvcc(self) -> None:
            """Lets the C++ compiler object take .cu files and hands them to nvcc."""
            home = _cuda_home()
            if home is None:
                raise RuntimeError("BuildExtension: .cu sources need nvcc (set CUDA_HOME or put "
                                   "nvcc on PATH)")
            nvcc = str(home / "bin" / "nvcc")
            compiler = self.compiler
            compiler.src_extensions.append(".cu")
            original = compiler._compile

            def _compile(obj: str, src: str, ext: str, cc_args: list[str],
                         extra_postargs: list[str], pp_opts: list[str]) -> None:
                if not src.endswith(".cu"):
                    return original(obj, src, ext, cc_args, extra_postargs, pp_opts)
                cmd = [nvcc, "-c", src, "-o", obj, *pp_opts, *self._nvcc_args]
                if self.verbose:
                    print(" ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if proc.returncode != 0:
                    raise RuntimeError(f"BuildExtension: nvcc failed on {src}:\n"
                                       f"{(proc.stderr + proc.stdout)[-4000:]}")
                return None

            compiler._compile = _compile

        def get_ext_filename(self, ext_name: str) -> str:
            name = super().get_ext_filename(ext_name)
            if self.no_python_abi_suffix:
                suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
                if name.endswith(suffix):
                    name = name[: -len(suffix)] + ".so"
            return name

    return BuildExtension


def __getattr__(name: str) -> Any:
    # BuildExtension subclasses setuptools' build_ext, imported only when it is asked for.
    if name == "BuildExtension":
        return _build_extension_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
