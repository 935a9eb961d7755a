"""nn behaviour that the PyTorch-style example programs (tests/compat_programs) found different
in ember: in-place activations whose backward needs their input (DCGAN's
``LeakyReLU(0.2, inplace=True)`` after a convolution)."""

from __future__ import annotations

import ember
import ember.nn as nn
import ember.nn.functional as F
import numpy as np
import pytest

INPLACE = {
    "leaky_relu": lambda x, ip: F.leaky_relu(x, 0.2, inplace=ip),
    "silu": lambda x, ip: F.silu(x, inplace=ip),
    "mish": lambda x, ip: F.mish(x, inplace=ip),
    "hardswish": lambda x, ip: F.hardswish(x, inplace=ip),
    "rrelu_eval": lambda x, ip: F.rrelu(x, training=False, inplace=ip),
    "elu": lambda x, ip: F.elu(x, inplace=ip),
    "threshold": lambda x, ip: F.threshold(x, 0.1, 2.0, inplace=ip),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_activation_backward_matches_out_of_place(name):
    fn = INPLACE[name]
    w = ember.linspace(-2, 2, 12).reshape(3, 4).requires_grad_()
    grads, outs = [], []
    for inplace in (False, True):
        w.grad = None
        h = w * 1.5  # a non-leaf, as after a convolution
        y = fn(h, inplace)
        if inplace:
            assert y is h  # written into its input, as PyTorch's in-place forms
        (y * ember.arange(12.0).reshape(3, 4)).sum().backward()
        grads.append(w.grad.clone())
        outs.append(y.detach().clone())
    assert ember.allclose(outs[1], outs[0])
    assert ember.allclose(grads[1], grads[0])


def test_inplace_leaky_relu_with_a_negative_slope_refuses_the_backward_as_torch():
    # The in-place form differentiates from its result (no copy of the input is kept), which
    # cannot tell the input's sign when the slope is negative: the backward raises, as
    # PyTorch's; the forward and the out-of-place form work.
    w = ember.linspace(-2, 2, 12).requires_grad_()
    y = F.leaky_relu(w * 1.5, -0.5, inplace=True)
    assert ember.allclose(y, F.leaky_relu(w * 1.5, -0.5))
    with pytest.raises(RuntimeError, match="negative slope"):
        y.sum().backward()
    F.leaky_relu(w * 1.5, -0.5).sum().backward()
    assert w.grad is not None


def test_inplace_leaky_relu_module_in_a_discriminator_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 1, 8, 8)).astype(np.float32)
    grads = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        conv = lib.nn.Conv2d(1, 2, 4, 2, 1, bias=False)
        with lib.no_grad():
            conv.weight.copy_(lib.tensor(np.linspace(-1, 1, 32, dtype=np.float32).reshape(
                2, 1, 4, 4)))
        net = lib.nn.Sequential(conv, lib.nn.LeakyReLU(0.2, inplace=True))
        net(lib.tensor(x)).pow(2).sum().backward()
        grads.append(conv.weight.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-5)


def test_inplace_activation_on_a_leaf_that_requires_grad_is_refused():
    w = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.leaky_relu(w, 0.2, inplace=True)


def test_inplace_activation_without_grad_writes_the_input():
    x = ember.tensor([-2.0, 3.0])
    assert nn.SiLU(inplace=True)(x) is x
    np.testing.assert_allclose(x.numpy(), [-2.0 / (1 + np.exp(2.0)), 3.0 / (1 + np.exp(-3.0))],
                               rtol=1e-6)


