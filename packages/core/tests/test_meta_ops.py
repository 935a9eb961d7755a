"""Every op declared in packages/core/ops/*.yaml runs on the meta device and gives exactly the
sizes, strides and dtype it gives on the CPU (or, for ops whose result depends on values,
raises NotImplementedError). The sample calls come from meta_samples.py; an op without a
working sample fails test_every_op_has_a_meta_check, so a new op cannot go unchecked."""

from __future__ import annotations

import ember
import pytest
from meta_samples import SAMPLES, load_ops, schema_calls

OPS = load_ops()
NAMES = sorted({op.name for op in OPS})
DATA_DEPENDENT = {op.name for op in OPS if op.meta == "data_dependent"}
# Ops with no tensor result of their own (bool/int/float/Scalar returns read values).
VALUE_RESULTS = {op.name for op in OPS if op.returns[0][0] not in ("Tensor", "Tensor[]")}
# Composite ops that read values on the host by design (an explicit sync point, or an op marked
# data_dependent inside them): meta raises.
HOST_SYNC = {"embedding_bag", "argwhere"}


def to_meta(x):
    if isinstance(x, ember.Tensor):
        m = x.to("meta")
        return m.requires_grad_(x.requires_grad) if x.is_floating_point() else m
    if isinstance(x, list):
        return [to_meta(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_meta(v) for v in x)
    return x


def tensors(r):
    if isinstance(r, ember.Tensor):
        return [r]
    if isinstance(r, (list, tuple)):
        return [t for v in r for t in tensors(v)]
    return []


def cpu_calls(name):
    fns = []
    fn = getattr(ember._C, name, None)
    if name in SAMPLES:
        for make in SAMPLES[name]:
            args, kwargs = make()
            if fn is not None:
                fns.append((fn, args, kwargs))
            else:
                fns.append((getattr(type(args[0]), name), args, kwargs))
        return fns
    for op in OPS:
        if op.name == name:
            fns.extend(schema_calls(op))
    return fns


def first_working(name):
    """(fn, meta args, meta kwargs, CPU args, CPU result) of the first sample the CPU accepts;
    the meta arguments are taken before the CPU call (in-place ops change their inputs)."""
    errors = []
    for fn, args, kwargs in cpu_calls(name):
        ember.manual_seed(0)
        margs, mkwargs = to_meta(args), to_meta(kwargs)
        try:
            r = fn(*args, **kwargs)
        except Exception as e:  # not a valid call for this op: try the next sample
            errors.append(f"{type(e).__name__}: {e}"[:160])
            continue
        return fn, margs, mkwargs, args, r
    return None, None, None, None, errors


def check(name):
    fn, margs, mkwargs, args, r = first_working(name)
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


def test_every_op_has_a_meta_check():
    missing = []
    for name in NAMES:
        fn, *_ = first_working(name)
        if fn is None:
            missing.append(name)
    assert not missing, f"ops without a working sample in meta_samples.py: {missing}"


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
