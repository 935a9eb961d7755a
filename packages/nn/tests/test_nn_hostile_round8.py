"""Hostile input, round 8 (nn part): Module.to/type arguments, optimizer and scheduler values,
nn.utils (prune, skip_init, fusion, parametrize) and full backward hooks.

``Module.to`` skipped a positional bool (``m.to(True)``), kept the last of two dtypes
(``m.to(ember.float64, ember.float32)``) and took ``m.to("cpu", True)``, all silently; PyTorch
refuses each with a TypeError, and so does ember now, parsing PyTorch's three overloads. It also
refused complex dtypes, which PyTorch takes (with its "complex modules" warning): floating and
complex parameters and buffers become the complex dtype. ``Module.type("torch.DoubleTensor")``
failed with a device-string error; it now takes tensor type names as ``Tensor.type`` does.

An optimizer hyperparameter that is not a number (``lr="0.1"``, ``lr=None``, a str beta) failed
with "'<=' not supported between instances of 'float' and 'str'", naming neither; it is now a
TypeError naming the optimizer and the hyperparameter. A ``LambdaLR`` / ``MultiplicativeLR``
lambda returning a non-number failed with "can't multiply sequence by non-int of type 'float'";
it now names the scheduler, the group and the epoch. ``scheduler.load_state_dict`` took anything:
a list, ``last_epoch="x"`` (failing at the next step with "can only concatenate str"), a state
dict with more param groups or lambdas than the scheduler (``zip`` dropped the rest silently), a
``SequentialLR`` state with another number of schedulers; each is now refused before anything is
loaded. An on/off option set to a str (``SGD(maximize="no")``, truthy, or changed in a param
group) reached a kernel that named only itself ("_fused_sgd_(): argument 'maximize' must be
bool"); switching ``nesterov`` on in a group without momentum likewise ("_fused_sgd_: nesterov
momentum requires..."). Both now name the optimizer, the group and the option at step, before
any parameter is written; an int flag (``amsgrad=1``, which PyTorch takes) is used as a bool.

``prune.ln_structured`` / ``random_structured`` with a dim out of range said "tuple index out of
range", and a second structured prune with a dim below ``-ndim`` wrapped around to another dim
silently; both are now an IndexError naming the method, the dim and the shape. A failed prune
also put the parameter back at the end of the module's parameters (changing the order of
``parameters()`` and of the state dict), and a failed second prune (a bad ``amount`` or
``importance_scores``) dropped the first pruning's hook, so ``weight`` stopped following
``weight_orig * weight_mask`` (PyTorch too); a failed prune now leaves the module as it was.
``skip_init(5)`` was a RuntimeError; PyTorch's is a TypeError (``issubclass``).
``fuse_conv_bn_eval`` of a convolution and a batch norm with different channel counts
broadcast: a 1-channel convolution became a 2-channel one, or one statistic scaled every
channel (PyTorch does the same); it is now a RuntimeError naming both counts.
``register_parametrization`` with a plain function failed with "'function' object has no
attribute 'train'"; the error (a TypeError, and an AttributeError as PyTorch's) now says a
Module is needed.

An empty ``normalized_shape`` (``LayerNorm([])``, ``RMSNorm([])``) was blamed on the input
("expected an input whose trailing dims are ()"); it is now PyTorch's "at least 1-dimensional"
error. ``pack_padded_sequence`` with lengths on the meta device failed copying them ("Cannot copy
out of meta tensor"), a GRU/RNN (or cell) given a tuple hidden state said "'tuple' object has no
attribute 'shape'", and a triplet distance function returning a number "'float' object has no
attribute 'clamp'"; each now names the op and what it expected.

Assigning a tensor of another shape to a parametrized tensor (``m.weight = ember.ones(5)`` for a
Linear(3, 2) parametrized without ``unsafe=True``) gave the original the new shape silently (PyTorch
too), breaking the module far from the assignment; it is now a ValueError, and a right_inverse
returning several tensors is checked whole before any original is written.
``get_total_norm([t, None])`` said "'NoneType' object has no attribute 'detach'"; it is now a
RuntimeError (PyTorch's class) naming the entry.

A full backward hook (or pre-hook) returning a gradient of the wrong shape or dtype, or a non
tensor, was reported naming ember's internal wrappers ("hook '_input_hook' has changed the size
of value"); it now names the module, the user's hook, the position and both shapes/dtypes.
"""

