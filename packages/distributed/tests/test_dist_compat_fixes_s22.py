"""Regression tests for the session-22 distributed compatibility round: DTensor dtype casts
keep their layout (and an optimizer's state loaded for a sharded parameter stays sharded),
dim-wise ops keep a Shard of another dim, batch-split cross entropy / nll_loss are Partial as
torch's, the mean of even pieces is Partial(avg), *_like of a Partial needs no all-reduce, the
DTensor rand / randn factories, dist.split_group's checks and
torch.distributed.checkpoint.format_utils (dcp_to_torch_save / torch_save_to_dcp)."""

from __future__ import annotations

import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import ember
import ember.distributed as dist
import numpy as np
import pytest
from dist_helpers import run_ranks

X = np.arange(96, dtype=np.float32).reshape(2, 6, 8) % 7 - 3.0 + np.linspace(0, 0.5, 96,
                                                                             dtype=np.float32
                                                                             ).reshape(2, 6, 8)


def _counts(cm: Any) -> dict[str, int]:
    return {str(k): v for k, v in cm.get_comm_counts().items()}


def _dtensor_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember.nn.functional as F
        from ember.distributed.device_mesh import init_device_mesh
        from ember.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
        from ember.distributed.tensor import rand as d_rand
        from ember.distributed.tensor import randn as d_randn
        from ember.distributed.tensor.debug import CommDebugMode

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        mesh = init_device_mesh("cpu", (2,))
        full = ember.tensor(X)
        x = distribute_tensor(full, mesh, [Shard(1)])
        out: dict[str, Any] = {}

        def record(name: str, fn: Any) -> None:
            with CommDebugMode() as cm:
                y = fn()
            ys = y if isinstance(y, (tuple, list)) else [y]
            out[name] = {"placements": [str(v.placements[0]) for v in ys],
                         "value": [v.full_tensor().tolist() for v in ys],
                         "counts": _counts(cm)}

        # dtype casts
        record("to_f64", lambda: x.to(ember.float64))
        record("double", lambda: x.double())
        part = DTensor.from_local(ember.full((3,), float(rank + 1)), mesh, [Partial()])
        record("partial_to_f64", lambda: part.to(ember.float64))
        record("partial_to_int", lambda: part.to(ember.int64))
        # dim-wise ops along an unsplit dim
        record("argmax", lambda: x.argmax(-1))
        record("max_dim", lambda: tuple(x.max(dim=2)))
        record("max_dim_keep", lambda: tuple(x.max(dim=0, keepdim=True)))
        record("sort", lambda: tuple(ember.sort(x, dim=-1, descending=True)))
        record("topk", lambda: tuple(x.topk(2, dim=0)))
        record("cumsum", lambda: x.cumsum(2))
        record("var", lambda: x.var(-1))
        record("std_keep", lambda: x.std(0, keepdim=True))
        record("argmax_split", lambda: x.argmax(1))
        # layouts kept by contiguous / masked_fill_ / rms_norm / unflatten / new_zeros
        record("contiguous", lambda: x.transpose(1, 2).contiguous())
        w = distribute_tensor(ember.linspace(0.5, 1.5, 8), mesh, [Replicate()])
        record("rms_norm", lambda: F.rms_norm(x, (8,), w, eps=1e-6))
        record("unflatten", lambda: x.unflatten(2, (2, 4)))
        record("new_zeros", lambda: x.new_zeros(3, 2))

        y = distribute_tensor(full.clone(), mesh, [Shard(1)])

        def fill() -> Any:
            y.masked_fill_(y > 1.0, 0.5)
            return y

        record("masked_fill_", fill)
        # ops that move elements along other dims only
        record("flip", lambda: ember.flip(x, dims=[2]))
        record("flip_split", lambda: ember.flip(x, dims=[1]))
        record("roll", lambda: ember.roll(x, 1, dims=2))
        record("pad", lambda: F.pad(x, (1, 2)))
        record("repeat_interleave", lambda: x.repeat_interleave(2, dim=2))
        record("prod", lambda: x.prod(-1))
        record("count_nonzero", lambda: ember.count_nonzero(x > 0, dim=-1))
        record("normalize", lambda: F.normalize(x, dim=-1))
        wt = distribute_tensor(ember.linspace(-1.0, 1.0, 40).reshape(5, 8), mesh, [Replicate()])
        # (no grad needed, no dispatch mode on: ember runs it as one matmul)
        z = ember.matmul(x, wt.t())
        out["matmul_nd"] = {"placements": [str(z.placements[0])],
                            "value": [z.full_tensor().tolist()], "counts": {}}
        # the mean over a split dim, even and uneven
        record("mean_even", lambda: x.mean())
        odd = distribute_tensor(ember.arange(10.0).reshape(5, 2), mesh, [Shard(0)])
        record("mean_uneven", lambda: odd.mean(0))
        # a partial loss's backward seeds ones without reducing the loss first
        xs = distribute_tensor(full, mesh, [Shard(1)]).requires_grad_()
        with CommDebugMode() as cm:
            (xs * xs).sum().backward()
        out["seed"] = {"counts": _counts(cm), "grad": xs.grad.full_tensor().tolist(),
                       "placement": str(xs.grad.placements[0])}
        # batch-split cross entropy / nll_loss: values, placements, gradients
        logits = ember.tensor(X.reshape(12, 8)[:6, :5].astype(np.float64))
        target = ember.tensor([0, 4, 2, 2, 1, 3])
        dtg = distribute_tensor(target, mesh, [Shard(0)])
        ce = {}
        for red in ("mean", "sum", "none"):
            for kind in ("ce", "nll"):
                dl = distribute_tensor(logits, mesh, [Shard(0)]).requires_grad_()
                with CommDebugMode() as cm:
                    if kind == "ce":
                        loss = F.cross_entropy(dl, dtg, reduction=red)
                    else:
                        loss = F.nll_loss(F.log_softmax(dl, 1), dtg, reduction=red)
                    (loss.sum() if red == "none" else loss).backward()
                ce[f"{kind}_{red}"] = {"placement": str(loss.placements[0]),
                                       "value": loss.full_tensor().tolist(),
                                       "grad": dl.grad.full_tensor().tolist(),
                                       "grad_placement": str(dl.grad.placements[0]),
                                       "counts": _counts(cm)}
        out["ce"] = ce
        # random factories: shapes, placements, replicas equal
        r = d_rand(4, 6, device_mesh=mesh, placements=[Shard(1)])
        n = d_randn(3, 3, device_mesh=mesh, placements=[Replicate()], requires_grad=True)
        out["rand"] = {"placements": str(r.placements[0]), "local_shape": list(r.to_local().shape),
                       "in_range": bool(((r.to_local() >= 0) & (r.to_local() < 1)).all()),
                       "randn_local": n.to_local().tolist(), "randn_leaf": n.is_leaf,
                       "randn_requires_grad": n.requires_grad}
        # an optimizer's state loaded for sharded parameters stays sharded
        p = distribute_tensor(ember.ones(4, 2), mesh, [Shard(1)]).requires_grad_()
        opt = ember.optim.AdamW([p], lr=0.1)
        p.grad = distribute_tensor(ember.full((4, 2), 0.5), mesh, [Shard(1)])
        opt.step()
        sd = opt.state_dict()
        opt2 = ember.optim.AdamW([p], lr=0.1)
        opt2.load_state_dict(sd)
        st = opt2.state[p]
        out["optim"] = {"exp_avg": str(st["exp_avg"].placements[0]),
                        "exp_avg_sq": str(st["exp_avg_sq"].placements[0]),
                        "exp_avg_value": st["exp_avg"].full_tensor().tolist()}
        conn.send(("ok", out))
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (sent to the test)
        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def dtensor_results(tmp_path_factory: Any) -> list[dict]:
    init = "file://" + str(tmp_path_factory.mktemp("s22") / "store")
    return run_ranks(_dtensor_worker, 2, (init,), 240)


