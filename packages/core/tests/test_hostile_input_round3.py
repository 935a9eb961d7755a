"""Hostile input, round 3: checkpoints that fail to save (nothing saved before is lost),
map_location variants, autograd misuse (non-Tensor arguments, materialize_grads, grad mode,
``.data`` writes, exceptions in hooks), Module / optimizer ``load_state_dict`` with bad state,
and ops and backward from several threads at once.

Every refusal must be a clear Python exception naming the API and what it expected (PyTorch's
exception class where PyTorch refuses too); what PyTorch accepts, ember accepts and computes
the same. The DataLoader cases are in packages/data/tests/test_hostile_data_round3.py, the
collectives whose ranks disagree in packages/distributed/tests/test_collective_mismatch.py.
"""

from __future__ import annotations

import concurrent.futures as cf
import io
import os
import pickle
import subprocess
import sys
import textwrap

import ember
import ember.nn as nn
import pytest
from core_helpers import needs_torch, torch

E = ember


def _folder_state(folder) -> dict:
    return {name: open(os.path.join(folder, name), "rb").read() for name in os.listdir(folder)}


@pytest.fixture
def saved(tmp_path):
    """A checkpoint already on disk: (its path, its bytes)."""
    path = tmp_path / "ckpt.pt"
    E.save({"w": E.arange(4.0), "step": 7}, path)
    return path, path.read_bytes()


# ---- 1. a save that fails leaves the previous checkpoint (and nothing else) ------------------


class _RaisesWhenPickled:
    def __init__(self, exc: type[BaseException]) -> None:
        self.exc = exc

    def __reduce__(self):
        raise self.exc("refusing to be pickled")


@pytest.mark.parametrize("bad, exc", [
    (lambda x: x, pickle.PicklingError),  # not picklable: refused before the file is touched
    (_RaisesWhenPickled(KeyboardInterrupt), KeyboardInterrupt),
    (_RaisesWhenPickled(RuntimeError), RuntimeError),
])
def test_failed_save_keeps_the_previous_checkpoint(saved, bad, exc):
    path, before = saved
    with pytest.raises(exc):
        E.save({"w": E.ones(1000), "bad": bad}, path)
    assert _folder_state(path.parent) == {path.name: before}  # no temporary file left
    assert E.load(path)["step"] == 7


def test_save_failing_at_the_rename_removes_its_temporary_file(saved, monkeypatch):
    path, before = saved
    from ember import serialization

    def refuse(src, dst):
        raise PermissionError(1, "rename refused", dst)

    monkeypatch.setattr(serialization.os, "replace", refuse)
    with pytest.raises(PermissionError):
        E.save({"w": E.zeros(3)}, path)
    assert _folder_state(path.parent) == {path.name: before}


def test_save_over_the_file_size_limit_keeps_the_previous_checkpoint(saved):
    # A full disk, as the kernel reports it: the write fails part way (EFBIG under
    # RLIMIT_FSIZE; SIGXFSZ ignored so that it is an OSError). In a child: the limit is global.
    path, before = saved
    code = f"""
import resource, signal, ember
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 100}, resource.RLIM_INFINITY))
try:
    ember.save({{"w": ember.ones(100_000)}}, {str(path)!r})
except OSError as e:
    print("OSError", e.errno)
"""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("OSError 27"), r.stdout  # EFBIG
    assert _folder_state(path.parent) == {path.name: before}


def test_save_to_a_directory_is_refused_and_leaves_nothing(tmp_path):
    target = tmp_path / "a_dir"
    target.mkdir()
    with pytest.raises(IsADirectoryError, match="ember.save: the target is a directory"):
        E.save({"w": E.ones(2)}, target)
    assert sorted(os.listdir(tmp_path)) == ["a_dir"] and os.listdir(target) == []


def test_save_through_a_failing_file_object_raises_its_error():
    class Full(io.BytesIO):
        def write(self, b):
            if self.tell() > 64:
                raise OSError(28, "No space left on device")
            return super().write(b)

    with pytest.raises(OSError, match="No space left"):
        E.save({"w": E.ones(10_000)}, Full())


# ---- 2. map_location ---------------------------------------------------------------------------


def _torch_file(tmp_path, obj):
    p = tmp_path / "torch.pt"
    torch.save(obj, p)
    return p


