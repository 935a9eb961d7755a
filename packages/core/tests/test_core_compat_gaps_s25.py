"""Gaps in ember's core against PyTorch 2.13 closed in session 25, each pinned with explicit
values and compared with PyTorch where it is installed:

* ``grad_fn.metadata``: one dict per graph node, kept with the node whichever Python object
  reads it (``y.grad_fn.metadata['k'] = 1`` is seen by the next ``y.grad_fn.metadata``), on
  built-in nodes, AccumulateGrad nodes and custom Function nodes; read-only as an attribute.
* ``torch.batch_norm`` / ``instance_norm`` take their 9th positional argument
  ``cudnn_enabled``, ``layer_norm`` its ``cudnn_enable`` and ``group_norm`` its
  ``cudnn_enabled`` (a bool; anything else is a TypeError naming it).
* Tensor methods whose PyTorch arguments are all keyword-only refuse them positionally
  (``x.round(1)``, ``x.aminmax(0)``, ``x.round_(1)``, ``x.contiguous(ember.channels_last)``,
  ``x.bernoulli(generator)``), as PyTorch does; ``x.sum(0, True)`` stays positional.
"""

from __future__ import annotations

import ember
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


# ---- grad_fn.metadata and grad_fn identity -----------------------------------------------------
def test_metadata_persists_across_grad_fn_reads() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).sum()
    y.grad_fn.metadata["k"] = 1
    assert y.grad_fn.metadata == {"k": 1}
    assert y.grad_fn.metadata is y.grad_fn.metadata
    # a node reached through next_functions keeps its own dict too
    mul = y.grad_fn.next_functions[0][0]
    mul.metadata["tag"] = "mul"
    del mul
    assert y.grad_fn.next_functions[0][0].metadata == {"tag": "mul"}
    assert y.grad_fn.metadata == {"k": 1}
    # the leaf's AccumulateGrad node
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad"
    acc.metadata["leaf"] = True
    assert y.grad_fn.next_functions[0][0].next_functions[0][0].metadata == {"leaf": True}
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]
    assert y.grad_fn.metadata == {"k": 1}  # still there after backward


def test_metadata_is_per_node_and_read_only() -> None:
    x = ember.ones(2, requires_grad=True)
    a, b = x * 2, x * 3
    a.grad_fn.metadata["n"] = "a"
    assert b.grad_fn.metadata == {}
    assert a.grad_fn is a.grad_fn  # the same wrapper while one is alive
    with pytest.raises(AttributeError):
        a.grad_fn.metadata = {}
    # nodes made after a noted node is freed start with empty dicts (even at a reused address)
    del a
    for _ in range(200):
        c = x * 4
        assert c.grad_fn.metadata == {}
        c.grad_fn.metadata["fresh"] = 1
        del c


def test_metadata_of_custom_function_node() -> None:
    class Double(ember.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            assert ctx.metadata == {"seen": 1}
            return g * 2

    x = ember.ones(3, requires_grad=True)
    y = Double.apply(x)
    y.grad_fn.metadata["seen"] = 1
    assert y.grad_fn.metadata == {"seen": 1}
    with pytest.raises(AttributeError):
        y.grad_fn.metadata = {}
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


@needs_torch
def test_metadata_matches_torch() -> None:
    for lib in (ember, torch):
        x = lib.ones(2, requires_grad=True)
        y = (x.exp() * 3).sum()
        y.grad_fn.metadata["k"] = [1]
        y.grad_fn.next_functions[0][0].metadata["m"] = 2
        assert y.grad_fn.metadata == {"k": [1]}
        assert y.grad_fn.next_functions[0][0].metadata == {"m": 2}
        assert y.grad_fn.next_functions[0][0].next_functions[0][0].metadata == {}
        assert type(y.grad_fn.metadata) is dict
        assert y.grad_fn is y.grad_fn


# ---- torch.batch_norm & co: the cudnn switch ---------------------------------------------------
def _norm_input(lib):
    return lib.tensor([[[1.0, 3.0], [2.0, 6.0]], [[5.0, 7.0], [4.0, 0.0]]])


def test_norms_take_the_cudnn_switch() -> None:
    x = _norm_input(ember)
    bn = ember.batch_norm(x, None, None, None, None, True, 0.1, 0.0, True)
    assert bn.tolist() == ember.batch_norm(x, None, None, None, None, True, 0.1, 0.0).tolist()
    # channel 0 holds 1, 3, 5, 7 (mean 4, variance 5)
    assert bn[:, 0].flatten().tolist() == pytest.approx([-3 / 5**0.5, -1 / 5**0.5,
                                                         1 / 5**0.5, 3 / 5**0.5])
    rm, rv = ember.zeros(2), ember.ones(2)
    ember.batch_norm(x, None, None, rm, rv, True, 0.5, 1e-5, False)
    assert rm.tolist() == pytest.approx([2.0, 1.5])
    inn = ember.instance_norm(x, None, None, None, None, True, 0.1, 0.0, False)
    assert inn[0, 0].tolist() == pytest.approx([-1.0, 1.0])
    ln = ember.layer_norm(x, [2], None, None, 0.0, False)
    assert ln[0, 1].tolist() == pytest.approx([-1.0, 1.0])
    gn = ember.group_norm(x, 2, None, None, 0.0, True)
    assert gn[1, 1].tolist() == pytest.approx([1.0, -1.0])
    assert ember.layer_norm(x, [2], cudnn_enable=True).tolist() == \
        ember.layer_norm(x, [2]).tolist()
    assert ember.group_norm(x, 1, cudnn_enabled=False).tolist() == \
        ember.group_norm(x, 1).tolist()


def test_norms_refuse_a_non_bool_switch() -> None:
    x = _norm_input(ember)
    with pytest.raises(TypeError, match=r"batch_norm\(\): argument 'cudnn_enabled' \(position 9\)"):
        ember.batch_norm(x, None, None, None, None, True, 0.1, 1e-5, 1)
    with pytest.raises(TypeError, match="instance_norm.*cudnn_enabled.*NoneType"):
        ember.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, None)
    with pytest.raises(TypeError, match=r"layer_norm\(\): argument 'cudnn_enable' \(position 6\)"):
        ember.layer_norm(x, [2], None, None, 1e-5, 1)
    with pytest.raises(TypeError, match="group_norm.*cudnn_enabled"):
        ember.group_norm(x, 2, None, None, 1e-5, "yes")


