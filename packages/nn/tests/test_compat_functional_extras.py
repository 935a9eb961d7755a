"""What real programs call that ember lacked (issue 15): F.gumbel_softmax (discrete-latent
VAEs), the deprecated nn.utils.clip_grad_norm, and nn.Buffer (buffers registered by
assignment)."""

from __future__ import annotations

import copy
import io
import pickle
import warnings

import ember
import numpy as np
import pytest
from ember import nn
from ember.nn import functional as F


def test_gumbel_softmax_samples_follow_the_softmax():
    ember.manual_seed(0)
    logits = ember.tensor([1.0, 2.0, 0.5, -1.0])
    y = F.gumbel_softmax(logits.expand(40000, 4), tau=1.0, hard=True)
    assert sorted(set(y.flatten().tolist())) == [0.0, 1.0]
    assert y.sum(-1).tolist() == [1.0] * 40000
    np.testing.assert_allclose(y.mean(0).numpy(), logits.softmax(0).numpy(), atol=0.01)
    soft = F.gumbel_softmax(logits.expand(8, 4), tau=0.3)
    np.testing.assert_allclose(soft.sum(-1).numpy(), np.ones(8), rtol=1e-6)
    assert bool((soft > 0).all())


def test_gumbel_softmax_straight_through_gradient():
    logits = ember.tensor([[0.3, -0.2, 1.1], [0.0, 0.5, -0.5]], dtype=ember.float64,
                          requires_grad=True)
    w = ember.tensor([1.0, -2.0, 3.0], dtype=ember.float64)
    with ember.random.fork_rng():
        hard = F.gumbel_softmax(logits, tau=0.7, hard=True, dim=1)
    soft = F.gumbel_softmax(logits, tau=0.7, dim=1)  # the same noise
    assert hard.argmax(1).tolist() == soft.argmax(1).tolist()
    np.testing.assert_allclose((hard - soft).detach().numpy() + soft.detach().numpy(),
                               hard.detach().numpy())
    (g_hard,) = ember.autograd.grad((hard * w).sum(), logits)
    (g_soft,) = ember.autograd.grad((soft * w).sum(), logits)
    np.testing.assert_allclose(g_hard.numpy(), g_soft.numpy(), rtol=1e-12)
    # along dim 0 as well
    y = F.gumbel_softmax(logits, hard=True, dim=0)
    assert y.sum(0).tolist() == [1.0, 1.0, 1.0]


