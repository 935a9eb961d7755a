"""Module state-dict hook APIs PyTorch 2.13 has (session 18): the private
``_register_load_state_dict_pre_hook(hook, with_module=False)``, the public pre / post hooks of
``state_dict`` and ``load_state_dict``, their call order and return-value rules, and the
private call / forward entry points programs reach for. Each scenario runs on ember and, where
torch is installed, on torch, and the two must record the same events."""

from __future__ import annotations

import importlib.util

import ember
import pytest

_HAS_TORCH = importlib.util.find_spec("torch") is not None


def _libs() -> list:
    libs = [ember]
    if _HAS_TORCH:
        import torch

        libs.append(torch)
    return libs


def _same(scenario):
    """Runs ``scenario(lib)`` on ember (and torch) and returns ember's result, which must equal
    torch's."""
    results = [scenario(lib) for lib in _libs()]
    if len(results) == 2:
        assert results[0] == results[1], results
    return results[0]


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(), lib.nn.Linear(3, 1))


def test_private_load_pre_hook_without_module():
    def scenario(lib):
        net, calls = _net(lib), []

        def hook(*args):  # no module: (state_dict, prefix, local_metadata, strict, ...)
            calls.append((len(args), args[1], args[3], sorted(args[0])))

        net[0]._register_load_state_dict_pre_hook(hook)
        net.load_state_dict(net.state_dict())
        return calls

    assert _same(scenario) == [(7, "0.", True, ["0.bias", "0.weight"])]


def test_private_load_pre_hook_with_module_and_public_form():
    def scenario(lib):
        net, calls = _net(lib), []
        net._register_load_state_dict_pre_hook(
            lambda m, sd, prefix, *rest: calls.append(("private", type(m).__name__, prefix)),
            with_module=True)
        net[2].register_load_state_dict_pre_hook(
            lambda m, sd, prefix, *rest: calls.append(("public", type(m).__name__, prefix)))
        net.load_state_dict(net.state_dict())
        return calls

    assert _same(scenario) == [("private", "Sequential", ""), ("public", "Linear", "2.")]


def test_load_pre_hook_edits_state_dict_and_handle_removes():
    # a pre hook renaming old checkpoint keys (the common use), then removed by its handle
    def scenario(lib):
        net = lib.nn.Linear(2, 2)
        sd = {"w": lib.ones(2, 2), "bias": lib.zeros(2)}

        def rename(state_dict, prefix, *rest):
            if prefix + "w" in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")

        handle = net._register_load_state_dict_pre_hook(rename)
        keys = net.load_state_dict(sd)
        weight = net.weight.detach().sum().item()
        handle.remove()
        with pytest.raises(RuntimeError, match="Missing key"):
            net.load_state_dict({"w": lib.ones(2, 2), "bias": lib.zeros(2)})
        return (list(keys.missing_keys), list(keys.unexpected_keys), weight)

    assert _same(scenario) == ([], [], 4.0)


def test_load_pre_hook_return_value_is_ignored():
    def scenario(lib):
        net = lib.nn.Linear(1, 1)
        net._register_load_state_dict_pre_hook(lambda *a: {"junk": 1})
        return repr(net.load_state_dict(net.state_dict()))

    assert _same(scenario) == "<All keys matched successfully>"


def test_load_post_hook_edits_keys_in_place_and_must_return_none():
    def scenario(lib):
        net = lib.nn.Linear(1, 1)

        def forgive(module, keys):
            keys.unexpected_keys.clear()

        net.register_load_state_dict_post_hook(forgive)
        sd = dict(net.state_dict(), extra=lib.ones(1))
        out = repr(net.load_state_dict(sd))
        net.register_load_state_dict_post_hook(lambda m, keys: keys)
        with pytest.raises(AssertionError, match="not expected to return new values"):
            net.load_state_dict(net.state_dict())
        return out

    assert _same(scenario) == "<All keys matched successfully>"


def test_state_dict_pre_and_post_hook_order():
    def scenario(lib):
        net, calls = _net(lib), []
        for i in (0, 2):
            net[i].register_state_dict_pre_hook(
                lambda m, prefix, keep_vars: calls.append(("pre", prefix, keep_vars)))
            net[i].register_state_dict_post_hook(
                lambda m, sd, prefix, meta: calls.append(("post", prefix, len(sd))))
        net.register_state_dict_pre_hook(lambda m, prefix, kv: calls.append(("pre", prefix, kv)))
        net.register_state_dict_post_hook(lambda m, sd, p, meta: calls.append(("post", p, len(sd))))
        net.state_dict(keep_vars=True)
        return calls

    assert _same(scenario) == [("pre", "", True), ("pre", "0.", True), ("post", "0.", 2),
                               ("pre", "2.", True), ("post", "2.", 4), ("post", "", 4)]


