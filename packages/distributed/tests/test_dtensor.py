"""ember.distributed.tensor in one process (a one-rank world) and in a subprocess for the
import check: layouts and their errors, the fallback through whole tensors, and that
``import ember.distributed`` leaves the dispatch hook off. The 2-rank behaviour against torch's
reference is the dtensor_basics program of test_compat_dist_programs.py."""

from __future__ import annotations

import subprocess
import sys

import ember
import ember.distributed as dist
import numpy as np
import pytest


@pytest.fixture
def mesh():
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    from ember.distributed.device_mesh import init_device_mesh

    yield init_device_mesh("cpu", (1,))
    dist.destroy_process_group()


def test_importing_distributed_leaves_the_dispatch_hook_off():
    code = ("import ember, ember.distributed, ember.distributed.checkpoint; "
            "print(ember._C._python_dispatch_hook_on()); "
            "import ember.distributed.tensor; print(ember._C._python_dispatch_hook_on())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["False", "True"]


def test_one_rank_layouts_and_math(mesh):
    from ember.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    x = ember.arange(12.0).reshape(3, 4)
    d = distribute_tensor(x, mesh, [Shard(1)])
    assert isinstance(d, DTensor) and d.shape == (3, 4) and d.placements == (Shard(dim=1),)
    assert repr(d).startswith("DTensor(local_tensor=tensor(")
    s = (d * 2).sum()
    assert s.placements == (Partial("sum"),) and s.full_tensor().item() == 132.0
    r = d.redistribute(mesh, [Replicate()])
    np.testing.assert_array_equal(r.to_local().numpy(), x.numpy())
    sm = ember.softmax(d, 0)  # along the unsharded dim: on the pieces
    assert sm.placements == (Shard(dim=1),)
    np.testing.assert_allclose(sm.full_tensor().numpy(), ember.softmax(x, 0).numpy())
    sm = ember.softmax(d, 1)  # along the shard dim: on the whole tensor, Replicate
    assert sm.placements == (Replicate(),)
    np.testing.assert_allclose(sm.full_tensor().numpy(), ember.softmax(x, 1).numpy())
    e = DTensor.from_local(ember.ones(2, 2), mesh, [Shard(-1)])
    assert e.placements == (Shard(dim=1),)
    d.exp_()  # in place through the fallback: the piece is updated
    np.testing.assert_allclose(d.to_local().numpy(), np.exp(x.numpy()), rtol=1e-6)


def test_layout_errors(mesh):
    from ember.distributed.device_mesh import init_device_mesh
    from ember.distributed.tensor import Replicate, Shard, distribute_tensor

    x = ember.ones(2, 3)
    with pytest.raises(IndexError, match="out of range"):
        distribute_tensor(x, mesh, [Shard(2)])
    with pytest.raises(TypeError, match="Shard, Replicate or Partial"):
        distribute_tensor(x, mesh, ["shard"])
    with pytest.raises(ValueError, match="2 placements .* for a 1-D device mesh"):
        distribute_tensor(x, mesh, [Replicate(), Replicate()])
    two = distribute_tensor(x, init_device_mesh("cpu", (1, 1)), [Shard(0)])
    assert two.placements == (Shard(dim=0), Replicate())  # missing ones are Replicate
    d = distribute_tensor(x, mesh, [Shard(0)])
    with pytest.raises(RuntimeError, match="mixed ember.Tensor and DTensor"):
        d + ember.ones(2, 3)



def test_str_deepcopy_and_data_access(mesh):
    import copy

    from ember.distributed.tensor import Shard, distribute_tensor

    d = distribute_tensor(ember.arange(6.0).reshape(2, 3), mesh, [Shard(0)])
    assert str(d) == repr(d)
    twin = copy.deepcopy(d)
    assert twin.placements == d.placements and twin.device_mesh is d.device_mesh
    twin.to_local().add_(1)
    assert d.to_local().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]  # a real copy
    with pytest.raises(RuntimeError, match=r"\.tolist\(\) is not supported for tensor subclasses"):
        d.tolist()
    with pytest.raises(RuntimeError, match=r"\.numpy\(\) is not supported"):
        d.numpy()


@pytest.mark.parametrize("shape,kw", [((5, 7), {}), ((5, 7), {"reduction": "sum"}),
                                      ((5, 7), {"reduction": "none", "ignore_index": 3}),
                                      ((5, 7), {"weight": True}), ((2, 7, 3), {})])
