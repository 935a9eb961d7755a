#!/usr/bin/env bash
# Fast inner loop for C++ work: build ember._C with CMake into BUILD_DIR (default build/dev)
# and drop the extension next to packages/core/src/ember, so PYTHONPATH=packages/core/src works.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/dev}
cmake -S "$root/packages/core" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v python3)" >/dev/null
cmake --build "$build" -j "${JOBS:-2}"
cp "$build"/_C*.so "$root/packages/core/src/ember/"
cp "$build"/generated/_C.pyi "$root/packages/core/src/ember/_C.pyi"
