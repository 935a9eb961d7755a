"""Session-25 PyTorch distributed programs (compat_programs/*.py, 2 ranks on gloo), run on
ember through the torch shim and compared with torch 2.13's stored results, with the harness of
test_compat_dist_programs.py: Work handles (source_rank, coalesced collectives, object
collectives with device=), shuffled samplers and splits seeded as in torch (torch's randperm
order), every kind of store, DDP corners (tied / frozen / unused parameters, buffers, the
GradBucket a hook sees, compression hooks, no_sync), ZeroRedundancyOptimizer with Adam, the
errors collectives raise, torchrun --standalone --role, and several process groups at once
(group_src / group_dst). Regenerate the references with ``python test_compat_dist_programs_s25.py --regen`` (needs torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_compat_dist_programs import HERE, REFERENCE, TIMEOUT, _ember_pythonpath, assert_same

# program -> (relative tolerance for floats, absolute tolerance)
PROGRAMS = {
    "work_handles": (0, 0),
    "sampler_shuffle": (0, 0),
    "store_kinds": (0, 0),
    "ddp_edges": (1e-5, 1e-6),
    "collective_errors": (0, 0),
    "launched_standalone": (0, 0),
    "subgroup_overlap": (0, 0),
    "zero_adam": (1e-5, 1e-6),
}
# run by the launcher (torchrun's flags) rather than starting their own ranks
LAUNCHED = {"launched_standalone": ["--standalone", "--nproc-per-node=2", "--max-restarts=1",
                                    "--role=trainer"]}
# run together in one start of the ranks (compat_programs/s25_bundle.py): starting 2 ranks costs
# seconds, the programs themselves little
BUNDLED = ["work_handles", "subgroup_overlap", "sampler_shuffle", "ddp_edges", "zero_adam",
           "store_kinds", "collective_errors"]


def run_program(name: str, impl: str, out: Path) -> dict:
    """Runs compat_programs/<name>.py on impl ("ember" or "torch"); returns its result.json
    (for the bundle: program -> result)."""
    out.mkdir(parents=True, exist_ok=True)
    script = str(HERE / f"{name}.py")
    env = dict(os.environ)
    if impl == "ember":
        env["PYTHONPATH"] = _ember_pythonpath()
    cmd = [sys.executable, script, "--out", str(out)]
    if name in LAUNCHED:
        launcher = "ember.distributed.run" if impl == "ember" else "torch.distributed.run"
        cmd = [sys.executable, "-m", launcher, *LAUNCHED[name], script, "--out", str(out)]
    proc = subprocess.run(cmd, env=env, cwd=str(out), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, f"{name} on {impl} failed:\n{proc.stdout}\n{proc.stderr}"
    result = out / "result.json"
    assert result.exists(), f"{name} on {impl} wrote no result:\n{proc.stderr}"
    if impl == "ember":
        assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(result.read_text())


def _results(impl: str, tmp: Path) -> dict:
    res = run_program("s25_bundle", impl, tmp / "bundle")
    assert sorted(res) == sorted(BUNDLED)
    for name in set(PROGRAMS) - set(BUNDLED):
        res[name] = run_program(name, impl, tmp / name)
    return res


@pytest.fixture(scope="module")
def ember_results(tmp_path_factory) -> dict:
    return _results("ember", tmp_path_factory.mktemp("s25_ember"))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_torch_reference(name, ember_results):
    ref = json.loads((REFERENCE / f"{name}.json").read_text())
    assert_same(ref, ember_results[name], *PROGRAMS[name])


@pytest.fixture(scope="module")
def torch_results(tmp_path_factory) -> dict:
    pytest.importorskip("torch")
    return _results("torch", tmp_path_factory.mktemp("s25_torch"))


@pytest.mark.skipif(os.environ.get("EMBER_COMPAT_TORCH") != "1",
                    reason="live torch runs take minutes: set EMBER_COMPAT_TORCH=1")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_live_torch(name, torch_results, ember_results):
    ref = torch_results[name]
    assert_same(json.loads((REFERENCE / f"{name}.json").read_text()), ref, *PROGRAMS[name])
    assert_same(ref, ember_results[name], *PROGRAMS[name])


if __name__ == "__main__" and sys.argv[1:] == ["--regen"]:
    import tempfile

    # each program alone (the bundle's results must be the same: test_program_matches_live_torch)
    for prog in sorted(PROGRAMS):
        with tempfile.TemporaryDirectory() as d:
            res = run_program(prog, "torch", Path(d))
        (REFERENCE / f"{prog}.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        print("wrote", prog)