def _expect(res: dict, name: str, placements: list[str], values: list[np.ndarray],
            counts: dict | None = None) -> None:
    got = res[name]
    assert got["placements"] == placements, (name, got["placements"])
    for v, e in zip(got["value"], values):
        np.testing.assert_allclose(np.asarray(v, dtype=np.float64), e, rtol=1e-5, atol=1e-5,
                                   err_msg=name)
    assert got["counts"] == (counts or {}), (name, got["counts"])


def test_dtype_casts_keep_placements(dtensor_results):
    r = dtensor_results[0]
    _expect(r, "to_f64", ["S(1)"], [X])
    _expect(r, "double", ["S(1)"], [X])
    _expect(r, "partial_to_f64", ["P(sum)"], [np.full(3, 3.0)])
    # an integer cast reduces first (a partial sum of floats does not survive truncation)
    assert r["partial_to_int"]["placements"] == ["R"]
    assert r["partial_to_int"]["value"] == [[3, 3, 3]]


def test_dim_wise_ops_keep_the_other_dims_shard(dtensor_results):
    r = dtensor_results[0]
    _expect(r, "argmax", ["S(1)"], [X.argmax(-1)])
    _expect(r, "max_dim", ["S(1)", "S(1)"], [X.max(2), X.argmax(2)])
    _expect(r, "max_dim_keep", ["S(1)", "S(1)"],
            [X.max(0, keepdims=True), X.argmax(0)[None]])
    _expect(r, "sort", ["S(1)", "S(1)"],
            [-np.sort(-X, -1), np.argsort(-X, -1, kind="stable")])
    top = np.sort(X, 0)[::-1][:2]
    assert r["topk"]["placements"] == ["S(1)", "S(1)"]
    np.testing.assert_allclose(r["topk"]["value"][0], top, rtol=1e-6)
    _expect(r, "cumsum", ["S(1)"], [X.cumsum(2)])
    _expect(r, "var", ["S(1)"], [X.var(-1, ddof=1)])
    _expect(r, "std_keep", ["S(1)"], [X.std(0, ddof=1, keepdims=True)])
    # along the split dim the pieces are gathered first
    _expect(r, "argmax_split", ["R"], [X.argmax(1)],
            {"c10d_functional.all_gather_into_tensor": 1})


