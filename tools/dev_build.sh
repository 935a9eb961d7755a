#!/usr/bin/env bash
# Fast inner loop for C++ work: build ember._C with CMake into BUILD_DIR (default build/dev) and
# lay out an importable package in BUILD_DIR/site (symlinks to packages/core/src/ember/*.py plus
# the fresh extension). Then: PYTHONPATH=BUILD_DIR/site python -c "import ember".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/dev}
export CCACHE_BASEDIR=$root  # share ccache hits between build directories
cmake -S "$root/packages/core" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v python3)" >/dev/null
cmake --build "$build" -j "${JOBS:-2}"
site=$build/site/ember
mkdir -p "$site"
find "$site" -maxdepth 1 -type l -delete
for f in "$root"/packages/core/src/ember/*; do
  case "$(basename "$f")" in _C*.so|_C.pyi|__pycache__) continue ;; esac
  ln -sfn "$f" "$site/$(basename "$f")"
done
# The pure-Python packages' subpackages (ember.nn, ember.data, ...) join the same tree.
for pkg in nn data distributed; do
  for f in "$root"/packages/$pkg/src/ember/*; do
    [ -d "$f" ] && ln -sfn "$f" "$site/$(basename "$f")"
  done
done
cp "$build"/_C*.so "$site/"
cp "$build"/generated/_C.pyi "$site/_C.pyi"
echo "built: PYTHONPATH=$build/site"
