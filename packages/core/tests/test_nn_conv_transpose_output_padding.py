"""Transposed convolution with output_padding >= stride (legal while it is below the dilation):
the trailing output_padding elements then hold whole extra kernel windows that no input element
feeds, so the kernels must walk the input's positions, not every window that fits the output.
Forward, grad_input, grad_weight and grad_bias against torch (1-3 spatial dims, groups, padding,
1x1 kernels, the float32 column-free paths), the composite double-backward formulas, gradcheck,
ConvTranspose2d's output_size, and meta-device shapes."""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch
from op_db import GradCase, run_case

F = torch.nn.functional if torch is not None else None

# (name, spatial dims, input shape, weight shape (C_in, C_out / groups, *k), kwargs)
CASES = [
    # the reported case: 1 window more per dim than input positions
    ("s1_d2_op1", 2, (2, 4, 5, 6), (4, 3, 3, 3), dict(stride=1, dilation=2, output_padding=1)),
    ("s1_d2_op1_pad1", 2, (2, 4, 5, 6), (4, 3, 3, 3),
     dict(stride=1, dilation=2, output_padding=1, padding=1)),
    # two extra windows along H (stride 1, output_padding 2), the usual case along W
    ("mixed_groups", 2, (3, 4, 4, 5), (4, 2, 2, 3),
     dict(stride=(1, 2), dilation=(3, 1), output_padding=(2, 1), padding=(0, 1), groups=2)),
    ("stride2_d3_op2", 2, (2, 3, 4, 3), (3, 2, 3, 2),
     dict(stride=2, dilation=3, output_padding=2, padding=(2, 1))),
    ("conv1d_groups", 1, (2, 6, 7), (6, 1, 3),
     dict(stride=2, dilation=3, output_padding=2, padding=2, groups=3)),
    ("conv1d_s1", 1, (3, 2, 9), (2, 3, 4), dict(stride=1, dilation=4, output_padding=3)),
    # a 1x1 kernel: without the padding its columns would be the output itself
    ("1x1", 2, (2, 4, 3, 5), (4, 3, 1, 1), dict(dilation=2, output_padding=1)),
    ("1x1_groups", 1, (2, 4, 6), (4, 2, 1), dict(dilation=3, output_padding=2, groups=2)),
    # input lines of 30+ positions with stride 1 along W: float32 on AVX-512 computes the
    # gradients without columns
    ("long_lines", 2, (2, 4, 3, 32), (4, 5, 2, 3),
     dict(stride=1, dilation=2, output_padding=1, padding=(0, 1))),
    ("long_lines_c16", 2, (2, 16, 2, 31), (16, 4, 3, 3),
     dict(stride=1, dilation=(1, 2), output_padding=(0, 1), padding=1)),
    ("conv3d", 3, (2, 2, 3, 4, 3), (2, 3, 2, 3, 2),
     dict(stride=(1, 2, 1), dilation=(2, 1, 3), output_padding=(1, 1, 2), padding=(1, 0, 1))),
    ("conv3d_groups", 3, (1, 4, 3, 3, 4), (4, 1, 2, 2, 2),
     dict(stride=1, dilation=2, output_padding=1, groups=2)),
    # output_padding below the stride still matches (regression guard for the usual case)
    ("usual", 2, (2, 3, 4, 4), (3, 2, 3, 3), dict(stride=3, dilation=2, output_padding=2)),
]
IDS = [c[0] for c in CASES]


def _full(kw, k):
    def expand(v, default):
        v = kw.get(v, default)
        return list(v) if isinstance(v, tuple) else [v] * k
    return dict(stride=expand("stride", 1), padding=expand("padding", 0),
                dilation=expand("dilation", 1), output_padding=expand("output_padding", 0),
                groups=kw.get("groups", 1))


def _fn(lib, k, kw):
    if lib is ember and k == 3:  # ember has no conv_transpose3d function: the op itself
        a = _full(kw, 3)

        def conv3(x, w, b=None):
            return ember.convolution(x, w, b, a["stride"], a["padding"], a["dilation"], True,
                                     a["output_padding"], a["groups"])
        return conv3
    f = getattr(ember if lib is ember else F, f"conv_transpose{k}d")
    return lambda x, w, b=None: f(x, w, b, **kw)


def _arrays(xs, ws, kw, seed=0):
    rng = np.random.default_rng(seed)
    nb = ws[1] * kw.get("groups", 1)
    return rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(nb)


def _run_both(case, dtype, create_graph=False):
    _, k, xs, ws, kw = case
    x, w, b = _arrays(xs, ws, kw)
    out = []
    for lib in (ember, torch):
        tx = lib.tensor(x.astype(dtype), requires_grad=True)
        tw = lib.tensor(w.astype(dtype), requires_grad=True)
        tb = lib.tensor(b.astype(dtype), requires_grad=True)
        y = _fn(lib, k, kw)(tx, tw, tb)
        g = np.random.default_rng(7).standard_normal(tuple(y.shape)).astype(dtype)
        grads = lib.autograd.grad(y, [tx, tw, tb], lib.tensor(g), create_graph=create_graph)
        out.append([y.detach().numpy()] + [t.detach().numpy() for t in grads])
    return out


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv_transpose_output_padding_matches_torch(case, dtype):
    ours, theirs = _run_both(case, dtype)
    for name, a, b in zip(("output", "grad_input", "grad_weight", "grad_bias"), ours, theirs):
        assert a.shape == b.shape, f"{case[0]}: {name} shape"
        np.testing.assert_allclose(a, b, err_msg=f"{case[0]}: {name}", **_tol(dtype))


