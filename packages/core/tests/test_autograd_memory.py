"""Memory released by backward, read from the CPU allocator's statistics: after backward only
the gradients (and what the caller still holds) remain; saved tensors go as soon as their node
has run; peak memory of an MLP's backward stays within one layer's working set of what the
forward pass keeps. Graphs: an MLP, a custom Function, tensor/node hooks, create_graph."""

import gc

import ember
import numpy as np

WIDTH, LAYERS, BATCH = 32, 6, 256


def nbytes(*ts) -> int:
    # float32/float64 tensors of at least 64 bytes: the allocator's 64-byte blocks hold them
    # exactly when their size is a multiple of 64.
    total = 0
    for t in ts:
        n = t.numel() * t.element_size()
        assert n % 64 == 0
        total += n
    return total


def mlp_params():
    ember.manual_seed(0)
    ws = [(ember.randn(WIDTH, WIDTH) * WIDTH**-0.5).requires_grad_() for _ in range(LAYERS)]
    bs = [ember.zeros(WIDTH).requires_grad_() for _ in range(LAYERS)]
    return ws, bs


def mlp(x, ws, bs):
    h = x
    for w, b in zip(ws, bs):
        h = (h @ w + b).tanh()
    return h


def test_mlp_backward_leaves_only_the_gradients():
    ws, bs = mlp_params()
    x = ember.randn(BATCH, WIDTH)
    gc.collect()
    before = ember.memory_allocated()
    loss = mlp(x, ws, bs).sum()
    loss.backward()
    # The graph (and every activation it saved) is gone although `loss` is still alive.
    # + 8: the scalar loss (4 bytes in the allocator's tiny pool).
    assert ember.memory_allocated() == before + nbytes(*[p.grad for p in ws + bs]) + 8
    del loss
    for p in ws + bs:
        p.grad = None
    assert ember.memory_allocated() == before


def test_mlp_backward_peak_is_the_saved_activations_plus_one_layer():
    ws, bs = mlp_params()
    x = ember.randn(BATCH, WIDTH)
    act = BATCH * WIDTH * 4
    gc.collect()
    before = ember.memory_allocated()
    ember.reset_peak_memory_stats()
    mlp(x, ws, bs).sum().backward()
    peak = ember.max_memory_allocated() - before
    grads = nbytes(*[p.grad for p in ws + bs])
    # Forward keeps one activation per layer (and briefly one more). In backward each saved
    # activation is freed once its node ran, so a layer's backward holds its incoming gradient
    # and the one it produces where forward held two activations (tanh's backward must fit in
    # one buffer): 7.125 activations here, 9 when tanh's backward held three temporaries.
    assert peak <= LAYERS * act + act + act // 2 + grads


def test_retain_graph_keeps_saved_tensors_until_the_graph_goes():
    ws, bs = mlp_params()
    x = ember.randn(BATCH, WIDTH)
    gc.collect()
    before = ember.memory_allocated()
    loss = mlp(x, ws, bs).sum()
    loss.backward(retain_graph=True)
    grads = nbytes(*[p.grad for p in ws + bs])
    assert ember.memory_allocated() >= before + grads + LAYERS * BATCH * WIDTH * 4
    loss.backward()  # the second pass frees them
    assert ember.memory_allocated() == before + grads + 8
    del loss
    for p in ws + bs:
        p.grad = None
    assert ember.memory_allocated() == before


def test_custom_function_saved_tensors_are_released():
    class MulExp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            e = b.exp()
            ctx.save_for_backward(a, e)
            return a * e

        @staticmethod
        def backward(ctx, g):
            a, e = ctx.saved_tensors
            return g * e, g * a * e

    a = ember.randn(16, 16, dtype=ember.float64).requires_grad_()
    b = ember.randn(16, 16, dtype=ember.float64).requires_grad_()
    gc.collect()
    before = ember.memory_allocated()
    out = MulExp.apply(a * 1.5, b)
    out.sum().backward()
    assert ember.memory_allocated() == before + nbytes(out, a.grad, b.grad)
    np.testing.assert_allclose(b.grad.numpy(), 1.5 * a.detach().numpy() * np.exp(b.detach().numpy()))
    del out
    a.grad = b.grad = None
    assert ember.memory_allocated() == before


def test_hooks_do_not_keep_memory():
    x = ember.randn(32, 32).requires_grad_()
    seen = []
    gc.collect()
    before = ember.memory_allocated()
    h = x * 2
    h.register_hook(lambda g: g * 0.5)  # replaces the gradient
    node = h.grad_fn
    node.register_prehook(lambda gs: seen.append("pre"))
    node.register_hook(lambda gi, go: seen.append("post"))
    x.register_post_accumulate_grad_hook(lambda t: seen.append("acc"))
    loss = (h * h).sum()
    del h, node
    loss.backward()
    assert seen == ["pre", "post", "acc"]
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.detach().numpy(), rtol=1e-6)
    del loss
    assert ember.memory_allocated() == before + nbytes(x.grad)
    x.grad = None
    assert ember.memory_allocated() == before


def test_create_graph_memory_is_released_with_the_graph():
    x = ember.randn(24, 24, dtype=ember.float64).requires_grad_()
    gc.collect()
    before = ember.memory_allocated()
    y = (x.sin() * x).sum()
    (g,) = ember.autograd.grad(y, x, create_graph=True)  # g carries its own graph
    (gg,) = ember.autograd.grad(g.sum(), x)
    expected = 2 * np.cos(x.detach().numpy()) - x.detach().numpy() * np.sin(x.detach().numpy())
    np.testing.assert_allclose(gg.numpy(), expected, rtol=1e-12)
    del y, g, gg
    assert ember.memory_allocated() == before
