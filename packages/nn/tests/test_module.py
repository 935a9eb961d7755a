"""Module API: registration, iteration, modes, conversions, hooks, state dicts, repr, errors."""

from __future__ import annotations

import copy
import traceback
from collections import OrderedDict

import ember
import numpy as np
import pytest
from ember import nn
from nn_helpers import copy_weights, to_np, torch


class MLP(nn.Module):
    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8, bias=bias)
        self.fc2 = nn.Linear(8, 3, bias=bias)
        self.register_buffer("scale", ember.ones(3))
        self.register_buffer("calls", ember.zeros(()), persistent=False)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu()) * self.scale


def torch_mlp(bias: bool = True):
    class TMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(4, 8, bias=bias)
            self.fc2 = torch.nn.Linear(8, 3, bias=bias)
            self.register_buffer("scale", torch.ones(3))
            self.register_buffer("calls", torch.zeros(()), persistent=False)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu()) * self.scale

    return TMLP()


# ---- registration and iteration ---------------------------------------------------------------
def test_attribute_assignment_registers():
    m = MLP()
    assert [n for n, _ in m.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["scale", "calls"]
    assert [n for n, _ in m.named_children()] == ["fc1", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "fc2"]
    assert isinstance(m.fc1.weight, nn.Parameter)
    assert not isinstance(m.scale, nn.Parameter)
    assert m.get_submodule("fc2") is m.fc2
    assert m.get_parameter("fc1.bias") is m.fc1.bias
    assert m.get_buffer("scale") is m.scale
    assert "fc1" in dir(m) and "scale" in dir(m)


def test_reassignment_and_deletion():
    m = MLP()
    m.fc1 = None  # a registered module may be set to None
    assert [n for n, _ in m.named_children()] == ["fc2"]
    with pytest.raises(TypeError, match="child module 'fc1'"):
        m.fc1 = 3
    m.extra = nn.Parameter(ember.zeros(2))
    assert "extra" in dict(m.named_parameters())
    with pytest.raises(TypeError, match="as parameter 'extra'"):
        m.extra = ember.zeros(2)  # a plain tensor can't replace a parameter
    m.scale = ember.zeros(3)  # buffers take plain tensors
    assert m.scale.sum().item() == 0
    with pytest.raises(TypeError, match="buffer 'scale'"):
        m.scale = [1, 2]
    del m.extra
    assert "extra" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope


def test_register_errors():
    m = nn.Module()
    with pytest.raises(KeyError, match="must not contain"):
        m.register_buffer("a.b", ember.zeros(1))
    with pytest.raises(KeyError, match="empty"):
        m.register_parameter("", None)
    with pytest.raises(TypeError, match="string"):
        m.register_buffer(1, ember.zeros(1))
    m.x = 1
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("x", ember.zeros(1))
    with pytest.raises(TypeError, match="Parameter or None"):
        m.register_parameter("w", ember.zeros(1))
    with pytest.raises(TypeError, match="not a Module"):
        m.add_module("c", 3)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    with pytest.raises(AttributeError, match="MLP has no attribute `zz`"):
        MLP().get_submodule("zz.a")
    with pytest.raises(AttributeError, match="not an nn.Parameter"):
        MLP().get_parameter("scale")


def test_shared_parameters_deduplicated():
    a = nn.Linear(3, 3)
    seq = nn.Sequential(a, nn.Linear(3, 3), a)
    seq[1].weight = a.weight
    names = [n for n, _ in seq.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.bias"]
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 6
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert len(list(seq.named_modules(remove_duplicate=False))) == 4
    assert [n for n, _ in seq.named_modules(prefix="net")] == ["net", "net.0", "net.1"]
    assert [n for n, _ in seq.named_parameters(prefix="p", recurse=False)] == []


def test_parameter_identity():
    data = ember.ones(2, 3)
    p = nn.Parameter(data)
    assert isinstance(p, nn.Parameter) and isinstance(p, ember.Tensor)
    assert p.requires_grad and p.is_leaf
    assert not isinstance(data, nn.Parameter)
    assert not isinstance(p * 2, nn.Parameter)
    with ember.no_grad():
        assert p.mul_(2) is p and isinstance(p, nn.Parameter)
    assert data.sum().item() == 12.0  # shares memory with its data
    assert not nn.Parameter(ember.zeros(1), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(ember.zeros(2, dtype=ember.int64))
    with pytest.raises(TypeError, match="ember.Tensor"):
        nn.Parameter([1.0, 2.0])


# ---- modes and conversions --------------------------------------------------------------------
def test_train_eval_requires_grad_zero_grad_apply():
    m = MLP()
    assert m.training and m.fc1.training
    assert m.eval() is m and not m.fc2.training
    m.train()
    assert m.fc2.training
    with pytest.raises(ValueError, match="boolean"):
        m.train("yes")
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    m(ember.randn(2, 4)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "Linear", "MLP"]


def test_dtype_conversions_keep_sharing_and_buffers():
    m = MLP()
    m.fc2.weight = m.fc1.weight if False else m.fc2.weight
    tied = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    tied[1].weight = tied[0].weight
    tied.double()
    assert tied[0].weight.dtype == ember.float64
    assert tied[1].weight is tied[0].weight
    m.register_buffer("index", ember.zeros(2, dtype=ember.int64))
    m.double()
    assert m.fc1.weight.dtype == ember.float64 and isinstance(m.fc1.weight, nn.Parameter)
    assert m.scale.dtype == ember.float64
    assert m.index.dtype == ember.int64  # integer buffers keep their dtype
    m.to(ember.float32)
    assert m.fc1.bias.dtype == ember.float32
    m.half()
    assert m.fc2.weight.dtype == ember.float16
    m.float()
    w = m.fc1.weight
    m.to("cpu")
    assert m.fc1.weight is w  # nothing to do: the same objects
    with pytest.raises(TypeError, match="floating point"):
        m.to(ember.int32)
    m.to(ember.zeros(1, dtype=ember.float64))
    assert m.fc1.weight.dtype == ember.float64


def test_dtype_conversion_same_dtype_keeps_parameter_object():
    m = nn.Linear(2, 2)
    w = m.weight
    m.float()
    assert m.weight is w


def test_deepcopy_keeps_parameters():
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    m[1].weight = m[0].weight
    m(ember.randn(2, 3)).sum().backward()
    c = copy.deepcopy(m)
    assert isinstance(c[0].weight, nn.Parameter)
    assert c[1].weight is c[0].weight and c[0].weight is not m[0].weight
    np.testing.assert_array_equal(to_np(c[0].weight), to_np(m[0].weight))
    np.testing.assert_array_equal(to_np(c[0].weight.grad), to_np(m[0].weight.grad))
    with ember.no_grad():
        c[0].weight.add_(1)
    assert not np.array_equal(to_np(c[0].weight), to_np(m[0].weight))


# ---- calling and hooks ------------------------------------------------------------------------
def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append("post"))
    h3 = lin.register_forward_hook(lambda m, args, out: out + 1, prepend=True)
    out = lin(ember.ones(1, 2))
    assert calls == ["pre", "post"]
    np.testing.assert_allclose(to_np(out), to_np(lin.bias.detach().reshape(1, 2) + 1), rtol=1e-6)
    for h in (h1, h2, h3):
        h.remove()
    calls.clear()
    lin(ember.ones(1, 2))
    assert calls == []


def test_forward_hooks_with_kwargs_and_always_call():
    class Scale(nn.Module):
        def forward(self, x, *, factor=1.0):
            if factor < 0:
                raise ValueError("negative factor")
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kw: (args, {"factor": kw["factor"] * 2}), with_kwargs=True)
    seen = []
    m.register_forward_hook(lambda mod, args, kw, out: seen.append(kw["factor"]), with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: seen.append("always"), always_call=True)
    assert m(ember.ones(1), factor=3.0).item() == 6.0
    assert seen == [6.0, "always"]
    seen.clear()
    with pytest.raises(ValueError, match="negative factor"):
        m(ember.ones(1), factor=-1.0)
    assert seen == ["always"]
    with m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,)):
        assert m(ember.ones(1), factor=1.0).item() == 4.0
    assert m(ember.ones(1), factor=1.0).item() == 2.0


