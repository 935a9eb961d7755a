#!/usr/bin/env bash
# The GPU check: on a machine with one NVIDIA GPU (the H100/H200 machines the device tool lends:
# 16 cores, no network), build ember with CUDA for that GPU, run the GPU tests and the GPU
# benchmarks against the PyTorch installed there, and print one report. Under 8 minutes.
#
#   bash tools/gpu_check.sh            # everything (build tests bench profile)
#   PHASES="build tests" bash tools/gpu_check.sh
#   PHASES="build smoke" bash tools/gpu_check.sh   # only the crash diagnosis (tools/gpu_smoke.py)
#   TESTS="packages/core/tests/test_cuda_runtime.py" bash tools/gpu_check.sh
#   PHASES="build bench" TRAIN_BENCH_ARGS="--filter resnet" bash tools/gpu_check.sh
#   PHASES="build ab" bash tools/gpu_check.sh   # ember's kernel-path switches, off vs on
#   PHASES="build bench paper" bash tools/gpu_check.sh   # + the paper's GPU Fig. 1 / ablation
#   (AB="case:switch ...", default below, "+" for a space in the case: resnet50+bf16:cudnn_graph;
#   AB_BUDGET seconds per run, default 25; any ember._C_cuda._set_<switch> works, e.g.
#   AB=gpt2:sdpa_mma for the mma.sync attention against the WMMA one)
#   (the bench phase: benchmarks/cases_cuda.py, then the training benchmark
#   benchmarks/cuda_train.py with TRAIN_BENCH_BUDGET seconds, default 150, cut to what is left
#   of TOTAL_LIMIT, default 470)
#
# Missing build dependencies (scipy-openblas32 has no copy there) are installed from wheels in
# .whl/ when present (see the device tool's README). Logs and the report go to $OUT (the device
# tool's output folder) or build/gpu_check.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/build/gpu_check}
mkdir -p "$out"
phases=${PHASES:-"build tests bench profile"}
jobs=${JOBS:-$(nproc)}
report=$out/report.md
: >"$report"
say() { echo "$*" | tee -a "$report"; }
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }

say "# ember GPU check ($(date -u +%FT%TZ))"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -1)
say "- GPU: ${gpu:-none found}"
say "- python: $(python3 -c 'import sys; print(sys.version.split()[0])'), torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null || echo none), nvcc: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
say "- commit: $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')"

