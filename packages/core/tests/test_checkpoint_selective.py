"""Selective activation checkpointing (``create_selective_checkpoint_contexts``) and the rest of
``torch.utils.checkpoint``'s public names in ``ember.utils.checkpoint``: ops a policy saves are
not run again by the recomputation in backward (counted with a dispatch mode, in ember and in
PyTorch alike) and the gradients equal those without checkpointing."""

from __future__ import annotations

import contextlib
import functools
import warnings

import ember
import numpy as np
import pytest
from ember.utils import checkpoint as ec
from ember.utils._python_dispatch import TorchDispatchMode

try:
    import torch
    import torch.utils.checkpoint as tc
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


class _Count(TorchDispatchMode):
    """Counts the ops that reach it, by name (``'mm'``, ``'sigmoid'``...)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


if torch is not None:
    class _TorchCount(TorchMode):
        def __init__(self) -> None:
            super().__init__()
            self.counts: dict[str, int] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            self.counts[name] = self.counts.get(name, 0) + 1
            return func(*args, **(kwargs or {}))


def _fn(M, x, y):
    return M.sigmoid(M.mm(M.mm(x, y), y)) * y


def _inputs(M, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal((4, 4)).astype(np.float32)
    return M.tensor(a, requires_grad=True), M.tensor(b, requires_grad=True)


def _policies(M, mod):
    aten = M.ops.aten

    def save_mm_and_sigmoid(ctx, op, *args, **kwargs):
        assert ctx.is_recompute is False
        if op in [aten.mm.default, aten.sigmoid.default]:
            return mod.CheckpointPolicy.MUST_SAVE
        return mod.CheckpointPolicy.PREFER_RECOMPUTE

    def save_all_bool(ctx, op, *args, **kwargs):
        return True

    return {
        "none": None,
        "list_mm": [aten.mm.default],
        "fn_mm_sigmoid": save_mm_and_sigmoid,
        "bool_all": save_all_bool,
    }


def _run(M, mod, Count, policy):
    x, y = _inputs(M)
    kwargs = {} if policy is None else {
        "context_fn": functools.partial(mod.create_selective_checkpoint_contexts, policy)}
    out = mod.checkpoint(_fn, M, x, y, use_reentrant=False, **kwargs)
    with Count() as c:
        out.sum().backward()
    return c.counts, x.grad.detach().numpy().copy(), y.grad.detach().numpy().copy()


def _plain_grads(M):
    x, y = _inputs(M)
    _fn(M, x, y).sum().backward()
    return x.grad.detach().numpy(), y.grad.detach().numpy()


@pytest.mark.parametrize("name", ["none", "list_mm", "fn_mm_sigmoid", "bool_all"])
def test_saved_ops_are_not_recomputed_and_grads_match(name):
    counts, gx, gy = _run(ember, ec, _Count, _policies(ember, ec)[name])
    px, py = _plain_grads(ember)
    np.testing.assert_allclose(gx, px, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gy, py, rtol=1e-5, atol=1e-6)
    # backward itself runs 4 mm (2 per mm) and one sigmoid_backward; the recomputation adds
    # the ops the policy did not save
    expect_mm = {"none": 6, "list_mm": 4, "fn_mm_sigmoid": 4, "bool_all": 4}[name]
    expect_sigmoid = {"none": 1, "list_mm": 1, "fn_mm_sigmoid": 0, "bool_all": 0}[name]
    assert counts.get("mm", 0) == expect_mm
    assert counts.get("sigmoid", 0) == expect_sigmoid
    assert counts.get("sigmoid_backward", 0) == 1


@needs_torch
@pytest.mark.parametrize("name", ["none", "list_mm", "fn_mm_sigmoid", "bool_all"])
def test_recomputed_op_counts_and_grads_match_torch(name):
    e_counts, egx, egy = _run(ember, ec, _Count, _policies(ember, ec)[name])
    t_counts, tgx, tgy = _run(torch, tc, _TorchCount, _policies(torch, tc)[name])
    for op in ("mm", "sigmoid", "sigmoid_backward"):
        assert e_counts.get(op, 0) == t_counts.get(op, 0), op
    np.testing.assert_allclose(egx, tgx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(egy, tgy, rtol=1e-5, atol=1e-6)


def _region(M):
    def f(x):
        h = M.mm(x, x)
        return h, M.sin(h)
    return f


def _mutation_outcome(M, mod, allow):
    x = M.ones(2, 2, requires_grad=True)
    ctx_fn = functools.partial(mod.create_selective_checkpoint_contexts, [M.ops.aten.mm.default],
                               allow_cache_entry_mutation=allow)
    h, s = mod.checkpoint(_region(M), x, use_reentrant=False, context_fn=ctx_fn)
    with M.no_grad():
        h.mul_(0)  # the cached mm output shares h's version counter
    try:
        s.sum().backward()
    except RuntimeError as e:
        return "error", str(e)
    return "ok", x.grad.tolist()


def test_mutated_cache_entry_raises_unless_allowed():
    kind, msg = _mutation_outcome(ember, ec, False)
    assert kind == "error" and "has been mutated" in msg
    kind, grad = _mutation_outcome(ember, ec, True)
    assert kind == "ok"  # the cached (zeroed) value is used: cos(0) = 1 -> grad 2 * x sums
    assert grad == [[4.0, 4.0], [4.0, 4.0]]


@needs_torch
def test_mutated_cache_entry_matches_torch():
    for allow in (False, True):
        e, t = _mutation_outcome(ember, ec, allow), _mutation_outcome(torch, tc, allow)
        assert e[0] == t[0]
        if e[0] == "ok":
            assert e[1] == t[1]


def _backward_twice(M, mod):
    x = M.ones(2, 2, requires_grad=True)
    ctx_fn = functools.partial(mod.create_selective_checkpoint_contexts, [M.ops.aten.mm.default])
    y = mod.checkpoint(lambda t: M.sin(M.mm(t, t)), x, use_reentrant=False, context_fn=ctx_fn)
    y.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward an extra time"):
        y.sum().backward()


def test_second_backward_through_a_selective_region_raises():
    _backward_twice(ember, ec)
    if torch is not None:
        _backward_twice(torch, tc)


def test_policy_sees_ember_ops_and_outputs():
    seen = []

    def policy(ctx, op, *args, **kwargs):
        seen.append((op, ctx.is_recompute, isinstance(ctx.op_output, ember.Tensor)))
        return ec.CheckpointPolicy.PREFER_RECOMPUTE

    x = ember.ones(2, 2, requires_grad=True)
    ctx_fn = functools.partial(ec.create_selective_checkpoint_contexts, policy)
    y = ec.checkpoint(lambda t: ember.mm(t, t).relu(), x, use_reentrant=False, context_fn=ctx_fn)
    n = len(seen)
    y.sum().backward()
    assert len(seen) == n  # the policy only runs in the forward pass
    ops = [op for op, _, _ in seen]
    assert ember.ops.aten.mm.default in ops and ember.ops.aten.relu.default in ops
    assert all(r is False and o for _, r, o in seen)
    assert {ember.ops.aten.mm.default: 1}.get(ops[0]) == 1  # hashes like ember.ops.aten.mm


def test_bad_policies_raise_like_torch():
    with pytest.raises(ValueError, match="Expected op in `op_list` to be an OpOverload"):
        ec.create_selective_checkpoint_contexts([ember.mm])
    with pytest.raises(TypeError, match="either a function or a list of ops"):
        ec.create_selective_checkpoint_contexts(3)
    if torch is not None:
        with pytest.raises(ValueError, match="Expected op in `op_list` to be an OpOverload"):
            tc.create_selective_checkpoint_contexts([torch.mm])
        with pytest.raises(TypeError, match="either a function or a list of ops"):
            tc.create_selective_checkpoint_contexts(3)


def test_selective_checkpoint_with_rng_matches_plain():
    # dropout inside the region: the recomputation sees the forward's random numbers
    def f(t):
        return ember.nn.functional.dropout(ember.mm(t, t), 0.5, training=True).tanh()

    x = ember.randn(8, 8, requires_grad=True)
    ctx_fn = functools.partial(ec.create_selective_checkpoint_contexts, [ember.ops.aten.mm.default])
    state = ember.get_rng_state()
    y = ec.checkpoint(f, x, use_reentrant=False, context_fn=ctx_fn)
    y.sum().backward()
    g = x.grad.clone()
    x.grad = None
    ember.set_rng_state(state)
    f(x).sum().backward()
    np.testing.assert_allclose(g.numpy(), x.grad.numpy(), rtol=1e-6)


def _attention_block(M, x, w):
    F = M.nn.functional
    h = x @ w  # (B, H, L, E) @ (E, E)
    a = F.scaled_dot_product_attention(h, h, h, is_causal=True)
    return M.tanh(a).sum(-1)


def _attention_run(M, mod, Count, policy):
    rng = np.random.default_rng(3)
    x = M.tensor(rng.standard_normal((1, 2, 5, 8)).astype(np.float64), requires_grad=True)
    w = M.tensor(rng.standard_normal((8, 8)).astype(np.float64), requires_grad=True)
    kwargs = {} if policy is None else {
        "context_fn": functools.partial(mod.create_selective_checkpoint_contexts, policy)}
    out = mod.checkpoint(_attention_block, M, x, w, use_reentrant=False, **kwargs)
    with Count() as c:
        out.sum().backward()
    x2 = x.detach().clone().requires_grad_(True)
    w2 = w.detach().clone().requires_grad_(True)
    _attention_block(M, x2, w2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-10, atol=1e-12)
    return sum(n for op, n in c.counts.items() if op.startswith("_scaled_dot_product")
               and "backward" not in op)


def test_policy_naming_torchs_attention_kernels_saves_embers():
    # a policy written for PyTorch (torchtitan's list) names its flash / efficient kernels;
    # ember's fused kernel is equal to each of them
    aten = ember.ops.aten
    save = [aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_cudnn_attention.default]

    def policy(ctx, op, *args, **kwargs):
        if op in save:
            return ec.CheckpointPolicy.MUST_SAVE
        return ec.CheckpointPolicy.PREFER_RECOMPUTE

    assert _attention_run(ember, ec, _Count, None) == 1  # recomputed
    assert _attention_run(ember, ec, _Count, policy) == 0  # saved
    if torch is not None:
        taten = torch.ops.aten
        tsave = [taten._scaled_dot_product_flash_attention_for_cpu.default,
                 taten._scaled_dot_product_flash_attention.default,
                 taten._scaled_dot_product_efficient_attention.default]
        assert _attention_run(torch, tc, _TorchCount, None) == 1
        assert _attention_run(torch, tc, _TorchCount, tsave) == 0


# ---- the other public names ---------------------------------------------------------------------

@needs_torch
def test_all_names_of_torch_exist():
    missing = [n for n in tc.__all__ if not hasattr(ec, n)]
    assert missing == [], missing
    assert set(ec.__all__) == set(tc.__all__)


def test_checkpoint_policy_and_context():
    assert [(p.name, p.value) for p in ec.CheckpointPolicy] == [
        ("MUST_SAVE", 0), ("PREFER_SAVE", 1), ("MUST_RECOMPUTE", 2), ("PREFER_RECOMPUTE", 3),
        ("MUST_CPU_OFFLOAD", 4), ("PREFER_CPU_OFFLOAD", 5)]
    if torch is not None:
        assert [(p.name, p.value) for p in ec.CheckpointPolicy] == [
            (p.name, p.value) for p in tc.CheckpointPolicy]
    c = ec.SelectiveCheckpointContext(is_recompute=True)
    assert c.is_recompute is True and c.op_output is None
    with pytest.raises(TypeError):
        ec.SelectiveCheckpointContext(True)  # keyword-only, as in PyTorch
    assert issubclass(ec.CheckpointError, RuntimeError)
    assert ember.ops.aten.detach.default in ec.SAC_IGNORED_OPS


def test_detach_variable_and_backward_validity():
    for M, mod in [(ember, ec)] + ([(torch, tc)] if torch is not None else []):
        a = M.ones(2, requires_grad=True) * 2
        d, n, b = mod.detach_variable((a, "s", M.zeros(1)))
        assert d.grad_fn is None and d.requires_grad and n == "s" and not b.requires_grad
        with pytest.raises(RuntimeError, match="Only tuple of tensors is supported. Got "
                                               "Unsupported input type: list"):
            mod.detach_variable([a])
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            mod.check_backward_validity([M.ones(1), 3])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mod.check_backward_validity([M.ones(1, requires_grad=True)])


def test_checkpoint_function_is_the_reentrant_function():
    assert issubclass(ec.CheckpointFunction, ember.autograd.Function)
    for M, mod in [(ember, ec)] + ([(torch, tc)] if torch is not None else []):
        x = M.ones(3, requires_grad=True)
        y = mod.CheckpointFunction.apply(lambda t: (t * 3).exp(), True, x)
        assert y.requires_grad
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(3.0) * np.ones(3), rtol=1e-5)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
            mod.checkpoint(lambda t: t * 2, M.ones(2), use_reentrant=True)


def test_device_states_and_default_device_type():
    assert ec.get_device_states(ember.ones(2), [ember.ones(1)], 3) == ([], [])
    ec.set_device_states([], [])
    prev = ec.DefaultDeviceType.get_device_type()
    assert prev == (ember.accelerator.current_accelerator(True).type
                    if ember.accelerator.current_accelerator(True) is not None else "cpu")
    try:
        ec.DefaultDeviceType.set_device_type("meta")
        assert ec.DefaultDeviceType.get_device_type() == "meta"
        ec.set_device_states([0], [None])  # meta: nothing to restore
    finally:
        ec.DefaultDeviceType.set_device_type(prev)
    if torch is not None:
        assert tc.get_device_states(torch.ones(2), [torch.ones(1)], 3) == ([], [])
        assert ec.DefaultDeviceType.get_device_type() == tc.DefaultDeviceType.get_device_type()


def _two_backwards(M, mod, Count, group):
    x = M.ones(3, requires_grad=True)
    y = M.ones(3, requires_grad=True)

    def region(u, v):  # two parts that share no saved tensor
        return M.sin(M.exp(u)), M.cos(M.exp(v))

    a, b = mod.checkpoint(region, x, y, use_reentrant=False)
    ctx = mod.GraphExecGroup() if group else contextlib.nullcontext()
    with Count() as c, ctx:
        a.sum().backward(retain_graph=True)
        b.sum().backward(retain_graph=True)
    e = np.exp(1.0)
    np.testing.assert_allclose(x.grad.numpy(), np.cos(e) * e * np.ones(3), rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), -np.sin(e) * e * np.ones(3), rtol=1e-6)
    return c.counts.get("exp", 0)


def test_graph_exec_group():
    # ember recomputes the region (2 exp) once for both disjoint backward calls, group or not
    assert _two_backwards(ember, ec, _Count, True) == 2
    assert _two_backwards(ember, ec, _Count, False) == 2
    with ec.GraphExecGroup() as g:
        assert ec.GraphExecGroup._get_current_group() is g
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with ec.GraphExecGroup():
                pass
    assert ec.GraphExecGroup._get_current_group() is None
    if torch is not None:
        assert _two_backwards(torch, tc, _TorchCount, True) == 2


def test_early_stop_and_debug_switches_are_context_managers():
    with ec.set_checkpoint_early_stop(False):
        assert ec._enable_checkpoint_early_stop is False
        with ec.set_checkpoint_debug_enabled(True):
            assert ec._checkpoint_debug_enabled is True
            x = ember.ones(2, requires_grad=True)
            ec.checkpoint(lambda t: t.sin(), x, use_reentrant=False).sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), np.cos(np.ones(2)), rtol=1e-6)
        assert ec._checkpoint_debug_enabled is None
    assert ec._enable_checkpoint_early_stop is None