def test_error_notes_module_path_repr_and_shapes():
    model = MLP()
    with pytest.raises(RuntimeError) as info:
        model(ember.randn(2, 5))
    msg = str(info.value)
    assert "(*, 4)" in msg and "(2, 5)" in msg
    assert "model." not in msg  # the message is the op's own, as in PyTorch
    assert info.value.__notes__ == ["in model.fc1 (Linear(in_features=4, out_features=8, bias=True))"]
    assert "in model.fc1 (Linear(" in "".join(traceback.format_exception(info.value))

    nested = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Identity(), nn.Linear(7, 2)))
    with pytest.raises(RuntimeError) as info:
        nested(ember.randn(3, 4))
    assert "(3, 8)" in str(info.value)
    # noted once, by the outermost call
    assert info.value.__notes__ == ["in model.1.1 (Linear(in_features=7, out_features=2, bias=True))"]

    class Raises(nn.Module):
        def forward(self, x):
            raise RuntimeError("x")

    with pytest.raises(RuntimeError) as info:
        nn.Sequential(Raises())(ember.ones(1))
    assert str(info.value) == "x" and info.value.__notes__ == ["in model.0 (Raises())"]


def test_missing_forward():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


# ---- state dicts ------------------------------------------------------------------------------
def test_state_dict_keys_match_torch():
    pytest.importorskip("torch")
    m, t = MLP(), torch_mlp()
    assert list(m.state_dict()) == list(t.state_dict())
    seq = nn.Sequential(OrderedDict(a=nn.Linear(2, 3), b=nn.Sequential(nn.Linear(3, 3), nn.Identity())))
    tseq = torch.nn.Sequential(OrderedDict(a=torch.nn.Linear(2, 3), b=torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Identity())))
    assert list(seq.state_dict()) == list(tseq.state_dict())
    assert list(seq.state_dict(prefix="x.")) == list(tseq.state_dict(prefix="x."))