def test_embedding_bag_from_pretrained_matches_torch():
    torch = pytest.importorskip("torch")
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    text, offsets = [0, 2, 1, 3, 3], [0, 2]
    outs = []
    for lib in (torch, ember):
        for mode in ("mean", "sum", "max"):
            bag = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(w), mode=mode)
            assert not bag.weight.requires_grad and bag.mode == mode
            outs.append(bag(lib.tensor(text), lib.tensor(offsets)).numpy())
        bag = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(w), freeze=False,
                                                  include_last_offset=True, padding_idx=3)
        assert bag.weight.requires_grad
        outs.append(bag(lib.tensor(text), lib.tensor([0, 2, 5])).detach().numpy())
    half = len(outs) // 2
    for got, want in zip(outs[half:], outs[:half]):
        np.testing.assert_allclose(got, want)
    with pytest.raises(ValueError, match="must be 2-D"):
        nn.EmbeddingBag.from_pretrained(ember.ones(3))
    with pytest.raises(ValueError, match="does not match"):
        nn.EmbeddingBag(4, 2, _weight=ember.ones(3, 2))


def test_step_lr_takes_a_float_step_size():
    # the text-classification tutorial's StepLR(optimizer, 1.0, gamma=0.1)
    opt = ember.optim.SGD([nn.Parameter(ember.zeros(1))], lr=5.0)
    sched = ember.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.1)
    lrs = []
    for _ in range(3):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == pytest.approx([0.5, 0.05, 0.005])
    for bad in (0, -1.0, True, "1"):
        with pytest.raises(ValueError, match="step_size must be a positive number"):
            ember.optim.lr_scheduler.StepLR(opt, bad)


# ---- affine_grid / grid_sample (the spatial transformer tutorial), max_unpool, DataParallel --
def _theta(n, seed, nd=2):
    rng = np.random.default_rng(seed)
    eye = np.tile(np.eye(nd, nd + 1), (n, 1, 1))
    return (eye + rng.normal(0, 0.4, (n, nd, nd + 1))).astype(np.float64)


