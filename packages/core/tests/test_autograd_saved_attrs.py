"""Autograd graph introspection as in PyTorch: grad_fn._saved_<name> (the values a node saved
for backward, unpacked: tensors, ints, floats, bools, tuples, None), grad_fn._raw_saved_<name>
(a SavedTensor whose register_hooks(pack, unpack) swaps what is kept), dir(grad_fn) listing
them (torchviz's make_dot(show_saved=True) walks the graph this way), the error after the graph
was freed, and grad_fn names that follow the overload a call picked (sum(dim=None),
squeeze((0,))) or the op PyTorch lowers to (einsum, stack, CPU dropout). Checked against PyTorch
where it is installed, with explicit expectations otherwise."""

from __future__ import annotations

from typing import Any

import ember
import ember.nn as enn
import ember.nn.functional as F
import numpy as np
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

FREED = ("Trying to backward through the graph a second time (or directly access saved tensors "
         "after they have already been freed)")


def _x(*shape: int, lib: Any = ember, seed: int = 0) -> Any:
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lib.tensor(data, requires_grad=True)


def _saved_names(fn: Any) -> list[str]:
    return [a for a in dir(fn) if a.startswith("_saved_")]


def _plain(v: Any) -> Any:
    if hasattr(v, "detach") and hasattr(v, "shape"):
        return ("tensor", tuple(v.shape), v.detach().numpy().round(5).tolist())
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    return v


# ---- _saved_<name>: values ------------------------------------------------------------------


def test_saved_result_is_the_output() -> None:
    x = _x(3)
    y = x.exp()
    fn = y.grad_fn
    assert fn._saved_result.equal(y)
    assert fn._saved_result.grad_fn is fn  # re-linked to the node, as torch's unpacked output
    assert "_saved_result" in dir(fn) and "_raw_saved_result" in dir(fn)


def test_saved_inputs_and_numbers() -> None:
    x, w = _x(3, 4), _x(3, 4, seed=1)
    fn = (x * w).grad_fn
    assert fn._saved_self is x or fn._saved_self.equal(x)
    assert fn._saved_other.equal(w)
    # only what a needed gradient uses is saved: the rest reads as None
    fn = (x * w.detach()).grad_fn
    assert fn._saved_self is None and fn._saved_other.equal(w)
    fn = x.sum(1, keepdim=True).grad_fn
    assert (fn._saved_dim, fn._saved_keepdim, fn._saved_self_sym_sizes) == ((1,), True, (3, 4))
    fn = x.clamp(min=0.25).grad_fn
    assert fn._saved_min == 0.25 and fn._saved_max is None
    fn = x.prod(1).grad_fn
    assert fn._saved_dim == 1 and isinstance(fn._saved_dim, int)
    fn = F.leaky_relu(x, 0.2).grad_fn
    assert fn._saved_negative_slope == pytest.approx(0.2)
    fn = ember.cat([x, w], 1).grad_fn
    assert fn._saved_dim == 1


def test_tensor_list_and_optional_tensors() -> None:
    x = _x(4, 3)
    idx = ember.tensor([0, 2])
    fn = x[idx].grad_fn
    assert fn.name() == "IndexBackward0"
    saved = fn._saved_indices
    assert isinstance(saved, tuple) and saved[0].equal(idx)


def test_unknown_attribute_raises_attribute_error() -> None:
    fn = _x(2).exp().grad_fn
    with pytest.raises(AttributeError, match="_saved_nope"):
        _ = fn._saved_nope
    assert not hasattr(fn, "_raw_saved_nope")
    assert not hasattr(fn, "_saved_")
    with pytest.raises(AttributeError):
        _ = fn.whatever
    # a non-tensor value has no raw SavedTensor
    assert not hasattr(_x(2, 2).sum(0).grad_fn, "_raw_saved_dim")


def test_freed_after_backward() -> None:
    x = _x(3)
    y = x.exp()
    y.sum().backward()
    with pytest.raises(RuntimeError, match=r"Trying to backward through the graph a second time"):
        _ = y.grad_fn._saved_result
    assert FREED in _message(lambda: y.grad_fn._saved_result)
    # non-tensor values outlive the graph, as in torch
    z = x.sum(0)
    z.backward()
    assert z.grad_fn._saved_dim == (0,)
    # retain_graph keeps them
    y2 = x.exp()
    y2.sum().backward(retain_graph=True)
    assert y2.grad_fn._saved_result.equal(y2)