from __future__ import annotations

import warnings

import ember
import pytest
from ember import nn, optim
from ember.nn.utils import prune

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch for comparison")


# ---- Module.to / Module.type -----------------------------------------------------------------
@pytest.mark.parametrize("args", [(True,), (ember.float64, ember.float32), ("cpu", True),
                                  (ember.float32, False, False, False), (3.5,)])
def test_module_to_refuses_argument_combinations_torch_refuses(args):
    m = nn.Linear(2, 2)
    w = m.weight.detach().clone()
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        m.to(*args)
    assert m.weight.dtype == ember.float32 and ember.equal(m.weight.detach(), w)


@needs_torch
@pytest.mark.parametrize("args", [(True,), ("float64", "float32"), ("cpu", True)])
def test_torch_refuses_the_same_to_arguments(args):
    args = tuple(getattr(torch, a) if isinstance(a, str) and a.startswith("float") else a
                 for a in args)
    with pytest.raises(TypeError):
        torch.nn.Linear(2, 2).to(*args)


def test_module_to_still_takes_the_valid_forms():
    m = nn.Linear(2, 2)
    assert m.to("cpu", ember.float64, True).weight.dtype == ember.float64
    assert m.to(ember.float32, False, False).weight.dtype == ember.float32
    assert m.to(None).weight.dtype == ember.float32
    assert m.to("cpu", None).weight.dtype == ember.float32
    assert m.to(ember.zeros(1, dtype=ember.float64)).weight.dtype == ember.float64
    assert m.to(dtype=ember.float32, non_blocking=True).weight.dtype == ember.float32
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        m.to(ember.int32)