def test_state_dict_round_trip_and_aliasing():
    a, b = MLP(), MLP()
    sd = a.state_dict()
    assert sd["fc1.weight"].requires_grad is False
    assert b.load_state_dict(sd) is not None
    for k in sd:
        np.testing.assert_array_equal(to_np(a.state_dict()[k]), to_np(b.state_dict()[k]))
    kv = a.state_dict(keep_vars=True)
    assert kv["fc1.weight"] is a.fc1.weight
    assert repr(b.load_state_dict(sd)) == "<All keys matched successfully>"


def test_load_state_dict_reports_every_problem():
    m = MLP()
    sd = dict(m.state_dict())
    del sd["fc2.bias"]
    sd["fc3.weight"] = ember.zeros(1)
    sd["fc1.weight"] = ember.zeros(5, 4)
    sd["fc1.bias"] = "not a tensor"
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    msg = str(info.value)
    assert msg.startswith("Error(s) in loading state_dict for MLP:\n\t")
    # PyTorch's wording: missing, then unexpected keys, then each key's problem
    lines = msg.split("\n\t")
    assert lines[1] == 'Missing key(s) in state_dict: "fc2.bias". '
    assert lines[2] == 'Unexpected key(s) in state_dict: "fc3.weight". '
    assert "size mismatch for fc1.weight: copying a param with shape ember.Size([5, 4]) from " \
        "checkpoint, the shape in current model is ember.Size([8, 4])." in msg
    assert "'fc1.bias'" in msg and "str" in msg
    assert len(lines) == 5  # header + one line per problem


def test_load_state_dict_non_strict_and_assign():
    m = MLP()
    sd = dict(m.state_dict())
    del sd["fc2.bias"]
    sd["extra"] = ember.zeros(1)
    res = MLP().load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc2.bias"] and res.unexpected_keys == ["extra"]
    other = MLP()
    new_w = ember.randn(8, 4)
    sd2 = dict(other.state_dict())
    sd2["fc1.weight"] = new_w
    other.load_state_dict(sd2, assign=True)
    assert isinstance(other.fc1.weight, nn.Parameter)
    assert other.fc1.weight.requires_grad
    with ember.no_grad():
        new_w.add_(1)  # assign shares memory with the given tensor
    np.testing.assert_array_equal(to_np(other.fc1.weight), to_np(new_w))
    with pytest.raises(TypeError, match="dict-like"):
        m.load_state_dict([1, 2])


def test_load_state_dict_strict_false_returns_keys():
    m = MLP()
    sd = OrderedDict(m.state_dict())
    del sd["fc2.bias"]
    sd["bogus.weight"] = ember.zeros(1)
    res = m.load_state_dict(sd, strict=False)
    assert list(res) == [["fc2.bias"], ["bogus.weight"]]
    if torch is not None:
        t = torch_mlp()
        tsd = OrderedDict(t.state_dict())
        del tsd["fc2.bias"]
        tsd["bogus.weight"] = torch.zeros(1)
        assert list(t.load_state_dict(tsd, strict=False)) == list(res)


