"""ember.quasirandom.SobolEngine: the unscrambled sequence equals torch's point for point (all
1111 supported dimensions), fast_forward/reset/draw_base2 bookkeeping, and the properties of the
scrambled sequence (reproducible by seed, in [0, 1), stratified)."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember.quasirandom import SobolEngine, _primitive_polynomials

torch = pytest.importorskip("torch")


def test_direction_numbers_equal_torch_for_all_dimensions():
    e = SobolEngine(SobolEngine.MAXDIM)
    t = torch.quasirandom.SobolEngine(SobolEngine.MAXDIM)
    np.testing.assert_array_equal(e.sobolstate.numpy(), t.sobolstate.numpy())


def test_primitive_polynomials_are_in_joe_kuo_order():
    assert _primitive_polynomials(12) == [3, 7, 11, 13, 19, 25, 37, 41, 47, 55, 59, 61]


@pytest.mark.parametrize("dim", [1, 2, 21, 1111])
def test_unscrambled_points_equal_torch(dim):
    e = SobolEngine(dim)
    t = torch.quasirandom.SobolEngine(dim)
    np.testing.assert_array_equal(e.draw(70, dtype=ember.float64).numpy(),
                                  t.draw(70, dtype=torch.float64).numpy())
    np.testing.assert_array_equal(e.draw(33).numpy(), t.draw(33).numpy())  # float32
    assert e.num_generated == t.num_generated == 103
    np.testing.assert_array_equal(e.quasi.numpy(), t.quasi.numpy())


def test_fast_forward_reset_and_draw_base2_equal_torch():
    e, t = SobolEngine(6), torch.quasirandom.SobolEngine(6)
    assert e.fast_forward(5) is e
    t.fast_forward(5)
    np.testing.assert_array_equal(e.draw(3).numpy(), t.draw(3).numpy())
    e.fast_forward(1000)
    t.fast_forward(1000)
    np.testing.assert_array_equal(e.draw(4).numpy(), t.draw(4).numpy())
    assert e.reset() is e
    t.reset()
    np.testing.assert_array_equal(e.draw_base2(3).numpy(), t.draw_base2(3).numpy())
    np.testing.assert_array_equal(e.draw_base2(3).numpy(), t.draw_base2(3).numpy())
    with pytest.raises(ValueError, match="power of 2"):
        e.draw_base2(1)  # 16 + 2 points
    e2, t2 = SobolEngine(2), torch.quasirandom.SobolEngine(2)
    e2.fast_forward(1)
    t2.fast_forward(1)
    np.testing.assert_array_equal(e2.draw(2).numpy(), t2.draw(2).numpy())


def test_draw_out_dtype_and_repr():
    e = SobolEngine(3)
    out = ember.empty(0)
    r = e.draw(4, out=out)
    assert r is out and out.shape == (4, 3) and out.dtype == ember.float32
    assert e.draw(2, dtype=ember.float64).dtype == ember.float64
    assert repr(SobolEngine(3, scramble=True, seed=2)) == "SobolEngine(dimension=3, scramble=True, seed=2)"
    assert repr(e) == repr(torch.quasirandom.SobolEngine(3))


def test_bad_arguments():
    for dim in (0, 1112, 2.0):
        with pytest.raises(ValueError, match="dimensionality"):
            SobolEngine(dim)
    with pytest.raises(ValueError, match="non-negative"):
        SobolEngine(2).draw(-1)
    with pytest.raises(ValueError, match="non-negative"):
        SobolEngine(2).fast_forward(-3)


def test_scrambled_is_reproducible_and_stratified():
    a = SobolEngine(5, scramble=True, seed=7).draw_base2(5).numpy()
    b = SobolEngine(5, scramble=True, seed=7).draw(32).numpy()
    np.testing.assert_array_equal(a, b)
    c = SobolEngine(5, scramble=True, seed=8).draw(32).numpy()
    assert not np.array_equal(a, c)
    plain = SobolEngine(5).draw(32).numpy()
    assert not np.array_equal(a, plain)
    assert (a >= 0).all() and (a < 1).all()
    # every dimension of a 2^m block puts one point in each interval [k / 2^m, (k + 1) / 2^m)
    np.testing.assert_array_equal(np.sort(np.floor(a * 32), 0),
                                  np.repeat(np.arange(32.0)[:, None], 5, 1))
    # and every 2-D projection of the first 16 points is a (t, m, 2)-net with a small t:
    # the 4x4 grid of cells holds one point per cell for the first two dimensions
    cells = {(int(x * 4), int(y * 4)) for x, y in a[:16, :2]}
    assert len(cells) == 16
    # the scrambled state follows the same bookkeeping as the plain one
    e = SobolEngine(5, scramble=True, seed=7)
    e.fast_forward(10)
    np.testing.assert_array_equal(e.draw(3).numpy(), a[10:13])
    np.testing.assert_array_equal(e.reset().draw(2).numpy(), a[:2])


def test_scramble_without_seed_follows_global_generator():
    ember.manual_seed(123)
    a = SobolEngine(3, scramble=True).draw(8).numpy()
    ember.manual_seed(123)
    b = SobolEngine(3, scramble=True).draw(8).numpy()
    np.testing.assert_array_equal(a, b)