@pytest.mark.filterwarnings("ignore:Since version 1.3.0, affine_grid")
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("nd", [2, 3])
def test_affine_grid_matches_torch(align_corners, nd):
    torch = pytest.importorskip("torch")
    theta = _theta(2, 0, nd)
    sizes = ([2, 3, 4, 5], [2, 1, 1, 3], [2, 2, 6, 1]) if nd == 2 else \
        ([2, 3, 4, 5, 6], [2, 1, 1, 3, 1], [2, 2, 3, 1, 4])
    for size in sizes:
        grads = []
        for lib in (torch, ember):
            t = lib.tensor(theta, requires_grad=True)
            g = lib.nn.functional.affine_grid(t, size, align_corners=align_corners)
            (g * lib.tensor(np.linspace(-1, 1, g.numel()).reshape(tuple(g.shape)))).sum() \
                .backward()
            grads.append((g.detach().numpy(), t.grad.numpy()))
        np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("nd", [2, 3])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners, nd):
    # nd 3: volumetric input (N, C, D, H, W), a grid of (x, y, z), trilinear for "bilinear";
    # bicubic: 4 x 4 taps each padded on its own (2-D only, as torch)
    if mode == "bicubic" and nd == 3:
        with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
            F.grid_sample(ember.ones(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 1, 3), mode=mode)
        return
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 5, 7) if nd == 2 else (2, 3, 4, 5, 6))
    out = (4, 6) if nd == 2 else (3, 4, 5)
    grid = rng.uniform(-1.6, 1.6, (2, *out, nd))  # some samples well outside
    outs = []
    for lib in (torch, ember):
        tx = lib.tensor(x, requires_grad=True)
        tg = lib.tensor(grid, requires_grad=True)
        y = lib.nn.functional.grid_sample(tx, tg, mode=mode, padding_mode=padding_mode,
                                          align_corners=align_corners)
        (y * lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)))).sum().backward()
        outs.append((y.detach().numpy(), tx.grad.numpy(),
                     tg.grad.numpy() if tg.grad is not None else np.zeros_like(grid)))
    (y_t, gx_t, gg_t), (y_e, gx_e, gg_e) = outs
    assert y_e.shape == y_t.shape == (2, 3, *out)
    np.testing.assert_allclose(y_e, y_t, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(gx_e, gx_t, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(gg_e, gg_t, rtol=1e-8, atol=1e-9)


def test_grid_sample_and_affine_grid_bad_input():
    with pytest.raises(ValueError, match="expected mode to be 'bilinear', 'nearest' or 'bicubic'"):
        F.grid_sample(ember.ones(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), mode="cubic")
    with pytest.raises(ValueError, match="padding_mode"):
        F.grid_sample(ember.ones(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), padding_mode="wrap")
    with pytest.raises(RuntimeError, match="same batch size"):
        F.grid_sample(ember.ones(2, 1, 2, 2), ember.zeros(1, 1, 1, 2))
    with pytest.raises(ValueError, match="Nx2x3"):
        F.affine_grid(ember.zeros(1, 3, 3), [1, 1, 2, 2], align_corners=False)
    with pytest.raises(ValueError, match="Nx3x4"):
        F.affine_grid(ember.zeros(1, 2, 3), [1, 1, 2, 2, 2], align_corners=False)
    with pytest.raises(NotImplementedError, match=r"\(N, C, D, H, W\)"):  # as torch's class
        F.affine_grid(ember.zeros(1, 2, 3), [1, 1, 2], align_corners=False)
    with pytest.raises(RuntimeError, match="5D input"):  # a 2-D grid for a volume
        F.grid_sample(ember.ones(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 2))


@pytest.mark.parametrize("nd", [1, 2])
def test_max_unpool_matches_torch(nd):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    shape = (2, 3, 9) if nd == 1 else (2, 3, 6, 7)
    x = rng.normal(size=shape).astype(np.float32)
    outs = []
    for lib in (torch, ember):
        pool = getattr(lib.nn, f"MaxPool{nd}d")(2, stride=2, return_indices=True)
        unpool = getattr(lib.nn, f"MaxUnpool{nd}d")(2, stride=2)
        t = lib.tensor(x, requires_grad=True)
        y, idx = pool(t)
        size = list(shape) if nd == 2 else None  # the odd sizes back, as the docs show
        r = unpool(y, idx, output_size=size)
        r.pow(2).sum().backward()
        outs.append((r.detach().numpy(), t.grad.numpy(), repr(unpool)))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-6)
    assert outs[1][2] == outs[0][2]
    with pytest.raises(ValueError, match="invalid output_size"):
        F.max_unpool2d(ember.ones(1, 1, 2, 2), ember.zeros(1, 1, 2, 2, dtype=ember.int64), 2,
                       output_size=[9, 9])


def test_data_parallel_runs_the_module_and_keeps_the_module_prefix():
    torch = pytest.importorskip("torch")
    lin = nn.Linear(3, 2)
    dp = nn.DataParallel(lin)
    x = ember.ones(4, 3)
    assert ember.equal(dp(x), lin(x)) and dp.module is lin
    assert list(dp.state_dict()) == list(torch.nn.DataParallel(torch.nn.Linear(3, 2))
                                         .state_dict())
    assert repr(dp).startswith("DataParallel(\n  (module): Linear(")
    out = nn.parallel.data_parallel(lin, x)
    assert ember.equal(out, lin(x))


# ---- SyncBatchNorm ----------------------------------------------------------------------------
def _sync_bn_rank(rank: int, world: int, init: str, x: np.ndarray, w: np.ndarray, conn) -> None:
    import traceback
    from datetime import timedelta

    try:
        import ember as e
        import ember.distributed as dist

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=world,
                                timeout=timedelta(seconds=60))
        bn = e.nn.SyncBatchNorm(3, momentum=0.5)
        with e.no_grad():
            bn.weight.copy_(e.tensor([1.0, 2.0, 0.5]))
            bn.bias.copy_(e.tensor([0.0, -1.0, 1.0]))
        part = e.tensor(x[rank::world], requires_grad=True)  # this rank's share of the batch
        y = bn(part)
        (y * e.tensor(w[rank::world])).sum().backward()
        conn.send(("ok", (y.detach().numpy(), part.grad.numpy(), bn.weight.grad.numpy(),
                          bn.running_mean.numpy(), bn.running_var.numpy())))
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (sent to the test)
        conn.send(("err", traceback.format_exc()))


