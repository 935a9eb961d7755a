"""Developer and CI entry points for the ember monorepo.

Examples: `python3 -m nox -l` lists the sessions, `python3 -m nox -s tests` runs every
package's tests, `python3 -m nox -s tests -- nn -x` runs one package's tests (further
arguments go to pytest).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]

ROOT = Path(__file__).resolve().parent
PACKAGES = ["core", "nn", "data", "distributed"]
PURE_PACKAGES = ["nn", "data", "distributed"]

CORE_BUILD_DEPS = [
    "scikit-build-core>=0.10",
    "pybind11>=2.12",
    "setuptools-scm>=8",
    "pyyaml",
    "scipy-openblas32",
    "numpy",
    "ninja",
    "cmake",
]
# EMBER_CUDA=ON builds ember._C_cuda too (nvcc from the machine; cuBLAS from NVIDIA's wheel).
CUDA_BUILD_DEPS = ["nvidia-cublas>=13,<14"]
# Build backend of the pure-Python packages (>= 77: SPDX `license`; no `wheel` needed).
PURE_BUILD_DEPS = ["setuptools>=77", "setuptools-scm>=8"]

TORCH_REQUIREMENT = "torch==2.13.0"


def _build_env() -> dict[str, str]:
    env = {"CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)}
    if shutil.which("ccache") and "CMAKE_CXX_COMPILER_LAUNCHER" not in os.environ:
        env["CMAKE_CXX_COMPILER_LAUNCHER"] = "ccache"
    return env


# Every session that installs ember-core installs one wheel, built once per state of the core's
# sources and kept here: `nox -s tests` then `nox -s demo` compiles once, the second session only
# reinstalls. (Each session has its own virtualenv, and a build directory shared between them
# would recompile everything anyway: the include paths of pybind11 differ per venv.)
CORE_WHEEL_CACHE = ROOT / ".nox" / "_core_wheels"
CORE_SOURCES = ["packages/core/csrc", "packages/core/ops", "packages/core/src",
                "packages/core/CMakeLists.txt", "packages/core/pyproject.toml", "tools/codegen"]


def _core_source_key() -> str:
    """A hash of everything the core wheel is built from (and of the build switches)."""
    digest = hashlib.sha256()
    for entry in CORE_SOURCES:
        base = ROOT / entry
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for f in files:
            rel = f.relative_to(ROOT).as_posix()
            if rel.endswith("src/ember/_version.py") or "__pycache__" in rel:
                continue  # written by the build itself
            digest.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    digest.update(os.environ.get("EMBER_CUDA", "OFF").encode())
    digest.update(os.environ.get("EMBER_CUDA_ARCHS", "").encode())
    digest.update(os.environ.get("EMBER_CUDA_FAST_COMPILE", "OFF").encode())
    digest.update(os.environ.get("EMBER_FAST_BUILD", "OFF").encode())
    return digest.hexdigest()[:16]


def install_core(session: nox.Session) -> None:
    """Install ember-core from the cached wheel of the current sources, building it first
    (without build isolation, so scikit-build-core reuses its persistent build directory
    packages/core/build/ and rebuilds are incremental) when no session has built it yet."""
    wheel_dir = CORE_WHEEL_CACHE / _core_source_key()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = sorted(wheel_dir.glob(f"ember_core-*-{tag}-*.whl")) if wheel_dir.is_dir() else []
    if not wheels:
        session.install(*CORE_BUILD_DEPS)
        if os.environ.get("EMBER_CUDA", "OFF").upper() in ("ON", "1"):
            session.install(*CUDA_BUILD_DEPS)  # cuBLAS's headers and libraries
        tmp = wheel_dir.with_name(wheel_dir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        session.run(
            "python", "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
            "-w", str(tmp), "packages/core", env=_build_env(),
        )  # fmt: skip
        wheel_dir.mkdir(parents=True, exist_ok=True)
        for w in tmp.glob("*.whl"):
            shutil.move(str(w), wheel_dir / w.name)
        shutil.rmtree(tmp, ignore_errors=True)
        wheels = sorted(wheel_dir.glob("ember_core-*.whl"))
    else:
        session.log(f"ember-core: reusing {wheels[-1].name} (sources unchanged since it was built)")
    # --force-reinstall: an unchanged version number must not keep an older build installed
    session.install("--force-reinstall", "--no-deps", str(wheels[-1]))
    session.install(f"{wheels[-1]}[numpy]")  # its runtime dependencies, and NumPy


def install_all(session: nox.Session) -> None:
    """Install ember-core, then the pure-Python sub-distributions into it."""
    install_core(session)
    session.install(*PURE_BUILD_DEPS)
    for pkg in PURE_PACKAGES:
        session.install("--no-build-isolation", "--no-deps", f"packages/{pkg}")


def install_torch(session: nox.Session) -> None:
    """Best effort: tests and benchmarks that compare against torch skip without it."""
    if os.environ.get("EMBER_NO_TORCH") == "1":
        session.log("EMBER_NO_TORCH=1: not installing torch")
        return
    # Exit code 1 (no matching wheel, no network, ...) is tolerated.
    session.run(
        "python", "-m", "pip", "install", "-q", "--retries", "1", TORCH_REQUIREMENT,
        success_codes=[0, 1],
    )  # fmt: skip
    python = str(Path(session.bin) / "python")
    probe = subprocess.run([python, "-c", "import torch"], check=False, capture_output=True)
    if probe.returncode != 0:
        session.warn(f"could not install {TORCH_REQUIREMENT}; torch-based checks will skip")


def _require_file(session: nox.Session, path: str) -> None:
    if not (ROOT / path).is_file():
        session.error(f"{path} does not exist")


def install_references(session: nox.Session) -> None:
    """Best effort, one package set at a time: the tests that need them skip without them (the
    ONNX export tests without onnx and onnxruntime, the einops backend tests without einops)."""
    for packages in (("onnx", "onnxruntime"), ("einops",)):
        session.run(
            "python", "-m", "pip", "install", "-q", "--retries", "1", *packages,
            success_codes=[0, 1],
        )  # fmt: skip


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suites. `-- <package> [pytest args]` runs one package (core, nn, ...)."""
    install_all(session)
    session.install("pytest", "pytest-xdist", "hypothesis", "numpy")
    install_torch(session)
    install_references(session)

    args = list(session.posargs)
    selected = []
    while args and args[0] in PACKAGES:
        selected.append(args.pop(0))
    selected = selected or PACKAGES
    test_dirs = [
        f"packages/{p}/tests" for p in selected if (ROOT / "packages" / p / "tests").is_dir()
    ]
    if not test_dirs:
        session.error(f"no tests directory for {', '.join(selected)}")
    # The slowest tests are listed at the end, so CI's log shows where its time goes.
    durations = [] if any(a.startswith("--durations") for a in args) else ["--durations=15"]
    # Exit code 5 means "no tests collected", which is not a failure here.
    session.run(
        "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *durations, *_parallel_args(args),
        *test_dirs, *args, success_codes=[0, 5],
    )  # fmt: skip


