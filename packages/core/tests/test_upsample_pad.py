"""The upsample_* ops (F.interpolate's kernels) and pad's reflect / replicate / circular modes
with their backward op _pad_backward: values and gradients against PyTorch's aten ops of the
same names (skipped without PyTorch), float64 gradcheck / gradgradcheck (through the backward
ops' own derivatives), forward-mode tangents, non-contiguous inputs and bad input."""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch, val
from ember.autograd import gradcheck, gradgradcheck

NEAREST = ["upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
           "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"]
LINEAR = ["upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d"]
DIMS = {"upsample_nearest1d": 1, "upsample_nearest2d": 2, "upsample_nearest3d": 3,
        "_upsample_nearest_exact1d": 1, "_upsample_nearest_exact2d": 2,
        "_upsample_nearest_exact3d": 3, "upsample_linear1d": 1, "upsample_bilinear2d": 2,
        "upsample_trilinear3d": 3, "upsample_bicubic2d": 2}
IN_SHAPE = {1: (2, 3, 7), 2: (2, 3, 5, 6), 3: (1, 2, 3, 4, 5)}
# (output_size, scales): upsampling, downsampling, odd ratios, and scales that differ from
# in / out (the kernel must use 1 / scale, as when F.interpolate gets a scale_factor).
SIZES = {
    1: [((11,), None), ((3,), None), ((7,), None), ((14,), (2.0,)), ((21,), None), ((11,), (1.7,)),
        ((4,), (0.6,))],
    2: [((9, 13), None), ((2, 3), None), ((10, 12), (2.0, 2.0)), ((7, 3), (1.5, 0.5)),
        ((8, 5), (1.7, 0.9))],
    3: [((5, 7, 8), None), ((2, 2, 3), None), ((6, 8, 10), (2.0, 2.0, 2.0)),
        ((4, 6, 3), (1.5, 1.6, 0.7))],
}


