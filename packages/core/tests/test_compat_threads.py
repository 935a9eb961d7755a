"""The default thread count follows *_NUM_THREADS and the CPU affinity mask (issue 15 item 12),
so ember never oversubscribes a container, a taskset or ranks sharing a node."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

CODE = "import ember; print(ember.get_num_threads())"


def _threads(env_extra=None, prefix=(), env_drop=("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                   "EMBER_NUM_THREADS")):
    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    env.update(env_extra or {})
    out = subprocess.run([*prefix, sys.executable, "-c", CODE], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def _allowed_cpus() -> int:
    return len(os.sched_getaffinity(0))


def test_default_is_the_affinity_mask():
    n = _threads()
    assert 1 <= n <= _allowed_cpus()


@pytest.mark.parametrize("var", ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "EMBER_NUM_THREADS"])
def test_num_threads_variables(var):
    assert _threads({var: "3"}) == 3


def test_variable_precedence_and_bad_values():
    assert _threads({"EMBER_NUM_THREADS": "2", "OMP_NUM_THREADS": "5"}) == 2
    assert _threads({"OMP_NUM_THREADS": "5", "MKL_NUM_THREADS": "7"}) == 5
    assert _threads({"OMP_NUM_THREADS": "4,2"}) == 4  # OpenMP's nested form: the first level
    default = _threads()
    for bad in ("0", "-2", "many", ""):
        assert _threads({"OMP_NUM_THREADS": bad}) == default


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset is not installed")
def test_taskset_limits_the_default():
    cpu = sorted(os.sched_getaffinity(0))[0]
    assert _threads(prefix=("taskset", "-c", str(cpu))) == 1
    # the variables still win over the mask, as with torch
    assert _threads({"OMP_NUM_THREADS": "3"}, prefix=("taskset", "-c", str(cpu))) == 3


def test_affinity_set_before_import_limits_the_default():
    cpu = sorted(os.sched_getaffinity(0))[0]
    code = (f"import os; os.sched_setaffinity(0, {{{cpu}}}); import ember; "
            "print(ember.get_num_threads())")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                             "EMBER_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "1", out.stderr


def test_matches_torch_under_the_same_settings():
    pytest.importorskip("torch")
    code = "import torch; print(torch.get_num_threads())"
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["OMP_NUM_THREADS"] = "2"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert int(out.stdout.strip()) == _threads({"OMP_NUM_THREADS": "2"}) == 2
