"""Lazy modules (LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*) and the
uninitialized parameters/buffers behind them, against PyTorch and the eager modules."""

from __future__ import annotations

import copy

import ember
import numpy as np
import pytest
from ember import nn
from ember.nn.parameter import (
    Parameter,
    UninitializedBuffer,
    UninitializedParameter,
    is_lazy,
)
from nn_helpers import assert_close, copy_weights, to_ember, to_np, to_torch, torch

# (lazy factory, eager factory, torch lazy factory, input shape)
CASES = {
    "linear": (lambda: nn.LazyLinear(3), lambda: nn.Linear(5, 3), "LazyLinear(3)", (4, 5)),
    "conv1d": (
        lambda: nn.LazyConv1d(4, 3, padding=1), lambda: nn.Conv1d(6, 4, 3, padding=1),
        "LazyConv1d(4, 3, padding=1)", (2, 6, 7),
    ),
    "conv2d_groups": (
        lambda: nn.LazyConv2d(4, 3, groups=2, bias=False),
        lambda: nn.Conv2d(6, 4, 3, groups=2, bias=False),
        "LazyConv2d(4, 3, groups=2, bias=False)", (2, 6, 5, 5),
    ),
    "conv3d": (lambda: nn.LazyConv3d(2, 2), lambda: nn.Conv3d(3, 2, 2), "LazyConv3d(2, 2)", (1, 3, 3, 3, 3)),
    "convT1d": (
        lambda: nn.LazyConvTranspose1d(3, 3, stride=2),
        lambda: nn.ConvTranspose1d(4, 3, 3, stride=2),
        "LazyConvTranspose1d(3, 3, stride=2)", (2, 4, 5),
    ),
    "convT2d": (
        lambda: nn.LazyConvTranspose2d(3, 2, stride=2),
        lambda: nn.ConvTranspose2d(4, 3, 2, stride=2),
        "LazyConvTranspose2d(3, 2, stride=2)", (1, 4, 3, 3),
    ),
    "bn1d": (lambda: nn.LazyBatchNorm1d(), lambda: nn.BatchNorm1d(5), "LazyBatchNorm1d()", (8, 5)),
    "bn2d": (
        lambda: nn.LazyBatchNorm2d(momentum=None), lambda: nn.BatchNorm2d(3, momentum=None),
        "LazyBatchNorm2d(momentum=None)", (4, 3, 2, 2),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lazy_module_initializes_like_the_eager_one(case):
    make_lazy, make_eager, _, shape = CASES[case]
    x = ember.randn(*shape)
    ember.manual_seed(7)
    lazy = make_lazy()
    assert lazy.has_uninitialized_params()
    assert all(is_lazy(p) for p in lazy.parameters())
    lazy(x)
    ember.manual_seed(7)
    eager = make_eager()
    assert type(lazy) is type(eager)
    assert repr(lazy) == repr(eager)
    assert list(lazy.state_dict()) == list(eager.state_dict())
    # same initialization, drawn in the same order (the running stats moved in forward)
    eager_params = dict(eager.named_parameters())
    for k, p in lazy.named_parameters():
        assert type(p) is Parameter and p.requires_grad
        np.testing.assert_array_equal(to_np(p), to_np(eager_params[k]))
    for k, b in lazy.named_buffers():
        assert type(b) is ember.Tensor and b.shape == eager.get_buffer(k).shape


@pytest.mark.parametrize("case", sorted(CASES))
def test_lazy_module_matches_torch(case):
    pytest.importorskip("torch")
    make_lazy, _, torch_src, shape = CASES[case]
    ours = make_lazy().double()
    theirs = eval("torch.nn." + torch_src).double()
    x = np.random.default_rng(0).standard_normal(shape)
    # both materialize on their first forward; then weights are copied over
    ours(to_ember(x))
    theirs(to_torch(x))
    assert type(ours).__name__ == type(theirs).__name__
    assert repr(ours) == repr(theirs)
    copy_weights(ours, theirs)
    for _ in range(2):  # a second call uses the initialized module (running stats, etc.)
        xe, xt = to_ember(x, True), to_torch(x, True)
        out, ref = ours(xe), theirs(xt)
        assert_close(out, ref, rtol=1e-10, atol=1e-10)
        g = np.random.default_rng(1).standard_normal(tuple(ref.shape))
        out.backward(ember.from_numpy(g))
        ref.backward(torch.from_numpy(g))
        assert_close(xe.grad, xt.grad, rtol=1e-10, atol=1e-10)
    tp = dict(theirs.named_parameters())
    for k, p in ours.named_parameters():
        assert_close(p.grad, tp[k].grad, rtol=1e-10, atol=1e-10)
    for k, b in theirs.named_buffers():
        assert_close(ours.get_buffer(k), b, rtol=1e-10, atol=1e-10)


def test_uninitialized_state_dict_and_load_materializes():
    lazy = nn.LazyBatchNorm1d()
    sd = lazy.state_dict()
    assert [type(v).__name__ for v in sd.values()] == [
        "UninitializedParameter", "UninitializedParameter", "UninitializedBuffer",
        "UninitializedBuffer", "Tensor",
    ]
    trained = nn.BatchNorm1d(4)
    trained(ember.randn(6, 4))
    target = nn.LazyBatchNorm1d()
    target.load_state_dict(trained.state_dict())
    assert type(target) is nn.LazyBatchNorm1d  # becomes BatchNorm1d at its first forward
    assert not target.has_uninitialized_params()
    assert type(target.running_mean) is ember.Tensor
    for k, v in trained.state_dict().items():
        assert_close(target.state_dict()[k], v)
    x = ember.randn(3, 4)
    target.eval()
    trained.eval()
    assert_close(target(x), trained(x))
    assert type(target) is nn.BatchNorm1d and target.num_features == 4
    # uninitialized into uninitialized: nothing to copy, no error
    nn.LazyLinear(2).load_state_dict(nn.LazyLinear(2).state_dict())


def test_loading_uninitialized_into_initialized_fails_clearly():
    with pytest.raises(RuntimeError, match="uninitialized parameter"):
        nn.Linear(5, 3).load_state_dict(nn.LazyLinear(3).state_dict())


def test_optimizer_created_before_the_dry_run_keeps_working():
    pytest.importorskip("torch")
    ours, theirs = nn.LazyLinear(2).double(), torch.nn.LazyLinear(2).double()
    opt_e = ember.optim.Adam(ours.parameters(), lr=0.1)
    opt_t = torch.optim.Adam(theirs.parameters(), lr=0.1)
    x = np.random.default_rng(3).standard_normal((4, 3))
    ours(to_ember(x))
    theirs(to_torch(x))
    copy_weights(ours, theirs)
    for _ in range(3):
        for model, opt, conv in ((ours, opt_e, to_ember), (theirs, opt_t, to_torch)):
            opt.zero_grad()
            (model(conv(x)) ** 2).sum().backward()
            opt.step()
    assert_close(ours.weight, theirs.weight, rtol=1e-10, atol=1e-10)


def test_uninitialized_tensors_refuse_use():
    p = UninitializedParameter()
    assert repr(p) == "<UninitializedParameter>" and p.requires_grad
    with pytest.raises(RuntimeError, match="shape of an uninitialized parameter"):
        p.shape
    with pytest.raises(RuntimeError, match="uninitialized parameter"):
        p + 1
    with pytest.raises(RuntimeError, match="uninitialized parameter"):
        p.sum()
    b = UninitializedBuffer()
    assert not b.requires_grad
    with pytest.raises(RuntimeError, match="uninitialized buffer"):
        b.tolist()
    b.materialize((2,))
    assert not is_lazy(b) and tuple(b.shape) == (2,)
    p.materialize((2, 3), dtype=ember.float64)
    assert type(p) is Parameter and p.dtype == ember.float64 and p.is_leaf
    q = copy.deepcopy(UninitializedParameter(requires_grad=False))
    assert is_lazy(q) and not q.requires_grad


def test_lazy_conversions_and_copies_before_init():
    seq = nn.Sequential(nn.LazyLinear(3), nn.LazyBatchNorm1d()).double()
    assert seq[0].weight.dtype == ember.float64 and is_lazy(seq[0].weight)
    clone = copy.deepcopy(seq)
    assert clone[0].has_uninitialized_params() and clone[0].weight is not seq[0].weight
    out = clone(ember.randn(4, 2, dtype=ember.float64))
    assert out.dtype == ember.float64 and clone[1].running_mean.dtype == ember.float64
    assert seq[0].has_uninitialized_params()  # the original is untouched


def test_lazy_bad_input_errors():
    with pytest.raises(ValueError, match="expected 3D \\(unbatched\\) or 4D"):
        nn.LazyConv2d(4, 3)(ember.ones(2, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(ember.ones(1, 3, 5, 5))
    with pytest.raises(ValueError, match="out_channels \\(3\\) must be divisible"):
        nn.LazyConv1d(3, 3, groups=2)
    with pytest.raises(ValueError, match="BatchNorm1d: expected 2D or 3D"):
        nn.LazyBatchNorm1d()(ember.ones(2, 3, 4, 5))
    m = nn.LazyLinear(2)
    with pytest.raises(ValueError, match="0-d"):
        m(ember.tensor(1.0))


def test_custom_lazy_module_must_initialize_everything():
    class Half(nn.modules.lazy.LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.a = UninitializedParameter()
            self.b = UninitializedParameter()

        def initialize_parameters(self, x):
            self.a.materialize(x.shape)

        def forward(self, x):
            return x

    with pytest.raises(RuntimeError, match="has not been fully initialized"):
        Half()(ember.ones(2))
