"""CommDebugMode (ember.distributed.tensor.debug) and the collective op names it counts under
(ember.ops.c10d_functional / _c10d_functional / c10d), on a one-rank group. The two-rank
counts of DTensor redistributions, matmuls, functional and plain collectives against torch are
compat_programs/comm_debug_mode.py."""

from __future__ import annotations

import json

import ember
import ember.distributed as dist
import ember.distributed._functional_collectives as funcol
import pytest
from ember import nn
from ember.distributed.tensor.debug import CommDebugMode

F = ember.ops.c10d_functional
C = ember.ops.c10d


@pytest.fixture
def one_rank():
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def named(counts: dict) -> dict:
    return {str(k): v for k, v in counts.items() if v}


def test_op_packets_are_stable_hashable_and_print_like_torch():
    assert F.all_reduce is ember.ops.c10d_functional.all_reduce
    assert hash(F.all_reduce) == hash(ember.ops.c10d_functional.all_reduce)
    assert {F.all_reduce: 1}[ember.ops.c10d_functional.all_reduce] == 1
    assert F.all_reduce != F.all_gather_into_tensor
    assert ember.ops._c10d_functional.all_reduce is not F.all_reduce  # torch's native ops
    assert str(F.all_reduce) == "c10d_functional.all_reduce"
    assert repr(F.all_reduce) == "<OpOverloadPacket(op='c10d_functional.all_reduce')>"
    assert str(F.all_reduce.default) == "c10d_functional.all_reduce.default"
    assert F.all_reduce.default.overloadpacket is F.all_reduce
    assert str(C.allreduce_) == "c10d.allreduce_" and str(C._allgather_base_) == \
        "c10d._allgather_base_"
    with pytest.raises(AttributeError, match="no_such_op"):
        F.no_such_op  # noqa: B018
    with pytest.raises(NotImplementedError, match="ember.distributed"):
        F.all_reduce(ember.ones(2), "sum", "0")


def test_op_packets_print_as_torch_does():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.distributed._functional_collectives")  # registers the ops
    for ns, op in [("c10d_functional", "all_reduce"), ("c10d_functional", "all_to_all_single"),
                   ("c10d", "allreduce_"), ("c10d", "_reduce_scatter_base_")]:
        mine = getattr(getattr(ember.ops, ns), op)
        theirs = getattr(getattr(torch.ops, ns), op)
        assert str(mine) == str(theirs) and repr(mine) == repr(theirs)
        assert str(mine.default) == str(theirs.default)


def test_plain_collectives_count_under_c10d_names(one_rank):
    x = ember.arange(6.0)
    with CommDebugMode() as cm:
        dist.all_reduce(x)
        dist.all_reduce(x)
        dist.broadcast(x, 0)
        dist.all_gather([ember.empty(6)], x)
        dist.all_gather_into_tensor(ember.empty(6), x)
        dist.reduce_scatter_tensor(ember.empty(6), x)
        dist.all_to_all_single(ember.empty(6), x)
        dist.barrier()
    assert named(cm.get_comm_counts()) == {
        "c10d.allreduce_": 2, "c10d.broadcast_": 1, "c10d.allgather_": 1,
        "c10d._allgather_base_": 1, "c10d._reduce_scatter_base_": 1, "c10d.alltoall_base_": 1}
    assert cm.get_total_counts() == 7
    assert cm.get_comm_counts()[C.allreduce_] == 2
    assert cm.get_comm_counts()[F.all_reduce] == 0  # a defaultdict, as torch's
    assert repr(cm) == "CommDebugMode(get_total_counts()=7)"


def test_composite_collectives_count_once_and_object_ones_by_their_parts(one_rank):
    with CommDebugMode() as cm:
        dist.all_reduce_coalesced([ember.ones(2), ember.ones(3)])  # one collective, not two
        dist.all_gather_object([None], {"a": 1})  # sizes, then payloads: two all_gathers
    assert named(cm.get_comm_counts()) == {"c10d.allreduce_coalesced_": 1, "c10d.allgather_": 2}