def _parallel_args(args: list[str]) -> list[str]:
    """pytest-xdist over the machine's cores (at most 4; EMBER_TEST_WORKERS=N overrides, 1 runs
    in this process), unless the arguments choose themselves. A file goes to one worker whole
    (`--dist loadfile`): its module fixtures (process groups, network namespaces) and its order
    stay as written."""
    if any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in args):
        return []
    workers = int(os.environ.get("EMBER_TEST_WORKERS", min(os.cpu_count() or 1, 4)))
    return ["-n", str(workers), "--dist", "loadfile"] if workers > 1 else []


@nox.session
def build(session: nox.Session) -> None:
    """Build wheels of all four distributions into dist/."""
    session.install(*CORE_BUILD_DEPS, *PURE_BUILD_DEPS)
    dist = ROOT / "dist"
    dist.mkdir(exist_ok=True)
    for old in dist.glob("ember_*.whl"):
        old.unlink()
    for pkg in PACKAGES:
        session.run(
            "python", "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
            "-w", "dist", f"packages/{pkg}",
            env=_build_env() if pkg == "core" else None,
        )  # fmt: skip


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check over the repository, the layer rules of packages/core/csrc
    (tools/check_layers.py: no include up the layers, no ops:: call from a kernel, no header
    include cycle), clang-format over packages/core/csrc."""
    session.install("ruff", "clang-format")
    session.run("ruff", "check", ".")
    session.run("python", str(ROOT / "tools" / "check_layers.py"))
    csrc = ROOT / "packages" / "core" / "csrc"
    sources = sorted(
        str(p.relative_to(ROOT))
        for ext in ("h", "hpp", "cpp", "cu", "cuh")
        for p in csrc.rglob(f"*.{ext}")
    )
    if sources:
        session.run("clang-format", "--dry-run", "-Werror", *sources)
    else:
        session.log("no C++/CUDA sources under packages/core/csrc")


@nox.session
def bench(session: nox.Session) -> None:
    """Run benchmarks/run.py (arguments after `--` are forwarded)."""
    _require_file(session, "benchmarks/run.py")
    install_all(session)
    session.install("numpy")
    install_torch(session)
    session.run("python", "benchmarks/run.py", *session.posargs)


@nox.session
def paper(session: nox.Session) -> None:
    """The seed paper's figures, Table 1 and ablations into docs/paper/
    (benchmarks/paper/run_paper.py; `-- --quick` for a short run, further arguments forwarded).
    matplotlib is an optional extra: without it the run writes the tables only."""
    _require_file(session, "benchmarks/paper/run_paper.py")
    install_all(session)
    session.install("numpy")
    install_torch(session)
    session.run(
        "python", "-m", "pip", "install", "-q", "--retries", "1", "matplotlib",
        success_codes=[0, 1],
    )  # fmt: skip
    session.run("python", "benchmarks/paper/run_paper.py", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Generate docs/ops.md (the op reference) from packages/core/ops/*.yaml."""
    _require_file(session, "tools/codegen/gen_ops.py")
    install_core(session)
    session.install("pyyaml")
    session.run("python", "tools/codegen/gen_ops.py", "--docs", "docs/ops.md")


@nox.session
def demo(session: nox.Session) -> None:
    """Run examples/demo.py against freshly installed packages."""
    _require_file(session, "examples/demo.py")
    install_all(session)
    session.run("python", "examples/demo.py", *session.posargs)
