#!/usr/bin/env python3
"""Hostile-input harness for ember: every op of the op table, and the Tensor API surface, called
with inputs a careless or malicious caller could pass. Each case runs in a worker subprocess
(restarted after a death), so a segfault, an abort or a hang (no answer within ``--timeout``) is
caught and reported with a one-line reproducer instead of taking the harness down.

Op cases mutate the valid sample calls of ``packages/core/tests/op_db.py`` (``DB[op].device_calls``,
the table test_op_devices.py runs; every op of ``packages/core/ops/*.yaml`` has an entry). One
mutation per case, applied to one argument:

- tensors: empty (zero-size dim), 0-d, each dtype (bool, int8, uint8, int64, float16, bfloat16,
  float64: mismatched with the others), transposed / stepped (non-contiguous), expanded (stride
  0), overlapping (``as_strided`` with a stride smaller than the row), NaN/inf values, huge index
  values, moved to the meta device (meta and cpu mixed), leaves that require grad, and None / a
  list / a string in the tensor's place;
- ints: out-of-range dims (99, -99), 2**62, -(2**63), 2**64 (does not fit int64), a float;
- int lists: numel overflow ``[2**40, 2**40]``, negative entries, ``[2**62]``, ``[]``;
- floats: NaN / inf, an int where a float is expected;
- ``out=``: wrong shape, wrong dtype, aliasing the input, expanded, on the meta device (for an op
  returning several tensors, the first of a tuple whose others are empty);
- in-place ``op_``: on an expanded view, an overlapping view, a leaf that requires grad, an
  integer tensor fed a float result, a meta tensor fed cpu operands.

Surface cases (source text: the case is its own repro) cover indexing with odd keys, view /
reshape / expand / permute / as_strided / unflatten / narrow with bad arguments, factories with
bad sizes and dtypes, and ``ember.load`` of truncated / corrupted checkpoints.

A case passes when it returns a sane result or raises RuntimeError / ValueError / TypeError /
IndexError / NotImplementedError (OutOfMemoryError where the size is really allocatable) with a
message that leaks no C++ internals. Returned tensors are checked (every element they address lies
in their storage, every element readable). With ``--torch`` the same mutated call runs in
PyTorch; results that differ while both accept (a silent wrong number) and inputs ember accepts
but PyTorch rejects are listed for triage. Ember's function is then taken from the namespace
PyTorch's lives in (F.hardtanh, not the raw ember.hardtanh), and where PyTorch's values are
undefined (an in-place op on an overlapping self, out= aliasing an input it must resize) only
shapes and dtypes are compared; cases PyTorch refuses only for lacking the method or the out=
overload (x.silu_(), isnan(out=)) are not listed, nor meta-and-cpu mixes that ember refuses as
tensors on two devices (PyTorch lets some through and computes from uninitialized memory).

    PYTHONPATH=build/dev/site python3 tools/fuzz_ops.py                   # every op and surface
    PYTHONPATH=build/dev/site python3 tools/fuzz_ops.py --ops add,topk --torch
    PYTHONPATH=build/dev/site python3 tools/fuzz_ops.py --repro 'op|add|0|dtype=bool|1'

Exit status 1 when a crash, hang, unexpected exception, unclear message or bad result was found.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "packages" / "core" / "tests"

EXPECTED_EXC = ("RuntimeError", "ValueError", "TypeError", "IndexError", "NotImplementedError",
                "DtypeNotImplementedError",
                "OutOfMemoryError", "CheckpointError", "UnpicklingError", "EOFError",
                "SafetensorError",
                "OverflowError")  # PyTorch's for a Python int no dtype holds (fill_(2**64))
# Fragments of messages that leak implementation details instead of explaining the problem.
UNCLEAR = ("std::", "basic_string", "vector::", "_M_", "bad_alloc", "bad_array", "stoi", "stol",
           "map::at", "Unable to cast Python instance", "unordered_map", "bad_optional",
           "bad_function_call", "bad_variant", "out_of_range", "Assertion", "INTERNAL ASSERT")

DTYPE_MUTATIONS = ["bool", "int8", "uint8", "int64", "float16", "bfloat16", "float64"]
TENSOR_MUTATIONS = (["empty", "zerod", "transposed", "stepped", "expanded", "overlap", "nan",
                     "bigindex", "meta", "grad", "none", "list", "str"]
                    + [f"dtype={d}" for d in DTYPE_MUTATIONS])
INT_MUTATIONS = ["99", "-99", "2**62", "-(2**63)", "2**64", "1.5"]
INTLIST_MUTATIONS = ["[2**40, 2**40]", "[-3, 4]", "[2**62, 4]", "[]", "[99]", "[-1, -1]"]
FLOAT_MUTATIONS = ["nan", "inf", "-inf", "int"]
OUT_MUTATIONS = ["shape", "dtype=int8", "dtype=bool", "alias", "expanded", "meta", "stepped"]
INPLACE_MUTATIONS = ["expanded", "overlap", "grad", "int", "meta"]
# Ops whose results are random, uninitialized or address-like: only shapes/dtypes compared.
NONDETERMINISTIC = {
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal",
    "bernoulli", "bernoulli_", "feature_dropout", "multinomial", "uniform_", "normal_",
    "exponential_", "random_", "empty", "empty_like", "empty_strided", "new_empty", "dropout",
    "native_dropout", "alpha_dropout", "feature_alpha_dropout", "rrelu", "poisson", "cauchy_",
    "log_normal_", "geometric_", "data_ptr", "empty_permuted", "rnn_tanh", "rnn_relu", "lstm",
    "gru",
}
TIE_DEPENDENT = {"sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode", "max", "min",
                 "cummax", "cummin", "argmax", "argmin", "msort", "unique", "max_pool2d_with_indices"}


# --------------------------------------------------------------------------------------------
# Building a case in the worker (or in --repro): mutations are lib-agnostic, so the same code
# applies them to ember tensors and to their torch twins.
# --------------------------------------------------------------------------------------------
def _lib_of(t):
    return sys.modules[type(t).__module__.split(".")[0]]


def _is_tensor(x) -> bool:
    return type(x).__name__ == "Tensor" or (hasattr(x, "stride") and hasattr(x, "dtype"))


def mutate_tensor(t, how: str, lib):
    """A hostile stand-in for tensor argument `t` (an ember or torch tensor)."""
    dt = t.dtype
    if how == "empty":
        return lib.zeros((0,) + tuple(t.shape[1:]), dtype=dt)
    if how == "zerod":
        return (t.detach().reshape(-1)[0].clone() if t.numel() else lib.zeros((), dtype=dt))
    if how == "transposed":
        if t.dim() >= 2:
            return t.detach().transpose(-1, -2).contiguous().transpose(-1, -2)
        return t.detach().flip(0) if t.dim() else t
    if how == "stepped":
        if t.dim() == 0:
            return t
        wide = lib.cat([t.detach(), t.detach()], dim=-1)
        return wide[..., ::2]
    if how == "expanded":
        if t.dim() == 0 or t.shape[0] <= 1:
            return t.detach().reshape((1,) + tuple(t.shape)).expand((3,) + tuple(t.shape))
        return t.detach()[:1].expand(tuple(t.shape))
    if how == "overlap":  # elements share memory: stride 1 on every dim
        n = t.numel()
        if t.dim() == 0 or n == 0:
            return t
        base = t.detach().reshape(-1).contiguous().clone()
        return base.as_strided(tuple(t.shape), (1,) * t.dim())
    if how == "nan":
        if not t.is_floating_point():
            t = t.to(lib.float32)
        pat = lib.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e38],
                         dtype=lib.float32).to(t.dtype)
        n = t.numel()
        return pat.repeat(n // 6 + 1)[:n].reshape(t.shape).clone()
    if how == "bigindex":
        if t.is_floating_point() or dt == lib.bool:
            return lib.full(tuple(t.shape), 2**40, dtype=lib.int64)
        hi = 2**40 if dt == lib.int64 else (127 if dt == lib.int8 else 2**30)
        return lib.full(tuple(t.shape), hi, dtype=dt) * (-1 if t.numel() % 2 else 1)
    if how == "meta":
        return t.detach().to("meta")
    if how == "grad":
        if not t.is_floating_point():
            return t.to(lib.float64).requires_grad_()
        return t.detach().clone().requires_grad_()
    if how == "none":
        return None
    if how == "list":
        return t.tolist()
    if how == "str":
        return "abc"
    if how.startswith("dtype="):
        return t.detach().to(getattr(lib, how[6:]))
    raise ValueError(how)


def _convert(x, torch, requires_grad_too=True):
    """An ember value's torch twin (tensors through NumPy, meta tensors as meta)."""
    import ember
    import numpy as np
    if isinstance(x, ember.Tensor):
        dt = getattr(torch, str(x.dtype).split(".")[-1])
        if x.device.type == "meta":
            y = torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=dt, device="meta")
        else:
            d = x.detach()
            if d.dtype == ember.bfloat16:
                y = torch.from_numpy(np.array(d.float().numpy(), copy=True)).to(dt)
            else:
                y = torch.from_numpy(np.array(d.numpy(), copy=True))
        if requires_grad_too and x.requires_grad:
            y.requires_grad_()
        return y
    if isinstance(x, ember.dtype):
        return getattr(torch, str(x).split(".")[-1])
    if isinstance(x, (list, tuple)):
        return type(x)(_convert(v, torch) for v in x)
    if isinstance(x, dict):
        return {k: _convert(v, torch) for k, v in x.items()}
    if isinstance(x, ember.device):
        return torch.device(str(x))
    return x


