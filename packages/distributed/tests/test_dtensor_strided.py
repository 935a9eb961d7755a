"""DTensor sharding through reshapes with _StridedShard (torch's layout of a flattened sequence
split): flatten / view / reshape of a Shard dim merged with the dims before it is a
_StridedShard(dim, sf) with no collective, viewing it back is the Shard again, elementwise ops,
mm and linear keep it (forward and backward), and redistributes from and to it give the right
values (even and uneven splits). One 2-rank run records everything; the tests read it."""

from __future__ import annotations

import traceback
from datetime import timedelta
from typing import Any

import ember
import ember.distributed as dist
import numpy as np
import pytest
from dist_helpers import run_ranks

B, S, H, OUT = 3, 4, 2, 3
X = np.arange(B * S * H, dtype=np.float64).reshape(B, S, H)
W = (np.arange(OUT * H, dtype=np.float64).reshape(OUT, H) - 2.0) / 4.0
X5 = np.arange(2 * 5 * 3, dtype=np.float64).reshape(2, 5, 3) % 7  # S = 5: uneven over 2 ranks


def _worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember.nn.functional as F
        from ember.distributed.device_mesh import init_device_mesh
        from ember.distributed.tensor import Replicate, Shard, distribute_tensor
        from ember.distributed.tensor.debug import CommDebugMode
        from ember.distributed.tensor.placement_types import _StridedShard

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        mesh = init_device_mesh("cpu", (2,))
        out: dict[str, Any] = {}

        def record(name: str, fn: Any) -> Any:
            with CommDebugMode() as cm:
                y = fn()
            out[name] = {"placements": [repr(p) for p in y.placements],
                         "local": y.to_local().tolist(),
                         "counts": {str(k): v for k, v in cm.get_comm_counts().items()},
                         "full": y.full_tensor().tolist()}
            return y

        dx = distribute_tensor(ember.tensor(X), mesh, [Shard(1)])
        dw = distribute_tensor(ember.tensor(W), mesh, [Replicate()])
        y = record("flatten", lambda: dx.flatten(0, 1))
        record("view", lambda: dx.view(B * S, H))
        record("reshape", lambda: dx.reshape(-1, H))
        record("view_back", lambda: y.view(B, S, H))
        record("unflatten", lambda: y.unflatten(0, (B, S)))
        record("view_merge_after", lambda: y.view(B, S * H))
        record("flatten_later", lambda: dx.flatten(1, 2))  # the split dim is the outer part
        record("relu_add", lambda: (y - 10.0).relu() + y)
        record("mm", lambda: ember.mm(y, dw.t()))
        bias = distribute_tensor(ember.ones(OUT, dtype=ember.float64), mesh, [Replicate()])
        record("addmm", lambda: ember.addmm(bias, y, dw.t()))
        record("t", lambda: y.t())
        record("sum0", lambda: y.sum(0))
        record("sum1", lambda: y.sum(1))
        record("to_replicate", lambda: y.redistribute(mesh, [Replicate()]))
        record("to_shard0", lambda: y.redistribute(mesh, [Shard(0)]))
        rows = distribute_tensor(ember.tensor(X).flatten(0, 1), mesh, [Shard(0)])
        record("from_shard0", lambda: rows.redistribute(mesh, [_StridedShard(0, split_factor=B)]))
        record("distribute_strided", lambda: distribute_tensor(
            ember.tensor(X).flatten(0, 1), mesh, [_StridedShard(0, split_factor=B)]))
        record("add_shard0", lambda: y + rows)
        record("slice", lambda: y[1:7])  # a rule that assumes one block: gathered first

        # linear with grad (autograd's view + mm + view) and its backward
        dx2 = distribute_tensor(ember.tensor(X), mesh, [Shard(1)]).requires_grad_()
        dw2 = distribute_tensor(ember.tensor(W), mesh, [Replicate()]).requires_grad_()
        o = record("linear", lambda: F.linear(dx2, dw2))
        scale = distribute_tensor(ember.arange(OUT, dtype=ember.float64), mesh, [Replicate()])
        (o * scale).sum().backward()
        out["x_grad"] = dx2.grad.full_tensor().tolist()
        out["w_grad"] = dw2.grad.full_tensor().tolist()

        # uneven: S = 5 over 2 ranks
        d5 = distribute_tensor(ember.tensor(X5), mesh, [Shard(1)])
        y5 = record("uneven_flatten", lambda: d5.flatten(0, 1))
        record("uneven_back", lambda: y5.view(2, 5, 3))
        record("uneven_to_replicate", lambda: y5.redistribute(mesh, [Replicate()]))
        record("uneven_mean0", lambda: y5.mean(0))
        ones = distribute_tensor(ember.ones(3, 2, dtype=ember.float64), mesh, [Replicate()])
        record("uneven_mm", lambda: ember.mm(y5, ones))
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:
        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def results(tmp_path_factory: Any) -> list[dict]:
    init = "file://" + str(tmp_path_factory.mktemp("strided") / "store")
    return run_ranks(_worker, 2, (init,), 240)


FLAT = X.reshape(B * S, H)
STRIDED = "_StridedShard(dim=0, sf=3)"