def test_module_to_a_complex_dtype_converts_floating_tensors():
    bn = nn.BatchNorm1d(2)
    with pytest.warns(UserWarning, match="Complex modules"):
        bn.to(ember.complex128)
    assert bn.weight.dtype == ember.complex128 and isinstance(bn.weight, nn.Parameter)
    assert bn.running_mean.dtype == ember.complex128
    assert bn.num_batches_tracked.dtype == ember.int64  # integer buffers stay
    lin = nn.Linear(2, 1, bias=False)
    with ember.no_grad():
        lin.weight.copy_(ember.tensor([[1.0, 2.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lin.to(ember.complex64)
    out = lin(ember.tensor([[1j, 1.0]], dtype=ember.complex64))
    assert out.tolist() == [[2 + 1j]]
    if torch is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tb = torch.nn.BatchNorm1d(2).to(torch.complex128)
        assert tb.running_mean.dtype == torch.complex128
        assert tb.num_batches_tracked.dtype == torch.int64


def test_module_type_takes_a_tensor_type_name():
    m = nn.Linear(2, 2)
    m.register_buffer("steps", ember.zeros(1, dtype=ember.int64))
    m.type("torch.DoubleTensor")
    assert m.weight.dtype == ember.float64 and m.steps.dtype == ember.float64
    m.type(ember.float32)
    assert m.weight.dtype == ember.float32
    with pytest.raises(TypeError, match="dst_type must be"):
        m.type(5)
    if torch is not None:
        assert torch.nn.Linear(2, 2).type("torch.DoubleTensor").weight.dtype == torch.float64


# ---- optimizer and scheduler values ----------------------------------------------------------
def _p() -> nn.Parameter:
    return nn.Parameter(ember.ones(2))


@pytest.mark.parametrize("make, what", [
    (lambda: optim.SGD([_p()], lr="0.1"), "SGD: lr must be a number or a Tensor, got '0.1'"),
    (lambda: optim.SGD([_p()], lr=None), "SGD: lr must be a number or a Tensor, got None"),
    (lambda: optim.SGD([_p()], lr=0.1, momentum="0.9"), "SGD: momentum must be a number"),
    (lambda: optim.Adam([_p()], betas=(0.9, "x")), r"Adam: betas\[1\] must be a number"),
    (lambda: optim.AdamW([_p()], weight_decay=None), "AdamW: weight_decay must be a number"),
])
def test_a_hyperparameter_that_is_not_a_number_is_named(make, what):
    with pytest.raises(TypeError, match=what):
        make()


def test_number_and_tensor_hyperparameters_still_work():
    p = _p()
    o = optim.Adam([p], lr=ember.tensor(0.5), betas=(ember.tensor(0.9), 0.999))
    p.grad = ember.ones(2)
    o.step()
    assert p.tolist() == pytest.approx([0.5, 0.5], abs=1e-6)
    assert optim.SGD([_p()], lr=True).param_groups[0]["lr"] is True  # a bool is a number


@needs_torch
def test_torch_refuses_a_str_lr_with_a_type_error():
    with pytest.raises(TypeError):
        torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr="0.1")


def test_a_lambda_returning_a_non_number_is_named():
    o = optim.SGD([_p()], lr=1.0)
    s = optim.lr_scheduler.LambdaLR(o, lambda e: "x" if e else 1.0)
    o.step()
    with pytest.raises(TypeError, match=r"LambdaLR: lr_lambda of param group 0 returned 'x' "
                                        r"\(str\) for epoch 1"):
        s.step()
    o = optim.SGD([_p()], lr=1.0)
    s = optim.lr_scheduler.MultiplicativeLR(o, lambda e: None)
    o.step()
    with pytest.raises(TypeError, match="MultiplicativeLR: lr_lambda of param group 0"):
        s.step()
    o = optim.SGD([_p()], lr=1.0)
    s = optim.lr_scheduler.LambdaLR(o, lambda e: 0.5 ** e)
    for _ in range(2):
        o.step()
        s.step()
    assert o.param_groups[0]["lr"] == 0.25


def test_scheduler_load_state_dict_refuses_what_it_cannot_resume():
    o = optim.SGD([_p()], lr=0.1)
    s = optim.lr_scheduler.StepLR(o, 1)
    before = dict(s.__dict__)
    with pytest.raises(TypeError, match="StepLR.load_state_dict: expected a dict"):
        s.load_state_dict([1])
    with pytest.raises(TypeError, match="last_epoch must be an int, got 'x'"):
        s.load_state_dict({"last_epoch": "x"})
    with pytest.raises(ValueError, match="base_lrs has 2 entries in the state dict but the "
                                         "scheduler has 1"):
        s.load_state_dict({**s.state_dict(), "base_lrs": [0.1, 0.2]})
    assert s.__dict__ == before  # nothing was loaded
    o2 = optim.SGD([{"params": [_p()]}, {"params": [_p()]}], lr=0.1)
    two = optim.lr_scheduler.LambdaLR(o2, [lambda e: 1.0, lambda e: 2.0])
    one = optim.lr_scheduler.LambdaLR(o, lambda e: 1.0)
    with pytest.raises(ValueError, match="base_lrs has 2 entries"):
        one.load_state_dict(two.state_dict())
    a, b, c = (optim.lr_scheduler.StepLR(o, 1) for _ in range(3))
    three = optim.lr_scheduler.SequentialLR(o, [a, b, c], milestones=[1, 2])
    pair = optim.lr_scheduler.SequentialLR(o, [a, b], milestones=[1])
    with pytest.raises(ValueError, match="holds 3 schedulers but this one chains 2"):
        pair.load_state_dict(three.state_dict())


def test_scheduler_state_round_trips_still_resume_exactly():
    o = optim.SGD([_p()], lr=1.0)
    s = optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)
    for _ in range(3):
        o.step()
        s.step()
    o2 = optim.SGD([_p()], lr=1.0)
    o2.load_state_dict(o.state_dict())
    s2 = optim.lr_scheduler.StepLR(o2, step_size=2, gamma=0.5)
    s2.load_state_dict(s.state_dict())
    for _ in range(2):
        o.step()
        s.step()
        o2.step()
        s2.step()
    assert o2.param_groups[0]["lr"] == o.param_groups[0]["lr"] == 0.25
    p = optim.lr_scheduler.ReduceLROnPlateau(o)
    p.load_state_dict(p.state_dict())
    lam = optim.lr_scheduler.LambdaLR(o, lambda e: 1.0)
    lam.load_state_dict(lam.state_dict())
    assert lam.last_epoch == 0


# ---- nn.utils ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [2, 5, -3])
def test_structured_pruning_dim_out_of_range_is_named(dim):
    m = nn.Linear(2, 2)
    with pytest.raises(IndexError, match=rf"LnStructured: dim {dim} is out of range for a "
                                         r"tensor of shape \(2, 2\)"):
        prune.ln_structured(m, "weight", amount=1, n=2, dim=dim)
    with pytest.raises(IndexError, match=rf"RandomStructured: dim {dim} is out of range"):
        prune.random_structured(m, "weight", amount=1, dim=dim)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]  # untouched


def test_a_second_structured_prune_does_not_wrap_a_bad_dim():
    m = nn.Linear(3, 2)
    with ember.no_grad():
        m.weight.copy_(ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    prune.ln_structured(m, "weight", amount=1, n=1, dim=0)
    assert m.weight.tolist() == [[0.0, 0.0, 0.0], [4.0, 5.0, 6.0]]
    with pytest.raises(IndexError, match="dim -3 is out of range"):
        prune.ln_structured(m, "weight", amount=1, n=1, dim=-3)
    prune.ln_structured(m, "weight", amount=1, n=1, dim=-1)  # a valid dim still prunes
    assert m.weight.tolist() == [[0.0, 0.0, 0.0], [0.0, 5.0, 6.0]]


@pytest.mark.parametrize("kwargs", [{"amount": 1.5}, {"amount": -1},
                                    {"amount": 1, "importance_scores": "bad shape"}])
def test_a_failed_second_prune_keeps_the_first_one_working(kwargs):
    # the earlier pruning hook was taken off before the new method was checked: a bad amount
    # (or importance scores) left weight a stale tensor that no longer followed
    # weight_orig * weight_mask (PyTorch too)
    m = nn.Linear(2, 2)
    with ember.no_grad():
        m.weight.copy_(ember.tensor([[1.0, -4.0], [3.0, 2.0]]))
    prune.l1_unstructured(m, "weight", amount=1)
    prune.l1_unstructured(m, "weight", amount=1)
    hooks = list(m._forward_pre_hooks.items())
    if kwargs.get("importance_scores") == "bad shape":
        kwargs = {**kwargs, "importance_scores": ember.ones(3)}
    with pytest.raises(ValueError):
        prune.l1_unstructured(m, "weight", **kwargs)
    assert list(m._forward_pre_hooks.items()) == hooks
    assert len(hooks[0][1]) == 2  # the chain did not keep the method that failed
    with ember.no_grad():
        m.weight_orig.fill_(3.0)
    m(ember.ones(1, 2))
    assert m.weight.tolist() == [[0.0, 3.0], [3.0, 0.0]]
    prune.l1_unstructured(m, "weight", amount=1)  # and pruning on still works
    assert m.weight_mask.sum().item() == 1.0


@needs_torch
def test_torch_refuses_the_structured_dim_with_an_index_error():
    import torch.nn.utils.prune as tprune
    with pytest.raises(IndexError):
        tprune.ln_structured(torch.nn.Linear(2, 2), "weight", amount=1, n=2, dim=5)


def test_skip_init_of_a_non_class_is_a_type_error():
    with pytest.raises(TypeError, match="skip_init: expected a Module class"):
        nn.utils.skip_init(5)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        nn.utils.skip_init(int)
    assert nn.utils.skip_init(nn.Linear, 2, 3).weight.shape == (3, 2)
    if torch is not None:
        with pytest.raises(TypeError):
            torch.nn.utils.skip_init(5)


@pytest.mark.parametrize("out, feats", [(1, 2), (3, 1), (3, 2)])
def test_fusing_a_batch_norm_of_another_channel_count_is_refused(out, feats):
    from ember.nn.utils.fusion import fuse_conv_bn_eval
    conv, bn = nn.Conv2d(2, out, 1).eval(), nn.BatchNorm2d(feats).eval()
    with pytest.raises(RuntimeError, match=rf"has {out} output channels .* but the batch norm "
                                           rf"has {feats} running statistics"):
        fuse_conv_bn_eval(conv, bn)


def test_fusing_matching_layers_still_gives_the_same_outputs():
    from ember.nn.utils.fusion import fuse_conv_bn_eval
    ember.manual_seed(0)
    conv, bn = nn.Conv2d(2, 3, 1).eval(), nn.BatchNorm2d(3).eval()
    bn.running_mean.copy_(ember.tensor([0.5, -1.0, 2.0]))
    bn.running_var.copy_(ember.tensor([4.0, 1.0, 0.25]))
    x = ember.randn(1, 2, 3, 3)
    assert ember.allclose(fuse_conv_bn_eval(conv, bn)(x), bn(conv(x)), atol=1e-5)
    tconv, tbn = nn.ConvTranspose2d(2, 3, 1).eval(), nn.BatchNorm2d(3).eval()
    assert fuse_conv_bn_eval(tconv, tbn, transpose=True).weight.shape == (2, 3, 1, 1)


def test_a_parametrization_that_is_not_a_module_is_named():
    from ember.nn.utils import parametrize
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="the parametrization must be an nn.Module"):
        parametrize.register_parametrization(m, "weight", lambda x: x)
    with pytest.raises(AttributeError):  # PyTorch's class
        parametrize.register_parametrization(m, "weight", lambda x: x)
    assert not parametrize.is_parametrized(m)


# ---- full backward hooks ---------------------------------------------------------------------
def _backward_through(hook, pre=False):
    m = nn.Linear(2, 2)
    (m.register_full_backward_pre_hook if pre else m.register_full_backward_hook)(hook)
    x = ember.ones(1, 2, requires_grad=True)
    m(x).sum().backward()
    return x.grad


def test_a_backward_hook_of_the_wrong_shape_or_type_is_named():
    def widen(mod, gi, go):
        return (ember.ones(3),)

    with pytest.raises(RuntimeError, match=r"Linear: a full backward hook 'widen' returned a "
                                           r"gradient of shape \(3,\) .* at position 0, but "
                                           r"that gradient has shape \(1, 2\)"):
        _backward_through(widen)
    with pytest.raises(RuntimeError, match="dtype ember.float64 at position 0, but that "
                                           "gradient has shape \\(1, 2\\) and dtype "
                                           "ember.float32"):
        _backward_through(lambda mod, gi, go: (gi[0].double(),))
    with pytest.raises(TypeError, match="returned an object of type int at position 0"):
        _backward_through(lambda mod, gi, go: (5,))
    with pytest.raises(RuntimeError, match=r"a backward pre-hook '<lambda>' returned a gradient "
                                           r"of shape \(3,\)"):
        _backward_through(lambda mod, go: (ember.ones(3),), pre=True)


def test_backward_hooks_that_return_gradients_still_work():
    m = nn.Linear(2, 1, bias=False)
    with ember.no_grad():
        m.weight.copy_(ember.tensor([[1.0, 2.0]]))
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 3,))
    x = ember.ones(1, 2, requires_grad=True)
    m(x).sum().backward()
    assert x.grad.tolist() == [[3.0, 6.0]]
    m2 = nn.Linear(2, 1, bias=False)
    with ember.no_grad():
        m2.weight.copy_(ember.tensor([[1.0, 2.0]]))
    m2.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    x = ember.ones(1, 2, requires_grad=True)
    m2(x).sum().backward()
    assert x.grad.tolist() == [[2.0, 4.0]]
    assert _backward_through(lambda mod, gi, go: (None,)) is None