def test_sync_batch_norm_over_two_ranks_matches_batch_norm_of_the_whole_batch(tmp_path):
    pytest.importorskip("ember.distributed")
    import multiprocessing as mp

    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 3, 2, 2)).astype(np.float64)
    w = rng.normal(size=(6, 3, 2, 2)).astype(np.float64)
    x, w = x.astype(np.float32), w.astype(np.float32)
    ctx = mp.get_context("spawn")
    init = f"file://{tmp_path / 'store'}"
    pipes, procs = [], []
    for rank in range(2):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_sync_bn_rank, args=(rank, 2, init, x, w, child))
        p.start()
        pipes.append(parent)
        procs.append(p)
    results = []
    for parent in pipes:
        assert parent.poll(120), "a rank did not answer"
        status, value = parent.recv()
        assert status == "ok", value
        results.append(value)
    for p in procs:
        p.join(60)
    # the reference: plain batch norm over the whole batch in one process
    bn = nn.BatchNorm2d(3, momentum=0.5)
    with ember.no_grad():
        bn.weight.copy_(ember.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(ember.tensor([0.0, -1.0, 1.0]))
    full = ember.tensor(x, requires_grad=True)
    y = bn(full)
    (y * ember.tensor(w)).sum().backward()
    for rank, (y_r, gx_r, gw_r, rm_r, rv_r) in enumerate(results):
        np.testing.assert_allclose(y_r, y.detach().numpy()[rank::2], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gx_r, full.grad.numpy()[rank::2], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(rm_r, bn.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rv_r, bn.running_var.numpy(), rtol=1e-4, atol=1e-6)
    # each rank's weight gradient is its share; DDP's averaging would sum them
    np.testing.assert_allclose(results[0][2] + results[1][2], bn.weight.grad.numpy(), rtol=1e-4,
                               atol=1e-5)


def test_sync_batch_norm_alone_is_batch_norm_and_converts_like_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).normal(size=(4, 2, 3)).astype(np.float32)
    outs = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Conv1d(2, 2, 1), lib.nn.BatchNorm1d(2),
                                lib.nn.Sequential(lib.nn.BatchNorm1d(2)))
        with lib.no_grad():
            net[0].weight.copy_(lib.eye(2).unsqueeze(-1))
            net[0].bias.zero_()
        conv = lib.nn.SyncBatchNorm.convert_sync_batchnorm(net)
        assert conv[1].weight is net[1].weight if lib is ember else True
        outs.append((repr(conv), list(conv.state_dict()), conv(lib.tensor(x)).detach().numpy()))
    assert outs[1][0] == outs[0][0] and outs[1][1] == outs[0][1]
    np.testing.assert_allclose(outs[1][2], outs[0][2], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="expected at least 2D input"):
        nn.SyncBatchNorm(2)(ember.ones(2))


OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
              "RAdam", "ASGD", "Rprop"]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizers_take_and_record_torchs_flags(name):
    torch = pytest.importorskip("torch")
    import inspect

    flags = [k for k in ("differentiable", "capturable")
             if k in inspect.signature(getattr(torch.optim, name).__init__).parameters]
    outs = []
    for lib in (torch, ember):
        w = lib.nn.Parameter(lib.ones(3))
        opt = getattr(lib.optim, name)([w], lr=0.1, **{k: False for k in flags})
        (w * lib.arange(3.0)).sum().backward()
        opt.step()
        outs.append((repr(opt), sorted(opt.state_dict()["param_groups"][0]), w.tolist()))
    assert outs[1][0] == outs[0][0]  # the repr lists the same settings
    assert outs[1][1] == outs[0][1]
    np.testing.assert_allclose(outs[1][2], outs[0][2], rtol=1e-6)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        getattr(ember.optim, name)([nn.Parameter(ember.ones(1))], lr=0.1, differentiable=True)