def test_functional_collectives_count_under_c10d_functional_names(one_rank):
    x = ember.arange(4.0)
    with CommDebugMode() as cm:
        assert funcol.all_reduce(x, "sum", [0]).tolist() == [0.0, 1.0, 2.0, 3.0]
        funcol.all_gather_tensor(x, 0, [0])
        funcol.reduce_scatter_tensor(x, "sum", 0, [0])
        funcol.all_to_all_single(x, None, None, [0])
        funcol.permute_tensor(x, [0], [0])  # an all_to_all_single underneath
        funcol.broadcast(x, 0, [0])
    assert named(cm.get_comm_counts()) == {
        "c10d_functional.all_reduce": 1, "c10d_functional.all_gather_into_tensor": 1,
        "c10d_functional.reduce_scatter_tensor": 1, "c10d_functional.all_to_all_single": 2,
        "c10d_functional.broadcast": 1}
    assert cm.get_comm_counts()[F.all_to_all_single] == 2
    with CommDebugMode() as cm:
        funcol.permute_tensor(x, [0], [0])  # one collective, as torch counts it
    assert named(cm.get_comm_counts()) == {"c10d_functional.all_to_all_single": 1}


def test_nothing_counted_outside_and_modes_nest(one_rank):
    x = ember.ones(2)
    with CommDebugMode() as outer:
        dist.all_reduce(x)
        with CommDebugMode() as inner:
            dist.broadcast(x, 0)
        dist.all_reduce(x)
    dist.all_reduce(x)
    assert named(outer.get_comm_counts()) == {"c10d.allreduce_": 2, "c10d.broadcast_": 1}
    assert named(inner.get_comm_counts()) == {"c10d.broadcast_": 1}
    with outer:  # entering again starts over
        pass
    assert outer.get_total_counts() == 0


def test_dtensor_on_a_one_rank_mesh_redistributes_without_collectives(one_rank):
    # as torch: a mesh dim of one rank needs no all-gather / all-reduce / reduce-scatter, while
    # distribute_tensor still scatters from the source rank
    from ember.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = dist.init_device_mesh("cpu", (1,))
    with CommDebugMode() as cm:
        d = distribute_tensor(ember.arange(8.0).reshape(4, 2), mesh, [Shard(0)])
        assert d.redistribute(mesh, [Replicate()]).to_local().sum().item() == 28.0
        p = DTensor.from_local(ember.arange(4.0), mesh, [Partial()])
        s = p.redistribute(mesh, [Shard(0)])
        r = p.redistribute(mesh, [Replicate()])
    assert s.to_local().tolist() == r.to_local().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert named(cm.get_comm_counts()) == {"c10d.scatter_": 1}


class AllReduceIn(nn.Module):
    """Adds the group sum of its input in forward; its output's gradient is all-reduced too."""

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        s = x.detach().clone()
        dist.all_reduce(s)
        out = x + s
        out.register_hook(self.reduce_grad)
        return out

    @staticmethod
    def reduce_grad(grad: ember.Tensor) -> ember.Tensor:
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


def test_per_module_counts_forward_and_backward(one_rank, tmp_path):
    model = nn.Sequential(nn.Linear(2, 2), AllReduceIn(), nn.Sequential(AllReduceIn()))
    x = ember.ones(3, 2, requires_grad=True)
    with CommDebugMode() as cm:
        model(x).sum().backward()
    mc = {m: {k: named(v) for k, v in c.items()} for m, c in cm.comm_module_counts.items()}
    assert mc == {
        "Global": {"forward": {"c10d.allreduce_": 2}, "backward": {"c10d.allreduce_": 2}},
        "Sequential": {"forward": {"c10d.allreduce_": 2}, "backward": {"c10d.allreduce_": 2}},
        "Sequential.1": {"forward": {"c10d.allreduce_": 1}, "backward": {"c10d.allreduce_": 1}},
        "Sequential.2": {"forward": {"c10d.allreduce_": 1}, "backward": {"c10d.allreduce_": 1}},
        "Sequential.2.0": {"forward": {"c10d.allreduce_": 1},
                           "backward": {"c10d.allreduce_": 1}},
    }
    assert cm.get_total_counts() == 4
    params = cm.get_parameter_info()
    assert list(params) == ["Sequential.0"] and sorted(params["Sequential.0"]) == ["bias",
                                                                                  "weight"]
    assert cm.get_sharding_info() == {}  # no DTensor parameters
    table = cm.generate_comm_debug_tracing_table(noise_level=0)
    lines = [ln.replace("\x1b[1;33m", "").replace("\x1b[0m", "") for ln in table.splitlines()]
    assert lines[:5] == ["Global", "  FORWARD PASS", "    *c10d.allreduce_: 2", "  BACKWARD PASS",
                         "    *c10d.allreduce_: 2"]
    assert "        Sequential.0" in lines and "            Sequential.2.0" in lines
    assert "module type" not in table
    detailed = cm.generate_comm_debug_tracing_table(noise_level=1)
    assert "        *module type: class 'ember.nn.modules.linear.Linear'" in detailed
    path = tmp_path / "log.txt"
    cm.log_comm_debug_tracing_table_to_file(str(path), noise_level=0)
    assert path.read_text().splitlines() == lines
    dump = tmp_path / "dump.json"
    cm.generate_json_dump(str(dump), noise_level=1)
    tree = json.loads(dump.read_text())
    assert tree["fqn"] == "Global" and [c["fqn"] for c in tree["children"]] == ["Sequential"]
    seq = tree["children"][0]
    assert [c["fqn"] for c in seq["children"]] == ["Sequential.0", "Sequential.1",
                                                   "Sequential.2"]
    assert seq["collectives_forward"] == [["c10d.allreduce_", 2]]