def test_layouts_kept_without_collectives(dtensor_results):
    r = dtensor_results[0]
    _expect(r, "contiguous", ["S(2)"], [X.transpose(0, 2, 1)])
    wv = np.linspace(0.5, 1.5, 8)
    rms = X / np.sqrt((X.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * wv
    _expect(r, "rms_norm", ["S(1)"], [rms])
    _expect(r, "unflatten", ["S(1)"], [X.reshape(2, 6, 2, 4)])
    _expect(r, "new_zeros", ["R"], [np.zeros((3, 2))])
    _expect(r, "masked_fill_", ["S(1)"], [np.where(X > 1.0, 0.5, X)])


def test_ops_along_other_dims_keep_the_shard(dtensor_results):
    r = dtensor_results[0]
    _expect(r, "flip", ["S(1)"], [X[:, :, ::-1]])
    _expect(r, "flip_split", ["R"], [X[:, ::-1]], {"c10d_functional.all_gather_into_tensor": 1})
    _expect(r, "roll", ["S(1)"], [np.roll(X, 1, axis=2)])
    _expect(r, "pad", ["S(1)"], [np.pad(X, ((0, 0), (0, 0), (1, 2)))])
    _expect(r, "repeat_interleave", ["S(1)"], [np.repeat(X, 2, axis=2)])
    _expect(r, "prod", ["S(1)"], [X.astype(np.float64).prod(-1)])
    _expect(r, "count_nonzero", ["S(1)"], [(X > 0).sum(-1)])
    _expect(r, "normalize", ["S(1)"], [X / np.linalg.norm(X.astype(np.float64), axis=-1,
                                                             keepdims=True)])
    wt = np.linspace(-1.0, 1.0, 40).reshape(5, 8)
    _expect(r, "matmul_nd", ["S(1)"], [X.astype(np.float64) @ wt.T])


def test_mean_over_pieces(dtensor_results):
    r = dtensor_results[0]
    _expect(r, "mean_even", ["P(avg)"], [np.float64(X.mean())])
    _expect(r, "mean_uneven", ["P(sum)"], [np.array([4.0, 5.0])])


def test_partial_loss_seed_needs_no_all_reduce(dtensor_results):
    seed = dtensor_results[0]["seed"]
    assert seed["counts"] == {}
    assert seed["placement"] == "S(1)"
    np.testing.assert_allclose(seed["grad"], 2 * X, rtol=1e-6)


def _ce_reference() -> dict[str, tuple[Any, np.ndarray]]:
    logits = X.reshape(12, 8)[:6, :5].astype(np.float64)
    target = np.array([0, 4, 2, 2, 1, 3])
    lse = np.log(np.exp(logits).sum(1))
    per = lse - logits[np.arange(6), target]
    soft = np.exp(logits - lse[:, None])
    onehot = np.eye(5)[target]
    return {"mean": (per.mean(), (soft - onehot) / 6), "sum": (per.sum(), soft - onehot),
            "none": (per, soft - onehot)}


def test_batch_split_cross_entropy_and_nll_loss(dtensor_results):
    ce = dtensor_results[0]["ce"]
    ref = _ce_reference()
    for red, placement in (("mean", "P(avg)"), ("sum", "P(sum)"),
                           ("none", "S(0)")):
        for kind in ("ce", "nll"):
            got = ce[f"{kind}_{red}"]
            assert got["placement"] == placement, (kind, red)
            assert got["grad_placement"] == "S(0)"
            np.testing.assert_allclose(got["value"], ref[red][0], rtol=1e-10)
            np.testing.assert_allclose(got["grad"], ref[red][1], rtol=1e-10, atol=1e-12)
            # the rows stay on their ranks: no collective forward or backward
            assert got["counts"] == {}, (kind, red, got["counts"])


def test_batch_split_cross_entropy_matches_torch(dtensor_results):
    torch = pytest.importorskip("torch")
    logits = torch.tensor(X.reshape(12, 8)[:6, :5].astype(np.float64), requires_grad=True)
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 4, 2, 2, 1, 3]))
    loss.backward()
    got = dtensor_results[0]["ce"]["ce_mean"]
    np.testing.assert_allclose(got["value"], loss.item(), rtol=1e-12)
    np.testing.assert_allclose(got["grad"], logits.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_random_factories(dtensor_results):
    r0, r1 = (res["rand"] for res in dtensor_results)
    assert r0["placements"] == "S(1)" and r0["local_shape"] == [4, 3]
    assert r0["in_range"] and r1["in_range"]
    assert r0["randn_local"] == r1["randn_local"]  # a Replicate draw is the same everywhere
    assert r0["randn_leaf"] and r0["randn_requires_grad"]


def test_optimizer_state_of_sharded_parameters_stays_sharded(dtensor_results):
    o = dtensor_results[0]["optim"]
    assert o["exp_avg"] == "S(1)" and o["exp_avg_sq"] == "S(1)"
    np.testing.assert_allclose(o["exp_avg_value"], np.full((4, 2), 0.05), rtol=1e-6)


@pytest.fixture
def world1():
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_split_group_checks(world1):
    with pytest.raises(ValueError, match="split_ranks cannot be None or empty"):
        dist.split_group(split_ranks=[])
    with pytest.raises(RuntimeError, match="No device associated with the default pg"):
        dist.split_group(split_ranks=[[0]])
    assert "split_group" in dist.__all__


def test_dcp_to_torch_save_and_back(tmp_path: Path):
    import ember.distributed.checkpoint as dcp
    from ember.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp

    state = {"model": {"w": ember.arange(6.0).reshape(2, 3), "b": ember.tensor([1, 2])},
             "optim": {"groups": [{"lr": 0.1, "params": ["w"]}],
                       "state": [ember.ones(2), {"step": ember.tensor(3.0)}]},
             "epoch": 4}
    dcp.save(state, checkpoint_id=tmp_path / "ckpt", no_dist=True)
    dcp_to_torch_save(tmp_path / "ckpt", tmp_path / "whole.pt")
    whole = ember.load(tmp_path / "whole.pt", weights_only=False)
    assert sorted(whole) == ["epoch", "model", "optim"] and whole["epoch"] == 4
    assert whole["model"]["w"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert whole["model"]["b"].dtype == ember.int64 and whole["model"]["b"].tolist() == [1, 2]
    assert whole["optim"]["groups"] == [{"lr": 0.1, "params": ["w"]}]
    assert whole["optim"]["state"][0].tolist() == [1.0, 1.0]
    assert whole["optim"]["state"][1]["step"].item() == 3.0
    # and back: the torch.save file as a checkpoint that loads in place
    torch_save_to_dcp(tmp_path / "whole.pt", tmp_path / "again")
    target = {"model": {"w": ember.zeros(2, 3), "b": ember.zeros(2, dtype=ember.int64)}}
    dcp.load(target, checkpoint_id=tmp_path / "again", no_dist=True)
    assert target["model"]["w"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert target["model"]["b"].tolist() == [1, 2]
    with pytest.raises(FileNotFoundError):
        dcp_to_torch_save(tmp_path / "missing", tmp_path / "x.pt")


def test_dcp_to_torch_save_readable_by_torch(tmp_path: Path):
    torch = pytest.importorskip("torch")
    import ember.distributed.checkpoint as dcp
    from ember.distributed.checkpoint.format_utils import dcp_to_torch_save

    dcp.save({"w": ember.arange(4.0), "n": 7}, checkpoint_id=tmp_path / "c", no_dist=True)
    dcp_to_torch_save(tmp_path / "c", tmp_path / "w.pt")
    got = torch.load(tmp_path / "w.pt", weights_only=False)
    assert got["n"] == 7 and got["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
