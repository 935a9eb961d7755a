"""The multi-stage pipeline schedules (ScheduleLoopedBFS, ScheduleInterleaved1F1B,
ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV) on 2 and 4 ranks
with 2 or 3 stages per rank: each rank's action order is torch's (``pipeline_order``), the
losses, outputs and gradients are those of the whole model on one process (float64), and the
activations alive at once stay within what each schedule promises."""

from __future__ import annotations

import os
import traceback
from datetime import timedelta
from typing import Any

import ember
import ember.distributed as dist
import numpy as np
import pytest
from dist_helpers import run_ranks
from ember import nn
from ember.distributed.pipelining import (
    PipelineStage,
    ScheduleDualPipeV,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
    ScheduleLoopedBFS,
    ScheduleZBVZeroBubble,
)
from ember.distributed.pipelining._schedule import _Action, _PipelineScheduleRuntime

D = 3  # features between stages
TIMEOUT = 120  # generous: the machine is shared
V_STYLE = {"ScheduleZBVZeroBubble", "ScheduleDualPipeV"}
# (world) -> name -> (schedule class, stages per rank, micro-batches)
SCENARIOS = {
    2: {"bfs": ("ScheduleLoopedBFS", 2, 4),
        "interleaved": ("ScheduleInterleaved1F1B", 2, 4),
        "interleaved_3": ("ScheduleInterleaved1F1B", 3, 4),
        "zb": ("ScheduleInterleavedZeroBubble", 2, 4),
        "zbv": ("ScheduleZBVZeroBubble", 2, 4),
        "dualpipev": ("ScheduleDualPipeV", 2, 6)},
    4: {"interleaved": ("ScheduleInterleaved1F1B", 2, 8),
        "zb": ("ScheduleInterleavedZeroBubble", 2, 8),
        "zbv": ("ScheduleZBVZeroBubble", 2, 8),
        "dualpipev": ("ScheduleDualPipeV", 2, 8)},
}


def _stage_module(s: int, num_stages: int) -> nn.Module:
    """Stage s of the model: Linear + Tanh, the last one Linear to 2 outputs; weights from a
    seed per stage, float64."""
    rng = np.random.default_rng(100 + s)
    lin = nn.Linear(D, 2 if s == num_stages - 1 else D)
    with ember.no_grad():
        lin.weight.copy_(ember.tensor(0.6 * rng.standard_normal(tuple(lin.weight.shape))))
        lin.bias.copy_(ember.tensor(0.3 * rng.standard_normal(tuple(lin.bias.shape))))
    mod = lin if s == num_stages - 1 else nn.Sequential(lin, nn.Tanh())
    return mod.double()


def _batch(n: int) -> tuple[ember.Tensor, ember.Tensor]:
    rng = np.random.default_rng(7)
    return (ember.tensor(rng.standard_normal((2 * n, D))),
            ember.tensor(rng.standard_normal((2 * n, 2))))


def _loss(out: ember.Tensor, target: ember.Tensor) -> ember.Tensor:
    return ((out - target) ** 2).mean()


def _stages_of(rank: int, world: int, n_local: int, v: bool) -> list[int]:
    num = world * n_local
    if v:
        return sorted((rank, num - 1 - rank))
    return [s for s in range(num) if s % world == rank]


def _run(rank: int, world: int, cls_name: str, n_local: int, n: int, group: Any = None) -> dict:
    import ember.distributed.pipelining as pp

    num = world * n_local
    mine = _stages_of(rank, world, n_local, cls_name in V_STYLE)
    mods = {s: _stage_module(s, num) for s in mine}
    stages = [PipelineStage(mods[s], s, num, group=group) for s in mine]
    schedule = getattr(pp, cls_name)(stages, n, loss_fn=_loss)
    x, y = _batch(n)
    res: dict[str, Any] = {"order": {r: [None if a is None else str(a) for a in acts]
                                     for r, acts in schedule.pipeline_order.items()}}
    peaks, outs, losses_all = [], [], []
    for _ in range(2):  # the second step starts afresh: nothing of the first one is left
        for m in mods.values():
            m.zero_grad()
        losses: list = []
        out = schedule.step(*((x,) if 0 in mine else ()),
                            target=y if num - 1 in mine else None, losses=losses)
        peaks.append(schedule._peak_live_activations)
        outs.append(None if out is None else out.tolist())
        losses_all.append([float(v) for v in losses])
    res["peak"] = peaks
    res["out"], res["losses"] = outs, losses_all
    res["grads"] = {s: [p.grad.tolist() for p in mods[s].parameters()] for s in mine}
    ev_losses: list = []
    ev = schedule.eval(*((x,) if 0 in mine else ()), target=y if num - 1 in mine else None,
                       losses=ev_losses)
    res["eval"] = (None if ev is None else ev.tolist(), [float(v) for v in ev_losses])
    return res


