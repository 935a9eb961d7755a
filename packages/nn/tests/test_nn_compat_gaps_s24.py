"""nn compatibility gaps with PyTorch (session 24): ember.compile(module) returns an
OptimizedModule wrapper as torch.compile does; pooling refuses empty non-batch dims (zero
channels) as PyTorch does, variant by variant."""

import copy
import pickle
import warnings

import ember
import ember.nn as nn
import pytest

try:
    import torch
except ImportError:  # the comparisons against PyTorch skip without it
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _compile(lib, m, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.compile(m, **kw)


# ---- ember.compile(module) -------------------------------------------------------------------

def test_compile_module_wraps_like_torch():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    c = _compile(ember, m)
    assert type(c).__name__ == "OptimizedModule" and isinstance(c, nn.Module)
    assert isinstance(c, ember._dynamo.eval_frame.OptimizedModule)
    assert c._orig_mod is m and getattr(c, "_orig_mod", c) is m
    assert list(c.state_dict()) == ["_orig_mod.0.weight", "_orig_mod.0.bias"]
    assert [n for n, _ in c.named_parameters()] == ["_orig_mod.0.weight", "_orig_mod.0.bias"]
    assert list(getattr(c, "_orig_mod", c).state_dict()) == ["0.weight", "0.bias"]
    assert all(a is b for a, b in zip(c.parameters(), m.parameters()))
    x = ember.arange(8.0).reshape(4, 2)
    assert ember.equal(c(x), m(x))
    assert len(c) == 2
    # functions stay functions; disable=True gives the model back
    f = _compile(ember, lambda t: t + 1)
    assert f(1) == 2
    assert _compile(ember, m, disable=True) is m


def test_compiled_state_dict_keys_do_not_load_into_plain_module():
    m = nn.Linear(2, 2)
    c = _compile(ember, m)
    plain = nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "weight", "bias"'):
        plain.load_state_dict(c.state_dict())
    with pytest.raises(RuntimeError, match="Error.s. in loading state_dict for OptimizedModule"):
        c.load_state_dict(plain.state_dict())
    # the usual workarounds work
    plain.load_state_dict(c._orig_mod.state_dict())
    sd = {k.removeprefix("_orig_mod."): v for k, v in c.state_dict().items()}
    plain.load_state_dict(sd)
    assert ember.equal(plain.weight, m.weight)


def test_compiled_attribute_forwarding():
    m = nn.Linear(2, 2)
    c = _compile(ember, m)
    assert c.weight is m.weight and c.in_features == 2
    c.eval()
    assert not m.training and not c.training
    m.train()
    assert c.training
    c.foo = 3  # set on the model, as torch
    assert m.foo == 3 and "foo" not in c.__dict__
    del c.foo
    assert not hasattr(m, "foo")
    c.weight = nn.Parameter(ember.zeros(2, 2))
    assert m.weight.sum().item() == 0.0 and list(c._parameters) == []
    c.register_buffer("bb", ember.ones(1))  # a method runs on the wrapper itself
    assert list(c.state_dict()) == ["bb", "_orig_mod.weight", "_orig_mod.bias"]
    with pytest.raises(TypeError, match="Linear does not support len"):
        len(c)
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        c.nope
    seen = []
    c.register_forward_hook(lambda mod, i, o: seen.append(type(mod).__name__))
    c(ember.ones(2))
    assert seen == ["OptimizedModule"]
    c.to(ember.float64)
    assert m.weight.dtype == ember.float64


def test_compiled_pickle_and_deepcopy():
    m = nn.Linear(2, 2)
    c = _compile(ember, m)
    for r in (pickle.loads(pickle.dumps(c)), copy.deepcopy(c)):
        assert type(r).__name__ == "OptimizedModule" and type(r._orig_mod) is nn.Linear
        assert r._orig_mod is not m and ember.equal(r.weight, m.weight)
        assert list(r.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]


@needs_torch
def test_compiled_module_matches_torch():
    got = []
    for lib in (ember, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU())
        c = _compile(lib, m)
        c.train(False)
        try:
            m.__class__().load_state_dict(c.state_dict())
            err = None
        except RuntimeError as e:
            err = str(e).replace("torch", "ember")
        got.append((type(c).__name__, list(c.state_dict()), list(dict(c.named_modules())),
                    c.training, m.training, len(c), err))
    assert got[0] == got[1]


# ---- pooling of inputs with empty dims ---------------------------------------------------------

F = nn.functional


def _pools(nd):
    return {
        f"max_pool{nd}d": lambda L, x: L.nn.functional.__dict__[f"max_pool{nd}d"](x, 2),
        f"max_pool{nd}d_indices": lambda L, x: L.nn.functional.__dict__[f"max_pool{nd}d"](
            x, 2, return_indices=True)[0],
        f"avg_pool{nd}d": lambda L, x: L.nn.functional.__dict__[f"avg_pool{nd}d"](x, 2),
        f"lp_pool{nd}d": lambda L, x: L.nn.functional.__dict__[f"lp_pool{nd}d"](x, 2, 2),
        f"adaptive_max_pool{nd}d": lambda L, x: L.nn.functional.__dict__[
            f"adaptive_max_pool{nd}d"](x, 2),
        f"adaptive_avg_pool{nd}d": lambda L, x: L.nn.functional.__dict__[
            f"adaptive_avg_pool{nd}d"](x, 2),
        f"adaptive_max_pool{nd}d_0": lambda L, x: L.nn.functional.__dict__[
            f"adaptive_max_pool{nd}d"](x, 0),
        f"adaptive_avg_pool{nd}d_0": lambda L, x: L.nn.functional.__dict__[
            f"adaptive_avg_pool{nd}d"](x, 0),
        **({f"fractional_max_pool{nd}d": lambda L, x: L.nn.functional.__dict__[
            f"fractional_max_pool{nd}d"](x, 2, output_size=2)} if nd > 1 else {}),
    }


# (pool, shape) -> accepted by PyTorch (True) or refused with a RuntimeError (False)
_ACCEPTED = {
    "max_pool": {"1,0": False, "0,1": True, "0": False, "0,0": False},
    "avg_pool": {"1,0": False, "0,1": True, "0": False, "0,0": False},
    "lp_pool": {"1,0": False, "0,1": True, "0": False, "0,0": False},
    "adaptive_max_pool": {"1,0": False, "0,1": True, "0": True, "0,0": False},
    "adaptive_avg_pool": {"1,0": True, "0,1": True, "0": True, "0,0": True},
    "adaptive_avg_pool3": {"1,0": False, "0,1": True, "0": True, "0,0": False},
    "fractional_max_pool": {"1,0": False, "0,1": True, "0": True, "0,0": False},
}
_SHAPES = {"1,0": (1, 0), "0,1": (0, 1), "0": (0,), "0,0": (0, 0)}


def _family(name, nd):
    base = name.split("_pool")[0] + "_pool"
    return base + "3" if base == "adaptive_avg_pool" and nd == 3 else base


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pooling_empty_channels_as_torch(nd):
    for name, fn in _pools(nd).items():
        for key, lead in _SHAPES.items():
            x = ember.ones(*lead, *(4,) * nd)
            ok = _ACCEPTED[_family(name, nd)][key]
            if ok:
                out = fn(ember, x)
                assert out.shape[:len(lead)] == lead, (name, key)
            else:
                with pytest.raises(RuntimeError, match="non-batch dimensions|Expected [0-9]D"):
                    fn(ember, x)
            if torch is not None:
                try:
                    fn(torch, torch.ones(*lead, *(4,) * nd))
                    t_ok = True
                except RuntimeError:
                    t_ok = False
                assert t_ok == ok, (name, key)


def test_pooling_empty_dims_messages():
    with pytest.raises(RuntimeError, match=r"max_pool2d: Expected 3D or 4D \(batch mode\) "
                       r"tensor with optional 0 dim batch size for input, but got:\[1, 0, 4, 4\]"):
        F.max_pool2d(ember.ones(1, 0, 4, 4), 2)
    with pytest.raises(RuntimeError, match=r"but got:\[0, 4\]"):
        F.max_pool1d(ember.ones(0, 4), 2)
    with pytest.raises(RuntimeError, match=r"avg_pool3d\(\): Expected input's non-batch "
                       r"dimensions to have positive length, but input has a shape of "
                       r"\[1, 0, 4, 4, 4\] and non-batch dimension 0 has length zero!"):
        F.avg_pool3d(ember.ones(1, 0, 4, 4, 4), 2)
    with pytest.raises(RuntimeError, match=r"adaptive_max_pool1d\(\): Expected input to have "
                       r"non-zero size for non-batch dimensions, but input has sizes "
                       r"\[1, 0, 4\] with dimension 1 being empty"):
        F.adaptive_max_pool1d(ember.ones(1, 0, 4), 2)
    with pytest.raises(RuntimeError, match=r"adaptive_avg_pool2d\(\).*sizes \[1, 1, 0, 4\] "
                       r"with dimension 2 being empty"):
        F.adaptive_avg_pool2d(ember.ones(1, 1, 0, 4), 2)
    with pytest.raises(RuntimeError, match=r"fractional_max_pool2d\(\): Expected input to have "
                       r"non-zero size for non-batch dimensions, but got\[1, 0, 4, 4\] with "
                       r"dimension 1 being empty."):
        F.fractional_max_pool2d(ember.ones(1, 0, 4, 4), 2, output_size=2)
    # the top-level ops and modules refuse too
    with pytest.raises(RuntimeError, match="Expected 3D or 4D"):
        ember.max_pool2d(ember.ones(1, 0, 4, 4), 2)
    with pytest.raises(RuntimeError, match="non-batch dimensions"):
        nn.AdaptiveMaxPool2d(2)(ember.ones(2, 0, 4, 4))
    # values of accepted empty inputs
    out = F.adaptive_avg_pool2d(ember.ones(2, 0, 4, 4), 2)
    assert out.shape == (2, 0, 2, 2)
    out, idx = F.max_pool2d(ember.ones(0, 3, 4, 4), 2, return_indices=True)
    assert out.shape == idx.shape == (0, 3, 2, 2)