@pytest.mark.parametrize("fmt", ["ember", "torch"])
def test_map_location_callable_must_return_a_tensor(tmp_path, fmt):
    if fmt == "torch":
        if torch is None:
            pytest.skip("writes a PyTorch checkpoint")
        path = _torch_file(tmp_path, {"w": torch.arange(4.0)})
    else:
        path = tmp_path / "e.pt"
        E.save({"w": E.arange(4.0)}, path)
    # Before, the callable's 5 was loaded in the tensor's place (ember format) or ignored.
    with pytest.raises(TypeError, match=r"map_location returned an object of type int .* saved at 'cpu'"):
        E.load(path, map_location=lambda storage, loc: 5)
    # None: the default placement; a tensor: used as is
    assert E.load(path, map_location=lambda s, loc: None)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    doubled = E.load(path, map_location=lambda s, loc: s * 2)["w"]
    assert doubled.tolist() == [0.0, 2.0, 4.0, 6.0]


@pytest.mark.parametrize("fmt", ["ember", "torch"])
def test_map_location_meta_loads_shapes_and_dtypes(tmp_path, fmt):
    if fmt == "torch":
        if torch is None:
            pytest.skip("writes a PyTorch checkpoint")
        x = torch.arange(6.0, dtype=torch.float64)
        path = _torch_file(tmp_path, {"x": x, "view": x[2:5], "n": torch.ones(2, 3, dtype=torch.int32)})
    else:
        x = E.arange(6.0, dtype=E.float64)
        path = tmp_path / "e.pt"
        E.save({"x": x, "view": x[2:5], "n": E.ones(2, 3, dtype=E.int32)}, path)
    d = E.load(path, map_location="meta")
    assert {k: (str(v.device), tuple(v.shape), v.dtype) for k, v in d.items()} == {
        "x": ("meta", (6,), E.float64), "view": ("meta", (3,), E.float64),
        "n": ("meta", (2, 3), E.int32)}
    assert E.load(path, map_location=E.device("meta"))["x"].is_meta


def test_map_location_unknown_device_names_it(saved):
    path, _ = saved
    with pytest.raises(ValueError, match="unknown map_location device 'gpu'.*'meta'"):
        E.load(path, map_location="gpu")
    with pytest.raises(ValueError, match="unknown map_location device 'nope'"):
        E.load(path, map_location={"cpu": "nope"})


# ---- 3. autograd misuse ------------------------------------------------------------------------


def _x():
    return E.ones(3, requires_grad=True)


@pytest.mark.parametrize("call, exc, msg", [
    ("E.autograd.grad((x * 2).sum(), [x, 5])", RuntimeError, r"grad: inputs\[1\] must be a Tensor, got int"),
    ("E.autograd.grad([(x * 2).sum(), 5], x)", TypeError, r"grad: outputs\[1\] must be a Tensor, got int"),
    ("E.autograd.grad((x * 2).sum(), x, grad_outputs=[2.0])", TypeError,
     r"grad: grad_outputs\[0\] must be a Tensor or None, got float"),
    ("E.autograd.grad(x * 2, x, grad_outputs=[[1.0, 1.0, 1.0]])", TypeError,
     r"grad_outputs\[0\] must be a Tensor or None, got list"),
    ("E.autograd.grad((x * 2).sum(), None)", TypeError, "grad: inputs must be a Tensor"),
    ("(x * 2).sum().backward(inputs=[x, 'a'])", RuntimeError,
     r"backward: inputs\[1\] must be a Tensor, got str"),
    ("E.autograd.backward([(x * 2).sum(), 3])", TypeError,
     r"backward: tensors\[1\] must be a Tensor, got int"),
    ("(x * 2).sum().backward(gradient=2.0)", TypeError,
     "backward: grad_tensors must be a Tensor or a sequence of Tensors or None, got float"),
    ("E.autograd.grad((x * 2).sum(), [x, E.ones(3, requires_grad=True)], materialize_grads=True, "
     "allow_unused=False)", ValueError, "expected allow_unused to be True or not passed"),
])
def test_autograd_arguments_of_the_wrong_kind(call, exc, msg):
    # Before: the engine binding's whole signature ("_run_backward(): incompatible function
    # arguments"), or (materialize_grads) silently accepted.
    with pytest.raises(exc, match=msg):
        eval(call, {"E": E, "x": _x()})


@needs_torch
@pytest.mark.parametrize("call", [
    "lib.autograd.grad((x * 2).sum(), [x, 5])",
    "lib.autograd.grad((x * 2).sum(), x, grad_outputs=[2.0])",
    "(x * 2).sum().backward(inputs=[x, 'a'])",
    "lib.autograd.grad((x * 2).sum(), [x, lib.ones(3, requires_grad=True)], "
    "materialize_grads=True, allow_unused=False)",
    "lib.autograd.grad((x * 2).sum(), None)",
])
def test_autograd_refusals_match_torch_classes(call):
    def outcome(lib):
        try:
            eval(call, {"lib": lib, "x": lib.ones(3, requires_grad=True)})
        except Exception as e:  # noqa: BLE001
            return type(e)
        return None

    assert outcome(E) is outcome(torch) is not None