@needs_torch
def test_torch_refuses_the_same_hook_results():
    m = torch.nn.Linear(2, 2)
    m.register_full_backward_hook(lambda mod, gi, go: (torch.ones(3),))
    with pytest.raises(RuntimeError, match="changed the size"):
        m(torch.ones(1, 2, requires_grad=True)).sum().backward()


# ---- layers and losses -------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: nn.functional.layer_norm(ember.ones(2, 3), []),
    lambda: nn.LayerNorm([])(ember.ones(2, 3)),
    lambda: nn.RMSNorm([])(ember.ones(2, 3)),
])
def test_an_empty_normalized_shape_is_named(call):
    # the kernel's check said the input (2, 3) did not end with () -- which it does
    with pytest.raises(RuntimeError, match=r"normalized_shape to be at least 1-dimensional.*"
                                           r"normalized_shape = \[\]"):
        call()


def test_layer_norm_over_a_dim_still_normalizes():
    out = nn.functional.layer_norm(ember.tensor([[1.0, 3.0], [2.0, 2.0]]), [2])
    assert out.flatten().tolist() == pytest.approx([-1.0, 1.0, 0.0, 0.0], abs=1e-4)
    if torch is not None:
        with pytest.raises(RuntimeError, match="at least 1-dimensional"):
            torch.nn.functional.layer_norm(torch.ones(2, 3), [])