def test_dtensor_parameters_sharding_info(one_rank):
    from ember.distributed.tensor import Shard, distribute_tensor

    mesh = dist.init_device_mesh("cpu", (1,))
    lin = nn.Linear(4, 2)
    lin.weight = nn.Parameter(distribute_tensor(lin.weight.detach(), mesh, [Shard(0)]))
    lin.bias = nn.Parameter(distribute_tensor(lin.bias.detach(), mesh, [Shard(0)]))
    model = nn.Sequential(lin)
    with CommDebugMode() as cm:
        model(distribute_tensor(ember.ones(3, 4), mesh))
    assert {k: str(v) for k, v in cm.get_sharding_info().items()} == {
        "Sequential.0.weight": "(Shard(dim=0),)", "Sequential.0.bias": "(Shard(dim=0),)"}
    assert "         *weight: (Shard(dim=0),)" in cm.generate_comm_debug_tracing_table(1)


def test_operations_per_module_by_noise_level(one_rank, tmp_path):
    from ember.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = dist.init_device_mesh("cpu", (1,))
    lin = nn.Linear(4, 2)
    lin.weight = nn.Parameter(distribute_tensor(lin.weight.detach(), mesh, [Shard(0)]))
    lin.bias = nn.Parameter(distribute_tensor(lin.bias.detach(), mesh, [Shard(0)]))
    model = nn.Sequential(lin)
    x = distribute_tensor(ember.ones(3, 4), mesh, [Replicate()])
    with CommDebugMode() as cm:
        model(x)
        (ember.ones(2) * 3).sum()  # plain ops, outside every module
    dtensor_ops = [o for o in cm.comm_module_operation_counts["Sequential.0"]["operations_list"]
                   if o["input_shape"]]  # the others: DTensor's ops on the local pieces
    # linear as torch decomposes it (the detaches: the tracker reads each DTensor parameter's
    # .data, which in ember runs one)
    assert [str(o["name"]) for o in dtensor_ops if str(o["name"]) != "aten.detach.default"] \
        == ["aten.t.default", "aten.addmm.default"]
    addmm = dtensor_ops[-1]
    assert [list(s) for s in addmm["input_shape"]] == [[2], [3, 4], [4, 2]]
    assert [str(p) for p in addmm["input_sharding"]] == ["(Shard(dim=0),)", "(Replicate(),)",
                                                         "(Shard(dim=1),)"]
    assert addmm["is_bw"] is False
    plain = [str(o["name"]) for o in cm.comm_module_operation_counts["Global"]["operations_list"]]
    assert "aten.mul.Tensor" in plain or "aten.mul.Scalar" in plain

    def table(level):
        return cm.generate_comm_debug_tracing_table(level).replace("\x1b[1;33m", "").replace(
            "\x1b[1;31m", "").replace("\x1b[0m", "")

    assert "addmm" not in table(0)
    one = table(1)
    assert ("          FORWARD PASS\n            **aten.addmm.default\n"
            "              shape: [ember.Size([2]), ember.Size([3, 4]), ember.Size([4, 2])]\n"
            "              sharding: [(Shard(dim=0),), (Replicate(),), (Shard(dim=1),)]\n"
            "              device mesh: ") in one
    assert "aten.t.default" not in one and "aten.mul" not in one  # trivial / not a DTensor op
    assert "aten.mul" in table(2) and "aten.t.default" not in table(2)
    assert "**aten.t.default" in table(3)
    dump = tmp_path / "ops.json"
    cm.generate_json_dump(str(dump), noise_level=1)
    tree = json.loads(dump.read_text())
    ops = tree["children"][0]["children"][0]["operations_forward"]
    assert [o["name"] for o in ops] == ["aten.addmm.default"]
    assert ops[0]["input_sharding"] == ["(Shard(dim=0),)", "(Replicate(),)", "(Shard(dim=1),)"]