def _message(f: Any) -> str:
    try:
        f()
    except RuntimeError as e:
        return str(e)
    return ""


# ---- _raw_saved_<name>: SavedTensor.register_hooks ------------------------------------------


def test_raw_saved_register_hooks() -> None:
    calls: list[str] = []
    x = _x(4)
    y = x.pow(3)
    raw = y.grad_fn._raw_saved_self
    assert type(raw).__name__ == "SavedTensor"

    def pack(t: Any) -> Any:
        calls.append("pack")
        return t.detach().numpy().copy()

    def unpack(a: Any) -> Any:
        calls.append("unpack")
        return ember.tensor(a)

    raw.register_hooks(pack, unpack)
    assert calls == ["pack"]
    assert y.grad_fn._saved_self.equal(x.detach())  # through unpack
    assert calls == ["pack", "unpack"]
    with pytest.raises(RuntimeError, match="hooks have already been set"):
        raw.register_hooks(pack, unpack)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.detach().numpy() ** 2, rtol=1e-5)
    assert calls.count("unpack") == 2
    with pytest.raises(RuntimeError, match="after it has been freed"):
        y.grad_fn._raw_saved_self.register_hooks(pack, unpack)


def test_raw_saved_errors() -> None:
    x = _x(3)
    fn = (x * _x(3, seed=2).detach()).grad_fn  # self not saved: None
    with pytest.raises(RuntimeError, match="with value None is forbidden"):
        fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(TypeError):
        x.exp().grad_fn._raw_saved_result.register_hooks(1, 2)
    y = x.exp()
    y.grad_fn._raw_saved_result.register_hooks(lambda t: 5, lambda p: p)
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        _ = y.grad_fn._saved_result


def test_raw_saved_output_keeps_graph_for_double_backward() -> None:
    x = _x(3)
    y = x.exp()
    y.grad_fn._raw_saved_result.register_hooks(lambda t: t.detach().clone(), lambda t: t)
    (g,) = ember.autograd.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.exp(x.detach().numpy()), rtol=1e-6)


# ---- other nodes keep working ----------------------------------------------------------------