def test_pack_lengths_on_the_meta_device_are_named():
    from ember.nn.utils.rnn import pack_padded_sequence
    with pytest.raises(RuntimeError, match="'lengths' argument should be a 1D CPU int64 "
                                           "tensor, but got a tensor on the meta device"):
        pack_padded_sequence(ember.zeros(3, 2, 1), ember.tensor([3, 2], device="meta"))
    packed = pack_padded_sequence(ember.zeros(3, 2, 1), ember.tensor([3, 2]))
    assert packed.batch_sizes.tolist() == [2, 2, 1]


@pytest.mark.parametrize("call", [
    lambda: nn.GRU(2, 3)(ember.zeros(3, 1, 2), (ember.zeros(1, 1, 3), ember.zeros(1, 1, 3))),
    lambda: nn.RNN(2, 3)(ember.zeros(3, 1, 2), [ember.zeros(1, 1, 3)]),
    lambda: nn.GRUCell(2, 3)(ember.zeros(1, 2), (ember.zeros(1, 3),)),
    lambda: nn.RNNCell(2, 3)(ember.zeros(1, 2), [1.0]),
])
def test_a_hidden_state_that_is_not_a_tensor_is_named(call):
    with pytest.raises(TypeError, match="hx must be a Tensor h_0 .* got (tuple|list)"):
        call()
    with pytest.raises(AttributeError):  # PyTorch's class
        call()