def _worker(rank: int, init: str, conn: Any) -> None:
    """4 ranks: the 2-rank scenarios on the group of ranks 0 and 1 (one start of processes
    for both sizes), then the 4-rank ones."""
    try:
        dist.init_process_group("shm", init_method=init, rank=rank, world_size=4,
                                timeout=timedelta(seconds=60))
        pair = dist.new_group([0, 1])
        results = {}
        for world, group in ((2, pair), (4, None)):
            for name, (cls_name, n_local, n) in SCENARIOS[world].items():
                if rank >= world:
                    continue
                try:
                    results[f"{world}:{name}"] = ("ok", _run(rank, world, cls_name, n_local, n,
                                                             group))
                except BaseException:  # noqa: BLE001  (reported by the scenario's test)
                    results[f"{world}:{name}"] = ("err", traceback.format_exc())
                    break  # the ranks may be out of step now
            dist.barrier()
        dist.destroy_process_group()
        conn.send(("ok", results))
    except BaseException:  # noqa: BLE001
        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def all_ranks(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("pp")
    return run_ranks(_worker, 4, (f"file://{tmp / 'store'}",), TIMEOUT)


@pytest.fixture(scope="module")
def ranks2(all_ranks) -> list[dict]:
    return [{k[2:]: v for k, v in res.items() if k.startswith("2:")} for res in all_ranks[:2]]


@pytest.fixture(scope="module")
def ranks4(all_ranks) -> list[dict]:
    return [{k[2:]: v for k, v in res.items() if k.startswith("4:")} for res in all_ranks]


def _get(results: list[dict], name: str) -> list[dict]:
    values = []
    for r, res in enumerate(results):
        if name not in res:
            pytest.fail(f"scenario {name} did not run on rank {r} (an earlier one failed)")
        status, value = res[name]
        if status == "err":
            pytest.fail(f"rank {r}:\n{value}")
        values.append(value)
    return values


def _reference(num: int, n: int) -> tuple[list, list, dict]:
    """The whole model on one process: each micro-batch's loss, the output, and the
    gradients of the mean of the micro-batch losses."""
    mods = [_stage_module(s, num) for s in range(num)]
    x, y = _batch(n)
    losses, outs = [], []
    for xm, ym in zip(ember.tensor_split(x, n), ember.tensor_split(y, n)):
        h = xm
        for m in mods:
            h = m(h)
        loss = _loss(h, ym)
        (loss / n).backward()
        losses.append(float(loss))
        outs.append(h.detach())
    grads = {s: [p.grad.tolist() for p in mods[s].parameters()] for s in range(num)}
    return losses, ember.cat(outs).tolist(), grads


def _check_training(per_rank: list[dict], world: int, n_local: int, n: int) -> None:
    num = world * n_local
    ref_losses, ref_out, ref_grads = _reference(num, n)
    last = next(r for r in per_rank if r["out"][0] is not None)
    for step in range(2):
        np.testing.assert_allclose(last["losses"][step], ref_losses, rtol=1e-12)
        np.testing.assert_allclose(last["out"][step], ref_out, rtol=1e-12)
    np.testing.assert_allclose(last["eval"][0], ref_out, rtol=1e-12)
    np.testing.assert_allclose(last["eval"][1], ref_losses, rtol=1e-12)
    seen = set()
    for res in per_rank:
        for s, grads in res["grads"].items():
            seen.add(int(s))
            for g, ref in zip(grads, ref_grads[int(s)]):
                np.testing.assert_allclose(np.asarray(g), np.asarray(ref), rtol=1e-10,
                                           atol=1e-14)
    assert seen == set(range(num))


def _live_peaks(order: dict, weight_step_frees: bool) -> dict[int, int]:
    """The most micro-batch activations alive at once on each rank by the action list: a
    forward keeps them until the full backward, and in a split backward until the weight
    step (torch) or the input-gradient step (ember, whose input step does all the work)."""
    frees = {"B": -1, "W" if weight_step_frees else "I": -1}
    peaks = {}
    for r, acts in order.items():
        live = peak = 0
        for a in acts:
            act = _Action.from_str(a) if a else None
            for c in (act.sub_actions or (act,)) if act else ():
                live += frees.get(c.computation_type.value, 0)
                live += c.computation_type.value == "F"
                peak = max(peak, live)
        peaks[int(r)] = peak
    return peaks


@pytest.mark.parametrize("name", list(SCENARIOS[2]))
def test_two_ranks_train_like_the_whole_model(ranks2, name):
    _, n_local, n = SCENARIOS[2][name]
    _check_training(_get(ranks2, name), 2, n_local, n)


@pytest.mark.parametrize("name", list(SCENARIOS[4]))
def test_four_ranks_train_like_the_whole_model(ranks4, name):
    _, n_local, n = SCENARIOS[4][name]
    _check_training(_get(ranks4, name), 4, n_local, n)


def test_interleaved_1f1b_order_is_torchs():
    """The documented interleaved 1F1B timeline, 2 ranks x 2 stages, 4 micro-batches:
    depth first (micro-batches 0 and 1 through stage 0, then stage 2, ...), not looped."""
    order = _fake_schedule(ScheduleInterleaved1F1B, 2, 2, 4).pipeline_order
    assert [None if a is None else str(a) for a in order[0]] == [
        "0F0", "0F1", "2F0", "2F1", None, None, "0F2", "2B0", "0F3", "2B1", "2F2", "0B0",
        "2F3", "0B1", None, "2B2", None, "2B3", None, "0B2", None, "0B3"]
    assert [None if a is None else str(a) for a in order[1]] == [
        None, "1F0", "1F1", None, "3F0", "3B0", "3F1", "3B1", "1F2", "1B0", "1F3", "1B1",
        "3F2", "3B2", "3F3", "3B3", None, "1B2", None, "1B3"]


def test_zero_bubble_orders_split_the_backward():
    zb = _fake_schedule(ScheduleInterleavedZeroBubble, 2, 2, 4).pipeline_order
    assert [None if a is None else str(a) for a in zb[1]] == [
        None, "1F0", "1F1", "3F0", "3I0", "3F1", "3I1", "3W0", "1F2", "1I0", "3W1", "1F3",
        "1I1", "1W0", "3F2", "3I2", "1W1", "3F3", "3I3", "3W2", "1I2", "3W3", "1I3", "1W2",
        "1W3"]
    zbv = _fake_schedule(ScheduleZBVZeroBubble, 2, 2, 4, v=True).pipeline_order
    assert [str(a) for a in zbv[0]][:9] == ["0F0", "0F1", "0F2", "3F0", "3I0", "3W0", "3F1",
                                            "3I1", "3W1"]
    dp = _fake_schedule(ScheduleDualPipeV, 2, 2, 4, v=True).pipeline_order
    assert [str(a) for a in dp[0]] == [
        "0F0", "0F1", "0F2", "3F0", "3I0", "3W0", "3F1", "(0F3;3B1)OVERLAP_F_B",
        "(3F2;0B0)OVERLAP_F_B", "3B2", "(3F3;0B1)OVERLAP_F_B", "3B3", "0I2", "0W2", "0I3",
        "0W3"]
    assert _Action.from_str("(0F3;3B1)OVERLAP_F_B").sub_actions == (
        _Action.from_str("0F3"), _Action.from_str("3B1"))


class _FakeStage:
    """What a schedule reads from its stages to plan the order (no process group needed)."""

    def __init__(self, world: int, rank: int, num: int, s: int) -> None:
        self.group_size, self.group_rank, self.num_stages, self.stage_index = world, rank, num, s
        self.is_first, self.is_last = s == 0, s == num - 1
        self.submod = None


def _fake_schedule(cls: type, world: int, n_local: int, n: int, v: bool = False,
                   lib: Any = None) -> Any:
    num = world * n_local
    stages = [_FakeStage(world, 0, num, s) for s in _stages_of(0, world, n_local, v)]
    if lib is not None:  # torch checks its stages' modules for torch.compile
        for st in stages:
            st.submod = lib.nn.Linear(1, 1)
    return cls(stages, n)


@pytest.mark.parametrize("cls_name", ["ScheduleLoopedBFS", "ScheduleInterleaved1F1B",
                                      "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble",
                                      "ScheduleDualPipeV"])
def test_orders_match_torch(cls_name):
    """ember's pipeline_order is torch's, action for action (idle slots included), for 1-4
    ranks, 1-3 stages per rank (2 in a V for the V schedules) and 1-10 micro-batches; where
    torch refuses a configuration ember refuses it with the same exception class."""
    torch = pytest.importorskip("torch")
    import ember.distributed.pipelining as pp
    from torch.distributed.pipelining import schedules as ts

    v = cls_name in V_STYLE
    for world in (1, 2, 3, 4):
        for n_local in (2,) if v else (1, 2, 3):
            for n in range(1, 11):
                try:
                    theirs = _fake_schedule(getattr(ts, cls_name), world, n_local, n, v, torch)
                except Exception as e:  # noqa: BLE001
                    with pytest.raises(type(e)):
                        _fake_schedule(getattr(pp, cls_name), world, n_local, n, v)
                    continue
                ours = _fake_schedule(getattr(pp, cls_name), world, n_local, n, v)
                got = {r: [str(a) if a else None for a in acts]
                       for r, acts in ours.pipeline_order.items()}
                want = {r: [str(a) if a else None for a in acts]
                        for r, acts in theirs.pipeline_order.items()}
                assert got == want, (world, n_local, n)


def test_activations_alive_stay_within_the_schedules_bound(ranks2, ranks4):
    """By the order (a forward keeps its activations until the full backward or the weight
    step), each schedule's promise: interleaved 1F1B at most its warm-up count + 1
    micro-batches per rank ((stages per rank - 1) * micro-batches per round
    + 2 * (ranks - 1 - rank) + 1), fewer than looped BFS (all of them); ZB1P one warm-up
    forward less per hop but rank weight steps deferred ((stages per rank - 1) * per round
    + ranks); ZB-V 2 * ranks stage chunks (1F1B's memory), DualPipeV 2 * ranks + 1. Measured
    during ember's steps: the same, or fewer where the input-gradient step frees them."""
    expected = {(2, "bfs"): [8, 8], (2, "interleaved"): [5, 3], (2, "interleaved_3"): [7, 5],
                (2, "zb"): [4, 4], (2, "zbv"): [4, 4], (2, "dualpipev"): [5, 5],
                (4, "interleaved"): [11, 9, 7, 5], (4, "zb"): [8, 8, 8, 8],
                (4, "zbv"): [8, 8, 8, 8], (4, "dualpipev"): [9, 9, 9, 9]}
    measured = {(2, "zb"): [4, 3], (2, "zbv"): [4, 4], (2, "dualpipev"): [5, 5],
                (4, "zb"): [8, 7, 6, 5], (4, "zbv"): [8, 8, 8, 8],
                (4, "dualpipev"): [9, 9, 9, 9]}
    for (world, name), want in expected.items():
        per_rank = _get(ranks2 if world == 2 else ranks4, name)
        order = per_rank[0]["order"]
        assert list(_live_peaks(order, True).values()) == want, (world, name)
        ours = measured.get((world, name), want)
        assert list(_live_peaks(order, False).values()) == ours, (world, name)
        assert [res["peak"] for res in per_rank] == [[p, p] for p in ours], (world, name)
        assert all(p <= w for p, w in zip(ours, want))
        _, n_local, n = SCENARIOS[world][name]
        per_round = n // max(1, n // world)
        bound = {"bfs": [n_local * n] * world,
                 "interleaved": [min((n_local - 1) * per_round + 2 * (world - 1 - r),
                                     n_local * n) + 1 for r in range(world)],
                 "zb": [(n_local - 1) * per_round + world] * world,
                 "zbv": [2 * world] * world, "dualpipev": [2 * world + 1] * world}
        assert want == bound[name.split("_")[0]], (world, name)
        if name.startswith("interleaved"):
            assert max(want) < n_local * n  # looped BFS keeps them all


def test_schedule_checks():
    with pytest.raises(ValueError, match="exactly 2 stages per rank"):
        _fake_schedule(ScheduleZBVZeroBubble, 2, 3, 4, v=False)
    with pytest.raises(ValueError, match="at least as many microbatches as stages"):
        _fake_schedule(ScheduleDualPipeV, 2, 2, 3, v=True)
    with pytest.raises(ValueError, match="multiple of the number of rounds"):
        _fake_schedule(ScheduleInterleaved1F1B, 4, 2, 9)
    with pytest.raises(ValueError, match="must be on rank 1"):
        _fake_schedule(ScheduleZBVZeroBubble, 2, 2, 4, v=False)  # stages 0, 2: not a V
    bfs = _fake_schedule(ScheduleLoopedBFS, 2, 2, 2)
    assert [str(a) for a in bfs.pipeline_order[0] if a] == [
        "0F0", "0F1", "2F0", "2F1", "2B1", "2B0", "0B1", "0B0"]
    with pytest.raises(RuntimeError, match="Invalid action string"):
        _Action.from_str("0X1")


def test_runtime_loads_and_checks_an_order(tmp_path):
    rt = _fake_schedule(_PipelineScheduleRuntime, 2, 2, 2)
    a = _Action.from_str
    good = {0: [a(s) for s in ("0F0", "0F1", "2F0", "2F1", "2B0", "2B1", "0B0", "0B1")],
            1: [a(s) for s in ("1F0", "1F1", "3F0", "3I0", "3W0", "3F1", "3B1", "1B0",
                               "1B1")]}
    rt._load_actions(good)
    path = tmp_path / "order.csv"
    rt._dump_csv(str(path))
    assert path.read_text().splitlines()[1] == "1F0,1F1,3F0,3I0,3W0,3F1,3B1,1B0,1B1"
    rt._load_csv(str(path))
    assert [str(x) for x in rt.pipeline_order[1]] == [str(x) for x in good[1]]
    # rank 0 waits for stage 2's gradient before running stage 2 forward: never completes
    stuck = {0: [a(s) for s in ("0F0", "0F1", "2B0", "2F0", "2F1", "2B1", "0B0", "0B1")],
             1: good[1]}
    with pytest.raises(ValueError, match="cannot complete"):
        rt._load_actions(stuck)
    with pytest.raises(ValueError, match="exactly once"):
        rt._load_actions({0: good[0][:-1], 1: good[1]})
    with pytest.raises(ValueError, match="does not hold"):
        rt._load_actions({0: good[1], 1: good[0]})


@pytest.mark.skipif(os.environ.get("EMBER_COMPAT_TORCH") != "1",
                    reason="starts torch ranks (slow); EMBER_COMPAT_TORCH=1 runs it")
def test_losses_and_gradients_match_torch(ranks2, tmp_path):
    """torch's own schedules on 2 gloo ranks, same model and batch: the same losses and
    gradients as ember's."""
    pytest.importorskip("torch")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    theirs = run_ranks(_torch_worker, 2, (port,), TIMEOUT)
    for name in SCENARIOS[2]:
        for ours, tr in zip(_get(ranks2, name), theirs):
            if ours["out"][0] is not None:
                np.testing.assert_allclose(ours["losses"][0], tr[name]["losses"], rtol=1e-10)
            for s, grads in ours["grads"].items():
                for g, t in zip(grads, tr[name]["grads"][s]):
                    np.testing.assert_allclose(np.asarray(g), np.asarray(t), rtol=1e-9,
                                               atol=1e-14)


def _torch_worker(rank: int, port: int, conn: Any) -> None:
    try:
        import torch
        import torch.distributed as tdist
        import torch.distributed.pipelining as tp

        tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                 world_size=2, timeout=timedelta(seconds=60))
        out = {}
        for name, (cls_name, n_local, n) in SCENARIOS[2].items():
            num = 2 * n_local
            mine = _stages_of(rank, 2, n_local, cls_name in V_STYLE)
            mods = {}
            for s in mine:
                m = torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.Tanh()) \
                    if s < num - 1 else torch.nn.Linear(D, 2)
                ours = _stage_module(s, num)
                with torch.no_grad():
                    for p, q in zip(m.parameters(), ours.parameters()):
                        p.copy_(torch.tensor(q.tolist()))
                mods[s] = m.double()
            stages = [tp.PipelineStage(mods[s], s, num, torch.device("cpu")) for s in mine]
            sched = getattr(tp, cls_name)(stages, n, loss_fn=lambda o, t: ((o - t) ** 2).mean())
            x, y = (torch.tensor(t.tolist(), dtype=torch.float64) for t in _batch(n))
            losses: list = []
            sched.step(*((x,) if 0 in mine else ()), target=y if num - 1 in mine else None,
                       losses=losses)
            out[name] = {"losses": [float(v) for v in losses],
                         "grads": {s: [p.grad.tolist() for p in mods[s].parameters()]
                                   for s in mine}}
        tdist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        conn.send(("err", traceback.format_exc()))