def test_public_state_dict_post_hook_must_return_none():
    def scenario(lib):
        net = lib.nn.Linear(1, 1)

        def returns(m, sd, prefix, meta):
            return {}

        net.register_state_dict_post_hook(returns)
        with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
            net.state_dict()
        # the same function cannot then go through the private API
        with pytest.raises(RuntimeError, match="previously registered via"):
            lib.nn.Linear(1, 1)._register_state_dict_hook(returns)
        return True

    assert _same(scenario)


def test_private_state_dict_hook_may_replace_the_root_result():
    def scenario(lib):
        net = _net(lib)
        net._register_state_dict_hook(lambda m, sd, prefix, meta: {"only": 1})
        # a child's replacement is dropped: only the root's return value is returned
        net[0]._register_state_dict_hook(lambda m, sd, prefix, meta: {"child": 2})
        return net.state_dict()

    assert _same(scenario) == {"only": 1}


def test_public_post_hook_as_bound_method():
    # a bound method cannot take the "public API" mark itself (torch then refuses it with an
    # AttributeError at registration); ember accepts it and still holds it to returning None
    class Recorder:
        def __init__(self):
            self.seen = []

        def hook(self, m, sd, prefix, meta):
            self.seen.append(sorted(sd))
            return sd

    rec = Recorder()
    net = ember.nn.Linear(1, 1)
    net.register_state_dict_post_hook(rec.hook)
    with pytest.raises(RuntimeError, match="must return None"):
        net.state_dict()
    assert rec.seen == [["bias", "weight"]]


def test_modules_with_hooks_still_deepcopy_and_pickle():
    import copy
    import pickle

    net = ember.nn.Linear(2, 2)
    net._register_load_state_dict_pre_hook(_module_level_pre_hook)
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        _SEEN.clear()
        clone.load_state_dict(clone.state_dict())
        assert _SEEN == [""]


_SEEN: list = []


def _module_level_pre_hook(state_dict, prefix, *rest):
    _SEEN.append(prefix)


def test_private_call_entry_points():
    def scenario(lib):
        net, calls = lib.nn.Linear(2, 1), []
        net.register_forward_hook(lambda m, args, out: calls.append("hook"))
        x = lib.ones(1, 2)
        a = net._call_impl(x)
        b = net._wrapped_call_impl(x)
        c = net._slow_forward(x)  # forward alone: no hooks
        assert net._compiled_call_impl is None
        return calls, a.tolist() == b.tolist() == c.tolist()

    assert _same(scenario) == (["hook", "hook"], True)


def test_factory_kwargs():
    def scenario(lib):
        fk = lib.nn.factory_kwargs
        got = [fk({"device": "cpu", "factory_kwargs": {"dtype": lib.float64}}), fk(None),
               fk({"factory_kwargs": {"memory_format": lib.contiguous_format}})]
        for bad, msg in (({"foo": 1}, "unexpected kwargs"),
                         ({"dtype": lib.float32, "factory_kwargs": {"dtype": lib.float32}},
                          "dtype specified twice")):
            with pytest.raises(TypeError, match=msg):
                fk(bad)
        w = lib.empty(2, 3, **got[0])
        return [sorted(d) for d in got], str(w.dtype).split(".")[-1], tuple(w.shape)

    assert _same(scenario) == ([["device", "dtype"], [], ["memory_format"]], "float64", (2, 3))


def test_deprecated_container():
    def scenario(lib):
        with pytest.warns(FutureWarning, match="nn.Container. is deprecated"):
            c = lib.nn.Container(a=lib.nn.Linear(1, 2), b=lib.nn.ReLU())
        return list(dict(c.named_children())), sorted(c.state_dict()), repr(c).splitlines()[0]

    assert _same(scenario) == (["a", "b"], ["a.bias", "a.weight"], "Container(")


def test_functional_reexports_override_helpers():
    def scenario(lib):
        F, t = lib.nn.functional, lib.ones(1)
        return (F.has_torch_function((t,)), F.has_torch_function_unary(t),
                F.has_torch_function_variadic(t, t),
                F.handle_torch_function is lib.overrides.handle_torch_function,
                # helpers of the protocol, not functions behind it
                all(f in lib.overrides.get_ignored_functions()
                    for f in (F.handle_torch_function, F.has_torch_function,
                              F.has_torch_function_unary, F.has_torch_function_variadic)))

    assert _same(scenario) == (False, False, False, True, True)