# ---- module paths programs import -------------------------------------------------------------
def test_helper_modules_programs_import_match_torch():
    torch = pytest.importorskip("torch")
    from ember.nn.modules import utils as eu
    from torch.nn.modules import utils as tu

    for name in ("_single", "_pair", "_triple", "_quadruple"):
        for arg in (3, (1, 2), [4, 5, 6]):
            assert getattr(eu, name)(arg) == getattr(tu, name)(arg)
    assert eu._reverse_repeat_tuple((1, 2), 2) == tu._reverse_repeat_tuple((1, 2), 2)
    import ember.nn.common_types as ect
    import torch.nn.common_types as tct

    for name in ("_size_1_t", "_size_2_t", "_size_3_t", "_ratio_2_t", "_size_2_opt_t"):
        assert str(getattr(ect, name)) == str(getattr(tct, name))
    from ember.utils.hooks import RemovableHandle

    assert RemovableHandle is nn.RemovableHandle
    from ember.nn.attention import SDPBackend, sdpa_kernel

    assert list(SDPBackend.__members__) == list(torch.nn.attention.SDPBackend.__members__)
    q = ember.randn(1, 3, 4)
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
        out = F.scaled_dot_product_attention(q, q, q)
    assert out.shape == (1, 3, 4)
    with pytest.raises(AssertionError, match="SDPBackend"):
        with sdpa_kernel(["math"]):
            pass


def test_collate_with_a_collate_fn_map_matches_torch():
    torch = pytest.importorskip("torch")
    import ember.data._utils.collate as ec
    import torch.utils.data._utils.collate as tc

    class Box:
        def __init__(self, v):
            self.v = v

    batch = [{"x": np.ones(2, np.float32), "b": Box(1), "n": (1, 2.5), "s": "a"},
             {"x": np.zeros(2, np.float32), "b": Box(2), "n": (3, 4.5), "s": "b"}]
    outs = []
    for lib, mod in ((torch, tc), (ember, ec)):
        def collate_box(items, *, collate_fn_map=None, lib=lib):
            return lib.tensor([i.v for i in items])

        out = mod.collate(batch, collate_fn_map={Box: collate_box, **mod.default_collate_fn_map})
        outs.append(out)
    want, got = outs
    assert got["x"].tolist() == want["x"].tolist() and got["b"].tolist() == want["b"].tolist()
    assert [t.tolist() for t in got["n"]] == [t.tolist() for t in want["n"]]
    assert got["n"][1].dtype == ember.float64 and got["s"] == want["s"]
    with pytest.raises(TypeError, match="default_collate"):
        ec.collate([Box(1)], collate_fn_map=ec.default_collate_fn_map)
    assert ec.default_collate([1, 2]).tolist() == [1, 2]


def test_autograd_profiler_profile():
    with ember.autograd.profiler.profile(record_shapes=True) as prof:
        with ember.autograd.profiler.record_function("my_block"):
            ember.ones(3, 4).sum()
    keys = [e.key for e in prof.key_averages()]
    assert "aten::sum" in keys and "my_block" in keys
    with ember.autograd.profiler.profile(enabled=False) as off:
        ember.ones(2).sum()
    assert len(off.key_averages()) == 0
    with ember.autograd.profiler.emit_nvtx():
        pass