def test_norm_gradients_with_the_switch() -> None:
    x = ember.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=ember.float64,
                     requires_grad=True)
    w = ember.tensor([1.5, -0.5, 2.0], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(
        lambda a, b: ember.layer_norm(a, [3], b, None, 1e-5, False), (x, w))
    assert ember.autograd.gradcheck(
        lambda a, b: ember.batch_norm(a, b, None, None, None, True, 0.1, 1e-5, True), (x, w))


@needs_torch
def test_norms_match_torch() -> None:
    ex, tx = _norm_input(ember), _norm_input(torch)
    ew, tw = ember.tensor([2.0, -1.0]), torch.tensor([2.0, -1.0])
    eb, tb = ember.tensor([0.5, 0.0]), torch.tensor([0.5, 0.0])
    pairs = [
        (ember.batch_norm(ex, ew, eb, None, None, True, 0.1, 1e-5, False),
         torch.batch_norm(tx, tw, tb, None, None, True, 0.1, 1e-5, False)),
        (ember.instance_norm(ex, ew, eb, None, None, True, 0.1, 1e-5, True),
         torch.instance_norm(tx, tw, tb, None, None, True, 0.1, 1e-5, True)),
        (ember.layer_norm(ex, [2], ew, eb, 1e-5, False),
         torch.layer_norm(tx, [2], tw, tb, 1e-5, False)),
        (ember.group_norm(ex, 1, ew, eb, 1e-5, False),
         torch.group_norm(tx, 1, tw, tb, 1e-5, False)),
    ]
    for e, t in pairs:
        assert e.flatten().tolist() == pytest.approx(t.flatten().tolist(), abs=1e-5)
    for lib, x in ((ember, ex), (torch, tx)):
        with pytest.raises(TypeError, match="cudnn_enabled"):
            lib.batch_norm(x, None, None, None, None, True, 0.1, 1e-5, 1)


# ---- keyword-only arguments of Tensor methods --------------------------------------------------
def test_keyword_only_method_arguments() -> None:
    x = ember.tensor([[1.25, -2.5], [3.75, 0.5]], dtype=ember.float64)
    with pytest.raises(TypeError):
        x.round(1)
    assert x.round(decimals=1).tolist() == [[1.2, -2.5], [3.8, 0.5]]
    with pytest.raises(TypeError):
        x.clone().round_(1)
    assert x.clone().round_(decimals=0).tolist() == [[1.0, -2.0], [4.0, 0.0]]
    with pytest.raises(TypeError):
        x.aminmax(0)
    mn, mx = x.aminmax(dim=0)
    assert mn.tolist() == [1.25, -2.5] and mx.tolist() == [3.75, 0.5]
    with pytest.raises(TypeError):
        x.bernoulli(ember.Generator())
    with pytest.raises(TypeError):
        x.contiguous(ember.contiguous_format)
    assert x.t().contiguous(memory_format=ember.contiguous_format).stride() == (2, 1)
    # arguments PyTorch takes positionally stay positional
    assert x.sum(0, True).tolist() == [[5.0, -2.0]]
    assert x.round().tolist() == [[1.0, -2.0], [4.0, 0.0]]
    assert ember.round(x, decimals=1).tolist() == [[1.2, -2.5], [3.8, 0.5]]


@needs_torch
def test_keyword_only_method_arguments_match_torch() -> None:
    calls = [
        ("round", (1,)), ("round", ()), ("round_", (1,)), ("aminmax", (0,)),
        ("contiguous", (None,)), ("sum", (0, True)), ("amax", (0, True)),
    ]
    for name, args in calls:
        outcome = []
        for lib in (ember, torch):
            x = lib.tensor([[1.25, -2.5], [3.75, 0.5]], dtype=lib.float64)
            if args == (None,):
                args = (lib.contiguous_format,)
            try:
                r = getattr(x, name)(*args)
                outcome.append(("ok", r.tolist() if isinstance(r, lib.Tensor) else None))
            except TypeError:
                outcome.append(("TypeError", None))
        assert outcome[0] == outcome[1], (name, args, outcome)


def test_tensor_factories_keyword_only_dtype() -> None:
    with pytest.raises(TypeError, match=r"tensor\(\) takes 1 positional argument but 2"):
        ember.tensor([1, 2], ember.float64)
    with pytest.raises(TypeError, match=r"as_tensor\(\) takes 1 positional argument but 2"):
        ember.as_tensor([1, 2], ember.float64)
    t = ember.tensor([1, 2], dtype=ember.float64)
    assert t.dtype == ember.float64 and t.tolist() == [1.0, 2.0]
    assert ember.as_tensor(t, dtype=ember.float64) is t


@needs_torch
def test_tensor_factories_keyword_only_dtype_match_torch() -> None:
    for lib in (ember, torch):
        for fn in (lib.tensor, lib.as_tensor):
            with pytest.raises(TypeError):
                fn([1.5], lib.float64)
            assert fn([1.5], dtype=lib.float64).tolist() == [1.5]