@needs_torch
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in
                                  ("s1_d2_op1_pad1", "mixed_groups", "1x1", "conv1d_groups",
                                   "conv3d")], ids=lambda c: c[0])
def test_conv_transpose_output_padding_create_graph(case):
    # create_graph=True takes the composite backward formulas instead of convolution_backward.
    ours, theirs = _run_both(case, "float64", create_graph=True)
    for name, a, b in zip(("output", "grad_input", "grad_weight", "grad_bias"), ours, theirs):
        np.testing.assert_allclose(a, b, err_msg=f"{case[0]}: {name}", **_tol("float64"))


@needs_torch
def test_conv_transpose_output_padding_single_thread():
    prev = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        ours, theirs = _run_both(CASES[1], "float32")
    finally:
        ember.set_num_threads(prev)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **_tol("float32"))


def _grad_case(case):
    name, k, xs, ws, kw = case

    def fn(x, w, b):
        lib = torch if torch is not None and isinstance(x, torch.Tensor) else ember
        return _fn(lib, k, kw)(x, w, b)

    def inputs(rng):
        return [rng.standard_normal(xs), rng.standard_normal(ws),
                rng.standard_normal(ws[1] * kw.get("groups", 1))]

    return GradCase("conv_transpose_opd_" + name, fn, inputs)


# float64 gradcheck (convolution_backward) and double backward against torch (composite).
GRAD_CASES = [
    _grad_case(("small_s1_d2_op1", 2, (1, 2, 3, 4), (2, 2, 2, 2),
                dict(stride=1, dilation=2, output_padding=1, padding=(1, 0)))),
    _grad_case(("small_conv1d_groups", 1, (2, 4, 4), (4, 1, 2),
                dict(stride=1, dilation=3, output_padding=2, groups=2))),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_conv_transpose_output_padding_gradcheck(case):
    run_case(case)


@needs_torch
def test_conv_transpose2d_module_output_padding_past_stride():
    ember.manual_seed(0)
    kw = dict(stride=(1, 2), dilation=3, padding=1, output_padding=(2, 1))
    m = ember.nn.ConvTranspose2d(3, 2, 3, **kw).double()
    t = torch.nn.ConvTranspose2d(3, 2, 3, **kw).double()
    with torch.no_grad():
        t.weight.copy_(torch.tensor(m.weight.detach().numpy()))
        t.bias.copy_(torch.tensor(m.bias.detach().numpy()))
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 5))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, r = m(ex), t(tx)
    assert tuple(y.shape) == tuple(r.shape) == (2, 2, 10, 14)
    np.testing.assert_allclose(y.detach().numpy(), r.detach().numpy(), rtol=1e-10, atol=1e-10)
    y.square().sum().backward()
    r.square().sum().backward()
    for a, b in ((ex.grad, tx.grad), (m.weight.grad, t.weight.grad), (m.bias.grad, t.bias.grad)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-9)


def test_conv_transpose_output_padding_meta_shapes():
    x = ember.randn(2, 4, 5, 6, requires_grad=True)
    w = ember.randn(4, 6, 3, 3, requires_grad=True)
    b = ember.randn(6, requires_grad=True)
    kw = dict(stride=1, dilation=2, output_padding=1, padding=1)
    y = ember.nn.functional.conv_transpose2d(x, w, b, **kw)
    mx, mw, mb = (t.detach().to("meta").requires_grad_(True) for t in (x, w, b))
    my = ember.nn.functional.conv_transpose2d(mx, mw, mb, **kw)
    assert my.device.type == "meta"
    assert tuple(my.shape) == tuple(y.shape) == (2, 6, 8, 9)
    assert my.stride() == y.stride()
    g = ember.ones(*y.shape)
    grads = ember.autograd.grad(y, [x, w, b], g)
    mgrads = ember.autograd.grad(my, [mx, mw, mb], g.to("meta"))
    for mg, cg, t in zip(mgrads, grads, (x, w, b)):
        assert mg.device.type == "meta"
        assert tuple(mg.shape) == tuple(cg.shape) == tuple(t.shape)
    # the op itself, all three gradients
    gi, gw, gb = ember._C.convolution_backward(
        g.to("meta"), mx.detach(), mw.detach(), [1, 1], [1, 1], [2, 2], True, [1, 1], 1,
        True, True, True)
    assert (tuple(gi.shape), tuple(gw.shape), tuple(gb.shape)) == ((2, 4, 5, 6), (4, 6, 3, 3),
                                                                  (6,))


def test_conv_transpose_output_padding_still_checked():
    x, w = ember.zeros(1, 2, 4, 4), ember.zeros(2, 3, 3, 3)
    # below the dilation: fine; at both the stride and the dilation: an error
    assert tuple(ember.nn.functional.conv_transpose2d(
        x, w, stride=1, dilation=3, output_padding=2).shape) == (1, 3, 12, 12)
    with pytest.raises(RuntimeError, match="output_padding must be smaller than either stride or "
                                         "dilation"):
        ember.nn.functional.conv_transpose2d(x, w, stride=2, dilation=2, output_padding=2)