_DB = None


def _db():
    global _DB
    if _DB is None:
        sys.path.insert(0, str(TESTS))
        from op_db import DB  # noqa: E402  (the op table of the core tests)
        _DB = DB
    return _DB


def base_calls(name: str, limit: int = 2):
    """The op table's first valid sample calls of `name`, each (callable, args, kwargs), made
    under a fixed seed so that every worker builds the same inputs."""
    import ember
    ember.manual_seed(1234)
    out = []
    for fn, args, kwargs in _db()[name].device_calls():
        out.append((fn, list(args), dict(kwargs)))
        if len(out) >= limit:
            break
    return out


def _slots(args, kwargs):
    """(key, value) of every argument: positional index or keyword name."""
    return [(i, v) for i, v in enumerate(args)] + [(k, v) for k, v in kwargs.items()]


def op_mutations(name: str, info, calls) -> list[str]:
    """Every mutation key that applies to the op's base calls."""
    import ember
    keys = []
    has_out = bool(info.out)
    has_inplace = bool(info.inplace) and hasattr(ember.Tensor, name + "_")
    for ci, (fn, args, kwargs) in enumerate(calls):
        keys.append(f"op|{name}|{ci}|base|-")  # the valid call itself
        for slot, v in _slots(args, kwargs):
            if isinstance(v, ember.Tensor):
                keys += [f"op|{name}|{ci}|{m}|{slot}" for m in TENSOR_MUTATIONS]
            elif isinstance(v, (list, tuple)) and v and all(isinstance(e, ember.Tensor) for e in v):
                keys += [f"op|{name}|{ci}|{m}|{slot}.0" for m in TENSOR_MUTATIONS]
                keys += [f"op|{name}|{ci}|seq={m}|{slot}" for m in ("empty", "mixed", "none")]
            elif isinstance(v, bool):
                continue
            elif isinstance(v, int):
                keys += [f"op|{name}|{ci}|int={m}|{slot}" for m in INT_MUTATIONS]
            elif isinstance(v, float):
                keys += [f"op|{name}|{ci}|float={m}|{slot}" for m in FLOAT_MUTATIONS]
            elif isinstance(v, (list, tuple)) and v and all(
                    isinstance(e, int) and not isinstance(e, bool) for e in v):
                keys += [f"op|{name}|{ci}|ints={m}|{slot}" for m in INTLIST_MUTATIONS]
        if has_out and ci == 0:
            keys += [f"op|{name}|{ci}|out={m}|-" for m in OUT_MUTATIONS]
        if has_inplace and ci == 0 and args and isinstance(args[0], ember.Tensor):
            keys += [f"op|{name}|{ci}|inplace={m}|0" for m in INPLACE_MUTATIONS]
    return keys


class Skip(Exception):
    """The case does not apply (a method called on a non-tensor receiver)."""


def _method(name: str):
    def call(s, *a, **k):
        if not _is_tensor(s):
            raise Skip(f"no receiver for .{name}()")
        return getattr(s, name)(*a, **k)
    return call