# ---- dependencies ------------------------------------------------------------------------
if ! python3 -c "import scipy_openblas32" 2>/dev/null; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/ember_site .whl/*.whl
    export PYTHONPATH=/tmp/ember_site${PYTHONPATH:+:$PYTHONPATH}
  else
    say "- scipy-openblas32 is missing and .whl/ has no wheel: cannot build"; exit 1
  fi
fi

# ---- build -------------------------------------------------------------------------------
# PREBUILT=dir: a build made elsewhere for this Python (the .so files and generated/ of a
# CUDA=1 dev_build; tools/gpu_prebuild.sh makes one); used when it imports, else we build here.
build=${BUILD_DIR:-$root/build/gpu}
# PREBUILT=an archive of build/gpu-prebuilt (tools/gpu_prebuild.sh writes .gpucarry/prebuilt.tar.xz)
if [[ "${PREBUILT:-}" == *.tar.xz ]] && [ -f "$PREBUILT" ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" "$PREBUILT" &&
    PREBUILT=build/gpu-prebuilt
fi
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${CUDA_ARCHS:-${arch:-90}-real}
# cuBLAS from NVIDIA's wheel and OpenBLAS from its wheel, wherever this Python has them.
libs=$(python3 -c "
import os, importlib.util as u
out = []
try:
    import nvidia
    out += [os.path.join(p, d, 'lib') for p in nvidia.__path__ for d in ('cu13', 'cublas')]
except ImportError:
    pass
s = u.find_spec('scipy_openblas32')
if s: out.append(os.path.join(os.path.dirname(s.origin), 'lib'))
print(':'.join(d for d in out if os.path.isdir(d)))")
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
imports() { PYTHONPATH=$1/site${PYTHONPATH:+:$PYTHONPATH} python3 -c "import ember, ember._C_cuda" >>"$out/build.log" 2>&1; }
# A prebuilt of other sources (the tree changed since it was made) is not used.
if [ -n "${PREBUILT:-}" ] && [ "$(cat "$PREBUILT/SOURCES" 2>/dev/null)" != \
    "$(bash tools/build_inputs_hash.sh)" ]; then
  say "- build: the prebuilt $PREBUILT was made from other sources; building here"
  PREBUILT=
fi
if [[ " $phases " == *" build "* ]]; then
  b0=$(date +%s)
  if [ -n "${PREBUILT:-}" ] && ls "$PREBUILT"/_C_cuda*.so >/dev/null 2>&1 &&
      SKIP_BUILD=1 BUILD_DIR=$PREBUILT bash tools/dev_build.sh >"$out/build.log" 2>&1 &&
      imports "$PREBUILT"; then
    build=$PREBUILT
    say "- build: the prebuilt $PREBUILT imports; not rebuilt"
  elif CUDA=1 CUDA_ARCHS="$arch" JOBS=$jobs BUILD_DIR=$build timeout "${BUILD_TIMEOUT:-300}" \
      bash tools/dev_build.sh >>"$out/build.log" 2>&1; then
    say "- build: ok in $(($(date +%s) - b0)) s (sm_$arch, $jobs jobs)"
  else
    say "- build: FAILED after $(($(date +%s) - b0)) s; the end of build.log:"
    grep -E "error|Error|FAILED" "$out/build.log" | head -30 | tee -a "$report"
    tail -20 "$out/build.log"
    exit 1
  fi
fi
export PYTHONPATH=$build/site${PYTHONPATH:+:$PYTHONPATH}
python3 -c "import ember, ember._C_cuda as c; print('cuda available:', c.is_available(), c.device_count())" \
  2>&1 | tee -a "$report"

# ---- smoke: outside pytest, with and without torch loaded ------------------------------------
# Each step of CUDA work is followed by probes of the host heap, canaries and engine errors; on a
# crash the last "[step] probe ..." line names the first step that broke the host (see the
# script's docstring). The tests crashed at the first error formatting a number after CUDA work;
# ember._C_cuda now creates the number-formatting state before CUDA starts (a mitigation under
# test, off with EMBER_CUDA_NO_FORMAT_WARMUP=1). The runs:
#   plain     as the tests run (warm-up on)           nowarmup  warm-up off: the crash scenario
#   early     warm-up off, numbers before any CUDA    torch     torch imported first
#   nothp     nowarmup with ember's CPU allocator not asking for transparent huge pages (the
#             host memory the GPU copies into; the system's THP mode is "madvise" there)
#   mcheck    nowarmup under glibc's checking malloc (aborts at the first corrupted chunk)
#   pytest    nowarmup inside pytest, where the crash was seen
# plain passing while nowarmup crashes (and early passes) means state the C++ runtime creates
# lazily after CUDA init is what breaks; mcheck failing means heap corruption.
# PHASES="build smoke" runs only these (about a minute).
if [[ ( " $phases " == *" tests "* && -z "${NO_SMOKE:-}" ) || " $phases " == *" smoke "* ]]; then
  mdebug=$(ls /usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0 /lib64/libc_malloc_debug.so.0 2>/dev/null | head -1)
  for run in plain nowarmup early nothp torch mcheck; do
    flag=""; envs=(EMBER_CUDA_NO_FORMAT_WARMUP=1)
    case $run in
      plain) envs=(EMBER_CUDA_NO_FORMAT_WARMUP=0) ;;
      early) flag=--early ;;
      nothp) envs+=(EMBER_CPU_NO_HUGEPAGES=1) ;;
      torch) flag=--torch; envs=(EMBER_CUDA_NO_FORMAT_WARMUP=0) ;;
      mcheck)
        [ -n "$mdebug" ] || { say "- smoke mcheck: no libc_malloc_debug.so.0 here"; continue; }
        envs+=(LD_PRELOAD="$mdebug" MALLOC_CHECK_=3 PYTHONMALLOC=malloc) ;;
    esac
    env "${envs[@]}" timeout 90 python3 -X faulthandler tools/gpu_smoke.py $flag >"$out/smoke_$run.log" 2>&1
    rc=$?
    say "- smoke $run: exit $rc; $(tail -1 "$out/smoke_$run.log" | cut -c1-300)"
    if [ $rc -ne 0 ]; then
      say "  last probe lines before the failure:"
      grep -E "^\[|!!!|Fatal|Segmentation|corrupt|free\(\)|malloc" "$out/smoke_$run.log" | tail -6 | sed 's/^/    /' | tee -a "$report" >/dev/null
    fi
    grep -E "Addressing Mode|uvm_disable_hmm|step failed|!!!" "$out/smoke_$run.log" | head -12 | sed 's/^/    /' | tee -a "$report" >/dev/null
  done
  # The same steps inside pytest (with its output capture); progress goes to a log file that the
  # capture cannot swallow.
  rm -f "$out/smoke_pytest.log"
  GPU_SMOKE_LOG=$out/smoke_pytest.log EMBER_CUDA_NO_FORMAT_WARMUP=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 \
    timeout 120 python3 -X faulthandler -m pytest -q -p no:cacheprovider -o addopts="" \
    tools/gpu_smoke.py >"$out/smoke_pytest.out" 2>&1
  rc=$?
  say "- smoke pytest (nowarmup): exit $rc; $(tail -1 "$out/smoke_pytest.out" | cut -c1-200)"
  grep -E "!!!|probe|step failed" "$out/smoke_pytest.log" 2>/dev/null | tail -4 | sed 's/^/    /' | tee -a "$report" >/dev/null
  # Which loaded libraries export libstdc++'s stream symbols after CUDA work (a second exporter
  # searched first would explain the crash): tools/cuda_emulation/README.md, "findings".
  timeout 60 python3 tools/cuda_emulation/libstdcxx_exporters.py >"$out/exporters.log" 2>&1
  say "- libstdc++ exporters (exit $?):"
  tail -8 "$out/exporters.log" | sed 's/^/    /' | tee -a "$report" >/dev/null
  LD_DEBUG=bindings timeout 60 python3 tools/cuda_emulation/libstdcxx_exporters.py 2>&1 |
    grep -E '(libember_engine|_C_cuda|_C\.).*_ZNSo9_M_insertImEERSoT_' | head -4 | sed 's/^/    /' | tee -a "$report" >/dev/null
fi

# ---- tests -------------------------------------------------------------------------------
# Each test file runs in its own process, all at once (16 cores, one GPU): a crash takes down
# one file's run, not the report, and the wall time is that of the longest file.
if [[ " $phases " == *" tests "* ]]; then
  tests=${TESTS:-"$(ls packages/*/tests/test_cuda_*.py 2>/dev/null | sort -u | tr '\n' ' ') packages/core/tests/test_op_devices.py packages/data/tests/test_pin_memory.py packages/nn/tests/test_activation_inplace.py"}
  say ""
  say "## Tests"
  s0=$(date +%s)
  # Only the plugins we name: the GPU image's Python has many installed, each a suspect in a crash.
  export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
  per_test=""
  python3 -c "import pytest_timeout" 2>/dev/null && per_test="-p pytest_timeout --timeout=${PER_TEST_TIMEOUT:-60}"
  mkdir -p "$out/tests"
  pids=()
  for f in $tests; do
    name=$(basename "$f" .py)
    # -k cuda on the op table keeps its meta/privateuse1 axes (CPU work, run by CI) out of here.
    sel=()
    [ "$name" = test_op_devices ] || [ "$name" = test_activation_inplace ] && sel=(-k cuda)
    timeout "${TEST_TIMEOUT:-240}" python3 -X faulthandler -m pytest -q -p no:cacheprovider \
      -o addopts="" $per_test -rfE "${sel[@]}" "$f" >"$out/tests/$name.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for f in $tests; do
    name=$(basename "$f" .py)
    log=$out/tests/$name.log
    say "- $name: $(grep -E '(passed|failed|error|skipped)' "$log" | tail -1)$(grep -q 'Fatal Python error' "$log" && echo ' CRASHED')"
  done
  say "tests took $(($(date +%s) - s0)) s; failures (first 80; all in logs.tgz):"
  grep -hE "^(FAILED|ERROR)" "$out"/tests/*.log | cut -c1-300 | head -80 | tee -a "$report" >/dev/null
  grep -h -A12 "Fatal Python error" "$out"/tests/*.log | head -40 | tee -a "$report" >/dev/null
  # One archive of the logs comes back whole (the device tool returns few files).
fi

# ---- benchmarks --------------------------------------------------------------------------
if [[ " $phases " == *" bench "* ]]; then
  say ""
  say "## Benchmarks (ember vs torch, same GPU)"
  timeout "${BENCH_TIMEOUT:-150}" python3 benchmarks/cases_cuda.py ${BENCH_ARGS:-} >"$out/bench.log" 2>&1
  say "- exit $? ; table:"
  cat "$out/bench.log" | tee -a "$report" >/dev/null

  # Training throughput (issue 12): eight models, ember vs torch, one process per case. Its
  # budget shrinks to what is left of TOTAL_LIMIT (default 470 s, so that the whole check stays
  # under 8 minutes); --hard-limit stops it 30 s after the budget at the latest.
  say ""
  say "## Training benchmarks (benchmarks/cuda_train.py)"
  limit=${TOTAL_LIMIT:-470}
  left=$((limit - $(elapsed)))
  [[ " $phases " == *" profile "* ]] && left=$((left - 80))  # the profile phase comes after
  tb=${TRAIN_BENCH_BUDGET:-150}
  [ $((left - 40)) -lt "$tb" ] && tb=$((left - 40))
  if [ "$tb" -lt 40 ]; then
    say "- skipped: $left s left of TOTAL_LIMIT=$limit s"
  else
    timeout "$((tb + 60))" python3 benchmarks/cuda_train.py --budget "$tb" --hard-limit "$((tb + 30))" \
      --json "$out/cuda_train.json" ${TRAIN_BENCH_ARGS:-} >"$out/cuda_train.md" 2>"$out/cuda_train.log"
    rc=$?
    say "- exit $rc (budget $tb s; the tracebacks are in cuda_train.log); table:"
    cat "$out/cuda_train.md" | tee -a "$report" >/dev/null
    [ $rc -ne 0 ] && tail -15 "$out/cuda_train.log" | tee -a "$report" >/dev/null
  fi
fi
# ---- ab: one training case with one of ember's kernel-path switches off, then on ------------
# (benchmarks/cuda_train.py --ember-switch NAME=0|1, ember only): which path is faster here.
if [[ " $phases " == *" ab "* ]]; then
  say ""
  say "## A/B of ember's kernel-path switches (cuda_train.py, ember only, throughput)"
  for pair in ${AB:-gpt2:deferred_errors vgg19:cudnn_graph alexnet:cudnn_graph}; do
    tag=${pair%%:*} sw=${pair#*:}
    case_=${tag//+/ }  # "resnet50+bf16": the case filter "resnet50 bf16"
    line="- $case_, $sw:"
    for v in 0 1; do
      timeout "$((${AB_BUDGET:-25} + 60))" python3 benchmarks/cuda_train.py --no-torch \
        --filter "$case_" --budget "${AB_BUDGET:-25}" --ember-switch "$sw=$v" \
        --json "$out/ab_${tag}_${sw}_$v.json" >"$out/ab_${tag}_${sw}_$v.md" 2>&1
      rc=$?
      got=$(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['cases'][0]['ember']
print(r.get('throughput') or r.get('status'))" "$out/ab_${tag}_${sw}_$v.json" 2>/dev/null)
      line="$line $sw=$v: ${got:-exit $rc}"
    done
    say "$line"
  done
fi
# ---- paper: the paper's GPU Fig. 1, the async ablation and Table 1 (benchmarks/paper/gpu_paper.py;
# Table 1 from the bench phase's cuda_train.json when it ran). Its README, PNG and traces come
# back in logs.tgz (paper/), for docs/paper/gpu/.
if [[ " $phases " == *" paper "* ]]; then
  say ""
  say "## The paper's GPU experiments (benchmarks/paper/gpu_paper.py)"
  train_json=()
  [ -f "$out/cuda_train.json" ] && train_json=(--train-json "$out/cuda_train.json")
  timeout "${PAPER_TIMEOUT:-240}" python3 benchmarks/paper/gpu_paper.py --out "$out/paper" \
    "${train_json[@]}" ${PAPER_ARGS:-} >"$out/paper.log" 2>&1
  say "- exit $?"
  if [ -f "$out/paper/README.md" ]; then
    tee -a "$report" <"$out/paper/README.md" >/dev/null
  else
    tail -15 "$out/paper.log" | tee -a "$report" >/dev/null
  fi
fi
# ---- profile: where a training step's GPU time goes, per op, ember then torch --------------
# (tools/gpu_profile_train.py; device times from ember's CUPTI activity; PROFILE_BLOCKING=1 runs
# ember under CUDA_LAUNCH_BLOCKING=1 for a build without it). Several profiles: PROFILE_ARGS
# separated by ';', e.g. PHASES="build profile" PROFILE_ARGS="gpt2 --bf16 --batch 8; resnet50 --bf16"
if [[ " $phases " == *" profile "* ]]; then
  IFS=';' read -ra profiles <<<"${PROFILE_ARGS:-gpt2 --bf16 --batch 8}"
  n=0
  for pargs in "${profiles[@]}"; do
    n=$((n + 1))
    say ""
    say "## Profile: $pargs, ember then torch"
    CUDA_LAUNCH_BLOCKING=${PROFILE_BLOCKING:-0} timeout "${PROFILE_TIMEOUT:-90}" \
      python3 tools/gpu_profile_train.py $pargs >"$out/profile_ember_$n.log" 2>&1
    say "- ember: exit $?"
    tail -${PROFILE_LINES:-42} "$out/profile_ember_$n.log" | tee -a "$report" >/dev/null
    timeout "${PROFILE_TIMEOUT:-90}" python3 tools/gpu_profile_train.py --framework torch \
      $pargs >"$out/profile_torch_$n.log" 2>&1
    say "- torch: exit $?"
    tail -${PROFILE_LINES:-42} "$out/profile_torch_$n.log" | tee -a "$report" >/dev/null
  done
fi
say ""
say "total: $(elapsed) s"
# Every log in one archive beside the report: the device tool returns at most 8 files.
(cd "$out" && tar -czf logs.tgz --exclude=report.md --exclude=logs.tgz -- * &&
  find . -mindepth 1 -maxdepth 1 ! -name report.md ! -name logs.tgz -exec rm -rf {} +)
cat "$report"