def test_accumulate_grad_and_custom_function() -> None:
    x = _x(3)
    acc = (x * 2).grad_fn.next_functions[0][0]
    assert acc.name() == "AccumulateGrad" and acc.variable is x
    assert _saved_names(acc) == []

    class Square(ember.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (a,) = ctx.saved_tensors
            return 2 * a * g

    y = Square.apply(x)
    assert y.grad_fn.saved_tensors[0] is x or y.grad_fn.saved_tensors[0].equal(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy())


# ---- grad_fn names ---------------------------------------------------------------------------

NAME_CASES = [
    ("sum()", lambda T, F, x: x.sum(), "SumBackward0"),
    ("sum(dim=None)", lambda T, F, x: x.sum(dim=None), "SumBackward1"),
    ("sum(None)", lambda T, F, x: T.sum(x, None), "SumBackward1"),
    ("sum(0)", lambda T, F, x: x.sum(0), "SumBackward1"),
    ("mean(dim=None)", lambda T, F, x: x.mean(dim=None), "MeanBackward1"),
    ("mean()", lambda T, F, x: x.mean(), "MeanBackward0"),
    ("squeeze()", lambda T, F, x: x.unsqueeze(0).squeeze(), "SqueezeBackward0"),
    ("squeeze(0)", lambda T, F, x: x.unsqueeze(0).squeeze(0), "SqueezeBackward1"),
    ("squeeze((0,))", lambda T, F, x: x.unsqueeze(0).squeeze((0,)), "SqueezeBackward2"),
    ("squeeze([0])", lambda T, F, x: x.unsqueeze(0).squeeze([0]), "SqueezeBackward2"),
    ("stack", lambda T, F, x: T.stack([x, x], 1), "StackBackward0"),
    ("dropout", lambda T, F, x: F.dropout(x, 0.5, training=True), "MulBackward0"),
    ("einsum ij,jk->ik", lambda T, F, x: T.einsum("ij,jk->ik", x, x.t()), "ViewBackward0"),
    ("einsum ij->j", lambda T, F, x: T.einsum("ij->j", x), "SumBackward1"),
    ("einsum ij->ji", lambda T, F, x: T.einsum("ij->ji", x), "PermuteBackward0"),
    ("einsum ij,ij->ij", lambda T, F, x: T.einsum("ij,ij->ij", x, x), "MulBackward0"),
    ("einsum i,j->ij", lambda T, F, x: T.einsum("i,j->ij", x[0], x[1]), "MulBackward0"),
    ("einsum ii", lambda T, F, x: T.einsum("ii", x[:, :3]), "SumBackward1"),
    ("einsum ij,k->ik", lambda T, F, x: T.einsum("ij,k->ik", x, x[0]), "ViewBackward0"),
    ("broadcast_to", lambda T, F, x: T.broadcast_to(x[0], (2, 3, 4)), "ExpandBackward0"),
    ("take_along_dim", lambda T, F, x: T.take_along_dim(x, T.tensor([[0], [1], [2]]), 1),
     "GatherBackward0"),
    ("adaptive_avg_pool2d 1", lambda T, F, x: F.adaptive_avg_pool2d(x[None], 1),
     "MeanBackward1"),
]


@pytest.mark.parametrize("case", NAME_CASES, ids=[c[0] for c in NAME_CASES])
def test_node_names(case: Any) -> None:
    _, f, want = case
    y = f(ember, F, _x(3, 4))
    assert type(y.grad_fn).__name__ == want and y.grad_fn.name() == want
    if torch is not None:
        import torch.nn.functional as tF
        t = f(torch, tF, _x(3, 4, lib=torch))
        assert type(t.grad_fn).__name__ == want


def test_sum_dim_none_saves_like_torch() -> None:
    x = _x(3, 4)
    fn = x.sum(dim=None).grad_fn
    assert (fn._saved_dim, fn._saved_keepdim) == (None, False)
    assert _saved_names(x.sum().grad_fn) == ["_saved_self_sym_sizes"]
    np.testing.assert_allclose(ember.autograd.grad(x.sum(dim=None), x)[0].numpy(), np.ones((3, 4)))
    # a bad dims argument is still a TypeError
    with pytest.raises(TypeError):
        x.sum(dim="a")
    with pytest.raises(TypeError):
        x.squeeze("a")


def test_stack_and_cpu_dropout_gradients() -> None:
    x, w = _x(3, 4), _x(3, 4, seed=1)
    y = ember.stack([x, w], 1)
    assert y.grad_fn._saved_dim == 1
    (y * ember.arange(24.0).reshape(3, 2, 4)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.arange(24.0).reshape(3, 2, 4)[:, 0])
    np.testing.assert_allclose(w.grad.numpy(), np.arange(24.0).reshape(3, 2, 4)[:, 1])
    x.grad = None
    y = F.dropout(x, 0.25, training=True)
    noise = y.grad_fn._saved_other
    assert set(np.unique(noise.numpy())) <= {0.0, np.float32(1 / 0.75)}
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() * noise.numpy())
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), noise.numpy())
    z = F.dropout(x, 1.0, training=True)
    assert z.grad_fn.name() == "MulBackward0" and not z.detach().numpy().any()


# ---- against PyTorch: saved names and values --------------------------------------------------

# Attributes PyTorch saves only to reshape gradients; ember keeps them as node metadata.
_TORCH_ONLY = ("_sym_strides", "_scalar_type", "_options", "_sym_numel", "_info")

SAVED_CASES = [
    "a.exp()", "a.tanh()", "a.sigmoid()", "a.relu()", "a * b", "a + b",
    "a.pow(2)", "a.clamp(min=0.1)", "a.sum()", "a.sum(1)", "a.sum(dim=None)", "a.mean()",
    "a.max(1)[0]", "a.logsumexp(1)", "a.log_softmax(1)", "a.softmax(1)", "a.t()",
    "a.permute(1, 0)", "a.view(12)", "a.transpose(0, 1)",
    "T.mm(a, m)", "T.addmm(c, a, m)", "T.cat([a, b], 1)", "T.stack([a, b])",
    "a[idx]", "F.linear(a, w2, bias)", "F.gelu(a)", "F.silu(a)",
    "F.leaky_relu(a, 0.1)", "a.prod()", "a.prod(1)",
]