def test_tensor_hidden_states_still_run():
    gru = nn.GRU(2, 3)
    out, h = gru(ember.zeros(4, 1, 2), ember.zeros(1, 1, 3))
    assert out.shape == (4, 1, 3) and h.shape == (1, 1, 3)
    assert nn.GRUCell(2, 3)(ember.zeros(2), ember.zeros(3)).shape == (3,)
    if torch is not None:
        with pytest.raises(AttributeError):
            torch.nn.GRU(2, 3)(torch.zeros(3, 1, 2), (torch.zeros(1, 1, 3), torch.zeros(1, 1, 3)))


def test_a_distance_function_returning_a_number_is_named():
    loss = nn.TripletMarginWithDistanceLoss(distance_function=lambda a, b: 3.0)
    with pytest.raises(TypeError, match="distance_function must return a Tensor of distances, "
                                        "got float"):
        loss(ember.zeros(2, 3), ember.zeros(2, 3), ember.zeros(2, 3))
    l1 = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: (a - b).abs().sum(-1), margin=1.0)
    a = ember.zeros(2, 3)
    assert l1(a, a + 1.0, a + 2.0).item() == pytest.approx(0.0)
    assert l1(a, a + 2.0, a + 1.0).item() == pytest.approx(4.0)


# ---- parametrized assignment and total norms -------------------------------------------------
class _Scale(nn.Module):
    def forward(self, x):
        return x * 2

    def right_inverse(self, x):
        return x / 2


class _Halves(nn.Module):
    def forward(self, a, b):
        return a + b

    def right_inverse(self, x):
        # the second half comes back in another dtype when asked to (x.sum() > 100)
        return x * 0.5, (x.double() if x.sum() > 100 else x) * 0.5


