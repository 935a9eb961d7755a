"""The portable (baseline x86-64) copies of the vectorized kernels: on a machine with AVX2 or
AVX-512 they never run unless EMBER_CPU_ISA caps the choice, so this runs the test files of those
kernels again in a subprocess with EMBER_CPU_ISA=baseline (softmax/norm/loss rows, vector math,
convolution, reductions, the fused optimizers, the LSTM and GRU layers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ember
import pytest

ROOT = Path(__file__).resolve().parents[3]
FILES = [
    "packages/core/tests/test_vec_math.py",
    "packages/core/tests/test_nn_rowops.py",
    "packages/core/tests/test_nn_conv_fast.py",
    "packages/core/tests/test_reductions.py",
    "packages/core/tests/test_lstm_layer.py",
    "packages/core/tests/test_gru_layer.py",
    "packages/nn/tests/test_optim_fused.py",
    "packages/nn/tests/test_optim_sgd_vec.py",
]


def _run(code_or_args: list[str], isa: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, EMBER_CPU_ISA=isa)
    return subprocess.run([sys.executable, *code_or_args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def test_env_caps_the_instruction_set():
    r = _run(["-c", "import ember; print(ember._C._cpu_isa())"], "baseline")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "baseline"
    r = _run(["-c", "import ember; ember.randn(3).softmax(0)"], "sse9")
    assert r.returncode != 0
    assert "EMBER_CPU_ISA must be 'baseline', 'avx2' or 'avx512', got 'sse9'" in r.stderr


@pytest.mark.skipif(ember._C._cpu_isa() == "baseline",
                    reason="this machine already runs the baseline kernels in every test")
def test_kernel_tests_pass_on_the_baseline_isa():
    files = [f for f in FILES if (ROOT / f).exists()]
    if len(files) < len(FILES):
        pytest.skip("not run from a repository checkout")
    r = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", *files], "baseline")
    tail = "\n".join((r.stdout + r.stderr).splitlines()[-30:])
    assert r.returncode == 0, f"kernel tests failed with EMBER_CPU_ISA=baseline:\n{tail}"