def test_loss_parallel_runs_on_the_pieces(mesh, monkeypatch, shape, kw):
    """Inside loss_parallel, cross entropy of class-split logits and its backward never go
    through whole tensors (the fallback would gather the logits)."""
    import ember.distributed.tensor._dtensor as impl
    from ember.distributed.tensor import Shard, distribute_tensor
    from ember.distributed.tensor.parallel import loss_parallel

    gen = ember.Generator().manual_seed(0)
    full = ember.randn(*shape, generator=gen, dtype=ember.float64)
    target = ember.randint(0, 7, (shape[0],) + shape[2:], generator=gen)
    if kw.get("weight"):
        kw = {"weight": ember.rand(7, generator=gen, dtype=ember.float64) + 0.5}
    expected = ember.nn.functional.cross_entropy(full.clone().requires_grad_(), target, **kw)
    leaf = full.clone().requires_grad_()
    ember.nn.functional.cross_entropy(leaf, target, **kw).sum().backward()

    def no_fallback(c):
        raise AssertionError(f"{c.func} went through whole tensors")

    d = distribute_tensor(full, mesh, [Shard(1)]).requires_grad_()
    with loss_parallel():
        monkeypatch.setattr(impl, "_replicated", no_fallback)
        loss = ember.nn.functional.cross_entropy(d, target, **kw)
        (loss.sum() if loss.ndim else loss).backward()
        monkeypatch.undo()
    np.testing.assert_allclose(loss.full_tensor().detach().numpy(), expected.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(d.grad.full_tensor().numpy(), leaf.grad.numpy(), rtol=1e-10,
                               atol=1e-14)


def test_attention_on_heads_split_runs_on_the_pieces(mesh, monkeypatch):
    """Causal attention of q, k, v split over the heads (torch's CPU DTensor has no rule for
    it): the fused kernel on each rank's heads, gradients too, equal to whole tensors."""
    import ember.distributed.tensor._dtensor as impl
    from ember.distributed.tensor import Shard, distribute_tensor

    gen = ember.Generator().manual_seed(1)
    full = [ember.randn(2, 4, 3, 5, generator=gen, dtype=ember.float64) for _ in range(3)]
    leaves = [t.clone().requires_grad_() for t in full]
    want = ember.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True)
    want.pow(2).sum().backward()

    def no_fallback(c):
        raise AssertionError(f"{c.func} went through whole tensors")

    ds = [distribute_tensor(t, mesh, [Shard(1)]).requires_grad_() for t in full]
    monkeypatch.setattr(impl, "_replicated", no_fallback)
    got = ember.nn.functional.scaled_dot_product_attention(*ds, is_causal=True)
    assert got.placements == (Shard(dim=1),)
    got.pow(2).sum().backward()
    monkeypatch.undo()
    np.testing.assert_allclose(got.full_tensor().detach().numpy(), want.detach().numpy(),
                               rtol=1e-12)
    for d, leaf in zip(ds, leaves):
        assert d.grad.placements == (Shard(dim=1),)
        np.testing.assert_allclose(d.grad.full_tensor().numpy(), leaf.grad.numpy(), rtol=1e-10)


def test_wrappers_have_no_memory_but_their_device(mesh):
    """A DTensor's own tensor is storage-less: C++ sees its device (cpu), and anything that
    would read its values refuses clearly instead of reading nothing."""
    from ember.distributed.tensor import Shard, distribute_tensor

    d = distribute_tensor(ember.ones(4, 3), mesh, [Shard(0)])
    assert d.device.type == "cpu" and not d.is_meta
    plain = ember.Tensor._make_subclass(ember.Tensor, d)  # the bare storage-less tensor
    with pytest.raises(NotImplementedError, match="no data of its own"):
        plain.tolist()
    with pytest.raises(NotImplementedError, match="no data of its own"):
        ember.zeros(4, 3).copy_(plain)


def test_partial_stays_partial_only_through_linear_ops(mesh):
    """A partial sum scaled by a number stays partial; floor division of it must reduce first
    (floor(a/2) + floor(b/2) is not floor((a+b)/2))."""
    from ember.distributed.tensor import DTensor, Partial, Replicate

    p = DTensor.from_local(ember.tensor([3.0, 5.0]), mesh, [Partial()])
    assert (p * 2).placements == (Partial("sum"),) and (p / 4).placements == (Partial("sum"),)
    floored = ember.div(p, 2, rounding_mode="floor")
    assert floored.placements == (Replicate(),)
    assert floored.full_tensor().tolist() == [1.0, 2.0]


def test_visualize_sharding(mesh, capsys):
    from ember.distributed.tensor import Shard, distribute_tensor
    from ember.distributed.tensor.debug import visualize_sharding

    visualize_sharding(distribute_tensor(ember.ones(4, 3), mesh, [Shard(0)]), header="w")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "w" and out[1].split() == ["Row", "ranges", "Col", "ranges", "Ranks"]
    assert out[2].split() == ["0-3", "0-2", "0"]
    with pytest.raises(RuntimeError, match="only 1D or 2D"):
        visualize_sharding(distribute_tensor(ember.ones(2, 2, 2), mesh, [Shard(0)]))


def test_distribute_tensor_takes_leaves_only(mesh):
    from ember.distributed.tensor import Shard, distribute_tensor

    x = ember.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensors"):
        distribute_tensor(x * 2, mesh, [Shard(0)])
    assert distribute_tensor(x, mesh, [Shard(0)]).requires_grad
