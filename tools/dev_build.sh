#!/usr/bin/env bash
# Fast inner loop for C++ work: build ember._C with CMake into BUILD_DIR (default build/dev) and
# lay out an importable package in BUILD_DIR/site (symlinks to packages/core/src/ember/*.py plus
# the fresh extension). Then: PYTHONPATH=BUILD_DIR/site python -c "import ember".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/dev}
export CCACHE_BASEDIR=$root  # share ccache hits between build directories
# CUDA=1 also builds ember._C_cuda (for CUDA_ARCHS, default sm_90 only, to keep builds short).
cuda_flags=(-DEMBER_CUDA=OFF)
if [ "${CUDA:-0}" = 1 ]; then cuda_flags=(-DEMBER_CUDA=ON "-DEMBER_CUDA_ARCHS=${CUDA_ARCHS:-90-real}"); fi
# FAST=1: CI's test-only build (C++ at -O1, CUDA host code at -O0 and nvcc -Ofc max).
fast=${FAST:-0}; [ "$fast" = 1 ] && fast=ON || fast=OFF
cuda_flags+=("-DEMBER_FAST_BUILD=$fast" "-DEMBER_CUDA_FAST_COMPILE=$fast")
# SKIP_BUILD=1 only lays out site/ over a build directory that already holds the built modules
# (tools/gpu_check.sh with a build made elsewhere).
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S "$root/packages/core" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$(command -v python3)" "${cuda_flags[@]}" >/dev/null
  cmake --build "$build" -j "${JOBS:-2}"
fi
site=$build/site/ember
mkdir -p "$site"
find "$site" -maxdepth 1 -type l -delete
for f in "$root"/packages/core/src/ember/*; do
  case "$(basename "$f")" in _C*.so|_C.pyi|__pycache__|include) continue ;; esac
  ln -sfn "$f" "$site/$(basename "$f")"
done
# The pure-Python packages' subpackages (ember.nn, ember.data, ...) join the same tree.
for pkg in nn data distributed; do
  for f in "$root"/packages/$pkg/src/ember/*; do
    [ -d "$f" ] && ln -sfn "$f" "$site/$(basename "$f")"
  done
done
cp "$build"/_C*.so "$build"/libember_engine.so "$site/"
cp "$build"/generated/_C.pyi "$site/_C.pyi"
# Headers for extensions built against this tree (ember.utils.cpp_extension.include_paths()).
rm -rf "$site/include" && mkdir -p "$site/include"
for d in "$root"/packages/core/csrc/*/; do ln -sfn "$d" "$site/include/$(basename "$d")"; done
ln -sfn "$build/generated/ops.h" "$site/include/ops.h"
ln -sfn "$build/generated/frontend_ops.h" "$site/include/frontend_ops.h"
echo "built: PYTHONPATH=$build/site"