def test_gumbel_softmax_matches_torch_given_the_noise():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 5))
    # with the generators' noise replaced by the same Gumbel draws, both compute the same
    g = -np.log(rng.exponential(size=(3, 5)))
    want = torch.softmax((torch.from_numpy(logits) + torch.from_numpy(g)) / 0.5, -1).numpy()
    got = ((ember.from_numpy(logits) + ember.from_numpy(g)) / 0.5).softmax(-1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    t = torch.nn.functional.gumbel_softmax(torch.from_numpy(logits), tau=0.5, hard=True)
    e = F.gumbel_softmax(ember.from_numpy(logits), tau=0.5, hard=True)
    assert t.shape == tuple(e.shape) and t.dtype == torch.float64 and e.dtype == ember.float64


def test_gumbel_softmax_errors():
    with pytest.raises(ValueError, match="tau must be positive"):
        F.gumbel_softmax(ember.zeros(3), tau=0)
    with pytest.raises(TypeError, match="must be floating point"):
        F.gumbel_softmax(ember.zeros(3, dtype=ember.int64))


def test_clip_grad_norm_old_name():
    a, b = nn.Parameter(ember.ones(3)), nn.Parameter(ember.ones(3))
    a.grad, b.grad = ember.full((3,), 2.0), ember.full((3,), 2.0)
    with pytest.warns(FutureWarning, match="clip_grad_norm is now deprecated"):
        total = nn.utils.clip_grad_norm([a], 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = nn.utils.clip_grad_norm_([b], 1.0)
    assert total.item() == pytest.approx(ref.item())
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())


def _buffer_module(lib):
    class Attn(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = lib.nn.Linear(2, 2)
            self.bias = lib.nn.Buffer(lib.tril(lib.ones(3, 3)).view(1, 1, 3, 3))
            self.cache = lib.nn.Buffer(lib.zeros(2), persistent=False)

    return Attn()


def test_buffer_registration_matches_torch():
    torch = pytest.importorskip("torch")
    e, t = _buffer_module(ember), _buffer_module(torch)
    assert list(e.state_dict()) == list(t.state_dict())
    assert [n for n, _ in e.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert not isinstance(e.bias, nn.Parameter) and not e.bias.requires_grad
    # reassigning a plain tensor keeps it a buffer; a new Buffer can change persistence
    for lib, m in ((ember, e), (torch, t)):
        m.bias = lib.zeros(1, 1, 3, 3)
        m.cache = lib.nn.Buffer(lib.ones(2), persistent=True)
    assert list(e.state_dict()) == list(t.state_dict())
    assert "cache" in e.state_dict()
    assert e.cache.tolist() == [1.0, 1.0]


def test_buffer_aliases_and_copies():
    data = ember.ones(2)
    b = nn.Buffer(data)
    b.add_(1)
    assert data.tolist() == [2.0, 2.0]  # an alias, as Parameter is
    g = nn.Buffer(ember.ones(2, requires_grad=True))
    assert g.requires_grad and g.is_leaf
    m = _buffer_module(ember)
    m.bias.fill_(3.0)
    m2 = copy.deepcopy(m)
    assert m2.bias.tolist() == m.bias.tolist() and "cache" not in m2.state_dict()
    assert m2.bias.data_ptr() != m.bias.data_ptr()
    back = pickle.loads(pickle.dumps(nn.Buffer(ember.ones(1), persistent=False)))
    assert isinstance(back, nn.Buffer) and back.persistent is False
    with pytest.raises(TypeError, match="Buffer\\(\\): expected data to be an ember.Tensor"):
        nn.Buffer([1.0])


def test_replace_all_batch_norm_modules_then_per_sample_grads_match_torch():
    # the functorch recipe for per-sample gradients of a model with batch norm
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(0)
    x = r.normal(size=(5, 4, 3)).astype(np.float32)

    def per_sample(lib):
        net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(),
                                lib.nn.Linear(4, 1))
        with lib.no_grad():
            for p in net.parameters():
                p.copy_(lib.tensor(r.normal(size=tuple(p.shape)).astype(np.float32)))
        assert lib.func.replace_all_batch_norm_modules_(net) is net
        bn = net[1]
        assert bn.running_mean is None and bn.running_var is None
        assert bn.num_batches_tracked is None and not bn.track_running_stats
        params = {k: v.detach() for k, v in net.named_parameters()}

        def loss(p, xb):
            return lib.func.functional_call(net, p, (xb,)).pow(2).mean()

        return lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0))(params, lib.tensor(x))

    r = np.random.default_rng(1)
    got = per_sample(ember)
    r = np.random.default_rng(1)
    want = per_sample(torch)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-4, atol=1e-5)


def test_buffer_is_a_marked_plain_tensor_as_in_torch():
    torch = pytest.importorskip("torch")
    for lib in (ember, torch):
        b = lib.nn.Buffer(lib.ones(2), persistent=False)
        assert type(b) is lib.Tensor and isinstance(b, lib.nn.Buffer)
        assert b.__dict__ == {"persistent": False, "_is_buffer": True}
        assert not isinstance(lib.ones(2), lib.nn.Buffer)
        assert isinstance(_buffer_module(lib).bias, lib.nn.Buffer)
    buf = io.BytesIO()
    ember.save({"b": nn.Buffer(ember.ones(2))}, buf)  # plain tensor plus attributes
    buf.seek(0)
    assert isinstance(ember.load(buf)["b"], nn.Buffer)
