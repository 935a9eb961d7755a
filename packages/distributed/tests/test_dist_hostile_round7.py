"""Hostile input, round 7 (ember.distributed part): all_to_all pieces of the wrong size, rank
arguments that are not ints, and object collectives given the wrong containers.

all_to_all / all_to_all_single on the shm backend (what "gloo" runs on one machine) copied
``min(sent, expected)`` bytes of each piece: an output piece shorter than what its peer sent
silently got a cut piece, a longer one kept stale values past it (PyTorch's gloo: a
RuntimeError). Every rank now learns every rank's piece sizes in the exchange it already made to
agree on the number of steps, so all of them refuse a mismatch together (a ValueError naming the
collective, the group, the ranks and the byte counts) and the group stays usable.

Rank arguments went through ``int()``: ``broadcast(t, src="1")`` or ``src=0.9`` ran from rank 1
or 0 (PyTorch: TypeError); ``new_group(["0"])`` was accepted; passing both ``src`` and
``group_src`` silently used ``group_src`` (PyTorch: ValueError). ``batch_isend_irecv([1])`` was an
AttributeError ``'int' object has no attribute 'group'`` (PyTorch: ValueError naming P2POp).
``scatter_object_list`` with an input list of the wrong length silently scattered the first
entries (PyTorch: RuntimeError), and an empty output list was an IndexError; both are now
ValueErrors naming the argument. ``broadcast_object_list(3)`` was ``TypeError: object of type
'int' has no len()``; it now names the call.

Exception classes: where PyTorch's gloo raises RuntimeError for a tensor or list of the wrong
size or a root outside the group, ember raised ValueError, and TypeError where PyTorch raises
RuntimeError for a reduction the dtype cannot take (BAND of floats, AVG of ints). These are now
raised as classes deriving from both (as ember.DtypeNotImplementedError does), so code catching
either library's class keeps working.

A ``group=`` that is not a ProcessGroup (a str, an int) was a TypeError where PyTorch raises
ValueError; it is a ValueError now, naming what was passed.

``DistributedDataParallel`` made before ``init_process_group`` raised RuntimeError; PyTorch
raises ValueError (its get_world_size does), and so does ember now (the same for
ember.data.DistributedSampler, tested in packages/data/tests/test_data_hostile_round7.py).

A DCP checkpoint whose ``.metadata`` was truncated or overwritten raised the bare pickle error
("pickle data was truncated") naming neither the file nor DCP; it names both now (same class).

One process, world size 1 (a HashStore), except the all_to_all mismatch between two ranks,
which runs in two spawned processes with a group timeout and a queue timeout (no hang, no leaked
process).
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
from datetime import timedelta

import ember
import ember.distributed as dist
import ember.distributed.checkpoint as dcp
import pytest


@pytest.fixture
def world():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


# ---- all_to_all piece sizes -------------------------------------------------------------------
def test_all_to_all_single_of_another_size_is_refused(world):
    out = ember.full((3,), -1.0)
    with pytest.raises(ValueError, match=r"all_to_all_single: rank 0 of group WORLD expects 12 "
                                         r"bytes from rank 0, which sends it 16 bytes"):
        dist.all_to_all_single(out, ember.arange(4.0))
    assert out.tolist() == [-1.0, -1.0, -1.0]  # nothing was cut into it
    with pytest.raises(ValueError, match="expects 20 bytes from rank 0, which sends it 16"):
        dist.all_to_all_single(ember.zeros(5), ember.arange(4.0), [5], [4])


def test_all_to_all_of_another_size_is_refused(world):
    out = [ember.full((3,), -1.0)]
    with pytest.raises(ValueError, match=r"all_to_all: rank 0 of group WORLD expects 12 bytes "
                                         r"from rank 0, which sends it 8 bytes"):
        dist.all_to_all(out, [ember.ones(2)])
    assert out[0].tolist() == [-1.0, -1.0, -1.0]


def test_all_to_all_of_matching_sizes_still_works_after_a_refusal(world):
    with pytest.raises(ValueError):
        dist.all_to_all([ember.zeros(3)], [ember.ones(2)])
    out = [ember.zeros(2)]
    dist.all_to_all(out, [ember.tensor([1.0, 2.0])])
    assert out[0].tolist() == [1.0, 2.0]
    o = ember.zeros(4)
    dist.all_to_all_single(o, ember.arange(4.0), [4], [4])
    assert o.tolist() == [0.0, 1.0, 2.0, 3.0]
    e = [ember.zeros(0)]
    dist.all_to_all(e, [ember.ones(0)])  # empty pieces agree too
    assert e[0].numel() == 0
    x = ember.ones(2)
    dist.all_reduce(x)  # the group is not broken
    assert x.tolist() == [1.0, 1.0]


def _a2a_rank(rank: int, init: str, q) -> None:
    import ember as t
    import ember.distributed as d

    d.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                         timeout=timedelta(seconds=30))
    out = {}
    try:
        # rank 0 sends 3 elements to rank 1, which expects 2 from it
        ins = [t.ones(2), t.ones(3)] if rank == 0 else [t.ones(2), t.ones(2)]
        outs = [t.zeros(2), t.zeros(2)]
        try:
            d.all_to_all(outs, ins)
            out["a2a"] = ["ok", "", [o.tolist() for o in outs]]
        except Exception as e:  # noqa: BLE001  (reported to the test)
            kind = "ValueError+RuntimeError" if isinstance(e, ValueError) and isinstance(
                e, RuntimeError) else type(e).__name__
            out["a2a"] = [kind, str(e), None]
        x = t.ones(2) * (rank + 1)
        d.all_reduce(x)
        out["after"] = x.tolist()
        got = [t.zeros(2), t.zeros(2)] if rank == 0 else [t.zeros(3), t.zeros(2)]
        d.all_to_all(got, ins)  # sizes that agree (3 elements from rank 0 to rank 1)
        out["uneven"] = [g.tolist() for g in got] if rank == 1 else None
    finally:
        q.put((rank, out))
        d.destroy_process_group()


def test_two_ranks_refuse_a_piece_size_mismatch_together(tmp_path):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = f"file://{tmp_path / 'store'}"
    procs = [ctx.Process(target=_a2a_rank, args=(r, init, q), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    got = {}
    try:
        for _ in range(2):
            rank, out = q.get(timeout=120)
            got[rank] = out
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    for rank in (0, 1):  # both refuse: neither waits for the other until a timeout
        kind, msg, _ = got[rank]["a2a"]
        assert kind == "ValueError+RuntimeError", (rank, kind, msg)
        assert "rank 1 of group WORLD expects 8 bytes from rank 0, which sends it 12 bytes" in msg
        assert got[rank]["after"] == [3.0, 3.0]
    assert got[1]["uneven"] == [[1.0, 1.0, 1.0], [1.0, 1.0]]


# ---- rank arguments ---------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, fragment", [
    (dict(src="0"), r"broadcast: rank must be an int, got str '0'"),
    (dict(src=0.9), r"broadcast: rank must be an int, got float 0.9"),
    (dict(src=True), r"broadcast: rank must be an int, got bool"),
    (dict(group_src=0.5), r"broadcast: group rank must be an int, got float 0.5"),
])
def test_a_rank_that_is_not_an_int_is_refused(world, kwargs, fragment):
    with pytest.raises(TypeError, match=fragment):
        dist.broadcast(ember.ones(2), **kwargs)


def test_torch_refuses_a_str_rank_with_the_same_class():
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist

    if not tdist.is_available() or not tdist.is_gloo_available():
        pytest.skip("no gloo in this torch")
    tdist.init_process_group("gloo", store=tdist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(TypeError):
            tdist.broadcast(torch.ones(2), src="0")
        with pytest.raises(TypeError):
            tdist.new_group(["0"])
        with pytest.raises(ValueError):
            tdist.broadcast(torch.ones(2), src=0, group_src=0)
        with pytest.raises(ValueError):
            tdist.batch_isend_irecv([1])
    finally:
        tdist.destroy_process_group()


def test_src_and_group_src_together_are_refused(world):
    with pytest.raises(ValueError, match="broadcast: pass either a global rank or a group rank"):
        dist.broadcast(ember.ones(2), src=0, group_src=0)
    with pytest.raises(ValueError, match="reduce: pass either"):
        dist.reduce(ember.ones(2), dst=0, group_dst=0)


def test_int_ranks_still_work(world):
    import numpy as np

    x = ember.ones(2)
    dist.broadcast(x, src=np.int64(0))
    dist.broadcast(x, group_src=0)
    assert x.tolist() == [1.0, 1.0]
    assert dist.get_global_rank(None, 0) == 0 and dist.get_group_rank(None, 0) == 0
    g = dist.new_group([np.int32(0)])
    assert dist.get_world_size(g) == 1


def test_new_group_and_get_global_rank_take_int_ranks(world):
    with pytest.raises(TypeError, match=r"new_group: each of ranks must be an int, got str '0'"):
        dist.new_group(["0"])
    with pytest.raises(TypeError, match=r"get_global_rank: group_rank must be an int, got str"):
        dist.get_global_rank(None, "0")


def test_batch_isend_irecv_names_what_is_not_a_p2p_op(world):
    with pytest.raises(ValueError, match=r"batch_isend_irecv: p2p_op_list must be a list of "
                                         r"dist.P2POp, got \['int'\]"):
        dist.batch_isend_irecv([1])
    with pytest.raises(ValueError, match="got int"):
        dist.batch_isend_irecv(3)
    with pytest.raises(IndexError, match="p2p_op_list is empty"):  # as torch (its [0])
        dist.batch_isend_irecv([])


# ---- object collectives -----------------------------------------------------------------------
def test_scatter_object_list_checks_both_lists(world):
    out = [None]
    with pytest.raises(ValueError, match=r"scatter_object_list: on src, scatter_object_input_list "
                                         r"must be a list of 1 objects \(one per rank\), got 2"):
        dist.scatter_object_list(out, [1, 2], src=0)
    assert out == [None]
    with pytest.raises(ValueError, match=r"scatter_object_output_list must be a list of at least "
                                         r"1 entries, got 0"):
        dist.scatter_object_list([], [1], src=0)
    dist.scatter_object_list(out, [{"a": 1}], src=0)
    assert out == [{"a": 1}]


def test_broadcast_object_list_needs_a_list(world):
    with pytest.raises(TypeError, match="broadcast_object_list: object_list must be a list, got "
                                        "int"):
        dist.broadcast_object_list(3, src=0)
    objs = [1, "x", None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [1, "x", None]


# ---- DCP metadata -----------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
@pytest.mark.parametrize("garbage", [b"", b"garbage", b"\x80\x04\x95"])
def test_corrupt_dcp_metadata_names_the_file(tmp_path, garbage):
    ck = tmp_path / "ck"
    dcp.save({"w": ember.ones(3)}, checkpoint_id=str(ck))
    (ck / ".metadata").write_bytes(garbage)
    target = {"w": ember.zeros(3)}
    with pytest.raises(pickle.UnpicklingError, match=r"\.metadata: corrupt checkpoint metadata"):
        dcp.load(target, checkpoint_id=str(ck))
    assert target["w"].tolist() == [0.0, 0.0, 0.0]


def test_ddp_before_init_process_group_is_a_value_error():
    from ember import nn
    from ember.nn.parallel import DistributedDataParallel

    assert not dist.is_initialized()
    with pytest.raises(ValueError, match=r"DistributedDataParallel: the default process group "
                                         r"has not been initialized"):
        DistributedDataParallel(nn.Linear(2, 2))


def test_torch_ddp_before_init_process_group_is_a_value_error():
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist

    if not tdist.is_available():
        pytest.skip("torch without distributed")
    with pytest.raises(ValueError):
        torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("group", ["x", 3, object()])
def test_a_group_that_is_not_a_process_group_is_a_value_error(world, group):
    # PyTorch: ValueError "Group x is not registered" / "... not initialized in the world group
    # map"; ember raised TypeError
    with pytest.raises(ValueError, match="group must be a ProcessGroup from new_group, got"):
        dist.get_rank(group)
    with pytest.raises(ValueError, match="group must be a ProcessGroup from new_group"):
        dist.all_reduce(ember.ones(2), group=group)


# ---- exception classes: ember's and PyTorch's at once ------------------------------------------
@pytest.mark.parametrize("call, classes", [
    # PyTorch's gloo: RuntimeError "invalid tensor size"; ember: ValueError (both now)
    (lambda: dist.all_gather([ember.zeros(3)], ember.ones(2)), (ValueError, RuntimeError)),
    (lambda: dist.all_gather([ember.zeros(2)] * 2, ember.ones(2)), (ValueError, RuntimeError)),
    (lambda: dist.all_gather_into_tensor(ember.zeros(3), ember.ones(2)),
     (ValueError, RuntimeError)),
    (lambda: dist.reduce_scatter_tensor(ember.zeros(3), ember.ones(2)),
     (ValueError, RuntimeError)),
    (lambda: dist.all_to_all_single(ember.zeros(4), ember.ones(4), [3], [4]),
     (ValueError, RuntimeError)),
    (lambda: dist.all_to_all([ember.zeros(3)], [ember.ones(2)]), (ValueError, RuntimeError)),
    (lambda: dist.gather(ember.ones(2), [ember.zeros(3)], dst=0), (ValueError, RuntimeError)),
    (lambda: dist.broadcast(ember.ones(2), src=1), (ValueError, RuntimeError)),
    # PyTorch: TypeError for a tensor_list that is not a list
    (lambda: dist.all_gather(ember.zeros(2), ember.ones(2)), (ValueError, TypeError)),
    # PyTorch: RuntimeError "Cannot use ReduceOp.BAND with non-integral dtype"; ember: TypeError
    (lambda: dist.all_reduce(ember.ones(2), op=dist.ReduceOp.BAND), (TypeError, RuntimeError)),
    (lambda: dist.all_reduce(ember.ones(2, dtype=ember.int64), op=dist.ReduceOp.AVG),
     (TypeError, RuntimeError)),
])
def test_refusals_are_of_pytorchs_class_and_embers(world, call, classes):
    for cls in classes:
        with pytest.raises(cls):
            call()