def test_flatten_of_a_sequence_split_is_strided_without_collectives(results):
    for name in ("flatten", "view", "reshape"):
        for rank, r in enumerate(results):
            got = r[name]
            assert got["placements"] == [STRIDED] and got["counts"] == {}
            assert got["full"] == FLAT.tolist()
    # rank 0 holds rows b * S + s for s in {0, 1} of every b, rank 1 s in {2, 3}
    assert results[0]["flatten"]["local"] == [[0, 1], [2, 3], [8, 9], [10, 11], [16, 17],
                                              [18, 19]]
    assert results[1]["flatten"]["local"] == [[4, 5], [6, 7], [12, 13], [14, 15], [20, 21],
                                              [22, 23]]


def test_viewing_back_gives_the_shard_again(results):
    for name, shape in (("view_back", (B, S, H)), ("unflatten", (B, S, H)),
                        ("view_merge_after", (B, S * H)), ("flatten_later", (B, S * H))):
        for rank, r in enumerate(results):
            got = r[name]
            assert got["placements"] == ["Shard(dim=1)"] and got["counts"] == {}, name
            assert got["full"] == X.reshape(shape).tolist()
            whole = X.reshape(shape)
            n = shape[1] // 2
            assert got["local"] == whole[:, rank * n:(rank + 1) * n].tolist()


def test_elementwise_mm_transpose_and_sums_keep_it(results):
    r0 = results[0]
    for name, want, placement in (
            ("relu_add", np.maximum(FLAT - 10, 0) + FLAT, STRIDED),
            ("mm", FLAT @ W.T, STRIDED),
            ("addmm", FLAT @ W.T + 1, STRIDED),
            ("t", FLAT.T, "_StridedShard(dim=1, sf=3)"),
            ("sum0", FLAT.sum(0), "Partial(sum)"),
            ("sum1", FLAT.sum(1), STRIDED)):
        assert r0[name]["placements"] == [placement], name
        assert r0[name]["counts"] == {}, name
        np.testing.assert_allclose(r0[name]["full"], want, rtol=1e-12)
    # the pieces of mm are the pieces of the rows
    np.testing.assert_allclose(results[1]["mm"]["local"],
                               FLAT[[2, 3, 6, 7, 10, 11]] @ W.T, rtol=1e-12)


def test_redistribute_from_and_to_strided(results):
    one_gather = {"c10d_functional.all_gather_into_tensor": 1}
    for rank, r in enumerate(results):
        assert r["to_replicate"]["counts"] == one_gather
        assert r["to_replicate"]["local"] == FLAT.tolist()
        assert r["to_shard0"]["counts"] == one_gather
        assert r["to_shard0"]["placements"] == ["Shard(dim=0)"]
        assert r["to_shard0"]["local"] == FLAT[rank * 6:(rank + 1) * 6].tolist()
        for name in ("from_shard0", "distribute_strided"):
            assert r[name]["placements"] == [STRIDED]
            assert r[name]["local"] == r["flatten"]["local"], name
            assert r[name]["full"] == FLAT.tolist()
        # a plain Shard wins (as torch's): the strided operand is moved to Shard(0)
        assert r["add_shard0"]["placements"] == ["Shard(dim=0)"]
        assert r["add_shard0"]["counts"] == one_gather
        assert r["add_shard0"]["full"] == (2 * FLAT).tolist()
        assert r["slice"]["full"] == FLAT[1:7].tolist()  # gathered, never a wrong piece


def test_linear_keeps_the_sequence_split_and_its_gradients(results):
    scale = np.arange(OUT, dtype=np.float64)
    for r in results:
        assert r["linear"]["placements"] == ["Shard(dim=1)"]
        assert r["linear"]["counts"] == {}
        np.testing.assert_allclose(r["linear"]["full"], X @ W.T, rtol=1e-12)
        # d/dx sum(linear(x, W) * scale) = scale @ W at every (b, s); d/dW = scale^T sum of x
        np.testing.assert_allclose(r["x_grad"], np.broadcast_to(scale @ W, X.shape), rtol=1e-12)
        np.testing.assert_allclose(r["w_grad"], np.outer(scale, X.reshape(-1, H).sum(0)),
                                   rtol=1e-12)


def test_uneven_split(results):
    flat5 = X5.reshape(10, 3)
    for rank, r in enumerate(results):
        got = r["uneven_flatten"]
        assert got["placements"] == ["_StridedShard(dim=0, sf=2)"] and got["counts"] == {}
        rows = [0, 1, 2, 5, 6, 7] if rank == 0 else [3, 4, 8, 9]  # s in {0, 1, 2} / {3, 4}
        assert got["local"] == flat5[rows].tolist()
        assert r["uneven_back"]["placements"] == ["Shard(dim=1)"]
        assert r["uneven_back"]["full"] == X5.tolist()
        assert r["uneven_to_replicate"]["local"] == flat5.tolist()
        # pieces of 6 and 4 rows: never a mean of the means (torch gathers, so does ember)
        assert r["uneven_mean0"]["placements"] == ["Replicate()"]
        np.testing.assert_allclose(r["uneven_mean0"]["full"], flat5.mean(0), rtol=1e-12)
        np.testing.assert_allclose(r["uneven_mm"]["full"], flat5 @ np.ones((3, 2)), rtol=1e-12)


def test_layouts_match_torch(results):
    torch = pytest.importorskip("torch")
    from torch.distributed.tensor.placement_types import _StridedShard as TorchStrided

    # torch's flatten of Shard(1) of (B, S, H) is _StridedShard(0, sf=B), printed alike
    assert repr(TorchStrided(0, split_factor=B)) == STRIDED
    assert torch.tensor(X).flatten(0, 1).tolist() == results[0]["flatten"]["full"]
