#!/usr/bin/env bash
# Builds ember with CUDA here for the GPU machine's Python (3.12 by default) into
# build/gpu-prebuilt (only what tools/gpu_check.sh needs: the modules and generated headers), so
# the GPU check spends its device time testing rather than compiling:
#   bash tools/gpu_prebuild.sh && (device) PREBUILT=.gpucarry/prebuilt.tar.xz bash tools/gpu_check.sh
# with carry [".whl", ".gpucarry"]: the build also goes into .gpucarry/prebuilt.tar.xz (~7 MB; the
# modules themselves are ~55 MB, too much beside the working tree for the device tool's 64 MiB).
# Needs a Python of that version with numpy, pybind11, pyyaml, scipy-openblas32, nvidia-cublas
# (PY=/path/to/python3.12).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PY:-/tmp/py312/bin/python3}
work=${WORK_DIR:-/tmp/ember-gpu-prebuild}
dest=$root/build/gpu-prebuilt
PATH=$(dirname "$py"):$PATH CUDA=1 CUDA_ARCHS=${CUDA_ARCHS:-90-real} JOBS=${JOBS:-2} \
  BUILD_DIR=$work bash "$root/tools/dev_build.sh"
rm -rf "$dest" && mkdir -p "$dest/generated"
cp "$work"/_C*.so "$work"/libember_engine.so "$dest/"
cp "$work"/generated/_C.pyi "$work"/generated/ops.h "$work"/generated/frontend_ops.h "$dest/generated/"
strip --strip-unneeded "$dest"/*.so
bash "$root/tools/build_inputs_hash.sh" >"$dest/SOURCES"  # gpu_check.sh uses it only for these
du -sh "$dest"
mkdir -p "$root/.gpucarry"
(cd "$root" && tar -cf - build/gpu-prebuilt | xz -T2 -6 >.gpucarry/prebuilt.tar.xz)
du -sh "$root/.gpucarry/prebuilt.tar.xz"