def test_assigning_another_shape_to_a_safe_parametrization_is_refused():
    from ember.nn.utils import parametrize
    m = nn.Linear(3, 2)
    parametrize.register_parametrization(m, "weight", _Scale())
    with pytest.raises(ValueError, match=r"Assigning a tensor of shape \(5,\) to a parametrized "
                                         r"tensor of shape \(2, 3\)"):
        m.weight = ember.ones(5)
    assert m.parametrizations.weight.original.shape == (2, 3)  # unchanged
    m.weight = ember.ones(2, 3)
    assert m.weight.tolist() == [[1.0, 1.0, 1.0]] * 2
    assert m.parametrizations.weight.original.tolist() == [[0.5, 0.5, 0.5]] * 2
    assert m(ember.ones(1, 3)).shape == (1, 2)
    if torch is not None:  # PyTorch lets the original take the new shape
        from torch.nn.utils import parametrize as tparametrize

        class TScale(torch.nn.Module):
            def forward(self, x):
                return x * 2

            def right_inverse(self, x):
                return x / 2

        tm = torch.nn.Linear(3, 2)
        tparametrize.register_parametrization(tm, "weight", TScale())
        tm.weight = torch.ones(5)
        assert tuple(tm.parametrizations.weight.original.shape) == (5,)


def test_unsafe_parametrizations_may_still_change_the_shape():
    from ember.nn.utils import parametrize

    class Flat(nn.Module):
        def forward(self, x):
            return x.reshape(-1)

        def right_inverse(self, x):
            return x.reshape(2, 3)

    m = nn.Linear(3, 2)
    parametrize.register_parametrization(m, "weight", Flat(), unsafe=True)
    m.weight = ember.arange(6.0)
    assert m.weight.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_failed_assignment_of_several_originals_writes_none_of_them():
    from ember.nn.utils import parametrize
    m = nn.Linear(3, 2)
    parametrize.register_parametrization(m, "weight", _Halves())
    before = [getattr(m.parametrizations.weight, f"original{i}").detach().clone()
              for i in range(2)]
    with pytest.raises(ValueError, match="Tensor 1 returned by `right_inverse` has dtype "
                                         "ember.float64"):
        m.weight = ember.full((2, 3), 50.0)
    for i in range(2):
        assert ember.equal(getattr(m.parametrizations.weight, f"original{i}"), before[i])
    m.weight = ember.full((2, 3), 4.0)
    assert m.parametrizations.weight.original0.tolist() == [[2.0] * 3] * 2
    assert m.weight.tolist() == [[4.0] * 3] * 2


def test_get_total_norm_names_an_entry_that_is_not_a_tensor():
    with pytest.raises(RuntimeError, match=r"tensors\[1\] is NoneType"):
        nn.utils.get_total_norm([ember.ones(2), None])
    assert nn.utils.get_total_norm([ember.ones(2) * 3, ember.ones(2) * 4]).item() == \
        pytest.approx(50 ** 0.5)
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.nn.utils.get_total_norm([torch.ones(2), None])


# ---- optimizer flags changed after construction ----------------------------------------------
def test_a_flag_that_is_not_a_bool_is_named_at_step():
    p = _p()
    o = optim.SGD([p], lr=0.1, maximize="no")  # "no" is truthy: it would maximize
    p.grad = ember.ones(2)
    with pytest.raises(TypeError, match="SGD.step: param group 0 has maximize='no' \\(str\\); "
                                        "expected a bool"):
        o.step()
    assert p.tolist() == [1.0, 1.0]
    o = optim.RAdam([p], decoupled_weight_decay="yes")
    with pytest.raises(TypeError, match="RAdam.step: param group 0 has decoupled_weight_decay"):
        o.step()


def test_int_flags_are_taken_as_bools():
    p = _p()
    o = optim.Adam([p], lr=0.001, amsgrad=1)
    p.grad = ember.ones(2)
    o.step()
    assert o.param_groups[0]["amsgrad"] is True
    assert p.tolist() == pytest.approx([0.999, 0.999], abs=1e-6)


def test_nesterov_switched_on_without_momentum_is_named():
    p = _p()
    o = optim.SGD([p], lr=0.1)
    p.grad = ember.ones(2)
    o.step()
    o.param_groups[0]["nesterov"] = True
    # the fused kernel refused it naming only itself ("_fused_sgd_: ...")
    with pytest.raises(ValueError, match="SGD.step: param group 0 has nesterov=True but "
                                         "momentum=0"):
        o.step()
    assert p.tolist() == pytest.approx([0.9, 0.9])
    o.param_groups[0]["momentum"] = 0.5
    o.step()
    assert p.tolist() == pytest.approx([0.75, 0.75])
