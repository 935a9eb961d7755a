"""PyTorch distributed programs (compat_programs/*.py, written against `torch`, 2 ranks on the
CPU backend "gloo") run unchanged on ember through a `torch` package that is ember
(compat_programs/torch_shim, first on PYTHONPATH, so spawned ranks, launcher workers and
DataLoader workers see it too). Each program's rank 0 writes result.json; ember's must match
torch's: the stored reference (compat_programs/reference/<program>.json, written by torch 2.13
with ``python test_compat_dist_programs.py --regen``) always, and a live torch run when
EMBER_COMPAT_TORCH=1 (torch takes 10-20 s per program on a loaded 2-core machine, so it is not
part of the default run)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "compat_programs"
SHIM = HERE / "torch_shim"
REFERENCE = HERE / "reference"
TIMEOUT = 180  # generous: the machine is shared and loaded

# program -> (relative tolerance for floats, absolute tolerance)
PROGRAMS = {
    "ddp_train": (1e-4, 1e-5),
    "launched_env": (1e-4, 1e-6),
    "object_collectives": (0, 0),
    "tensor_collectives": (0, 0),
    "ddp_unused_bn": (1e-4, 1e-5),
    "local_sgd": (1e-4, 1e-5),
    "spawn_dataloader": (0, 0),
    "failure_recovery": (0, 0),
    "collectives_extras": (1e-5, 1e-6),
    "fsdp_train": (1e-4, 1e-5),
    "device_mesh_2d": (1e-4, 1e-5),
    "dcp_checkpoint": (1e-4, 1e-5),
    "dtensor_basics": (1e-4, 1e-5),
    "fsdp2_train": (1e-4, 1e-5),
    "dcp_fsdp2": (1e-4, 1e-5),
    "tp_mlp": (1e-4, 1e-5),
    "pipeline_schedules": (1e-4, 1e-5),
    "dtensor_2d": (1e-4, 1e-5),
    "tp_sequence_loss": (1e-4, 1e-5),
    "fsdp_tp_2d": (1e-4, 1e-5),
    "dtensor_ops": (1e-4, 1e-5),
    "dtensor_apis": (1e-4, 1e-5),
    "fsdp2_placements": (1e-4, 1e-5),
    "pipeline_multi": (1e-4, 1e-5),
    "post_local_sgd": (1e-4, 1e-5),
    "functional_collectives": (0, 0),
    "replicate_composable": (1e-4, 1e-5),
    "powersgd": (1e-4, 1e-5),
    "comm_debug_mode": (1e-4, 1e-5),
    "fsdp2_comm_counts": (1e-4, 1e-5),
    "tp_embedding_rowwise": (1e-4, 1e-5),
    "tp_llama_block": (1e-4, 1e-5),
    "dcp_reshard": (1e-4, 1e-5),
    "ddp_features": (1e-4, 1e-5),
    "eval_collectives": (1e-5, 1e-6),
    "dtensor_nn_ops": (1e-4, 1e-5),
    "dtensor_strided_shard": (1e-4, 1e-5),
    "store_rendezvous": (0, 0),
    "hogwild_shared": (1e-4, 1e-5),
    "elastic_restart": (1e-4, 1e-5),
    "groups_4ranks": (1e-4, 1e-5),
    "fsdp2_ac_sched": (1e-4, 1e-5),
    "zero_finetune": (1e-4, 1e-5),
    "contrastive_gather": (1e-4, 1e-5),
    "elastic_launch_api": (0, 0),
    "odd_objects": (0, 0),
    "ring_p2p": (1e-4, 1e-5),
    "moe_expert_parallel": (1e-4, 1e-5),
    "zero1_by_hand": (1e-4, 1e-5),
    "megatron_by_hand": (1e-4, 1e-5),
    "init_methods": (0, 0),
    "join_uneven": (1e-4, 1e-5),
    "gather_for_metrics": (1e-4, 1e-5),
    "async_futures": (1e-4, 1e-5),
    "pipeline_by_hand": (1e-4, 1e-5),
    "gan_subgroup_ddp": (1e-4, 1e-5),
}
LAUNCHED = {"launched_env"}  # run by the launcher rather than starting their own ranks


def _ember_pythonpath() -> str:
    import ember

    # unresolved: a development site is a tree of links into the sources, beside the
    # built extension
    parts = [str(SHIM), str(Path(ember.__file__).parent.parent)]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


def run_program(name: str, impl: str, out: Path) -> dict:
    """Runs compat_programs/<name>.py on impl ("ember" or "torch"); returns rank 0's result."""
    out.mkdir(parents=True, exist_ok=True)
    script = str(HERE / f"{name}.py")
    env = dict(os.environ)
    if impl == "ember":
        env["PYTHONPATH"] = _ember_pythonpath()
        launcher = "ember.distributed.run"
    else:
        launcher = "torch.distributed.run"
    cmd = [sys.executable, script, "--out", str(out)]
    if name in LAUNCHED:
        # torchrun as PyTorch's DDP tutorial runs it (port 0: a free one)
        cmd = [sys.executable, "-m", launcher, "--nnodes=1", "--nproc-per-node=2",
               "--rdzv-id=compat", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0",
               script, "--out", str(out)]
    proc = subprocess.run(cmd, env=env, cwd=str(out), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, f"{name} on {impl} failed:\n{proc.stdout}\n{proc.stderr}"
    result = out / "result.json"
    assert result.exists(), f"{name} on {impl} wrote no result:\n{proc.stderr}"
    if impl == "ember":
        # ember warns only through logging; torch-only noise aside, a program's stderr is quiet
        assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(result.read_text())


def assert_same(ref, got, rtol: float, atol: float, path: str = "") -> None:
    """ref and got agree: the same keys, list lengths, strings (ember. read as torch.), ints and
    bools exactly, floats within rtol / atol."""
    if isinstance(ref, dict):
        assert isinstance(got, dict), f"{path}: {got!r} is not a dict"
        assert sorted(ref) == sorted(got), f"{path}: keys {sorted(got)} != {sorted(ref)}"
        for k in ref:
            assert_same(ref[k], got[k], rtol, atol, f"{path}.{k}")
    elif isinstance(ref, list):
        assert isinstance(got, list) and len(got) == len(ref), f"{path}: {got!r} != {ref!r}"
        for i, (a, b) in enumerate(zip(ref, got)):
            assert_same(a, b, rtol, atol, f"{path}[{i}]")
    elif isinstance(ref, str):
        assert isinstance(got, str) and got.replace("ember.", "torch.") == ref, \
            f"{path}: {got!r} != {ref!r}"
    elif isinstance(ref, bool) or ref is None:
        assert got is ref, f"{path}: {got!r} != {ref!r}"
    elif isinstance(ref, int):
        assert type(got) is int and got == ref, f"{path}: {got!r} != {ref!r}"
    else:
        assert isinstance(got, float) and math.isclose(got, ref, rel_tol=rtol, abs_tol=atol), \
            f"{path}: {got!r} != {ref!r}"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_torch_reference(name, tmp_path):
    got = run_program(name, "ember", tmp_path / "ember")
    ref = json.loads((REFERENCE / f"{name}.json").read_text())
    assert_same(ref, got, *PROGRAMS[name])


@pytest.mark.skipif(os.environ.get("EMBER_COMPAT_TORCH") != "1",
                    reason="live torch runs take minutes: set EMBER_COMPAT_TORCH=1")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_live_torch(name, tmp_path):
    pytest.importorskip("torch")
    ref = run_program(name, "torch", tmp_path / "torch")
    assert_same(json.loads((REFERENCE / f"{name}.json").read_text()), ref, *PROGRAMS[name])
    assert_same(ref, run_program(name, "ember", tmp_path / "ember"), *PROGRAMS[name])


def test_assert_same_catches_differences():
    assert_same({"a": [1, 2.0, "torch.float32", True]}, {"a": [1, 2.0 + 1e-9, "ember.float32",
                                                             True]}, 1e-6, 0)
    for bad in ({"a": [1, 2.5, "torch.float32", True]}, {"a": [1, 2.0, "torch.int64", True]},
                {"a": [1, 2.0, "torch.float32", False]}, {"a": [1, 2.0, "torch.float32"]},
                {"b": [1, 2.0, "torch.float32", True]}, {"a": [1.0, 2.0, "torch.float32", True]}):
        with pytest.raises(AssertionError):
            assert_same({"a": [1, 2.0, "torch.float32", True]}, bad, 1e-6, 0)


if __name__ == "__main__" and sys.argv[1:] == ["--regen"]:
    import tempfile

    REFERENCE.mkdir(exist_ok=True)
    for prog in sorted(PROGRAMS):
        with tempfile.TemporaryDirectory() as d:
            res = run_program(prog, "torch", Path(d))
        (REFERENCE / f"{prog}.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        print("wrote", prog)