def test_one_rank_split_backward_and_its_checks():
    """All stages on one rank (messages stay in the process): the zero-bubble schedules train
    like the whole model; the stage's input-gradient / weight-gradient steps as torch names
    them, and their order enforced."""
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ref_losses, ref_out, ref_grads = _reference(2, 4)
        x, y = _batch(4)
        for cls in (ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV,
                    ScheduleInterleaved1F1B, ScheduleLoopedBFS):
            mods = [_stage_module(s, 2) for s in range(2)]
            sched = cls([PipelineStage(mods[s], s, 2) for s in range(2)], 4, loss_fn=_loss)
            losses: list = []
            out = sched.step(x, target=y, losses=losses)
            np.testing.assert_allclose([float(v) for v in losses], ref_losses, rtol=1e-12)
            np.testing.assert_allclose(out.tolist(), ref_out, rtol=1e-12)
            for s in range(2):
                for p, ref in zip(mods[s].parameters(), ref_grads[s]):
                    np.testing.assert_allclose(p.grad.tolist(), ref, rtol=1e-10, atol=1e-14)
        assert [str(a) for a in sched.pipeline_order[0] if a] == [
            "0F0", "0F1", "0F2", "0F3", "1F0", "1F1", "1F2", "1F3",
            "1B3", "1B2", "1B1", "1B0", "0B3", "0B2", "0B1", "0B0"]

        # the stage's own steps: forward, input-gradient step, weight step
        mod = _stage_module(0, 1)
        stage = PipelineStage(mod, 0, 1)
        stage.has_backward = True
        stage.clear_runtime_states()
        out = stage.forward_one_chunk(0, (x,))
        with pytest.raises(RuntimeError, match="weight step of micro-batch 0 before its input"):
            stage.backward_weight_one_chunk(0)
        stage.backward_one_chunk(0, loss=_loss(out, y[:, :2]), full_backward=False)
        stage.backward_weight_one_chunk(0)
        whole = _stage_module(0, 1)
        _loss(whole(x), y[:, :2]).backward()
        np.testing.assert_allclose(mod.weight.grad.tolist(), whole.weight.grad.tolist(),
                                   rtol=1e-12)
        with pytest.raises(RuntimeError, match="backward on micro-batch 0 before its forward"):
            stage.backward_one_chunk(0, loss=None)
        with pytest.raises(RuntimeError, match="requires gradients to be enabled"):
            with ember.no_grad():
                ScheduleInterleaved1F1B([PipelineStage(mod, 0, 1)], 2, loss_fn=_loss).step(
                    x, target=y[:, :2])
    finally:
        dist.destroy_process_group()


def test_get_schedule_class():
    from ember.distributed.pipelining.schedules import get_schedule_class

    assert get_schedule_class("Interleaved1F1B") is ScheduleInterleaved1F1B
    assert get_schedule_class("zbvzerobubble") is ScheduleZBVZeroBubble
    assert get_schedule_class("DUALPIPEV") is ScheduleDualPipeV
    with pytest.raises(ValueError, match="Unknown schedule name 'Nope'"):
        get_schedule_class("Nope")