def test_materialize_grads_still_fills_unused_inputs():
    x, w = _x(), _x()
    gx, gw = E.autograd.grad((x * 2).sum(), [x, w], materialize_grads=True)
    assert gx.tolist() == [2.0] * 3 and gw.tolist() == [0.0] * 3
    gx, gw = E.autograd.grad((x * 2).sum(), (x, w), allow_unused=True)
    assert gw is None


@pytest.mark.parametrize("mode", [0, 1, None, "yes"])
def test_set_grad_enabled_takes_only_bools(mode):
    assert E.is_grad_enabled()
    with pytest.raises(TypeError, match="set_grad_enabled.*must be bool, not"):
        E.set_grad_enabled(mode)
    assert E.is_grad_enabled()  # untouched
    if torch is not None:
        with pytest.raises(TypeError):
            torch.set_grad_enabled(mode)


def test_set_grad_enabled_with_bools_still_works():
    with E.set_grad_enabled(False):
        assert not (E.ones(2, requires_grad=True) * 2).requires_grad
    assert E.is_grad_enabled()


def test_writes_through_data_do_not_trip_the_saved_tensor_check():
    # .data is the same memory under its own version counter (as in PyTorch): a write through
    # it is not an autograd-visible in-place change. Before: "modified by an inplace operation".
    x = _x()
    y = x.exp()
    y.data.zero_()
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]  # exp's backward reads the (zeroed) output
    assert y._version == 0
    # an in-place write on the tensor itself is still caught
    z = _x().exp()
    z.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_data_shares_memory_and_its_views_are_consistent():
    w = nn.Parameter(E.ones(2, 2))
    d = w.data
    assert type(d) is E.Tensor and not d.requires_grad
    assert d.data_ptr() == w.data_ptr()
    d[0, 0] = 5.0
    assert w[0, 0].item() == 5.0
    out = (w * 3).sum()
    w.data.mul_(2)  # an update between forward and backward (an EMA, weight norm, ...)
    out.backward()
    assert w.grad.tolist() == [[3.0, 3.0], [3.0, 3.0]]


@needs_torch
def test_data_writes_match_torch():
    def run(lib):
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        y = x.sigmoid()
        y.data.mul_(0.5)
        y.sum().backward()
        return x.grad.tolist()

    assert run(E) == pytest.approx(run(torch))