def _rand(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _call(lib, name, x, size, scales, ac):
    fn = getattr(torch._C._nn, name) if lib is torch else getattr(ember._C, name)
    sc = list(scales) if scales is not None else [None] * len(size)
    if name in LINEAR:
        return fn(x, list(size), ac, *sc)
    return fn(x, list(size), *sc)


def _cases(names, acs=(False,)):
    out = []
    for name in names:
        for size, scales in SIZES[DIMS[name]]:
            for ac in acs:
                out.append((name, size, scales, ac))
    return out


ALL_CASES = _cases(NEAREST) + _cases(LINEAR, (False, True))


@needs_torch
@pytest.mark.parametrize("name,size,scales,ac", ALL_CASES)
def test_upsample_forward_backward_match_torch(name, size, scales, ac):
    x = _rand(IN_SHAPE[DIMS[name]])
    res = {}
    for lib in (ember, torch):
        t = lib.tensor(x, requires_grad=True)
        y = _call(lib, name, t, size, scales, ac)
        g = lib.tensor(_rand(tuple(y.shape), seed=1))
        y.backward(g)
        res[lib] = (val(y), val(t.grad))
    np.testing.assert_allclose(res[ember][0], res[torch][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res[ember][1], res[torch][1], rtol=1e-12, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("name", NEAREST + LINEAR)
def test_upsample_float32_and_noncontiguous(name):
    k = DIMS[name]
    size, scales = SIZES[k][0]
    shape = IN_SHAPE[k]
    x = _rand(shape[:1] + shape[2:] + shape[1:2], seed=3, dtype=np.float32)
    perm = [0, k + 1] + list(range(1, k + 1))  # channels moved to dim 1: not contiguous
    e = ember.tensor(x).permute(*perm)
    assert not e.is_contiguous()
    t = torch.tensor(x).permute(*perm)
    got = _call(ember, name, e, size, scales, True)
    want = _call(torch, name, t, size, scales, True)
    # (a channels-last input keeps its layout, as PyTorch's: test_memory_format_propagation.py)
    assert got.dtype == ember.float32 and got.stride() == tuple(want.stride())
    np.testing.assert_allclose(val(got), val(want), rtol=1e-5, atol=1e-5)


@needs_torch
def test_upsample_nearest_integer_dtypes_and_identity_sizes():
    x = np.arange(2 * 3 * 5 * 4).reshape(2, 3, 5, 4).astype(np.uint8)
    for size in ((10, 8), (3, 7), (5, 4)):
        got = ember.upsample_nearest2d(ember.tensor(x), list(size))
        want = torch._C._nn.upsample_nearest2d(torch.tensor(x), list(size))
        assert got.dtype == ember.uint8
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # float16 through the float accumulator
    h = ember.tensor(_rand((1, 2, 4, 5), dtype=np.float32)).half()
    got = ember.upsample_bilinear2d(h, [7, 9], False)
    want = torch._C._nn.upsample_bilinear2d(torch.tensor(h.float().numpy()).half(), [7, 9], False)
    np.testing.assert_allclose(val(got), val(want), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", NEAREST + LINEAR)
def test_upsample_gradcheck_and_gradgradcheck(name):
    k = DIMS[name]
    shape = {1: (1, 2, 4), 2: (1, 2, 3, 4), 3: (1, 1, 2, 3, 3)}[k]
    x = ember.tensor(_rand(shape, seed=5), requires_grad=True)
    for size, scales, ac in (((5, 7, 6)[:k], None, False), ((2, 2, 2)[:k], (0.7,) * k, True)):
        def f(t, size=size, scales=scales, ac=ac):
            return _call(ember, name, t, size, scales, ac)
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))


@needs_torch
@pytest.mark.parametrize("name", ["upsample_nearest2d", "_upsample_nearest_exact1d",
                                  "upsample_linear1d", "upsample_bilinear2d",
                                  "upsample_trilinear3d", "upsample_bicubic2d"])
def test_upsample_forward_ad_matches_torch_jvp(name):
    k = DIMS[name]
    size, scales = SIZES[k][0]
    x, v = _rand(IN_SHAPE[k], seed=6), _rand(IN_SHAPE[k], seed=7)
    outs = {}
    for lib, jvp in ((ember, ember.func.jvp), (torch, torch.func.jvp)):
        y, t = jvp(lambda a, lib=lib: _call(lib, name, a, size, scales, False),
                   (lib.tensor(x),), (lib.tensor(v),))
        outs[lib] = (val(y), val(t))
    np.testing.assert_allclose(outs[ember][0], outs[torch][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outs[ember][1], outs[torch][1], rtol=1e-12, atol=1e-12)


def test_upsample_forward_ad_of_backward_op():
    # the backward op is linear in grad_output: its tangent is itself applied to the tangent
    g, v = _rand((1, 2, 6, 8), seed=8), _rand((1, 2, 6, 8), seed=9)
    y, t = ember.func.jvp(
        lambda a: ember.upsample_bilinear2d_backward(a, [6, 8], [1, 2, 3, 4], False),
        (ember.tensor(g),), (ember.tensor(v),))
    want = ember.upsample_bilinear2d_backward(ember.tensor(v), [6, 8], [1, 2, 3, 4], False)
    np.testing.assert_allclose(val(t), val(want), rtol=1e-12, atol=1e-12)
    assert tuple(y.shape) == (1, 2, 3, 4)


@needs_torch
@pytest.mark.parametrize("name,in_size,size,scales", [
    ("upsample_linear1d", (6,), (6,), (2.0,)),              # same size: a copy, scale ignored
    ("upsample_bilinear2d", (3, 4), (6, 4), (2.0, 3.0)),
    ("upsample_trilinear3d", (2, 3, 4), (2, 6, 4), (1.5, 2.0, 0.7)),
    ("upsample_nearest2d", (3, 5), (3, 10), (1.7, 2.7)),    # PyTorch's 2-D nearest shortcuts
    ("upsample_nearest2d", (4, 5), (9, 5), (2.3, 1.4)),
    ("upsample_nearest1d", (5,), (10,), (2.7,)),             # ... which 1-D nearest lacks
    ("_upsample_nearest_exact2d", (3, 4), (3, 8), (1.5, 2.5)),
])
def test_upsample_scales_that_disagree_with_sizes(name, in_size, size, scales):
    x = _rand((1, 2) + in_size, seed=21)
    ac = False
    got = _call(ember, name, ember.tensor(x), size, scales, ac)
    want = _call(torch, name, torch.tensor(x), size, scales, ac)
    np.testing.assert_allclose(val(got), val(want), rtol=1e-12, atol=1e-12)
    # the backward op is the forward's adjoint: <up(x), g> == <x, up_backward(g)>
    g = _rand(tuple(got.shape), seed=22)
    sc = list(scales)
    args = ([ac] if name in LINEAR else []) + sc
    gx = getattr(ember._C, name + "_backward")(ember.tensor(g), list(size), list(x.shape), *args)
    np.testing.assert_allclose((val(got) * g).sum(), (x * val(gx)).sum(), rtol=1e-12)


def test_upsample_known_values():
    x = ember.tensor([[[1.0, 2.0, 4.0]]])
    assert ember.upsample_nearest1d(x, [6]).tolist() == [[[1.0, 1.0, 2.0, 2.0, 4.0, 4.0]]]
    assert ember.upsample_linear1d(x, [5], True).tolist() == [[[1.0, 1.5, 2.0, 3.0, 4.0]]]
    assert ember.upsample_linear1d(x, [6], False).tolist() == [
        [[1.0, 1.25, 1.75, 2.5, 3.5, 4.0]]]


def test_upsample_bad_input():
    x = ember.ones(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match=r"upsample_bilinear2d: expected a 4-D input"):
        ember.upsample_bilinear2d(ember.ones(2, 3, 4), [4, 4], False)
    with pytest.raises(ValueError, match="output_size must have 2 elements"):
        ember.upsample_nearest2d(x, [4])
    with pytest.raises(RuntimeError, match="greater than 0"):
        ember.upsample_nearest2d(x, [0, 4])
    with pytest.raises(RuntimeError, match="greater than 0"):
        ember.upsample_nearest1d(ember.ones(1, 1, 0), [3])
    with pytest.raises(TypeError, match="upsample_bilinear2d: not implemented for dtype int64"):
        ember.upsample_bilinear2d(ember.ones(1, 1, 2, 2, dtype=ember.int64), [3, 3], False)
    with pytest.raises(RuntimeError, match=r"expected grad_output of shape \(1, 2, 6, 8\)"):
        ember.upsample_bilinear2d_backward(ember.ones(1, 2, 6, 7), [6, 8], [1, 2, 3, 4], False)
    assert ember.upsample_nearest2d(ember.ones(0, 2, 3, 4), [5, 5]).shape == (0, 2, 5, 5)


# ---- pad --------------------------------------------------------------------------------------
PAD_CASES = [
    ((2, 3, 7), (2, 3)),
    ((3, 7), (3, 1)),
    ((2, 3, 7), (-1, 2)),
    ((2, 3, 5, 6), (1, 2, 3, 1)),
    ((3, 5, 6), (2, 2, 0, 4)),
    ((2, 3, 5, 6), (-1, 2, 2, -2)),
    ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 2)),
    ((2, 3, 4, 5), (0, 1, 2, 0, 1, 1)),
]


@needs_torch
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
@pytest.mark.parametrize("shape,pad", PAD_CASES)
def test_pad_forward_backward_match_torch(mode, shape, pad):
    x = _rand(shape, seed=11)
    res = {}
    for lib in (ember, torch):
        t = lib.tensor(x, requires_grad=True)
        if lib is torch:
            y = torch.nn.functional.pad(t, pad, mode=mode)
        else:
            y = ember.pad(t, list(pad), mode=mode)
        y.backward(lib.tensor(_rand(tuple(y.shape), seed=12)))
        res[lib] = (val(y), val(t.grad))
    np.testing.assert_allclose(res[ember][0], res[torch][0], rtol=0, atol=0)
    np.testing.assert_allclose(res[ember][1], res[torch][1], rtol=1e-12, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_noncontiguous_and_float32(mode):
    x = _rand((2, 6, 5, 3), seed=13, dtype=np.float32)
    e = ember.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    ye = ember.pad(e.permute(0, 3, 1, 2), [2, 1, 1, 3], mode=mode)
    yt = torch.nn.functional.pad(t.permute(0, 3, 1, 2), (2, 1, 1, 3), mode=mode)
    np.testing.assert_array_equal(val(ye), val(yt))
    g = _rand(tuple(yt.shape), seed=14, dtype=np.float32)
    ye.backward(ember.tensor(g).transpose(2, 3).contiguous().transpose(2, 3))  # strided grad
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(val(e.grad), val(t.grad), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_gradcheck_gradgradcheck_and_tangent(mode):
    for shape, pad in (((2, 3, 4), [2, 1]), ((1, 2, 3, 4), [1, 2, 2, 0]),
                       ((1, 2, 3, 4), [-1, 2, 1, 1]), ((1, 1, 2, 3, 3), [1, 1, 0, 2, 1, 0])):
        x = ember.tensor(_rand(shape, seed=15), requires_grad=True)

        def f(t, pad=pad):
            return ember.pad(t, pad, mode=mode)
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))
        # forward AD: the tangent is the pad of the tangent
        v = ember.tensor(_rand(shape, seed=16))
        _, tan = ember.func.jvp(f, (x.detach(),), (v,))
        np.testing.assert_array_equal(val(tan), val(f(v)))


def test_pad_backward_op_bad_input_and_integer_grads():
    with pytest.raises(RuntimeError, match=r"pad_backward: expected grad_output of shape \(1, 2, 7\)"):
        ember._C._pad_backward(ember.ones(1, 2, 6), [1, 2, 4], [2, 1], "reflect")
    with pytest.raises(RuntimeError, match="less than the corresponding input dimension"):
        ember._C._pad_backward(ember.ones(1, 2, 9), [1, 2, 4], [4, 1], "reflect")
    g = ember._C._pad_backward(ember.ones(1, 6, dtype=ember.int64), [1, 3], [2, 1], "replicate")
    assert g.tolist() == [[3, 1, 2]]
    # cropping pads whose output is empty: every gradient is zero
    z = ember._C._pad_backward(ember.ones(1, 0), [1, 2], [-1, -1], "replicate")
    assert z.tolist() == [[0.0, 0.0]]
