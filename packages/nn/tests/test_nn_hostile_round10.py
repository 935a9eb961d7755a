"""Hostile input, round 10 (nn part): gradient clipping over mixed dtypes and RNN dropout that
does nothing.

``clip_grad_norm_`` / ``get_total_norm`` cast every per-tensor norm to the dtype of the *first*
gradient before combining them. In a model whose first parameters are float16 (or bfloat16) and
later ones float32, a float32 gradient whose norm exceeds 65504 became inf in float16, the total
norm was inf, and every gradient was multiplied by ``max_norm / inf = 0``: the whole step was
silently zeroed (a bfloat16 first gradient also rounded a float64 total to 3 significant digits).
The norms are now combined in the promoted dtype, as PyTorch's ``stack`` does, so the total of a
float16 and a float32 gradient is a float32 and that of a bfloat16 and a float64 one a float64.

``nn.RNN/LSTM/GRU(..., dropout=p)`` with ``num_layers=1`` silently ignored ``p`` (dropout runs
between stacked layers only); PyTorch warns, and ember now does too, naming the module.

``LBFGS`` over a parameter with a sparse gradient (``Embedding(sparse=True)``) failed with
"ember.sparse_coo: op is_complex not supported" while flattening the gradients; PyTorch flattens
the sparse gradient densely, and ember now does too.

The rest of round 10: packages/core/tests/test_hostile_input_round10.py.
"""

import math
import warnings

import ember as E
import pytest
from ember import nn

# ---- clip_grad_norm_ over mixed dtypes ----------------------------------------------------------


def _params(lib, specs):
    ps = []
    for dtype, grad in specs:
        p = lib.nn.Parameter(lib.zeros(len(grad), dtype=getattr(lib, dtype)))
        p.grad = lib.tensor(grad, dtype=getattr(lib, dtype))
        ps.append(p)
    return ps


def test_a_float16_first_gradient_does_not_zero_a_large_float32_one():
    p16, p32 = _params(E, [("float16", [1.0]), ("float32", [1e5])])
    total = nn.utils.clip_grad_norm_([p16, p32], max_norm=1.0)
    assert total.dtype == E.float32
    assert math.isclose(total.item(), 1e5, rel_tol=1e-6)  # sqrt(1 + 1e10)
    # both scaled by 1 / 1e5 (not zeroed)
    assert math.isclose(p32.grad.item(), 1.0, rel_tol=1e-5)
    assert math.isclose(p16.grad.item(), 1e-5, rel_tol=1e-2)


def test_the_total_norm_keeps_the_widest_precision():
    bf, f64 = _params(E, [("bfloat16", [3.0]), ("float64", [4.001])])
    total = nn.utils.get_total_norm([bf.grad, f64.grad])
    assert total.dtype == E.float64
    assert math.isclose(total.item(), math.sqrt(9 + 4.001 ** 2), rel_tol=1e-12)
    inf = nn.utils.get_total_norm([bf.grad, f64.grad], norm_type=math.inf)
    assert inf.dtype == E.float64 and inf.item() == 4.001


def test_same_dtype_clipping_is_unchanged():
    a, b = _params(E, [("float32", [3.0]), ("float32", [4.0])])
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert total.dtype == E.float32 and total.item() == 5.0
    assert [round(a.grad.item(), 6), round(b.grad.item(), 6)] == [0.6, 0.8]


def test_torch_combines_mixed_dtype_norms_the_same_way():
    torch = pytest.importorskip("torch")
    for specs in ([("float16", [1.0]), ("float32", [1e5])],
                  [("bfloat16", [3.0]), ("float64", [4.001])]):
        tp, ep = _params(torch, specs), _params(E, specs)
        tn = torch.nn.utils.clip_grad_norm_(tp, 1.0)
        en = nn.utils.clip_grad_norm_(ep, 1.0)
        assert str(en.dtype).split(".")[-1] == str(tn.dtype).split(".")[-1]
        assert math.isclose(en.item(), tn.item(), rel_tol=1e-6)
        for t, e in zip(tp, ep):
            assert math.isclose(e.grad.item(), t.grad.item(), rel_tol=1e-3)


# ---- dropout on a single-layer RNN --------------------------------------------------------------


def _warnings(make):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = make()
    return m, [str(x.message) for x in w if issubclass(x.category, UserWarning)]


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_dropout_with_one_layer_warns(cls):
    m, msgs = _warnings(lambda: getattr(nn, cls)(3, 4, dropout=0.5))
    assert len(msgs) == 1
    assert f"{cls}: dropout=0.5 has no effect with num_layers=1" in msgs[0]
    assert m.dropout == 0.5  # still built as asked


@pytest.mark.parametrize("kwargs", [dict(dropout=0.5, num_layers=2), dict(dropout=0.0),
                                    dict(num_layers=1)])
def test_dropout_that_applies_does_not_warn(kwargs):
    m, msgs = _warnings(lambda: nn.LSTM(3, 4, **kwargs))
    assert msgs == []
    x = E.ones(2, 1, 3)
    out, _ = m(x)
    assert tuple(out.shape) == (2, 1, 4)


def test_one_layer_dropout_really_does_nothing():
    E.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = nn.GRU(3, 4, dropout=0.9)
    m.train()
    x = E.linspace(-1, 1, 6).reshape(2, 1, 3)
    a, _ = m(x)
    b, _ = m(x)
    assert a.tolist() == b.tolist()  # no randomness: dropout is never applied


def test_torch_warns_about_one_layer_dropout_too():
    torch = pytest.importorskip("torch")
    _, msgs = _warnings(lambda: torch.nn.LSTM(3, 4, dropout=0.5))
    assert len(msgs) == 1 and "num_layers" in msgs[0]


# ---- LBFGS with a sparse gradient ---------------------------------------------------------------


def _lbfgs_embedding(lib):
    e = lib.nn.Embedding(4, 2, sparse=True)
    with lib.no_grad():
        e.weight.copy_(lib.arange(8.0).reshape(4, 2))
    opt = lib.optim.LBFGS(e.parameters(), max_iter=5)
    idx = lib.tensor([0, 2])

    def closure():
        opt.zero_grad()
        loss = (e(idx) ** 2).sum()
        loss.backward()
        return loss

    first = opt.step(closure)
    return first.item(), [[round(v, 5) for v in row] for row in e.weight.tolist()]


def test_lbfgs_takes_a_sparse_gradient():
    loss, w = _lbfgs_embedding(E)
    assert loss == 0 + 1 + 16 + 25  # rows 0 and 2 of arange(8).reshape(4, 2), squared
    # the quadratic's minimum is reached on the looked-up rows; the others never move
    assert w == [[0.0, 0.0], [2.0, 3.0], [0.0, 0.0], [6.0, 7.0]]


def test_torch_lbfgs_gives_the_same_sparse_step():
    torch = pytest.importorskip("torch")
    assert _lbfgs_embedding(E) == _lbfgs_embedding(torch)