def test_exceptions_in_hooks_leave_autograd_usable():
    x = _x()
    z = x * 2
    h = z.register_hook(lambda g: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        (z * 3).sum().backward()
    h.remove()
    (x * 5).sum().backward()
    assert x.grad.tolist() == [5.0] * 3
    m = nn.Linear(2, 2)
    fh = m.register_forward_hook(lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        m(E.ones(1, 2))
    fh.remove()
    assert m(E.ones(1, 2)).shape == (1, 2)


def test_hooks_returning_the_wrong_shape_or_type_are_named():
    x = _x()
    x.register_hook(lambda g: E.ones(4))
    with pytest.raises(RuntimeError, match=r"hook '<lambda>' has changed the size of value \(was \(3,\) got \(4,\)\)"):
        (x * 2).sum().backward()
    y = _x()
    y.register_hook(lambda g: 5)
    with pytest.raises(TypeError, match="expected Tensor, but hook '<lambda>' returned 'int'"):
        (y * 2).sum().backward()


# ---- 4. load_state_dict ------------------------------------------------------------------------


def _sgd(lr=0.1, **kw):
    p = nn.Parameter(E.ones(2))
    return p, E.optim.SGD([p], lr=lr, **kw)


@pytest.mark.parametrize("key, value", [("lr", "big"), ("momentum", None), ("lr", [0.1])])
def test_optimizer_state_with_a_non_number_hyperparameter_is_refused(key, value):
    p, o = _sgd(momentum=0.9)
    sd = o.state_dict()
    sd["param_groups"][0][key] = value
    # Before: accepted, then step() failed with _fused_sgd_'s whole binding signature
    with pytest.raises(TypeError, match=rf"SGD.load_state_dict: parameter group 0 has {key}="):
        o.load_state_dict(sd)
    assert o.param_groups[0]["lr"] == 0.1 and o.param_groups[0]["momentum"] == 0.9  # unchanged


@pytest.mark.parametrize("bad", [
    {"state": {}, "param_groups": {"lr": 1}},
    {"state": {}, "param_groups": [{"lr": 1}]},
    {"state": [], "param_groups": [{"params": [0], "lr": 0.1}]},
])
def test_optimizer_state_of_the_wrong_structure_is_refused(bad):
    _, o = _sgd()
    with pytest.raises(ValueError, match="SGD.load_state_dict: expected 'state' to be a dict"):
        o.load_state_dict(bad)


def test_optimizer_state_with_number_like_hyperparameters_loads():
    p, o = _sgd()
    sd = o.state_dict()
    sd["param_groups"][0]["lr"] = 1  # an int
    o.load_state_dict(sd)
    p.grad = E.ones(2)
    o.step()
    assert p.tolist() == [0.0, 0.0]
    q = nn.Parameter(E.ones(2))
    a = E.optim.Adam([q], lr=0.1)
    sd = a.state_dict()
    sd["param_groups"][0]["lr"] = E.tensor(0.01)  # a tensor lr, as PyTorch allows
    a.load_state_dict(sd)
    q.grad = E.ones(2)
    a.step()
    assert q.tolist() == pytest.approx([0.99, 0.99])


@needs_torch
def test_module_load_state_dict_messages_match_torch():
    def msg(lib):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Sequential(lib.nn.Linear(3, 1)))
        sd = m.state_dict()
        del sd["1.0.bias"]
        sd["1.0.extra"] = lib.zeros(1)
        sd["0.weight"] = lib.zeros(5, 5)
        with pytest.raises(RuntimeError) as info:
            m.load_state_dict(sd)
        return str(info.value).replace("torch.", "ember.")

    assert msg(E) == msg(torch)


def test_module_load_state_dict_non_strict_still_checks_shapes_and_types():
    m = nn.Linear(2, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape "
                                           r"ember.Size\(\[3, 5\]\)"):
        m.load_state_dict({"weight": E.zeros(3, 5), "bias": E.zeros(3)}, strict=False)
    with pytest.raises(RuntimeError, match="'weight': expected an ember.Tensor in the state "
                                           "dict, got NoneType"):
        m.load_state_dict({"weight": None, "bias": E.zeros(3)})
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like, got list"):
        m.load_state_dict([("weight", E.zeros(3, 2))])


def test_non_persistent_buffers_are_unexpected_keys():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", E.zeros(2))
            self.register_buffer("b", E.zeros(2), persistent=False)

    m = M()
    assert list(m.state_dict()) == ["a"]
    r = m.load_state_dict({"a": E.ones(2), "b": E.ones(2)}, strict=False)
    assert (r.missing_keys, r.unexpected_keys) == ([], ["b"])
    assert m.a.tolist() == [1.0, 1.0] and m.b.tolist() == [0.0, 0.0]


def test_load_state_dict_assign_keeps_the_parameter_type():
    m = nn.Linear(2, 3)
    w = E.ones(3, 2, dtype=E.float64)
    m.load_state_dict({"weight": w, "bias": E.zeros(3)}, assign=True)
    assert type(m.weight) is nn.Parameter and m.weight.requires_grad
    assert m.weight.dtype == E.float64 and m.weight.data_ptr() == w.data_ptr()


# ---- 5. threads --------------------------------------------------------------------------------


def test_backward_from_many_threads_gives_each_its_own_gradients():
    def work(i):
        x = E.arange(16.0).reshape(4, 4).requires_grad_()
        w = E.full((4, 4), float(i), requires_grad=True)
        for _ in range(20):
            gx, gw = E.autograd.grad((x @ w).tanh().sum(), [x, w])
        ((x * w).sum() * 2).backward()
        return (w.grad - x.detach() * 2).abs().max().item(), x.grad.sum().item()

    with cf.ThreadPoolExecutor(6) as ex:
        results = list(ex.map(work, range(12)))
    assert all(r[0] == 0.0 for r in results)
    assert [r[1] for r in results] == [32.0 * i for i in range(12)]


def test_concurrent_backward_into_one_leaf_accumulates_every_gradient():
    x = E.ones(1000, requires_grad=True)

    def work(_):
        for _ in range(25):
            (x * 2).sum().backward()

    with cf.ThreadPoolExecutor(6) as ex:
        list(ex.map(work, range(6)))
    assert x.grad.min().item() == x.grad.max().item() == 2.0 * 25 * 6


def test_grad_mode_is_per_thread():
    import threading

    seen = {}
    barrier = threading.Barrier(2)

    def off():
        with E.no_grad():
            barrier.wait()
            seen["off"] = (E.ones(2, requires_grad=True) * 2).requires_grad
            barrier.wait()

    def on():
        barrier.wait()
        seen["on"] = (E.ones(2, requires_grad=True) * 2).requires_grad
        barrier.wait()

    ts = [threading.Thread(target=off), threading.Thread(target=on)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert seen == {"off": False, "on": True}