def test_state_dict_hooks_and_extra_state():
    class WithExtra(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.counter = 7

        def get_extra_state(self):
            return {"counter": self.counter}

        def set_extra_state(self, state):
            self.counter = state["counter"]

    m = WithExtra()
    sd = m.state_dict()
    # like PyTorch: a module's own entries (extra state last) come before its children's
    assert list(sd) == ["_extra_state", "lin.weight", "lin.bias"]
    m2 = WithExtra()
    m2.counter = 0
    m2.load_state_dict(sd)
    assert m2.counter == 7

    events = []
    m.register_state_dict_pre_hook(lambda mod, prefix, keep: events.append(("pre", prefix)))

    def post(mod, sd, prefix, meta):
        sd[prefix + "added"] = ember.ones(1)

    m.register_state_dict_post_hook(post)
    assert "added" in m.state_dict()
    assert events == [("pre", "")]

    def load_pre(mod, sd, prefix, meta, strict, missing, unexpected, errors):
        sd.pop(prefix + "added", None)

    m.register_load_state_dict_pre_hook(load_pre)
    m.register_load_state_dict_post_hook(lambda mod, keys: events.append(("post", list(keys.missing_keys))))
    m.load_state_dict(m.state_dict())
    assert events[-1] == ("post", [])


# ---- repr -------------------------------------------------------------------------------------
def test_repr_equals_torch():
    pytest.importorskip("torch")
    pairs = [
        (MLP(), torch_mlp()),
        (
            nn.Sequential(nn.Linear(2, 3, bias=False), nn.Identity(), nn.Flatten(0, -1), nn.Unflatten(1, (2, 2)),
                          nn.Bilinear(2, 3, 4)),
            torch.nn.Sequential(torch.nn.Linear(2, 3, bias=False), torch.nn.Identity(), torch.nn.Flatten(0, -1),
                                torch.nn.Unflatten(1, (2, 2)), torch.nn.Bilinear(2, 3, 4)),
        ),
        (
            nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(3, 3), nn.Sequential(nn.Identity())]),
            torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2), torch.nn.Linear(3, 3),
                                 torch.nn.Sequential(torch.nn.Identity())]),
        ),
        (nn.ModuleList(), torch.nn.ModuleList()),
        (
            nn.ModuleDict({"enc": nn.Linear(1, 2), "dec": nn.ModuleList([nn.Identity()] * 3)}),
            torch.nn.ModuleDict({"enc": torch.nn.Linear(1, 2), "dec": torch.nn.ModuleList([torch.nn.Identity()] * 3)}),
        ),
    ]
    for ours, theirs in pairs:
        assert repr(ours).replace("MLP", "TMLP") == repr(theirs)


def test_parameter_container_repr_equals_torch():
    pytest.importorskip("torch")
    ours = nn.ParameterList([ember.zeros(2, 3), ember.zeros(4)])
    theirs = torch.nn.ParameterList([torch.zeros(2, 3), torch.zeros(4)])
    assert repr(ours).replace("ember.", "torch.") == repr(theirs)
    ours = nn.ParameterDict({"b": ember.zeros(1), "a": ember.zeros(2, 2)})
    theirs = torch.nn.ParameterDict({"b": torch.zeros(1), "a": torch.zeros(2, 2)})
    assert repr(ours).replace("ember.", "torch.") == repr(theirs)


def test_forward_matches_torch_with_copied_weights():
    pytest.importorskip("torch")
    m, t = MLP().double(), torch_mlp().double()
    copy_weights(m, t)
    x = np.random.default_rng(0).standard_normal((5, 4))
    out = m(ember.from_numpy(x))
    ref = t(torch.from_numpy(x))
    np.testing.assert_allclose(to_np(out), ref.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_module_compile_runs_eagerly_and_checks_arguments():
    # torch.nn.Module.compile (torch >= 2.2): compiles __call__ in place and returns None
    import warnings

    m = nn.Linear(3, 2)
    calls = []
    m.register_forward_hook(lambda mod, args, out: calls.append(out.shape))
    x = ember.ones(4, 3)
    before = m(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert m.compile(mode="max-autotune", fullgraph=True) is None
    assert ember.equal(m(x), before) and len(calls) == 2  # hooks still run
    with pytest.raises(RuntimeError, match="either mode or options"):
        m.compile(mode="default", options={"x": 1})
