"""The op table's device axis: every op declared in packages/core/ops/*.yaml runs on every
available device and is compared with the CPU.

- meta: exactly the CPU's sizes, strides and dtype (or, for ops whose result depends on values,
  NotImplementedError);
- the PrivateUse1 test backend (tests/backend_ext, built when a C++ compiler is present) and
  cuda (when a GPU is present): the same values as the CPU for every op the device has a kernel
  for; ops it has none for are skipped (they raise NotImplementedError naming the op and the
  device, checked here).

The calls come from the op table (op_db.DB[name].device_calls(): hand-written samples, else calls
built from the schema); the reference-checked entries also run every sample of
op_db's sample_inputs (layouts, broadcasting, empty, 0-d, each dtype). A YAML op without an
entry or without a working sample fails test_every_op_has_an_entry_and_a_sample, so a new op
cannot go unchecked."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from core_helpers import load_test_backend
from op_db import DB, POINTWISE, YAML_OPS

OPS = YAML_OPS
NAMES = sorted({op.name for op in OPS})
DATA_DEPENDENT = {op.name for op in OPS if op.meta == "data_dependent"}
# Ops with no tensor result of their own (bool/int/float/Scalar returns read values).
VALUE_RESULTS = {op.name for op in OPS if op.returns[0][0] not in ("Tensor", "Tensor[]")}
# Composite ops that read values on the host by design (an explicit sync point, or an op marked
# data_dependent inside them): meta raises.
HOST_SYNC = {"embedding_bag", "argwhere"}


# Factories whose values are unspecified: only shapes and dtypes are compared.
UNINITIALIZED = {"empty", "empty_like", "empty_strided", "new_empty"}


def to_device(x, device="meta"):
    if isinstance(x, ember.Tensor):
        m = x.to(device)
        return m.requires_grad_(x.requires_grad) if x.is_floating_point() else m
    if isinstance(x, list):
        return [to_device(v, device) for v in x]
    if isinstance(x, tuple):
        return tuple(to_device(v, device) for v in x)
    return x


def to_meta(x):
    return to_device(x, "meta")


def tensors(r):
    if isinstance(r, ember.Tensor):
        return [r]
    if isinstance(r, (list, tuple)):
        return [t for v in r for t in tensors(v)]
    return []


def cpu_calls(name):
    return list(DB[name].device_calls()) if name in DB else []


def snapshot(x):
    """A copy of the arguments as they are before the call (in-place ops change them)."""
    if isinstance(x, ember.Tensor):
        c = x.detach().clone()
        return c.requires_grad_(x.requires_grad) if x.is_floating_point() else c
    if isinstance(x, list):
        return [snapshot(v) for v in x]
    if isinstance(x, tuple):
        return tuple(snapshot(v) for v in x)
    if isinstance(x, dict):
        return {k: snapshot(v) for k, v in x.items()}
    return x


def first_working(name):
    """(fn, meta args, meta kwargs, CPU args after the call, CPU result, (args, kwargs) before
    the call) of the first sample the CPU accepts."""
    errors = []
    for fn, args, kwargs in cpu_calls(name):
        ember.manual_seed(0)
        margs, mkwargs = to_meta(args), to_meta(kwargs)
        before = (snapshot(args), snapshot(kwargs))
        try:
            r = fn(*args, **kwargs)
        except Exception as e:  # not a valid call for this op: try the next sample
            errors.append(f"{type(e).__name__}: {e}"[:160])
            continue
        return fn, margs, mkwargs, args, r, before
    return None, None, None, None, errors, None


def check(name):
    fn, margs, mkwargs, args, r, _ = first_working(name)
    if fn is None:
        return f"no working CPU sample ({(r or ['no sample'])[-1]})"
    if name in DATA_DEPENDENT or name in VALUE_RESULTS or name in HOST_SYNC:
        try:
            with ember.device("meta"):
                fn(*margs, **mkwargs)
        except (NotImplementedError, RuntimeError) as e:
            assert "meta" in str(e), f"{name}: unclear error on meta: {e}"
            return None
        return "ran on meta although its result depends on values"
    with ember.device("meta"):  # factories allocate on meta too
        mr = fn(*margs, **mkwargs)
    cpu_out, meta_out = tensors(r), tensors(mr)
    # in-place ops and out=: the written tensors are compared too
    cpu_out += tensors(args) if name.endswith("_") else []
    meta_out += tensors(margs) if name.endswith("_") else []
    if len(cpu_out) != len(meta_out):
        return f"{len(cpu_out)} results on the CPU, {len(meta_out)} on meta"
    for i, (c, m) in enumerate(zip(cpu_out, meta_out)):
        if m.device.type != "meta":
            if m.device == c.device and m.dim() == 0:
                continue  # a CPU 0-d argument passed through
            return f"result {i} is on {m.device}"
        got = (tuple(m.shape), m.stride(), m.dtype)
        want = (tuple(c.shape), c.stride(), c.dtype)
        if got != want:
            return f"result {i}: meta gives {got}, the CPU {want}"
    return None


@pytest.mark.parametrize("name", NAMES)
def test_op_on_meta_matches_cpu(name):
    problem = check(name)
    if problem and problem.startswith("no working CPU sample"):
        pytest.skip(problem)
    assert problem is None, f"{name}: {problem}"


def _backend_device():
    try:
        if load_test_backend() is None:
            return None
    except RuntimeError:  # the build failed: test_backend_slot.py reports why
        return None
    return ember._C._privateuse1_backend_name()


def _device(param):
    if param == "meta":
        return "meta"
    if param == "cuda":
        if not ember.cuda.is_available():
            pytest.skip("no CUDA device")
        return "cuda"
    name = _backend_device()
    if name is None:
        pytest.skip("the PrivateUse1 test backend could not be built")
    return name


@pytest.fixture(scope="module", params=["privateuse1", "cuda"])
def device(request):
    return _device(request.param)


def _values(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (ember.bfloat16,) else t.numpy()


@pytest.mark.parametrize("name", NAMES)
def test_op_on_device_matches_cpu(name, device):
    fn, _, _, args, r, before = first_working(name)
    if fn is None or name in VALUE_RESULTS:
        pytest.skip("no tensor result to compare")
    ember.manual_seed(0)
    try:
        # (inside the try: the device may not hold an argument's dtype, such as int32)
        dargs, dkwargs = to_device(before[0], device), {k: to_device(v, device)
                                                        for k, v in before[1].items()}
        with ember.device(device):  # factories allocate there too
            dr = fn(*dargs, **dkwargs)
    except NotImplementedError as e:
        assert device in str(e) or "meta" not in str(e), f"{name}: unclear error: {e}"
        pytest.skip(f"no {device} kernel: {e}"[:120])
    except TypeError as e:
        if "no kernel for dtype" in str(e):
            pytest.skip(str(e)[:120])
        raise
    cpu_out, dev_out = tensors(r), tensors(dr)
    if name.endswith("_"):
        cpu_out, dev_out = cpu_out + tensors(args), dev_out + tensors(dargs)
    assert len(cpu_out) == len(dev_out)
    for c, d in zip(cpu_out, dev_out):
        assert d.device.type in (device, "cpu")
        assert (tuple(d.shape), d.dtype) == (tuple(c.shape), c.dtype)
        if name in UNINITIALIZED:
            continue
        np.testing.assert_allclose(_values(d), _values(c), rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.fixture(scope="module", params=["meta", "privateuse1", "cuda"])
def any_device(request):
    return _device(request.param)


@pytest.mark.parametrize("name", [op.name for op in POINTWISE])
def test_pointwise_samples_on_device_match_cpu(name, any_device):
    """Every sample of a reference-checked entry (each dtype and layout) on the device against
    the CPU: sizes, strides and dtype on meta; values too elsewhere."""
    op, ran = DB[name], 0
    for dtype in op.dtypes:
        cpu = list(op.sample_inputs(dtype, np.random.default_rng(0)))
        try:
            dev = list(op.sample_inputs(dtype, np.random.default_rng(0), any_device))
        except TypeError as e:  # the device does not hold this dtype
            if "no kernel for dtype" in str(e):
                continue
            raise
        for c, d in zip(cpu, dev):
            want = getattr(ember, name)(*c.args, **c.kwargs)
            try:
                got = getattr(ember, name)(*d.args, **d.kwargs)
            except NotImplementedError as e:
                assert any_device in str(e), f"{name}: unclear error: {e}"
                continue
            except TypeError as e:
                if "no kernel for dtype" in str(e):
                    continue
                raise
            where = f"{name} {dtype} {c.desc}"
            assert got.device.type == any_device, where
            assert (tuple(got.shape), got.stride(), got.dtype) == (
                tuple(want.shape), want.stride(), want.dtype), where
            if any_device != "meta":
                np.testing.assert_allclose(_values(got).astype(np.float64),
                                           _values(want).astype(np.float64),
                                           rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=where)
            ran += 1
    if ran == 0:
        pytest.skip(f"no {any_device} kernel for {name}")


def test_every_op_has_an_entry_and_a_sample():
    no_entry = [name for name in NAMES if name not in DB]
    assert not no_entry, f"YAML ops without an op_db entry: {no_entry}"
    missing = []
    for name in NAMES:
        fn, *_ = first_working(name)
        if fn is None:
            missing.append(name)
    assert not missing, f"ops without a working sample in op_db.py: {missing}"


def test_recurrent_layers_on_meta():
    nn = pytest.importorskip("ember.nn")
    for cls in (nn.LSTM, nn.GRU):
        ember.manual_seed(0)
        m = cls(4, 5, num_layers=2)
        x = ember.randn(3, 2, 4)
        out, _ = m(x)
        mm = cls(4, 5, num_layers=2).to("meta")
        mout, _ = mm(x.to("meta"))
        assert (mout.shape, mout.stride(), mout.dtype) == (out.shape, out.stride(), out.dtype)
        mout.sum().backward()
        assert all(p.grad is not None and p.grad.device.type == "meta" for p in mm.parameters())
