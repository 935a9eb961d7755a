"""einops' functions on ember tensors (ember registers an einops backend when einops is
imported), against NumPy through einops itself and against torch where installed."""

from __future__ import annotations

import subprocess
import sys

import ember
import numpy as np
import pytest

einops = pytest.importorskip("einops")


def _np(t):
    return t.detach().numpy() if isinstance(t, ember.Tensor) else np.asarray(t)


@pytest.mark.parametrize("pattern,kwargs", [
    ("b c h w -> b (h w) c", {}),
    ("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", {"p1": 2, "p2": 2}),
    ("b c h w -> (b c) w h", {}),
    ("b c h w -> b c 1 h w", {}),
])
def test_rearrange_matches_numpy(pattern, kwargs):
    a = np.random.default_rng(0).standard_normal((2, 3, 4, 6)).astype(np.float32)
    got = einops.rearrange(ember.from_numpy(a), pattern, **kwargs)
    assert isinstance(got, ember.Tensor)
    np.testing.assert_array_equal(_np(got), einops.rearrange(a, pattern, **kwargs))


@pytest.mark.parametrize("op", ["mean", "sum", "max", "min", "prod"])
def test_reduce_matches_numpy(op):
    a = np.random.default_rng(1).uniform(0.5, 1.5, (2, 3, 4, 6)).astype(np.float64)
    for pattern in ("b c h w -> b c", "b c (h 2) (w 3) -> b c h w", "b c h w -> c"):
        got = einops.reduce(ember.from_numpy(a), pattern, op)
        np.testing.assert_allclose(_np(got), einops.reduce(a, pattern, op), rtol=1e-12)


def test_repeat_einsum_pack_unpack_and_autograd():
    x = ember.randn(2, 3, requires_grad=True)
    r = einops.repeat(x, "b c -> b k c", k=4)
    assert r.shape == (2, 4, 3) and r.stride()[1] == 0  # a broadcast view, as with torch
    r.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 4.0))
    y = ember.randn(3, 5)
    np.testing.assert_allclose(_np(einops.einsum(x, y, "b c, c d -> b d")), _np(x @ y),
                               rtol=1e-6)
    packed, ps = einops.pack([x, ember.ones(2)], "b *")
    assert packed.shape == (2, 4)
    a, b = einops.unpack(packed, ps, "b *")
    assert a.shape == (2, 3) and b.shape == (2,)
    np.testing.assert_array_equal(_np(a), _np(x))


def test_any_all_on_bool_tensors():
    m = ember.tensor([[True, False], [True, True]])
    assert einops.reduce(m, "a b -> a", "all").tolist() == [False, True]
    assert einops.reduce(m, "a b -> b", "any").tolist() == [True, True]


def test_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(2).standard_normal((2, 8, 6)).astype(np.float32)
    for fn, args in ((einops.rearrange, ("b (h d) n -> b h n d",)),
                     (einops.reduce, ("b (h d) n -> b n", "mean")),
                     (einops.repeat, ("b c n -> b c n k",))):
        kw = {"h": 2} if fn is einops.rearrange else ({"d": 4} if fn is einops.reduce else
                                                      {"k": 3})
        np.testing.assert_allclose(_np(fn(ember.from_numpy(a), *args, **kw)),
                                   fn(torch.from_numpy(a), *args, **kw).numpy(), rtol=1e-6)


@pytest.mark.parametrize("order", ["import ember, einops", "import einops, ember"])
def test_either_import_order(order):
    code = (f"{order}\n"
            "print(tuple(einops.rearrange(ember.ones(2, 3), 'a b -> b a').shape))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(3, 2)"


def test_import_ember_does_not_import_einops():
    code = "import sys, ember; print('einops' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