def _saved(fn: Any) -> dict[str, Any]:
    return {k: _plain(getattr(fn, k)) for k in _saved_names(fn) if not k.endswith(_TORCH_ONLY)}


def _env(T: Any, F_: Any) -> dict[str, Any]:
    lib = T
    return {"T": T, "F": F_, "a": _x(3, 4, lib=lib), "b": _x(3, 4, lib=lib, seed=1),
            "c": _x(3, 5, lib=lib, seed=2), "m": _x(4, 5, lib=lib, seed=3),
            "w2": _x(5, 4, lib=lib, seed=4), "bias": _x(5, lib=lib, seed=5),
            "idx": T.tensor([0, 2]), "idx2": T.tensor([[0, 1], [2, 3], [1, 1]])}


@needs_torch
@pytest.mark.parametrize("expr", SAVED_CASES)
def test_saved_attrs_match_torch(expr: str) -> None:
    import torch.nn.functional as tF
    e = eval(expr, _env(ember, F)).grad_fn  # noqa: S307 - the cases above
    t = eval(expr, _env(torch, tF)).grad_fn  # noqa: S307
    assert type(e).__name__ == type(t).__name__
    assert _saved(e) == _saved(t)


# ---- a torchviz-like graph walk ---------------------------------------------------------------


def _walk(root: Any) -> list[tuple[str, dict[str, Any], bool]]:
    """make_dot(show_saved=True)'s view: each node once, depth first, with its saved values and
    whether it is a leaf's AccumulateGrad (which shows .variable)."""
    seen: set[int] = set()
    keep = []  # the node objects stay alive, so no id is reused for another node
    out = []

    def visit(fn: Any) -> None:
        if fn is None or id(fn) in seen:
            return
        seen.add(id(fn))
        keep.append(fn)
        saved = {}
        for attr in dir(fn):
            if attr.startswith("_saved_") and not attr.endswith(_TORCH_ONLY):
                v = getattr(fn, attr)
                saved[attr] = tuple(v.shape) if hasattr(v, "shape") else v
        out.append((type(fn).__name__, saved, hasattr(fn, "variable")))
        for nxt, _ in fn.next_functions:
            visit(nxt)

    visit(root)
    return out


def _mlp_graph(nn: Any, lib: Any) -> Any:
    lib.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = lib.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    return net(x).sum()


MLP_WALK = [
    ("SumBackward0", {"_saved_self_sym_sizes": (3, 2)}, False),
    ("AddmmBackward0", {"_saved_alpha": 1, "_saved_beta": 1, "_saved_mat1": (3, 8),
                        "_saved_mat1_sym_sizes": (3, 8), "_saved_mat2": (8, 2),
                        "_saved_mat2_sym_sizes": (8, 2)}, False),
    ("AccumulateGrad", {}, True),
    ("ReluBackward0", {"_saved_result": (3, 8)}, False),
    ("AddmmBackward0", {"_saved_alpha": 1, "_saved_beta": 1, "_saved_mat1": (3, 4),
                        "_saved_mat1_sym_sizes": (3, 4), "_saved_mat2": None,
                        "_saved_mat2_sym_sizes": (4, 8)}, False),
    ("AccumulateGrad", {}, True),
    ("TBackward0", {}, False),
    ("AccumulateGrad", {}, True),
    ("TBackward0", {}, False),
    ("AccumulateGrad", {}, True),
]


def test_mlp_graph_walk() -> None:
    assert _walk(_mlp_graph(enn, ember).grad_fn) == MLP_WALK


@needs_torch
def test_mlp_graph_walk_matches_torch() -> None:
    assert _walk(_mlp_graph(torch.nn, torch).grad_fn) == MLP_WALK
    assert _walk(_mlp_graph(enn, ember).grad_fn) == _walk(_mlp_graph(torch.nn, torch).grad_fn)
