#!/usr/bin/env bash
# Prints one hash of everything the C++/CUDA build reads (sources, op YAML, code generators,
# CMake and the build script), so a prebuilt made elsewhere is used only for the same sources:
# tools/gpu_prebuild.sh stores it beside the build, tools/gpu_check.sh compares it.
set -euo pipefail
cd "$(dirname "$0")/.."
find packages/core/csrc packages/core/ops tools/codegen packages/core/CMakeLists.txt \
  tools/dev_build.sh -type f ! -name '*.pyc' -print0 | LC_ALL=C sort -z |
  xargs -0 sha256sum | sha256sum | cut -c1-16