# ---- nn.utils.prune (the pruning tutorial) ----------------------------------------------------
def _prune_net(lib):
    net = lib.nn.Sequential(lib.nn.Conv2d(1, 4, 3), lib.nn.Flatten(), lib.nn.Linear(16, 6))
    rng = np.random.default_rng(5)
    with lib.no_grad():  # distinct magnitudes: no ties for the rankings
        for p in net.parameters():
            vals = rng.permutation(p.numel()).astype(np.float32) + 1.0
            signs = np.where(rng.random(p.numel()) < 0.5, -1.0, 1.0).astype(np.float32)
            p.copy_(lib.tensor((vals * signs / p.numel()).reshape(tuple(p.shape))))
    return net


def test_prune_matches_torch():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.nn.utils.prune")  # not imported by torch.nn.utils itself
    outs = []
    x = np.random.default_rng(6).normal(size=(2, 1, 4, 4)).astype(np.float32)
    for lib in (torch, ember):
        P = lib.nn.utils.prune
        net = _prune_net(lib)
        conv, fc = net[0], net[2]
        P.l1_unstructured(conv, name="weight", amount=0.3)
        P.ln_structured(conv, name="weight", amount=1, n=2, dim=0)  # iterative: combined
        P.l1_unstructured(fc, name="bias", amount=2)
        P.global_unstructured([(fc, "weight"), (conv, "bias")], pruning_method=P.L1Unstructured,
                              amount=0.25)
        P.custom_from_mask(fc, "bias", mask=lib.tensor([1, 1, 0, 1, 1, 1]))
        keys = sorted(net.state_dict())
        params = sorted(n for n, _ in net.named_parameters())
        hooks = [type(h).__name__ for h in conv._forward_pre_hooks.values()]
        y = net(lib.tensor(x))
        y.sum().backward()
        masks = [conv.weight_mask.numpy().copy(), conv.bias_mask.numpy().copy(),
                 fc.weight_mask.numpy().copy(), fc.bias_mask.numpy().copy()]
        grad = conv.weight_orig.grad.numpy().copy()
        pruned = P.is_pruned(net)
        P.remove(conv, "weight")
        after = (sorted(n for n, _ in conv.named_parameters()), conv.weight.detach().numpy())
        outs.append((keys, params, hooks, y.detach().numpy(), masks, grad, pruned, after,
                     [type(c).__name__ for c in conv._forward_pre_hooks.values()]))
    want, got = outs
    assert got[0] == want[0] and got[1] == want[1]
    assert got[2] == want[2] == ["PruningContainer", "CustomFromMask"]
    np.testing.assert_allclose(got[3], want[3], rtol=1e-5, atol=1e-6)
    for g, w in zip(got[4], want[4]):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_allclose(got[5], want[5], rtol=1e-5, atol=1e-6)
    assert got[6] is want[6] is True
    assert got[7][0] == want[7][0] and np.array_equal(got[7][1], want[7][1])
    assert got[8] == want[8]


def test_prune_errors_and_random_methods():
    lin = nn.Linear(4, 3)
    P = nn.utils.prune
    with pytest.raises(ValueError, match="should either be a float in the range"):
        P.l1_unstructured(lin, "weight", amount=1.5)
    with pytest.raises(ValueError, match="smaller than the number of parameters"):
        P.l1_unstructured(lin, "weight", amount=13)
    assert isinstance(lin.weight, nn.Parameter) and not P.is_pruned(lin)  # left as it was
    with pytest.raises(ValueError, match="has to be pruned before"):
        P.remove(lin, "weight")
    ember.manual_seed(0)
    P.random_unstructured(lin, "weight", amount=5)
    assert int((lin.weight_mask == 0).sum()) == 5
    P.random_structured(lin, "weight", amount=1, dim=0)
    rows_off = int((lin.weight_mask.sum(1) == 0).sum())
    assert rows_off >= 1
    with pytest.raises(ValueError, match="multidimensional"):
        P.ln_structured(nn.Linear(2, 2), "bias", amount=1, n=1, dim=0)
    assert not P.is_pruned(nn.Linear(2, 2)) and P.is_pruned(lin)
    P.identity(nn.Linear(2, 2), "weight")