def _func_for(name: str, fn, lib, method: bool):
    """The public callable of op `name` in `lib` (ember or torch)."""
    import ember
    if lib is ember:
        if method:
            return _method(name) if hasattr(ember.Tensor, name) else fn
        twin = _torch_namespace_twin(name)
        if twin is not None:
            return twin
        f = getattr(ember, name, None) or getattr(ember.nn.functional, name, None)
        if f is None and hasattr(ember.Tensor, name):
            return _method(name)
        return f or fn
    info = _db()[name]
    tname = info.torch_fn
    if method:
        return _method(tname)
    for ns in (lib, lib.nn.functional, lib.special, lib.linalg):
        f = getattr(ns, tname, None)
        if f is not None:
            return f
    f = getattr(lib.ops.aten, tname, None)
    if f is not None:
        return f
    return _method(tname)


def _torch_namespace_twin(name: str):
    """With --torch, ember's function in the namespace where PyTorch's lives, when they differ:
    ember.hardtanh is the raw op (floats only) while torch has only F.hardtanh (which clamps
    integers too), so comparing ember.hardtanh with F.hardtanh reported false divergences."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    import ember
    tname = _db()[name].torch_fn
    pairs = ((torch, ember), (torch.nn.functional, ember.nn.functional),
             (torch.special, ember.special), (torch.linalg, ember.linalg))
    for tns, ens in pairs:
        if getattr(tns, tname, None) is not None:
            return getattr(ens, tname, None) if tns is not torch else None
    return None


def _tuple_out(name: str) -> bool:
    """Whether an overload of `name` returning several tensors takes out= (a tuple)."""
    sys.path.insert(0, str(TESTS))
    from op_db import SCHEMAS  # noqa: E402

    return any(o.out and o.tuple_return for o in SCHEMAS.get(name, []))


def build_op_case(key: str, lib):
    """(callable, args, kwargs, description) of op case `key` in `lib`."""
    import ember
    _, name, ci, mut, slot = key.split("|")
    fn, args, kwargs = base_calls(name, int(ci) + 1)[int(ci)]
    method = getattr(ember._C, name, None) is None or fn is not getattr(ember._C, name, None)
    if lib is not ember:
        args, kwargs = _convert(args, lib), _convert(kwargs, lib)
    sub = None
    if "." in slot:
        slot, sub = slot.split(".")
    slot_key = int(slot) if slot.lstrip("-").isdigit() else slot
    target = (args if isinstance(slot_key, int) else kwargs)

    def get():
        return target[slot_key]

    def put(v):
        target[slot_key] = v

    kind, _, how = mut.partition("=")
    if mut == "base":
        pass
    elif mut in TENSOR_MUTATIONS:
        if sub is not None:
            seq = list(get())
            seq[int(sub)] = mutate_tensor(seq[int(sub)], mut, lib)
            put(seq)
        else:
            put(mutate_tensor(get(), mut, lib))
    elif kind == "seq":
        seq = list(get())
        put([] if how == "empty" else
            [seq[0], seq[-1].to(lib.int32)] if how == "mixed" else [seq[0], None])
    elif kind == "int":
        put(eval(how))  # noqa: S307 (fixed table above)
    elif kind == "float":
        put(int(get()) + 1 if how == "int" else float(how))
    elif kind == "ints":
        put(eval(how))  # noqa: S307
    elif kind == "out":
        ref = next((v for v in args if _is_tensor(v)), None)
        dt = ref.dtype if ref is not None else lib.float32
        shape = tuple(ref.shape) if ref is not None else (3,)
        if how == "shape":
            out = lib.zeros(7, dtype=dt)
        elif how.startswith("dtype="):
            out = lib.zeros(shape, dtype=getattr(lib, how[6:]))
        elif how == "alias":
            out = ref
        elif how == "expanded":
            out = lib.zeros((1,) + shape[1:], dtype=dt).expand((2,) + shape[1:]) if shape else \
                lib.zeros(1, dtype=dt).expand(2)
        elif how == "meta":
            out = lib.empty(shape, dtype=dt, device="meta")
        else:
            out = lib.zeros(shape[:-1] + (2 * shape[-1],) if shape else (2,), dtype=dt)[..., ::2]
        # An op returning several tensors (sort, topk, max(dim), ...) takes a tuple: the mutated
        # tensor first, then empty tensors of the other results' dtypes.
        ref_result = _func_for(name, fn, lib, method)(*args, **kwargs) if _tuple_out(name) else None
        if isinstance(ref_result, tuple):
            out = (out,) + tuple(lib.empty(0, dtype=r.dtype) for r in ref_result[1:])
        kwargs["out"] = out
    elif kind == "inplace":
        self_ = args[0]
        if how == "expanded":
            self_ = mutate_tensor(self_, "expanded", lib)
        elif how == "overlap":
            self_ = mutate_tensor(self_, "overlap", lib)
        elif how == "grad":
            self_ = mutate_tensor(self_, "grad", lib)
        elif how == "int":
            self_ = self_.detach().to(lib.int32)
        elif how == "meta":
            self_ = self_.detach().to("meta")
        args[0] = self_
        f = _method(name + "_")
        return f, args, kwargs, describe(name + "_", args, kwargs)
    else:
        raise ValueError(mut)
    return _func_for(name, fn, lib, method), args, kwargs, describe(name, args, kwargs)


def describe(name: str, args, kwargs) -> str:
    """The call with each tensor shown as shape/dtype/strides/device."""
    def d(v):
        if _is_tensor(v):
            s = f"T{tuple(v.shape)}:{str(v.dtype).split('.')[-1]}"
            if not v.is_contiguous():
                s += f":stride{tuple(v.stride())}"
            if v.device.type != "cpu":
                s += f":{v.device.type}"
            if v.requires_grad:
                s += ":grad"
            return s
        if isinstance(v, (list, tuple)) and len(v) <= 8:
            return "[" + ", ".join(d(e) for e in v) + "]"
        r = repr(v)
        return r if len(r) < 60 else r[:57] + "..."
    parts = [d(a) for a in args] + [f"{k}={d(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


# --------------------------------------------------------------------------------------------
# Surface cases: source text run with M = ember (and M = torch with --torch).
# --------------------------------------------------------------------------------------------
INDEX_KEYS = [
    "True", "False", "...", "None", "(None, ..., None)", "(..., ...)", "slice(None, None, -1)",
    "slice(None, None, 0)", "slice(2**63 - 1, None)", "slice(-2**63, 2**63 - 1)", "5", "-6",
    "2**40", "-(2**63)", "M.tensor([0.5])", "M.tensor([1, 0], dtype=M.uint8)",
    "M.tensor([True])", "M.tensor([True, False, True, False])", "M.tensor(2**40)",
    "M.tensor([-5])", "M.tensor([], dtype=M.int64)", "M.tensor([], dtype=M.float32)", "1.5",
    "'a'", "[0, 'a']", "(0, 0, 0)", "([0, 1], [0, 1, 2])", "(slice(None), None, [0, 0])",
    "M.zeros(4, 5, dtype=M.bool)", "M.zeros(5, dtype=M.bool)", "[[True, False]]",
    "M.tensor([0, 1]).to('meta')", "M.tensor([True, False, True, False]).expand(2, 4)",
    "M.arange(4).as_strided((4,), (0,))", "{0: 1}", "[]", "[[]]", "(None,) * 70",
    "M.tensor([[0, 1], [1, 0]]).t()", "(0, None, ..., None, -1)", "M.tensor(0, dtype=M.int8)",
]
VIEW_CALLS = [
    "a.view(-1, -1)", "a.view(2**40, 2**40)", "a.view(-5, 4)", "a.view(0, -1)", "a.view(5, 4)",
    "a.view(M.int64)", "a.t().view(20)", "a.view([4, 5], 1)", "a.view('a')", "a.view(1.5)",
    "a.reshape(2**62, 4)", "a.reshape(-1, 0)", "a.reshape(())", "a.reshape(2**64)",
    "a.expand(2**40, 2**40, 4, 5)", "a.expand(-1, 4, 5)", "a.expand(3, -2, 5)", "a.expand(5, 5)",
    "a.expand(4)", "a.expand(*[1] * 70, 4, 5)", "a.permute(0, 0)", "a.permute(0)",
    "a.permute(2, 0)", "a.permute(-3, 0)", "a.permute(0, 1, 2)",
    "a.as_strided((4, 5), (2**62, 1))", "a.as_strided((4, 5), (-1, 1))",
    "a.as_strided((4, 5), (5, 1), 2**62)", "a.as_strided((4, 5), (5, 1), -1)",
    "a.as_strided((4, 5), (5, 1), 1)", "a.as_strided((-1, 5), (5, 1))",
    "a.as_strided((4, 5), (5,))", "a.as_strided((2**40, 2**40), (0, 0))",
    "a.as_strided((4, 5), (0, 0)).add_(1)", "a.unflatten(1, (2, 3))",
    "a.unflatten(1, (-1, -1))", "a.unflatten(5, (1,))", "a.unflatten(1, ())",
    "a.narrow(0, 3, 5)", "a.narrow(0, -9, 1)", "a.narrow(0, 0, -1)", "a.narrow(9, 0, 1)",
    "a.narrow(0, 2**62, 1)", "a.unfold(0, 2**62, 1)", "a.unfold(0, 2, 0)", "a.unfold(0, 2, -1)",
    "a.unfold(5, 2, 1)", "a.diagonal(2**62)", "a.diagonal(0, 0, 0)", "a.transpose(0, 7)",
    "a.squeeze(7)", "a.unsqueeze(4)", "a.unsqueeze(-4)", "a.flatten(1, 0)", "a.flatten(0, 9)",
    "a.movedim(0, 9)", "a.movedim((0, 1), (1, 1))", "a.select(0, 4)", "a.select(0, -5)",
    "a.select(3, 0)", "a.split(0)", "a.split(-1)", "a.split([1, 1])", "a.chunk(0)",
    "a.chunk(-1)", "a.tensor_split(0)", "a.repeat(2**40, 2**40)", "a.repeat(-1, 1)",
    "a.repeat(1)", "a.tile((2**40, 2**40))", "a.roll(2**62, 0)", "a.roll([1, 1], [0])",
    "a.flip(0, 0)", "a.flip(5)", "a.rot90(1, [0, 0])", "a.swapaxes(0, 5)",
    "a.as_strided((5, 4), (1, 5)).t()",
]
FACTORY_CALLS = [
    "M.zeros(2**40, 2**40)", "M.ones(-1)", "M.empty(2**62)", "M.full((2**31, 2**31), 1.0)",
    "M.zeros((3,), dtype='float32')", "M.zeros(3, dtype=M.float32, device='meta').sum()",
    "M.arange(0, 10, 0)", "M.arange(0, 2**62)", "M.arange(float('nan'))", "M.arange(10, 0)",
    "M.arange(0, float('inf'))", "M.arange(0, 1, 1e-300)", "M.linspace(0, 1, -1)",
    "M.linspace(0, 1, 2**62)", "M.logspace(0, 1, -2)", "M.eye(-1)", "M.eye(2**40, 2**40)",
    "M.eye(3, -2)", "M.randn(-1)", "M.randn(2**40, 2**40)", "M.randint(5, 0, (3,))",
    "M.randint(0, 2**64, (3,))", "M.randint(0, 10, (3,), dtype=M.bool)", "M.randint(0, 300, (3,), dtype=M.uint8)",
    "M.randperm(-1)", "M.randperm(2**62)", "M.rand(3, dtype=M.int64)", "M.full((3,), 'a')",
    "M.full((3,), None)", "M.zeros(3, dtype='nope')", "M.zeros((2, None))", "M.zeros([2.5])",
    "M.zeros(M.tensor([2, 3]))", "M.tensor([1, 2], dtype=M.bool) + 2**70",
    "M.empty_strided((3, 3), (-1, 1))", "M.empty_strided((3, 3), (1,))",
    "M.empty_strided((2**40, 2**40), (1, 1))", "M.empty_strided((3,), (2**62,))",
    "M.zeros_like(M.zeros(3), dtype=M.int8, device='meta')", "M.full_like(M.zeros(3), float('nan'), dtype=M.int64)",
    "M.tril_indices(-1, 3)", "M.tril_indices(2**31, 2**31)", "M.triu_indices(3, 3, 2**62)",
    "M.zeros(3).new_zeros(-1)", "M.zeros(3).new_full((2**40, 2**40), 1)",
    "M.zeros(3).new_empty((3,), dtype=M.float32, device='meta')", "M.tensor([[1, 2], [3]])",
    "M.tensor([1, 2], device='meta')", "M.as_tensor([1.5, 2**70])", "M.tensor(float('nan'), dtype=M.int32)",
]
LOAD_CORRUPTIONS = ["truncate_half", "truncate_10", "empty", "flip_middle", "flip_header",
                    "garbage", "zip_truncated", "text"]


def surface_cases(rng: random.Random, n_index: int) -> list[tuple[str, str]]:
    """(label, code) cases of the hand-written surface; code binds r."""
    cases = []
    shapes = ["(4, 5)", "(0, 5)", "()", "(4, 5)[0:0]"]
    for key in INDEX_KEYS:
        for base in ("M.arange(20.0).reshape(4, 5)", "M.tensor(3.0)", "M.zeros(0, 5)"):
            cases.append(("getitem", f"a = {base}\nr = a[{key}]"))
            cases.append(("setitem", f"a = {base}\na[{key}] = M.tensor([1.0, 2.0])\nr = a"))
            cases.append(("setitem", f"a = {base}\na[{key}] = 7\nr = a"))
    for _ in range(n_index):  # pairs of keys
        k1, k2 = rng.choice(INDEX_KEYS), rng.choice(INDEX_KEYS)
        cases.append(("getitem2", f"a = M.arange(60).reshape(3, 4, 5)\nr = a[{k1}, {k2}]"))
        cases.append(("setitem2", f"a = M.arange(60).reshape(3, 4, 5)\na[{k1}, {k2}] = -1\nr = a"))
    for call in VIEW_CALLS:
        for base in ("M.arange(20.0).reshape(4, 5)", "M.arange(20.0).reshape(4, 5).t()",
                     "M.zeros(1, 5).expand(4, 5)"):
            cases.append(("view", f"a = {base}\nr = {call}"))
    del shapes
    for call in FACTORY_CALLS:
        cases.append(("factory", f"r = {call}"))
    for c in LOAD_CORRUPTIONS:
        for fmt in ("save", "safetensors"):
            cases.append(("load", f"r = H.corrupt_and_load(M, {c!r}, {fmt!r})"))
    cases += [
        ("inplace-leaf", "a = M.ones(3, requires_grad=True)\nr = a.add_(1)"),
        ("inplace-leaf", "a = M.ones(3, requires_grad=True)\na[0] = 5\nr = a"),
        ("inplace-view-of-leaf", "a = M.ones(3, requires_grad=True)\nr = a[:2].mul_(2)"),
        ("inplace-expanded", "a = M.ones(1).expand(3)\nr = a.add_(M.arange(3.0))"),
        ("inplace-expanded", "a = M.ones(1).expand(3)\nr = a.copy_(M.arange(3.0))"),
        ("inplace-overlap", "a = M.arange(6.0)\nr = a[1:].add_(a[:-1])"),
        ("inplace-overlap", "a = M.arange(6.0)\nr = a[:4].copy_(a[2:])"),
        ("inplace-overlap", "a = M.arange(6.0)\nr = M.add(a[:4], 1, out=a[2:])"),
        ("meta-mix", "r = M.zeros(3) + M.zeros(3, device='meta')"),
        ("meta-mix", "r = M.zeros(3, device='meta').copy_(M.ones(3))"),
        ("meta-mix", "r = M.zeros(3).copy_(M.ones(3, device='meta'))"),
        ("meta-mix", "r = M.zeros(3, device='meta').item()"),
        ("meta-mix", "r = M.zeros(3, device='meta').tolist()"),
        ("meta-mix", "r = M.zeros(3, device='meta').numpy()"),
        ("meta-mix", "r = bool(M.zeros(1, device='meta'))"),
        ("meta-mix", "r = M.zeros(3)[M.tensor([0, 1], device='meta')]"),
        ("meta-mix", "r = M.zeros(3, device='meta')[M.tensor([0, 1])]"),
        ("grad", "a = M.ones(3, dtype=M.int64)\nr = a.requires_grad_()"),
        ("grad", "a = M.ones(3, requires_grad=True)\nr = (a * 2).backward()"),
        ("grad", "a = M.ones(3, requires_grad=True)\nr = (a * 2).sum().backward(M.ones(3))"),
        ("grad", "a = M.ones(3, requires_grad=True)\nr = M.autograd.grad(a.sum(), [a, a])"),
        ("grad", "a = M.ones(3, requires_grad=True)\nb = a.sum()\nb.backward()\nr = b.backward()"),
        ("numpy", "a = M.ones(3, requires_grad=True)\nr = a.numpy()"),
        ("item", "r = M.ones(3).item()"),
        ("item", "r = M.ones(0).item()"),
        ("bool", "r = bool(M.ones(3))"),
        ("int", "r = int(M.tensor([1.5, 2.5]))"),
        ("index-dtype", "r = M.arange(5)[M.tensor([1.0, 2.0])]"),
        ("index-dtype", "r = M.arange(5)[M.tensor([1, 2], dtype=M.int8)]"),
        ("index-dtype", "r = M.arange(5)[M.tensor([1, 2], dtype=M.float16)]"),
        ("index-dtype", "r = M.index_select(M.arange(5), 0, M.tensor([1, 2], dtype=M.int8))"),
        ("index-dtype", "r = M.gather(M.arange(5), 0, M.tensor([1, 2], dtype=M.int32))"),
        ("index-dtype", "r = M.take(M.arange(5), M.tensor([1, 2], dtype=M.uint8))"),
    ]
    return cases


def corrupt_and_load(M, how: str, fmt: str):
    """Saves a small checkpoint, corrupts it `how`, loads it (the worker's helper)."""
    d = tempfile.mkdtemp(prefix="fuzzload")
    p = os.path.join(d, "ck")
    state = {"w": M.arange(1000.0).reshape(10, 100), "b": M.ones(3, dtype=M.int64), "n": 3}
    if fmt == "save":
        M.save(state, p)
    else:
        if not hasattr(M, "save_safetensors"):
            return None
        M.save_safetensors({k: v for k, v in state.items() if k != "n"}, p)
    data = bytearray(Path(p).read_bytes())
    rng = random.Random(len(data))
    if how == "truncate_half":
        data = data[: len(data) // 2]
    elif how == "truncate_10":
        data = data[:10]
    elif how == "empty":
        data = bytearray()
    elif how == "flip_middle":
        for _ in range(16):
            i = rng.randrange(len(data) // 4, len(data))
            data[i] ^= 0xFF
    elif how == "flip_header":
        for i in range(min(64, len(data))):
            data[i] ^= 0x5A
    elif how == "garbage":
        data = bytearray(rng.randrange(256) for _ in range(4096))
    elif how == "zip_truncated":
        data = data[:-22]
    elif how == "text":
        data = bytearray(b'{"w": [1, 2, 3]}')
    Path(p).write_bytes(bytes(data))
    try:
        if fmt == "save":
            r = M.load(p)
            if isinstance(r, dict):  # touch every tensor
                for v in r.values():
                    if hasattr(v, "tolist"):
                        v.tolist()
            return r
        r = M.load_safetensors(p)
        for v in r.values():
            v.tolist()
        return r
    finally:
        try:
            os.remove(p)
            os.rmdir(d)
        except OSError:
            pass


# --------------------------------------------------------------------------------------------
# The worker: one JSON case per line in, one JSON answer per line out.
# --------------------------------------------------------------------------------------------
def check_bounds(t) -> str | None:
    """Every addressable element lies in the storage (a bad view reads or writes wild memory)."""
    sizes, strides = list(t.shape), list(t.stride())
    if len(sizes) != len(strides):
        return f"sizes {sizes} and strides {strides} differ in length"
    if any(s < 0 for s in sizes):
        return f"negative size in {sizes}"
    n = math.prod(sizes)
    if t.numel() != n:
        return f"numel() {t.numel()} != prod(sizes {sizes})"
    if n == 0 or t.device.type == "meta":
        return None
    off = t.storage_offset()
    lo = off + sum(min(0, (s - 1) * st) for s, st in zip(sizes, strides))
    hi = off + sum(max(0, (s - 1) * st) for s, st in zip(sizes, strides))
    nbytes = (t._storage_nbytes() if hasattr(t, "_storage_nbytes")
              else t.untyped_storage().nbytes())
    if lo < 0 or (hi + 1) * t.element_size() > nbytes:
        return (f"view out of storage bounds: sizes {sizes} strides {strides} offset {off} "
                f"storage nbytes {nbytes}")
    return None


def _tensors(r):
    if isinstance(r, (tuple, list)):
        for x in r:
            yield from _tensors(x)
    elif isinstance(r, dict):
        for x in r.values():
            yield from _tensors(x)
    elif _is_tensor(r):
        yield r


def _plain(v):
    """Complex numbers as [real, imag] pairs (JSON has no complex type)."""
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return [v.real, v.imag] if isinstance(v, complex) else v


def summarize(r):
    """A comparable digest of a result: shapes, dtypes and (small) values, NaN as a string."""
    if isinstance(r, (tuple, list)):
        return [summarize(x) for x in r]
    if isinstance(r, bool) or r is None or isinstance(r, str):
        return r
    if isinstance(r, (int, float)):
        return repr(r) if isinstance(r, float) and not math.isfinite(r) else r
    if _is_tensor(r):
        d = {"shape": list(r.shape), "dtype": str(r.dtype).split(".")[-1]}
        if r.device.type != "meta" and r.numel() <= 4096:
            x = r.detach()
            if d["dtype"] in ("bfloat16", "float16"):
                x = x.float()
            d["values"] = json.loads(json.dumps(_plain(x.tolist())).replace("NaN", '"nan"')
                                     .replace("-Infinity", '"-inf"').replace("Infinity", '"inf"'))
        return d
    return repr(type(r).__name__)


def run_in(lib, key: str, H) -> dict:
    """Runs case `key` with `lib`; an outcome dict."""
    import numpy as np
    try:
        if key.startswith("op|"):
            fn, args, kwargs, desc = build_op_case(key, lib)
            ns = None
        else:
            desc = None
    except Exception as e:  # the torch twin of an input may not exist
        return {"status": "setup", "type": type(e).__name__, "msg": str(e)[:300]}
    aliased = None
    if key.startswith("op|") and "|out=alias|" in key:
        aliased = kwargs["out"][0] if isinstance(kwargs["out"], tuple) else kwargs["out"]
        aliased = aliased if _is_tensor(aliased) else None  # (no tensor argument: out=None)
        aliased_shape = tuple(aliased.shape) if aliased is not None else ()
    try:
        if key.startswith("op|"):
            r = fn(*args, **kwargs)
        else:
            ns = {"M": lib, "np": np, "math": math, "H": H, "r": None}
            exec(key.split("|", 2)[2], ns)  # noqa: S102
            r = ns["r"]
    except Skip as e:
        return {"status": "skip", "type": "Skip", "msg": str(e), "desc": desc}
    except BaseException as e:  # noqa: BLE001 (everything is a finding to classify)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return {"status": "exc", "type": type(e).__name__, "msg": str(e)[:400], "desc": desc}
    res = {"status": "ok", "problems": [], "desc": desc}
    if aliased is not None and tuple(aliased.shape) != aliased_shape:
        res["resized_input"] = True  # out= was the input, resized to the result's shape
    try:
        for k, t in enumerate(_tensors(r)):
            if k >= 200:
                break
            p = check_bounds(t)
            if p:
                res["problems"].append(p)
            elif t.device.type != "meta" and t.numel() <= 100000:
                t.tolist()
        res["summary"] = summarize(r)
    except Exception as e:  # noqa: BLE001
        res["problems"].append(f"inspecting the result raised {type(e).__name__}: {e}"[:300])
    return res


def worker_main() -> None:
    import resource
    lim = int(os.environ.get("FUZZ_MEM", str(4 << 30)))
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    import ember
    ember.set_num_threads(1)
    torch = None
    if os.environ.get("FUZZ_TORCH") == "1":
        import torch
        torch.set_num_threads(1)
    H = sys.modules[__name__]
    _db()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints must not corrupt the protocol
    out.write(json.dumps({"ready": True}) + "\n")  # start-up is not part of any case's time
    out.flush()
    for line in sys.stdin:
        case = json.loads(line)
        res = {"i": case["i"], "ember": run_in(ember, case["key"], H)}
        ember.set_default_dtype(ember.float32)
        out.write(json.dumps(res) + "\n")  # ember's answer first: a torch crash is not ember's
        out.flush()
        if torch is not None:
            try:
                res = {"i": case["i"], "torch": run_in(torch, case["key"], H)}
            except Exception as e:  # noqa: BLE001
                res = {"i": case["i"], "torch": {"status": "setup", "type": type(e).__name__,
                                                 "msg": str(e)}}
            torch.set_default_dtype(torch.float32)
            out.write(json.dumps(res) + "\n")
            out.flush()


class Worker:
    """A worker subprocess; run() answers {'crash': ...} / {'hang': ...} when it dies / stalls."""

    def __init__(self, mem_gb: int = 4, torch: bool = False):
        self.torch = torch
        env = dict(os.environ)
        env["FUZZ_MEM"] = str(mem_gb << 30)
        env["FUZZ_TORCH"] = "1" if torch else "0"
        env["OMP_NUM_THREADS"] = "1"
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                  env=env)
        self.buf = b""
        self.ready = False

    def stderr_tail(self) -> str:
        self.err.seek(0)
        return self.err.read().decode(errors="replace")[-500:]

    def run(self, i: int, key: str, timeout: float) -> dict:
        res = self._run(i, key, timeout)
        if self.torch and "ember" in res:
            t = self._read(timeout)
            if "torch" in t:
                res["torch"] = t["torch"]
            else:  # PyTorch itself died or stalled on the input: no comparison
                res["torch"] = {"status": "setup", "type": "torch-died", "msg": str(t)}
                res["restart"] = True
        return res

    def _run(self, i: int, key: str, timeout: float) -> dict:
        if not self.ready:
            r = self._read(max(timeout, 300.0))
            if "ready" not in r:
                return {"crash": f"the worker failed to start: {r}"}
            self.ready = True
        try:
            self.p.stdin.write((json.dumps({"i": i, "key": key}) + "\n").encode())
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        return self._read(timeout)

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return {"hang": f"no answer within {timeout:.0f} s"}
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    rc = self.p.wait()
                    sig = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
                    return {"crash": f"worker died ({sig}); stderr: {self.stderr_tail()!r}"}
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def close(self) -> None:
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


# --------------------------------------------------------------------------------------------
# Classification and the driver.
# --------------------------------------------------------------------------------------------
def classify(res: dict) -> tuple[str, str] | None:
    """(kind, detail) when ember misbehaved on the case, None when it did fine."""
    if "crash" in res:
        return "crash", res["crash"]
    if "hang" in res:
        return "hang", res["hang"]
    e = res["ember"]
    if e["status"] == "setup":
        return "harness", f"{e['type']}: {e['msg']}"
    if e["status"] == "exc":
        if e["type"] not in EXPECTED_EXC:
            return "unexpected-exception", f"{e['type']}: {e['msg']}"
        if any(u in e["msg"] for u in UNCLEAR):
            return "unclear-message", f"{e['type']}: {e['msg']}"
        if not e["msg"].strip():
            return "unclear-message", f"{e['type']} with an empty message"
        return None
    if e.get("problems"):
        return "bad-result", "; ".join(e["problems"])
    return None


def _close(a, b, rtol: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= rtol * max(1.0, abs(a), abs(b))
    return a == b


def _absent_in_torch(key: str, t: dict) -> bool:
    """Whether PyTorch refused the case because it lacks the method or the out= overload."""
    if t["type"] == "AttributeError" and "object has no attribute" in t["msg"]:
        return "|inplace=" in key
    if "|out=" in key and t["type"] == "TypeError":
        return ("unexpected keyword argument 'out'" in t["msg"]
                or "received an invalid combination of arguments - got (Tensor, out=Tensor)"
                in t["msg"])
    return False


def _meta_mix_refused(key: str, e: dict) -> bool:
    """Whether ember refused a case that mixes a meta tensor with cpu ones with its device-mismatch
    error: PyTorch lets some such mixes through and computes from uninitialized memory (a
    conv_transpose1d with a meta weight returned garbage numbers), so they are not listed."""
    mixed = "|meta|" in key or "|inplace=meta|" in key or "'meta'" in key
    return mixed and "found at least two devices" in e.get("msg", "")


def compare_torch(key: str, res: dict) -> str | None:
    """A divergence from PyTorch worth a look, or None."""
    e, t = res["ember"], res.get("torch")
    if t is None or t["status"] in ("setup", "skip") or e["status"] == "skip":
        return None
    name = key.split("|")[1] if key.startswith("op|") else ""
    if e["status"] == "ok" and t["status"] == "exc":
        if _absent_in_torch(key, t):
            return None  # ember's API is wider here (x.silu_(), isnan(out=)): nothing to compare
        return f"ember accepts what torch rejects ({t['type']}: {t['msg'][:200]})"
    if e["status"] == "exc" and t["status"] == "ok":
        if _meta_mix_refused(key, e):
            return None
        return f"ember rejects what torch accepts ({e['type']}: {e['msg'][:200]})"
    if e["status"] == "exc":
        return None
    es, ts = e.get("summary"), t.get("summary")
    if es is None or ts is None:
        return None
    es = es if isinstance(es, list) and es and isinstance(es[0], dict) else [es]
    ts = ts if isinstance(ts, list) and ts and isinstance(ts[0], dict) else [ts]
    if name in TIE_DEPENDENT:
        es, ts = es[:1], ts[:1]
    # Values that are undefined in PyTorch: an in-place op (op_, or copy_ / index_put_ / ...
    # of the table) on a self whose elements overlap (as_strided: the result depends on the order
    # elements are written), and out= aliasing the input when out must be resized (PyTorch
    # resizes its own input first and reads garbage, where ember reads the input as it was).
    # Only shapes and dtypes are compared then.
    undefined = ("|inplace=overlap|" in key or (name.endswith("_") and "|overlap|0" in key)
                 or e.get("resized_input") or t.get("resized_input"))
    if len(es) != len(ts):
        return f"{len(es)} results (torch {len(ts)})"
    for k, (a, b) in enumerate(zip(es, ts)):
        if isinstance(a, dict) and isinstance(b, dict):
            if a["shape"] != b["shape"] or a["dtype"] != b["dtype"]:
                return (f"result {k}: {a['shape']} {a['dtype']} "
                        f"(torch {b['shape']} {b['dtype']})")
            if name in NONDETERMINISTIC or undefined or "values" not in a or "values" not in b:
                continue
            rtol = 2e-2 if a["dtype"] in ("float16", "bfloat16") else 1e-4
            if not _close(a["values"], b["values"], rtol):
                return (f"result {k}: values {str(a['values'])[:150]} "
                        f"(torch {str(b['values'])[:150]})")
        elif name not in NONDETERMINISTIC and not undefined and not _close(a, b, 1e-5):
            return f"result {k}: {str(a)[:100]} (torch {str(b)[:100]})"
    return None


def build_keys(ops: list[str] | None, surface: bool, calls_per_op: int, seed: int,
               n_index: int = 200) -> tuple[list[str], dict]:
    """Every case key; and the counts per category."""
    import ember  # noqa: F401
    keys: list[str] = []
    stats = {"ops": 0, "op_cases": 0, "surface_cases": 0}
    db = _db()
    for name in sorted(db):
        if ops is not None and name not in ops:
            continue
        try:
            calls = base_calls(name, calls_per_op)
        except Exception:  # noqa: BLE001 (an op whose sample needs what this build lacks)
            continue
        ks = op_mutations(name, db[name], calls)
        if ks:
            stats["ops"] += 1
        keys += ks
    stats["op_cases"] = len(keys)
    if surface:
        sc = surface_cases(random.Random(seed), n_index)
        keys += [f"src|{label}|{code}" for label, code in sc]
        stats["surface_cases"] = len(sc)
    return keys, stats


def run_keys(keys: list[str], timeout: float = 20.0, torch: bool = False, mem_gb: int = 4,
             progress: bool = False, messages: list | None = None) -> tuple[list[dict], dict]:
    """Runs every case; (findings, counts). A finding: key, kind, detail, desc. Every raised
    exception's (key, type, message) is appended to `messages` when given."""
    findings, counts = [], {}
    w = Worker(mem_gb, torch)
    t0 = time.monotonic()
    comparable: dict[str, bool] = {}  # op|name|call -> whether torch agrees on the valid call
    if torch:  # the valid calls first: an op torch spells differently is not compared
        bases = sorted({"|".join(k.split("|")[:3]) + "|base|-" for k in keys
                        if k.startswith("op|")})
        for key in bases:
            res = w.run(-1, key, timeout)
            if "crash" in res or "hang" in res or res.get("restart"):
                w.kill()
                w = Worker(mem_gb, torch)
            comparable[key.rsplit("|", 2)[0]] = ("ember" in res and compare_torch(key, res) is None
                                                 and res.get("torch", {}).get("status") == "ok")
    try:
        for i, key in enumerate(keys):
            res = w.run(i, key, timeout)
            if "crash" in res or "hang" in res or res.get("restart"):
                w.kill()
                w = Worker(mem_gb, torch)
            c = classify(res)
            kind = c[0] if c else res["ember"]["status"]
            counts[kind] = counts.get(kind, 0) + 1
            desc = res.get("ember", {}).get("desc") or _parent_desc(key)
            if messages is not None and res.get("ember", {}).get("status") == "exc":
                messages.append((key, res["ember"]["type"], res["ember"]["msg"]))
            if c:
                findings.append({"key": key, "kind": c[0], "detail": c[1], "desc": desc})
            elif torch and comparable.get(key.rsplit("|", 2)[0], key.startswith("src|")):
                d = compare_torch(key, res)
                if d:
                    counts["divergence"] = counts.get("divergence", 0) + 1
                    findings.append({"key": key, "kind": "divergence", "detail": d,
                                     "desc": desc})
            if progress and (i + 1) % 1000 == 0:
                print(f"  {i + 1}/{len(keys)} ({time.monotonic() - t0:.0f} s) {counts}",
                      file=sys.stderr)
    finally:
        w.close()
    return findings, counts


def _parent_desc(key: str) -> str | None:
    """The call's description, built here (the worker died before it could answer)."""
    if not key.startswith("op|"):
        return None
    try:
        import ember
        return build_op_case(key, ember)[3]
    except Exception:  # noqa: BLE001
        return None


def repro_line(key: str) -> str:
    """How to replay case `key`: a shell line (op cases) or the code itself (surface cases)."""
    if key.startswith("src|"):
        code = key.split("|", 2)[2].replace("H.corrupt_and_load", "corrupt_and_load")
        return "import ember as M  # from fuzz_ops import corrupt_and_load\n   " + \
            code.replace("\n", "\n   ")
    return f"PYTHONPATH=build/dev/site python3 tools/fuzz_ops.py --repro {key!r}"


def repro(key: str) -> int:
    """Runs one case in this process (a crash here is the crash) and prints its outcome."""
    import ember
    H = sys.modules[__name__]
    if key.startswith("src|"):
        print(key.split("|", 2)[2])
    res = run_in(ember, key, H)
    print(json.dumps(res, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    ap.add_argument("--no-surface", action="store_true", help="skip the Tensor API surface")
    ap.add_argument("--only-surface", action="store_true")
    ap.add_argument("--calls", type=int, default=2, help="base sample calls per op")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample", type=int, default=0, help="run a seeded random N of the cases")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds before a hang")
    ap.add_argument("--mem-gb", type=int, default=4, help="address-space limit of the worker")
    ap.add_argument("--torch", action="store_true", help="compare with PyTorch")
    ap.add_argument("--json", default="", help="write the findings here")
    ap.add_argument("--messages", default="", help="write every exception message here (the "
                    "ones that do not name their op are listed last)")
    ap.add_argument("--repro", default="", help="run one case key in-process")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker_main()
        return 0
    if args.repro:
        return repro(args.repro)
    ops = None if not args.ops else set(args.ops.split(","))
    if args.only_surface:
        ops = set()
    keys, stats = build_keys(ops, not args.no_surface, args.calls, args.seed)
    if args.sample and args.sample < len(keys):
        keys = random.Random(args.seed).sample(keys, args.sample)
    print(f"{stats['ops']} ops, {stats['op_cases']} op cases, {stats['surface_cases']} surface "
          f"cases; running {len(keys)}", file=sys.stderr)
    t0 = time.monotonic()
    messages: list | None = [] if args.messages else None
    findings, counts = run_keys(keys, args.timeout, args.torch,
                                max(args.mem_gb, 8) if args.torch else args.mem_gb, True, messages)
    if messages is not None:
        def names_op(key: str, msg: str) -> bool:
            if not key.startswith("op|"):
                return True
            name = key.split("|")[1].strip("_")
            return name.split("_")[0] in msg or "incompatible function arguments" in msg
        unnamed = [m for m in messages if not names_op(m[0], m[2])]
        Path(args.messages).write_text(json.dumps({"all": messages, "op_not_named": unnamed},
                                                  indent=1))
        print(f"{len(messages)} exception messages, {len(unnamed)} do not name their op",
              file=sys.stderr)
    print(f"\n{len(keys)} cases in {time.monotonic() - t0:.0f} s: {counts}")
    order = {"crash": 0, "hang": 1, "bad-result": 2, "unexpected-exception": 3,
             "unclear-message": 4, "harness": 5, "divergence": 6}
    findings.sort(key=lambda f: (order.get(f["kind"], 9), f["key"]))
    for f in findings:
        print(f"\n== {f['kind']}: {f['desc'] or ''}\n   {f['detail'][:400]}\n   {repro_line(f['key'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(findings, indent=1))
    return 1 if any(f["kind"] not in ("divergence", "harness") for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
