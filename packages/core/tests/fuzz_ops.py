#!/usr/bin/env python3
"""Crash/hang fuzzer for ember's public API (a standalone tool: pytest does not collect it).

Every op declared in ``packages/core/ops/*.yaml`` (function, method and in-place variants) and the
hand-written Python surface (indexing, operators, ``tensor``/``from_numpy``, conversions, ...) is
called with random and adversarial arguments: empty and 0-d tensors, transposed / strided /
expanded (stride-0) / offset views, every dtype, mismatched shapes and dtypes, huge and negative
sizes, out-of-range dims and indices, aliasing or ill-shaped ``out=`` tensors, and values of the
wrong Python type. Each case runs in a worker subprocess so that a segfault or abort (the worker
dies) and a hang (no answer within ``--timeout``) are caught; the worker is then restarted.

A case passes when it returns, or raises RuntimeError / ValueError / TypeError / IndexError /
NotImplementedError with a message that does not leak C++ internals. Returned tensors are also
checked: every element they can address must lie inside their storage, and results that require
grad (a quarter of the cases make their float inputs require grad) are run through backward().
With ``--torch`` each case
is also run against PyTorch, and outcome or result differences are listed (noisier: divergences
need a human look).

    PYTHONPATH=build/dev/site python3 packages/core/tests/fuzz_ops.py --seed 0 --per-op 30
    PYTHONPATH=build/dev/site python3 packages/core/tests/fuzz_ops.py --ops topk,sort --torch

Its sibling ``fuzz_api.py`` drives the same workers and checks from the signatures of every public
callable (the hand-written Python functions included) instead of the YAML schemas.

Every finding is printed as a standalone repro (``import ember as M`` + the case's code); crashes
and hangs are first shrunk (dropping optional arguments, simplifying tensors) while they still
reproduce. Exit status 1 when anything but divergences was found.
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
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "codegen"))

FLOATS = ["float32", "float64", "float16", "bfloat16"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
DTYPES = FLOATS + INTS + ["bool"]
EXPECTED_EXC = ("RuntimeError", "ValueError", "TypeError", "IndexError", "NotImplementedError",
                "DtypeNotImplementedError",
                "OutOfMemoryError", "LinAlgError",
                "OverflowError")  # PyTorch's for a Python int no dtype holds (fill_(2**64))
# The classes each ember exception class also is: raised where torch raises one of these, it is
# caught by the same ``except`` (NotImplementedError is a builtin subclass of RuntimeError).
SUBCLASS_OF = {"DtypeNotImplementedError": ("NotImplementedError", "TypeError", "RuntimeError"),
               "NotImplementedError": ("RuntimeError",), "LinAlgError": ("RuntimeError",),
               "OutOfMemoryError": ("RuntimeError",)}
# Fragments of messages that leak implementation details instead of explaining the problem.
UNCLEAR = ("std::", "basic_string", "vector::", "_M_", "bad_alloc", "bad_array", "stoi", "stol",
           "map::at", "Unable to cast Python instance", "unordered_map", "bad_optional",
           "bad_function_call", "bad_variant", "out_of_range")
# Ops whose results are random or uninitialized: only shapes and dtypes are compared with torch.
NONDETERMINISTIC = {
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal",
    "bernoulli", "bernoulli_", "multinomial", "uniform_", "normal_", "exponential_", "random_",
    "empty", "empty_like", "empty_strided", "new_empty", "data_ptr", "untyped_storage_ptr",
}
# Ops whose index outputs depend on how ties are broken: only the values are compared.
TIE_DEPENDENT = {"sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode", "max", "min",
                 "cummax", "cummin", "argmax", "argmin", "msort", "unique"}

# --------------------------------------------------------------------------------------------
# The worker: reads one JSON case per line on stdin, answers one JSON line per case on stdout.
# --------------------------------------------------------------------------------------------
WORKER = r'''
import json, math, os, resource, sys
lim = int(os.environ["FUZZ_MEM"])
resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
import numpy as np
import ember
ember.set_num_threads(int(os.environ.get("FUZZ_THREADS", "1")))
torch = None
if os.environ.get("FUZZ_TORCH") == "1":
    import torch
    torch.set_num_threads(1)
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # stray prints must not corrupt the protocol

def tensors_of(r):
    if isinstance(r, (tuple, list)):
        for x in r:
            yield from tensors_of(x)
    elif type(r).__module__.startswith(("ember", "torch")) and hasattr(r, "stride") and \
            not getattr(r, "is_sparse", False):  # sparse results have no strides to check
        yield r

def check_bounds(t):
    """Every addressable element must lie in the storage (a bad view reads or writes wild memory)."""
    sizes, strides = list(t.shape), list(t.stride())
    if len(sizes) != len(strides):
        return f"sizes {sizes} and strides {strides} differ in length"
    if any(s < 0 for s in sizes):
        return f"negative size in {sizes}"
    n = math.prod(sizes)
    if t.numel() != n:
        return f"numel() {t.numel()} != prod(sizes {sizes})"
    if n == 0:
        return None
    off = t.storage_offset()
    lo = off + sum(min(0, (s - 1) * st) for s, st in zip(sizes, strides))
    hi = off + sum(max(0, (s - 1) * st) for s, st in zip(sizes, strides))
    nbytes = t._storage_nbytes() if hasattr(t, "_storage_nbytes") else t.untyped_storage().nbytes()
    if lo < 0 or (hi + 1) * t.element_size() > nbytes:
        return (f"view out of storage bounds: sizes {sizes} strides {strides} offset {off} "
                f"itemsize {t.element_size()} storage nbytes {nbytes}")
    return None

def plain(v):
    """Complex numbers as [real, imag] pairs, so that they are compared with a tolerance."""
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, complex):
        return [v.real, v.imag]
    return v

def summarize(r, mod):
    """A comparable, JSON-able digest of a result (shape, dtype, values when small)."""
    if isinstance(r, (tuple, list)):
        return [summarize(x, mod) for x in r]
    if getattr(r, "is_sparse", False) and hasattr(r, "to_dense"):
        return summarize(r.to_dense(), mod)
    if isinstance(r, (bool, int, float, str)) or r is None:
        if isinstance(r, float) and not math.isfinite(r):
            return repr(r)
        return r
    if hasattr(r, "stride") and hasattr(r, "dtype"):
        d = {"shape": list(r.shape), "dtype": str(r.dtype).split(".")[-1]}
        if r.device.type == "meta":  # sizes and dtype only: meta tensors have no values
            d["device"] = "meta"
        elif r.numel() <= 4096 and math.prod(max(s, 1) for s in r.shape) <= 4096:
            x = r.detach() if hasattr(r, "detach") else r
            if d["dtype"] == "bfloat16":
                x = x.float()
            d["values"] = json.loads(json.dumps(plain(x.tolist()), default=str).replace("NaN", '"nan"')
                                     .replace("-Infinity", '"-inf"').replace("Infinity", '"inf"'))
        return d
    return repr(type(r))

EXPECTED = %r
UNCLEAR = %r

def reset():
    """Undo global state a case may have changed (print options, default dtype, ...)."""
    ember.set_printoptions(profile="default")
    ember.set_default_dtype(ember.float32)
    ember.set_num_threads(int(os.environ.get("FUZZ_THREADS", "1")))
    ember.set_allocator_caching(True)
    if torch is not None:
        torch.set_default_dtype(torch.float32)
        torch.set_printoptions(profile="default")

def backward(r, res):
    """Runs backward through results that require grad: the derivative formulas see the same
    adversarial inputs as the forward op."""
    for k, t in enumerate(tensors_of(r)):
        if k >= 4 or not getattr(t, "requires_grad", False) or t.numel() > 100000:
            continue
        try:
            t.sum().backward()
        except Exception as e:
            if type(e).__name__ not in EXPECTED or any(u in str(e) for u in UNCLEAR):
                res["problems"].append(f"backward raised {type(e).__name__}: {e}"[:300])

def run(code, mod):
    ns = {"M": mod, "np": np, "math": math, "r": None}
    try:
        exec(code, ns)
    except AttributeError as e:
        if "has no attribute" in str(e) and mod is torch:
            return {"status": "skip", "type": "AttributeError", "msg": str(e)[:300]}
        return {"status": "exc", "type": type(e).__name__, "msg": str(e)[:300]}
    except Exception as e:
        return {"status": "exc", "type": type(e).__name__, "msg": str(e)[:300]}
    r = ns["r"]
    res = {"status": "ok", "problems": []}
    try:
        for k, t in enumerate(tensors_of(r)):
            if k >= 1000:  # a split into a million pieces: the first ones will do
                break
            p = check_bounds(t)
            if p:
                res["problems"].append(p)
            elif t.device.type == "meta":
                repr(t)  # no values to touch
            elif math.prod(max(s, 1) for s in t.shape) <= 100000:
                t.tolist()  # touch every element
                if mod is ember and t.numel() <= 64:
                    repr(t)
        if mod is ember:
            backward(r, res)
        if torch is not None:
            res["summary"] = summarize(r, mod)
    except Exception as e:  # inspecting a returned tensor must not fail
        res["problems"].append(f"inspecting the result raised {type(e).__name__}: {e}"[:300])
    return res

out.write('{"ready": 1}\n')  # imports done: the parent starts timing cases from here
out.flush()
for line in sys.stdin:
    case = json.loads(line)
    res = {"i": case["i"], "ember": run(case["code"], ember)}
    if torch is not None:
        # ember's outcome first: a hang or crash after it is torch's, not ember's
        out.write(json.dumps({"ember_done": res["ember"]}) + "\n")
        out.flush()
        res["torch"] = run(case["code"], torch)
    reset()
    out.write(json.dumps(res) + "\n")
    out.flush()
'''


@dataclass
class Case:
    op: str  # the op or surface feature under test
    setup: list[str]  # `aN = <expr>` lines
    call: str  # the expression whose value is `r` (may mention a0..aN)
    simple: dict[int, str] = field(default_factory=dict)  # simpler exprs for setup lines (shrink)

    @property
    def code(self) -> str:
        return "\n".join(self.setup + [f"r = {self.call}"])

    def repro(self) -> str:
        return "import ember as M\n" + self.code


# --------------------------------------------------------------------------------------------
# Value generators. Everything is produced as source text, so a case is its own repro.
# --------------------------------------------------------------------------------------------
SHAPES = [(), (0,), (3, 0), (0, 3), (1,), (5,), (3, 4), (4, 3), (2, 3, 4), (1, 1), (4, 1),
          (2, 1, 3), (6,), (2, 2), (1, 5), (2, 0, 3), (17, 33), (3, 1, 1, 5), (1025,),
          (2, 2, 2, 2, 2), (40000,)]
HUGE = [2**31, 2**32, 2**40, 2**62, 2**63 - 1, -(2**63), -(2**62), 2**64, -(2**31) - 1]
WRONG = ["None", '"abc"', "1.5", "[1, 2]", "M.float32", "(1,)", "object()", "2**70", "True",
         "M.zeros(2)", "[M.zeros(2)]", "float('nan')"]


def _shape_src(shape: tuple) -> str:
    return repr(tuple(shape))


class Gen:
    def __init__(self, rng: random.Random):
        self.r = rng
        self.grad = False  # float tensors of the current case require grad (autograd paths)

    # ---- tensors ------------------------------------------------------------------------------
    def base(self, shape: tuple, dtype: str) -> str:
        n = math.prod(shape)
        sh = _shape_src(shape)
        if dtype == "bool":
            return f"(M.arange({n}).reshape({sh}) % 3 == 0)"
        if dtype in FLOATS:
            return (f"(M.arange({n}, dtype=M.float64) * 0.37 - {round(n * 0.15, 2)})"
                    f".reshape({sh}).to(M.{dtype})" + (".requires_grad_()" if self.grad else ""))
        if dtype == "uint8":
            return f"(M.arange({n}).reshape({sh}) % 256).to(M.uint8)"
        return f"(M.arange({n}).reshape({sh}) - {n // 2}).to(M.{dtype})"

    def tensor(self, shape: tuple, dtype: str, layout: str | None = None) -> str:
        r = self.r
        shape = tuple(shape)
        if layout is None:
            layout = r.choice(["contig"] * 3 + ["T", "step", "expand", "offset", "special"])
        if layout == "T" and len(shape) >= 2:
            sw = shape[:-2] + (shape[-1], shape[-2])
            return self.base(sw, dtype) + ".transpose(-1, -2)"
        if layout == "step" and len(shape) >= 1:
            wide = shape[:-1] + (2 * shape[-1],)
            return self.base(wide, dtype) + "[..., ::2]"
        if layout == "expand" and len(shape) >= 1 and shape[0] != 1:
            one = (1,) + shape[1:]
            return self.base(one, dtype) + f".expand({_shape_src(shape)})"
        if layout == "offset" and len(shape) >= 1:
            n = math.prod(shape)
            return self.base((n + 3,), dtype) + f"[3:].reshape({_shape_src(shape)})"
        if layout == "special" and dtype in FLOATS and shape != ():
            n = math.prod(shape)
            vals = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e30, -1.0, 0.5]
            lst = [vals[i % len(vals)] for i in range(n)]
            items = ", ".join(repr(v) if math.isfinite(v) else f"float('{v}')" for v in lst)
            return (f"M.tensor([{items}], dtype=M.float64).reshape({_shape_src(shape)})"
                    f".to(M.{dtype})" + (".requires_grad_()" if self.grad else ""))
        return self.base(shape, dtype)

    def rand_tensor(self) -> str:
        return self.tensor(self.r.choice(SHAPES), self.r.choice(DTYPES))

    def index_tensor(self, n: int, shape: tuple | None = None) -> str:
        r = self.r
        if shape is None:
            shape = r.choice([(), (0,), (1,), (3,), (2, 2), (5,), (3, 4)])
        k = math.prod(shape)
        hi = max(n, 1)
        mode = r.random()
        if mode < 0.6:
            vals = [r.randrange(-hi, hi) if n > 0 else 0 for _ in range(k)]
        elif mode < 0.85:
            vals = [r.choice([n, -n - 1, n + 5, -1, 0, 2**40, -(2**62)]) for _ in range(k)]
        else:
            vals = [r.randrange(0, hi) for _ in range(k)]
        dt = r.choice(["int64"] * 6 + ["int32", "float32", "uint8", "bool", "int16"])
        if dt == "bool":
            return f"(M.tensor({vals}).reshape({_shape_src(shape)}) > 0)"
        return f"M.tensor({vals}, dtype=M.{dt}).reshape({_shape_src(shape)})"

    # ---- plain values ---------------------------------------------------------------------------
    def dim(self, ndim: int) -> str:
        r = self.r
        if r.random() < 0.85:
            return str(r.randint(-ndim - 2, ndim + 1))
        return str(r.choice(HUGE))

    def size_int(self, n: int = 4) -> str:
        r = self.r
        if r.random() < 0.75:
            return str(r.choice([0, 1, 2, 3, 5, -1, -2, n, n + 1, 7, 100]))
        return str(r.choice(HUGE + [2**20, 10**6]))

    def size_list(self) -> str:
        r = self.r
        return r.choice([
            "[]", "[0]", "[3]", "[3, 4]", "[-1]", "[2, -1]", "[-1, -1]", "[2**62]", "[2**31, 2**31]",
            "[2**40]", "[-1, 4]", "[1] * 40", "[2] * 70", "[0, 2**62]", "[2**62, 2**62]", "[4, 3]",
            "[12]", "[2, 3, 2]", "[6, 0]", "[-5]", "[2**63 - 1]", "[1, 1, 1]", "[3, 0, 2**40]",
            "[2**21, 2**21, 2**21]", "(2, 6)", "[2**64]",
        ])

    def dim_list(self, ndim: int) -> str:
        r = self.r
        k = r.choice([0, 1, 1, 2, 2, 3])
        dims = [r.randint(-ndim - 1, ndim) for _ in range(k)]
        if r.random() < 0.15:
            dims = dims + dims[:1]  # duplicates
        if r.random() < 0.05:
            dims = [r.choice(HUGE)]
        return repr(dims)

    def scalar(self) -> str:
        return self.r.choice(["0", "1", "-1", "2.5", "-0.5", "True", "False", "float('nan')",
                              "float('inf')", "-float('inf')", "2**31", "2**63 - 1", "-(2**63)",
                              "2**64", "1e308", "3", "255", "-129", "0.0", "1e-300"])

    def float_(self) -> str:
        return self.r.choice(["0.0", "1.0", "-1.0", "0.5", "float('nan')", "float('inf')",
                              "-float('inf')", "1e308", "-1e-308", "10.0", "2", "-3"])

    def dtype(self) -> str:
        return "M." + self.r.choice(DTYPES)

    def device(self) -> str:
        return self.r.choice(["None", "'cpu'", "'cuda'", "'cuda:7'", "'bogus'", "'cpu:-1'",
                              "M.device('cpu')", "'meta'", "''"])

    def string(self, op: str, name: str) -> str:
        good = {
            "rounding_mode": ["'trunc'", "'floor'"],
            "reduce": ["'sum'", "'prod'", "'mean'", "'amax'", "'amin'", "'add'", "'multiply'"],
            "side": ["'left'", "'right'"],
            "indexing": ["'ij'", "'xy'"],
            "p": ["'fro'", "'nuc'"],
            "equation": ["'ij,jk->ik'", "'i,i->'", "'ii->i'", "'...i->...'", "'ij->ji'",
                         "'bij,bjk->bik'", "'i,j->ij'", "'ii'"],
        }.get(name, ["'x'"])
        bad = ["''", "'bogus'", "'ij->'", "'->'", "'...'", "'\\x00'", "'a' * 1000", "'i,i,i->i'",
               "'ij,jk->iz'", "'...,...->...'", "'i->ii'", "'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij'",
               "'i-->j'", "'ij,ij,ij'", "'....'"]
        return self.r.choice(good if self.r.random() < 0.65 else bad)


# --------------------------------------------------------------------------------------------
# Cases for the YAML-declared ops.
# --------------------------------------------------------------------------------------------
DIM_NAMES = {"dim", "dim0", "dim1", "dim2", "dimension", "axis", "axis0", "axis1", "start_dim",
             "end_dim"}
INDEX_TENSOR_NAMES = {"index", "indices", "sorter"}


def op_cases(gen: Gen, op, per_op: int, fn_names: set[str], method_names: set[str]) -> list[Case]:
    r = gen.r
    cases: list[Case] = []
    forms = []
    if "function" in op.variants and op.name in fn_names:
        forms.append("function")
    if "method" in op.variants and op.name in method_names and op.args and op.args[0].type in (
            "Tensor", "Tensor|Scalar"):
        forms.append("method")
    if op.inplace and op.name + "_" in method_names:
        forms.append("inplace")
    if not forms:
        return cases
    has_out = op.native_out or op.out
    for _ in range(per_op):
        gen.grad = r.random() < 0.25
        form = r.choice(forms)
        shape = r.choice(SHAPES)
        dtype = r.choice(DTYPES)
        ndim = len(shape)
        n0 = shape[0] if shape else 1
        setup: list[str] = []
        simple: dict[int, str] = {}
        pos: list[str] = []
        kw: dict[str, str] = {}
        tensor_vars: list[str] = []

        def new_var(expr: str, simple_expr: str | None = None) -> str:
            v = f"a{len(setup)}"
            if simple_expr is not None and simple_expr != expr:
                simple[len(setup)] = f"{v} = {simple_expr}"
            setup.append(f"{v} = {expr}")
            return v

        def tensor_arg(name: str) -> str:
            if name in INDEX_TENSOR_NAMES:
                return new_var(gen.index_tensor(n0, shape if r.random() < 0.4 else None))
            if name == "mask":
                mshape = shape if r.random() < 0.7 else r.choice(SHAPES)
                mdt = "bool" if r.random() < 0.85 else r.choice(DTYPES)
                return new_var(gen.tensor(mshape, mdt), gen.base(mshape, mdt))
            if r.random() < 0.65:  # same shape/dtype as the primary, maybe another layout
                return new_var(gen.tensor(shape, dtype), gen.base(shape, dtype))
            if r.random() < 0.5:  # same shape, another dtype / broadcastable
                sh = r.choice([shape, shape[1:], (1,) + shape[1:], ()])
                dt = r.choice(DTYPES)
                return new_var(gen.tensor(sh, dt), gen.base(sh, dt))
            sh, dt = r.choice(SHAPES), r.choice(DTYPES)
            return new_var(gen.tensor(sh, dt), gen.base(sh, dt))

        def value(a) -> str | None:
            t, name = a.type, a.name
            if r.random() < 0.06 and t != "Tensor?[]":
                return r.choice(WRONG + ([tensor_vars[0]] if tensor_vars else []))
            if t.startswith("Tensor|Scalar"):
                if t.endswith("?") and r.random() < 0.2:
                    return "None"
                if r.random() < 0.5:
                    return gen.scalar()
                v = tensor_arg(name)
                tensor_vars.append(v)
                return v
            if t in ("Tensor", "Tensor?"):
                if t == "Tensor?" and r.random() < 0.4:
                    return "None"
                v = tensor_arg(name)
                tensor_vars.append(v)
                return v
            if t == "Tensor[]":
                k = r.choice([0, 1, 2, 2, 3])
                vs = [tensor_arg("x") for _ in range(k)]
                tensor_vars.extend(vs)
                if r.random() < 0.1:
                    vs.append(r.choice(["None", "1", "'a'"]))
                return "[" + ", ".join(vs) + "]"
            if t == "Tensor?[]":
                k = r.choice([1, 1, 2, 3])
                items = []
                for _ in range(k):
                    if r.random() < 0.25:
                        items.append("None")
                    else:
                        items.append(new_var(gen.index_tensor(n0)))
                return "[" + ", ".join(items) + "]"
            if t in ("Scalar", "Scalar?"):
                if t == "Scalar?" and r.random() < 0.2:
                    return "None"
                return gen.scalar()
            if t in ("int", "int?"):
                if t == "int?" and r.random() < 0.2:
                    return "None"
                return gen.dim(ndim) if name in DIM_NAMES else gen.size_int(n0)
            if t in ("int[]", "int[]?", "int[]..."):
                if t == "int[]?" and r.random() < 0.2:
                    return "None"
                if name in ("dim", "dims", "source", "destination", "dims_a", "dims_b"):
                    return gen.dim_list(ndim)
                if name in ("shifts", "repeats", "split_size", "split_sizes", "indices"):
                    return repr([int(gen.size_int(n0)) for _ in range(r.choice([0, 1, 1, 2, 3]))])
                return gen.size_list()
            if t in ("float", "float?"):
                if t == "float?" and r.random() < 0.2:
                    return "None"
                return gen.float_()
            if t in ("bool", "bool?"):
                return r.choice(["True", "False"] + (["None"] if t == "bool?" else []))
            if t in ("str", "str?"):
                if t == "str?" and r.random() < 0.2:
                    return "None"
                return gen.string(op.name, name)
            if t in ("ScalarType", "ScalarType?"):
                if t == "ScalarType?" and r.random() < 0.5:
                    return None
                return gen.dtype()
            if t == "Device?":
                return None if r.random() < 0.7 else gen.device()
            if t == "Generator?":
                return None if r.random() < 0.7 else r.choice(
                    ["M.Generator()", "M.Generator().manual_seed(3)", "5", "M.default_generator"])
            return "None"

        args = list(op.args)
        if form in ("method", "inplace"):
            a0 = args[0]
            if a0.type.startswith("Tensor|Scalar"):
                self_v = tensor_arg(a0.name)
            else:
                self_v = new_var(gen.tensor(shape, dtype), gen.base(shape, dtype))
            tensor_vars.append(self_v)
            args = args[1:]
        for a in args:
            if a.name == "out":
                continue
            if a.default is not None and r.random() < 0.3:
                continue  # leave it at its default
            v = value(a)
            if v is None:
                continue
            if a.kwonly or (a.default is not None and r.random() < 0.3):
                kw[a.name] = v
            elif a.type == "int[]..." and v.startswith("[") and r.random() < 0.5 and v != "[]":
                pos.append("*" + v)  # varargs spelling: x.view(3, 4)
            else:
                pos.append(v)
        if has_out and form == "function" and r.random() < 0.35:
            choice = r.random()
            if choice < 0.3 and tensor_vars:
                kw["out"] = r.choice(tensor_vars)  # aliases an input
            elif choice < 0.5:
                kw["out"] = new_var(f"M.empty(0, dtype=M.{r.choice(DTYPES)})")
            elif choice < 0.65:
                kw["out"] = new_var(f"M.zeros(7, dtype=M.{dtype})")
            elif choice < 0.8:
                kw["out"] = new_var(f"M.zeros(16, dtype=M.{dtype})[::2]")
            elif choice < 0.9 and shape and shape[0] != 1:
                kw["out"] = new_var(
                    f"M.zeros((1,) + {_shape_src(shape[1:])}, dtype=M.{dtype})"
                    f".expand({_shape_src(shape)})")
            else:
                kw["out"] = new_var(gen.tensor(shape, r.choice(DTYPES)))
        argsrc = ", ".join(pos + [f"{k}={v}" for k, v in kw.items()])
        if form == "function":
            call = f"M.{op.name}({argsrc})"
        elif form == "method":
            call = f"{setup_var(setup, tensor_vars)}.{op.name}({argsrc})"
        else:
            call = f"{setup_var(setup, tensor_vars)}.{op.name}_({argsrc})"
        cases.append(Case(f"{op.name}[{form}]", setup, call, simple))
    return cases


def setup_var(setup: list[str], tensor_vars: list[str]) -> str:
    return tensor_vars[0]


# --------------------------------------------------------------------------------------------
# Cases for the hand-written surface: indexing, operators, construction, conversions.
# --------------------------------------------------------------------------------------------
UNARY = ['-a0', '~a0', 'abs(a0)', '+a0', 'bool(a0)', 'int(a0)', 'float(a0)', 'len(a0)', 'list(a0)', 'a0.item()', 'a0.tolist()', 'repr(a0)', 'str(a0)', 'hash(a0)', 'a0.numpy()', 'iter(a0)', 'a0.T', 'a0.mT', 'a0.H', 'a0.mH', 'a0.shape[-1]', 'a0.size(5)', 'a0.stride(-9)', 'a0.cpu()', 'a0.contiguous()', 'a0.data_ptr()', 'a0.nbytes', 'a0.byte()', 'a0.char()', 'a0.half()', 'a0.bfloat16()', 'a0.short()', 'a0.type_as(M.zeros(1, dtype=M.int8))', 'a0.__array__()', 'a0.__dlpack__()', 'M.from_dlpack(a0)', 'a0.__index__()', 'format(a0, "x")', 'a0 in a0', '3 in a0', 'reversed(a0)', 'a0.is_contiguous()', 'a0.untyped_storage_ptr()']
TO_ARGS = ["a0", "5", "None", "copy=True", "M.zeros(1, dtype=M.int8)", '"float32"']
SIZE_ARGS = ["[1, 2]", "[-1]", "[1.5]", "[2**64]", "None", "[M.tensor(3)]", '"ab"']
QX = '"x"'
PRINTOPTS = ["precision=-1", "threshold=-5", "edgeitems=-1", "linewidth=0", "precision=10**6",
             "sci_mode=3", 'profile="bogus"']
PRINT_TENSORS = ["M.zeros(2**20)", "M.zeros(0, 5, 0)", "M.ones(1, 1, 1, 1, 1, 1, 1, 1)",
                 'M.tensor([1e300, -1e-300, float("nan")])', "M.tensor([2**63 - 1, -(2**63)])",
                 "M.zeros(3, 4).t()", "M.zeros(1).expand(10**6)"]


def surface_cases(gen: Gen, n: int) -> list[Case]:
    r = gen.r
    cases: list[Case] = []

    def idx() -> str:
        parts = r.choice([
            "0", "-1", "5", "-6", "2**40", "-(2**63)", "slice(None)", "slice(None, None, 2)",
            "slice(None, None, -1)", "slice(None, None, 0)", "slice(2**62, None)",
            "slice(-2**63, 2**63 - 1)", "...", "None", "True", "False", "[0, 1]", "[]", "[[0], [1]]",
            "[True, False, True]", "M.tensor([0, 2])", "M.tensor([5])", "M.tensor([-9])",
            "M.tensor(1)", "M.tensor([], dtype=M.int64)", "M.tensor([True, False])",
            "M.zeros(3, dtype=M.bool)", "M.tensor([0.5])", "1.5", "'a'", "(0, 0, 0, 0)",
            "(Ellipsis, Ellipsis)", "(None, None, 0)", "(slice(None), [0, 1])", "([0, 1], [1, 0])",
            "([0], slice(None), [0])", "M.tensor([[0, 1], [1, 0]])", "np.int64(1)", "np.array([0, 1])",
            "M.tensor(0, dtype=M.uint8)", "[0, 'a']", "(M.tensor([0, 1]), M.tensor([0, 1, 2]))",
            "{0: 1}", "[[True]]", "M.ones(2, 2, 2, dtype=M.bool)",
        ])
        return parts

    binops = ["+", "-", "*", "/", "//", "%", "**", "@", "&", "|", "^", "<<", ">>", "==", "!=", "<",
              "<=", ">", ">="]
    templates = [
        lambda: ("getitem", [f"a0 = {gen.rand_tensor()}"], f"a0[{idx()}]"),
        lambda: ("getitem", [f"a0 = {gen.rand_tensor()}"], f"a0[{idx()}, {idx()}]"),
        lambda: ("setitem", [f"a0 = {gen.rand_tensor()}",
                             f"a0[{idx()}] = {r.choice([gen.scalar(), gen.rand_tensor()])}"], "a0"),
        lambda: ("setitem", [f"a0 = {gen.rand_tensor()}",
                             f"a0[{idx()}, {idx()}] = {gen.rand_tensor()}"], "a0"),
        lambda: ("binop", [f"a0 = {gen.rand_tensor()}"],
                 f"a0 {r.choice(binops)} {r.choice([gen.rand_tensor(), gen.scalar()])}"),
        lambda: ("rbinop", [f"a0 = {gen.rand_tensor()}"],
                 f"{gen.scalar()} {r.choice(binops)} a0"),
        lambda: ("inplace_binop", [f"a0 = {gen.rand_tensor()}",
                                   f"a0 {r.choice(binops[:13])}= {r.choice([gen.rand_tensor(), gen.scalar()])}"],
                 "a0"),
        lambda: ("unary", [f"a0 = {gen.rand_tensor()}"],
                 r.choice(UNARY)),
        lambda: ("to", [f"a0 = {gen.rand_tensor()}"],
                 f"a0.to({r.choice([gen.dtype(), gen.device()] + TO_ARGS + ['dtype=' + gen.dtype(), gen.dtype() + ', copy=True'])})"),
        lambda: ("view_dtype", [f"a0 = {gen.rand_tensor()}"], f"a0.view({gen.dtype()})"),
        lambda: ("tensor", [], f"M.tensor({gen.r.choice(NESTED)}{r.choice(['', ', dtype=' + gen.dtype()])})"),
        lambda: ("as_tensor", [], f"M.as_tensor({gen.r.choice(NESTED + NUMPY)}{r.choice(['', ', dtype=' + gen.dtype()])})"),
        lambda: ("from_numpy", [], f"M.from_numpy({gen.r.choice(NUMPY)})"),
        lambda: ("new_tensor", [f"a0 = {gen.rand_tensor()}"], f"a0.new_tensor({gen.r.choice(NESTED)})"),
        lambda: ("size", [], f"M.Size({r.choice(SIZE_ARGS)})"),
        lambda: ("broadcast_shapes", [],
                 f"M.broadcast_shapes({gen.size_list()}, {gen.size_list()})"),
        lambda: ("dtype_utils", [], r.choice([
            f"M.promote_types({gen.dtype()}, {r.choice([gen.dtype(), 'None', '1'])})",
            f"M.can_cast({gen.dtype()}, {r.choice([gen.dtype(), QX])})",
            f"M.finfo({r.choice([gen.dtype(), 'None', '1'])})",
            f"M.iinfo({r.choice([gen.dtype(), 'None'])})",
            f"M.set_default_dtype({gen.dtype()}) or M.get_default_dtype()",
        ])),
        lambda: ("global_state", [], r.choice([
            f"M.manual_seed({r.choice(['-1', '2**64', '2**70', '0', '1.5', 'None', '-(2**63)'])})",
            f"M.Generator().manual_seed({r.choice(['-1', '2**64', '2**70', QX])}).initial_seed()",
            f"M.set_num_threads({r.choice(['0', '-1', '2**40', '1'])}) or M.get_num_threads()",
            f"M.set_printoptions({r.choice(PRINTOPTS)}) or repr({gen.rand_tensor()})",
            "M.empty_cache()", "M.memory_stats()", "M.memory_snapshot()",
            f"M.set_allocator_caching({r.choice(['True', 'False', 'None'])})",
        ])),
        lambda: ("unique", [f"a0 = {gen.rand_tensor()}"],
                 f"M.unique(a0, sorted={r.choice(['True', 'False'])}, return_inverse={r.choice(['True', 'False'])}, return_counts={r.choice(['True', 'False'])}, dim={r.choice(['None', '0', '1', '-1', '5'])})"),
        lambda: ("einsum", [f"a0 = {gen.rand_tensor()}", f"a1 = {gen.rand_tensor()}"],
                 f"M.einsum({gen.string('einsum', 'equation')}, {r.choice(['a0', 'a0, a1', '[a0, a1]', '', 'a0, a0, a0'])})"),
        lambda: ("tensordot", [f"a0 = {gen.rand_tensor()}", f"a1 = {gen.rand_tensor()}"],
                 f"M.tensordot(a0, a1, dims={r.choice(['0', '1', '2', '3', '-1', '2**40', '([0], [0])', '([0, 1], [1, 0])', '([5], [0])', '([0], [])', '([0, 0], [0, 1])', '[[0], [0]]'])})"),
        lambda: ("printing", [f"a0 = {r.choice(PRINT_TENSORS)}.to({gen.dtype()})"], "repr(a0)"),
    ]
    for _ in range(n):
        label, setup, call = r.choice(templates)()
        cases.append(Case(label, setup, call))
    return cases


NESTED = ["[]", "[[]]", "[[], []]", "[1, [2]]", "[[1, 2], [3]]", "[1, 'a']", "['a']", "[None]",
          "[1.5, True, 3]", "[2**63]", "[2**64]", "[-(2**63) - 1]", "[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]",
          "[float('nan'), float('inf')]", "[1e400]", "[[1, 2], [3, 4.5]]", "[M.tensor(1), 2]",
          "[M.tensor([1, 2]), M.tensor([3, 4])]", "[M.zeros(2, 2)]", "[[1], [2, 3]]", "3",
          "True", "None", "'abc'", "(1, 2)", "range(5)", "[1 + 2j]", "[[1, 2], 3]", "{1, 2}",
          "[np.float32(1.5)]", "[np.int64(3)]", "np.float64(2.0)", "[[]] * 3", "[[[]], [[]]]",
          "[b'x']", "bytearray(3)", "[0] * 100000", "[[0] * 0] * 5", "[[1, 2]] * 0"]
NUMPY = ["np.arange(6).reshape(2, 3)", "np.arange(6).reshape(2, 3).T", "np.arange(10)[::-1]",
         "np.arange(10)[::3]", "np.zeros((0, 3))", "np.zeros(())", "np.array(['a'])",
         "np.array([1, 'a'], dtype=object)", "np.arange(4, dtype='>i4')", "np.zeros(3, dtype=np.complex64)",
         "np.zeros(3, dtype=np.uint16)", "np.zeros(3, dtype=np.uint64)", "np.zeros(3, dtype=np.float16)",
         "np.broadcast_to(np.arange(3), (4, 3))", "np.zeros((2, 3), order='F')",
         "np.arange(10, dtype=np.int8)[::-2]", "np.lib.stride_tricks.as_strided(np.zeros(4), (3, 3), (8, 0))",
         "np.zeros(3, dtype=[('a', 'i4')])", "np.zeros(3, dtype='datetime64[s]')", "np.ma.zeros(3)",
         "np.arange(6).reshape(2, 3)[:, 1:]", "np.frombuffer(b'abcd', dtype=np.uint8)",
         "np.zeros(2**10, dtype=bool)[::7]", "np.array(3.5)", "np.zeros((1,) * 40)"]


def extra_op_cases(gen: Gen, n: int) -> list[Case]:
    """Targeted calls the schema-driven generator reaches only rarely."""
    r = gen.r
    fixed = [
        "M.topk(M.zeros(3), 5)", "M.topk(M.zeros(3), -1)", "M.topk(M.zeros(0), 0)",
        "M.kthvalue(M.zeros(3), 0)", "M.kthvalue(M.zeros(3), 4)", "M.kthvalue(M.zeros(0), 1)",
        "M.as_strided(M.zeros(3), (10,), (1,))", "M.as_strided(M.zeros(3), (2,), (1,), 5)",
        "M.as_strided(M.zeros(3), (2,), (-1,), 2)", "M.as_strided(M.zeros(3), (2**62,), (2**62,))",
        "M.as_strided(M.zeros(3), (3,), (1,), -1)", "M.as_strided(M.zeros(3), (-1,), (1,))",
        "M.as_strided(M.zeros(3), (2, 2), (1,))", "M.zeros(3).as_strided_((4,), (1,))",
        "M.zeros(3).view(4)", "M.zeros(3).view(-1, -1)", "M.zeros(0).view(-1)", "M.zeros(0, 3).view(-1, 0)",
        "M.zeros(6).reshape(-1, 0)", "M.zeros(0).reshape(0, -1)", "M.zeros(3).repeat(-1)",
        "M.zeros(3).repeat(2**40, 2**40)", "M.zeros(3).expand(-2)", "M.zeros(3).expand(2**62, 3)",
        "M.tile(M.zeros(3), (-1,))", "M.arange(0, 10, 0)", "M.arange(0, 2**62)", "M.arange(10, 0)",
        "M.arange(0, 10, -1)", "M.arange(float('nan'))", "M.arange(0, float('inf'))",
        "M.arange(-(2**63), 2**63 - 1)", "M.arange(0, 1, 1e-300)", "M.arange(2**63 - 2, 2**63 - 1)",
        "M.linspace(0, 1, -1)", "M.linspace(1, 0, 5)", "M.linspace(0, 1, 2**62)", "M.logspace(0, 1, -3)",
        "M.linspace(0, 10, 5, dtype=M.uint8)", "M.linspace(0, 1, 1)", "M.linspace(float('nan'), 1, 3)",
        "M.randint(5, 5, (3,))", "M.randint(5, 2, (3,))", "M.randint(0, 2**63 - 1, (3,))",
        "M.randint(-(2**63), 2**63 - 1, (3,))", "M.randint(0, 300, (3,), dtype=M.uint8)",
        "M.randint(0, 2, (3,), dtype=M.bool)", "M.randint(0, 10, (3,), dtype=M.float16)",
        "M.multinomial(M.tensor([-1.0, 2.0]), 1)", "M.multinomial(M.tensor([0.0, 0.0]), 1)",
        "M.multinomial(M.tensor([1.0, 0.0]), 2)", "M.multinomial(M.tensor([1.0, 1.0]), 3, True)",
        "M.multinomial(M.tensor([float('nan'), 1.0]), 1)", "M.multinomial(M.tensor([float('inf'), 1.0]), 1)",
        "M.multinomial(M.zeros(0), 1)", "M.multinomial(M.ones(2, 2, 2), 1)", "M.multinomial(M.ones(3), 0)",
        "M.multinomial(M.ones(3), -1)", "M.multinomial(M.ones(3, dtype=M.int64), 1)",
        "M.multinomial(M.ones(0, 3), 1)", "M.multinomial(M.ones(2, 0), 1)", "M.multinomial(M.tensor(1.0), 1)",
        "M.randperm(-1)", "M.randperm(2**62)", "M.randperm(0)", "M.randperm(300, dtype=M.uint8)",
        "M.randperm(10, dtype=M.bool)", "M.randperm(5, dtype=M.float16)",
        "M.eye(-1)", "M.eye(3, -1)", "M.eye(2**40)", "M.eye(0, 2**62)",
        "M.zeros(2**62)", "M.zeros(2**40)", "M.ones(2**31, 2**31)", "M.empty(2**61, dtype=M.float64)",
        "M.full((2**62,), 1)", "M.empty_strided((2**40,), (2**40,))", "M.empty_strided((3,), (-1,))",
        "M.empty_strided((2, 2**62), (2**62, 1))", "M.empty_strided((3,), (1, 1))",
        "M.zeros(3, dtype=M.int64) // 0", "M.zeros(3, dtype=M.int64) % 0", "M.ones(3, dtype=M.int8).fmod(0)",
        "M.tensor([-(2**63)]) // -1", "M.tensor([-128], dtype=M.int8) // -1", "M.tensor([-(2**63)]) % -1",
        "M.tensor([-(2**31)], dtype=M.int32).remainder(-1)", "M.tensor([5]).div(0, rounding_mode='floor')",
        "M.tensor([5]).div(0, rounding_mode='trunc')", "M.tensor([5]).floor_divide(M.tensor([0]))",
        "M.tensor([1]) << 64", "M.tensor([1]) << -1", "M.tensor([1]) >> 100", "M.tensor([1], dtype=M.int8) << 9",
        "M.tensor([2]) ** -1", "M.tensor([0]) ** -1", "M.tensor([2], dtype=M.uint8) ** -1",
        "M.tensor([3]).pow(2**62)", "M.tensor([-(2**63)]).abs()", "M.tensor([-(2**63)]).neg()",
        "M.bincount(M.tensor([-1]))", "M.bincount(M.tensor([2**40]))", "M.bincount(M.tensor([1.0]))",
        "M.bincount(M.tensor([0, 1]), minlength=-1)", "M.bincount(M.tensor([0, 1]), M.tensor([1.0]))",
        "M.bincount(M.zeros(2, 2, dtype=M.int64))", "M.bincount(M.tensor([1]), minlength=2**62)",
        "M.histc(M.ones(3), bins=0)", "M.histc(M.ones(3), bins=-1)", "M.histc(M.ones(3), 4, 2, 1)",
        "M.histc(M.tensor([float('nan')]), 4)", "M.histc(M.tensor([float('inf')]), 4)",
        "M.histc(M.ones(3), bins=2**40)", "M.histc(M.tensor([0.0, 1.0]), 3, float('nan'), 1)",
        "M.histc(M.ones(3, dtype=M.int64), 4)", "M.histc(M.tensor([-1e308, 1e308]), 4)",
        "M.searchsorted(M.tensor([1, 2, 3]), M.tensor([2]), sorter=M.tensor([5, 0, 1]))",
        "M.searchsorted(M.tensor([1, 2, 3]), M.tensor([2]), sorter=M.tensor([0]))",
        "M.searchsorted(M.tensor([1, 2, 3]), M.tensor([2]), side='bogus')",
        "M.searchsorted(M.tensor([1, 2, 3]), M.tensor([2]), side='left', right=True)",
        "M.searchsorted(M.zeros(2, 3), M.zeros(3, 2))", "M.searchsorted(M.zeros(0), M.zeros(2))",
        "M.searchsorted(M.tensor(1.0), M.zeros(2))",
        "M.bucketize(M.tensor([1]), M.zeros(2, 2))", "M.bucketize(3, M.tensor([1, 5]))",
        "M.take(M.zeros(3), M.tensor([3]))", "M.take(M.zeros(0), M.tensor([0]))", "M.take(M.zeros(3), M.tensor([-4]))",
        "M.gather(M.zeros(3, 4), 1, M.tensor([[4]]))", "M.gather(M.zeros(3, 4), 1, M.tensor([[-1]]))",
        "M.gather(M.zeros(3, 4), 0, M.zeros(5, 5, dtype=M.int64))", "M.gather(M.zeros(3), 0, M.tensor([[0]]))",
        "M.scatter(M.zeros(3), 0, M.tensor([3]), M.ones(1))", "M.scatter(M.zeros(3), 0, M.tensor([0, 1]), M.ones(1))",
        "M.scatter_add(M.zeros(3), 0, M.tensor([-4]), M.ones(1))", "M.scatter_reduce(M.zeros(3), 0, M.tensor([0]), M.ones(1), 'bogus')",
        "M.index_select(M.zeros(3), 0, M.tensor([3]))", "M.index_select(M.zeros(3), 0, M.tensor([[0]]))",
        "M.index_add(M.zeros(3), 0, M.tensor([3]), M.ones(1))", "M.index_add(M.zeros(3), 0, M.tensor([0, 1]), M.ones(1))",
        "M.index_copy(M.zeros(3), 0, M.tensor([5]), M.ones(1))", "M.index_fill(M.zeros(3), 0, M.tensor([5]), 1)",
        "M.index_put(M.zeros(3), [M.tensor([3])], M.ones(1))", "M.index_put(M.zeros(3), [M.tensor([0, 1])], M.ones(3))",
        "M.index_put(M.zeros(3), [M.tensor([True])], M.ones(1))", "M.index_put(M.zeros(3), [], M.ones(1))",
        "M.index_put(M.zeros(3), [None], M.ones(1))", "M.index_put(M.zeros(3, 3), [M.tensor([0]), M.tensor([0]), M.tensor([0])], M.ones(1))",
        "M.masked_select(M.zeros(3), M.ones(4, dtype=M.bool))", "M.masked_scatter(M.zeros(3), M.ones(3, dtype=M.bool), M.ones(2))",
        "M.masked_fill(M.zeros(3), M.ones(3), 1)", "M.masked_fill(M.zeros(3), M.ones(3, dtype=M.bool), M.ones(2))",
        "M.take_along_dim(M.zeros(3, 4), M.tensor([[9]]), 1)", "M.take_along_dim(M.zeros(3, 4), M.tensor([[0]]), 5)",
        "M.repeat_interleave(M.tensor([1, 2]), M.tensor([-1, 2]))", "M.repeat_interleave(M.tensor([1, 2]), M.tensor([1, 2, 3]))",
        "M.repeat_interleave(M.tensor([2, 3]), output_size=1)", "M.repeat_interleave(M.tensor([2**40]))",
        "M.repeat_interleave(M.tensor([1, 2]), 2**62)", "M.repeat_interleave(M.tensor([1.5]))",
        "M.repeat_interleave(M.zeros(2, 2), M.tensor([1, 1]))", "M.repeat_interleave(M.tensor([1, 2]), -1)",
        "M.diagonal(M.zeros(3, 4), 2**62)", "M.diagonal(M.zeros(3, 4), -(2**63))", "M.diagonal(M.zeros(3, 4), 0, 0, 0)",
        "M.zeros(5).unfold(0, 6, 1)", "M.zeros(5).unfold(0, 2, 0)", "M.zeros(5).unfold(0, -1, 1)", "M.zeros(5).unfold(0, 0, 1)",
        "M.narrow(M.zeros(5), 0, 3, 3)", "M.narrow(M.zeros(5), 0, -1, 1)", "M.narrow(M.zeros(5), 0, 2**62, 2**62)",
        "M.narrow(M.zeros(5), 0, 0, -1)", "M.select(M.zeros(5), 0, 5)", "M.select(M.zeros(0), 0, 0)",
        "M.split(M.zeros(5), 0)", "M.split(M.zeros(5), -1)", "M.split(M.zeros(5), [2, 2])", "M.split(M.zeros(5), [6, -1])",
        "M.chunk(M.zeros(5), 0)", "M.chunk(M.zeros(5), -1)", "M.chunk(M.zeros(0), 3)", "M.tensor_split(M.zeros(5), 0)",
        "M.tensor_split(M.zeros(5), [3, 1])", "M.tensor_split(M.zeros(5), [-9, 2**62])", "M.hsplit(M.zeros(5), 2)",
        "M.unflatten(M.zeros(6), 0, [-1, -1])", "M.unflatten(M.zeros(6), 0, [4, -1])", "M.unflatten(M.zeros(6), 0, [])",
        "M.unflatten(M.zeros(0), 0, [0, -1])", "M.flatten(M.zeros(2, 3), 1, 0)", "M.movedim(M.zeros(2, 3), [0, 0], [0, 1])",
        "M.permute(M.zeros(2, 3), (0, 0))", "M.permute(M.zeros(2, 3), (0,))", "M.permute(M.zeros(2, 3), (0, 2))",
        "M.roll(M.zeros(5), 2**62)", "M.roll(M.zeros(5), -(2**63))", "M.roll(M.zeros(0), 3)", "M.roll(M.zeros(5), [1, 2], [0])",
        "M.rot90(M.zeros(2, 3), 1, [0, 0])", "M.rot90(M.zeros(2, 3), -(2**63))", "M.rot90(M.zeros(3), 1)",
        "M.tril(M.zeros(3), 0)", "M.tril(M.zeros(3, 3), 2**62)", "M.triu(M.zeros(3, 3), -(2**63))",
        "M.flip(M.zeros(3), (0, 0))", "M.squeeze(M.zeros(1, 2), (0, 0))", "M.unsqueeze(M.zeros(3), 2)",
        "M.cat([M.zeros(2, 3), M.zeros(3)])", "M.cat([M.zeros(2, 3), M.zeros(2, 4)])", "M.cat([])",
        "M.cat([M.zeros(0), M.zeros(2, 3)])", "M.cat([M.zeros(2), M.zeros(2)], 2**62)", "M.stack([])",
        "M.stack([M.zeros(2), M.zeros(3)])", "M.stack([M.zeros(2)], -3)", "M.cat([M.zeros(3), M.zeros(3)], out=M.zeros(3))",
        "M.meshgrid([M.zeros(2, 2)])", "M.meshgrid([], indexing='ij')", "M.broadcast_tensors([])",
        "M.mm(M.zeros(2, 3), M.zeros(4, 5))", "M.mm(M.zeros(2, 3, dtype=M.int64), M.zeros(3, 2))",
        "M.matmul(M.zeros(0), M.zeros(0))", "M.matmul(M.zeros(3), M.zeros(4))", "M.matmul(M.tensor(1.0), M.zeros(3))",
        "M.bmm(M.zeros(2, 3, 4), M.zeros(3, 4, 5))", "M.dot(M.zeros(3), M.zeros(3, dtype=M.int32))",
        "M.einsum('i,i->i', M.zeros(2), M.zeros(3))", "M.einsum('ii->i', M.zeros(2, 3))", "M.einsum('i', M.zeros(2), M.zeros(2))",
        "M.kron(M.zeros(2**20), M.zeros(2**20))", "M.outer(M.zeros(2**16), M.zeros(2**16, 2))",
        "M.sort(M.zeros(3), 5)", "M.mode(M.zeros(0))", "M.median(M.zeros(0))", "M.median(M.zeros(3, 0), 1)",
        "M.max(M.zeros(0))", "M.max(M.zeros(3, 0), 1)", "M.argmax(M.zeros(0))", "M.aminmax(M.zeros(0))",
        "M.cummax(M.zeros(0), 0)", "M.cumsum(M.zeros(3), 5)", "M.prod(M.zeros(3), 5)", "M.var(M.zeros(3), correction=5)",
        "M.std(M.zeros(1))", "M.norm(M.zeros(3), 'bogus')", "M.norm(M.zeros(3), float('nan'))", "M.logsumexp(M.zeros(0), [0])",
        "M.unique(M.zeros(3, 4), dim=5)", "M.unique(M.zeros(0, 4), dim=1)", "M.normal(M.zeros(3), -1.0)",
        "M.normal(0.0, -1.0, (3,))", "M.normal(M.zeros(3), M.ones(4))", "M.zeros(3).uniform_(1, 0)",
        "M.zeros(3).uniform_(float('nan'), 1)", "M.zeros(3).normal_(0, -1)", "M.zeros(3).exponential_(-1)",
        "M.zeros(3, dtype=M.int64).uniform_()", "M.zeros(3, dtype=M.bool).random_(5)", "M.zeros(3, dtype=M.uint8).random_(-1, 5)",
        "M.zeros(3, dtype=M.int8).random_(0, 1000)", "M.zeros(3).random_(5, 2)", "M.zeros(3, dtype=M.float16).random_(2**40)",
        "M.bernoulli(M.tensor([1.5]))", "M.bernoulli(M.tensor([-0.5]))", "M.bernoulli(M.tensor([float('nan')]))",
        "M.zeros(3).bernoulli_(2.0)", "M.zeros(3).bernoulli_(M.ones(4))", "M.bernoulli(M.zeros(3, dtype=M.int64))",
        "M.rand(2**62)", "M.rand(-1)", "M.randn(3, dtype=M.int64)", "M.rand(3, generator=5)",
        "M.zeros(3).fill_(M.zeros(2))", "M.zeros(3).copy_(M.zeros(4))", "M.zeros(1).expand(3).copy_(M.arange(3.0))",
        "M.zeros(1).expand(3).add_(1)", "M.zeros(3, dtype=M.int64).add_(1.5)", "M.zeros(3).add_(M.zeros(2, 3))",
        "M.zeros(3).view(M.int64)", "M.zeros(3).view(M.int8)", "M.zeros(3)[::2].view(M.int8)", "M.tensor(1.0).view(M.int8)",
        "M.zeros(4, dtype=M.int8).view(M.float32)", "M.zeros(3, dtype=M.int8).view(M.float32)", "M.zeros(2, 4, dtype=M.int8).t().view(M.int16)",
        "M.clamp(M.zeros(3), M.ones(4))", "M.clamp(M.zeros(3, dtype=M.bool), 0, 1)", "M.where(M.zeros(3), 1, 2)",
        "M.lerp(M.zeros(3), M.ones(3), M.ones(4))", "M.addcdiv(M.zeros(3, dtype=M.int64), M.ones(3, dtype=M.int64), M.ones(3, dtype=M.int64))",
        "M.nan_to_num(M.zeros(3, dtype=M.int64), 1.5)", "M.round(M.zeros(3), decimals=2**40)", "M.round(M.ones(3), decimals=-400)",
        "M.zeros(3).item()", "M.zeros(0).item()", "M.tensor([1, 2])[M.tensor([True])]",
        "M.diagonal(M.zeros(3), 0, 0, 1)", "M.atleast_3d([])", "M.column_stack([])", "M.vstack([M.zeros(2), M.zeros(3)])",
        "M.zeros(2, 3).T.view(6)", "M.zeros(2, 3).T.view(-1)", "M.squeeze(M.zeros(2), 3)",
        "M.full((2,), 2**64)", "M.full((2,), 300, dtype=M.uint8)", "M.full((2,), float('nan'), dtype=M.int64)",
        "M.full((2,), 'a')", "M.zeros((2, 3), dtype=M.int64).fill_(float('inf'))", "M.tensor([float('nan')]).to(M.int64)",
        "M.tensor([1e300]).to(M.float16)", "M.tensor([1e300]).to(M.int8)", "M.tensor([2**63 - 1]).to(M.float16)",
        "M.allclose(M.zeros(3), M.zeros(4))", "M.equal(M.zeros(3), M.zeros(4))", "M.isclose(M.zeros(3), M.zeros(3, dtype=M.int64))",
        "M.count_nonzero(M.zeros(3), [0, 0])", "M.all(M.zeros(3), [5])", "M.amax(M.zeros(0))", "M.amax(M.zeros(3, 0), 1)",
        "M.amin(M.zeros(0, 3), 0)", "M.mean(M.zeros(3, dtype=M.int64))", "M.sum(M.zeros(3), dtype=M.bool)",
        "M.nanmedian(M.zeros(0, 3), 0)", "M.msort(M.tensor(1.0))", "M.argsort(M.zeros(3), 5)",
        "M.topk(M.zeros(3, 4), 2, 1, out=M.zeros(1))", "M.topk(M.tensor(1.0), 1)", "M.topk(M.tensor(1.0), 2)",
        "M.kthvalue(M.tensor(1.0), 2)", "M.mode(M.tensor(1.0), 1)", "M.cumsum(M.tensor(1.0), 1)",
    ]
    cases = [Case("targeted", [], c) for c in fixed]
    r.shuffle(cases)
    return cases[:n] if n < len(cases) else cases


def build_cases(args) -> list[Case]:
    import ember
    from schema import load_ops  # tools/codegen

    rng = random.Random(args.seed)
    gen = Gen(rng)
    groups = load_ops(ROOT / "packages" / "core" / "ops")
    fn_names = set(dir(ember))
    method_names = set(dir(ember.Tensor))
    only = set(args.ops.split(",")) if args.ops else None
    cases: list[Case] = []
    seen_names: set[str] = set()
    for ops in groups.values():
        for op in ops:
            if only and op.name not in only:
                continue
            seen_names.add(op.name)
            cases += op_cases(gen, op, args.per_op, fn_names, method_names)
    if not only or "surface" in only:
        cases += surface_cases(gen, args.surface)
    if not only or "targeted" in only:
        cases += extra_op_cases(gen, 10**9)
    return cases


# --------------------------------------------------------------------------------------------
# Running cases in workers.
# --------------------------------------------------------------------------------------------
class Worker:
    def __init__(self, args):
        env = dict(os.environ)
        env["FUZZ_MEM"] = str(args.mem_gb * 2**30)
        env["FUZZ_TORCH"] = "1" if args.torch else "0"
        env["FUZZ_THREADS"] = str(args.threads)
        self.err = tempfile.TemporaryFile()
        worker = WORKER.replace("%r", repr(EXPECTED_EXC), 1).replace("%r", repr(UNCLEAR), 1)
        self.p = subprocess.Popen([sys.executable, "-c", worker], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, env=env)
        self.buf = b""
        # wait for the imports (slow on a loaded machine) so that they do not count as a hang
        fd, deadline = self.p.stdout.fileno(), time.monotonic() + 300
        while b"\n" not in self.buf and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            chunk = os.read(fd, 1 << 16) if ready else b""
            if not chunk:
                break  # died while importing: the first case reports the crash
            self.buf += chunk
        if b"\n" in self.buf:
            self.buf = self.buf.split(b"\n", 1)[1]

    def stderr_tail(self) -> str:
        self.err.seek(0)
        return self.err.read().decode(errors="replace")[-600:]

    def run(self, i: int, code: str, timeout: float) -> dict:
        """One case; {'crash': ...} / {'hang': ...} when the worker died / stopped answering."""
        try:
            self.p.stdin.write((json.dumps({"i": i, "code": code}) + "\n").encode())
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        ember_done = None  # ember's outcome, once the worker has moved on to torch
        while True:
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0 or not (select.select([fd], [], [], left)[0]):
                    self.kill()
                    if ember_done is not None:  # torch hung: not an ember finding
                        return {"i": i, "ember": ember_done, "torch": {
                            "status": "skip", "type": "hang", "msg": "torch did not answer"}}
                    return {"hang": f"no answer within {timeout:.0f} s"}
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    rc = self.p.wait()
                    if ember_done is not None:  # torch crashed
                        return {"i": i, "ember": ember_done, "torch": {
                            "status": "skip", "type": "crash", "msg": "torch crashed"}}
                    sig = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
                    return {"crash": f"worker died ({sig}); stderr: {self.stderr_tail()!r}"}
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            msg = json.loads(line)
            if "ember_done" not in msg:
                return msg
            ember_done = msg["ember_done"]

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()


def run_one_fresh(args, code: str) -> dict:
    w = Worker(args)
    try:
        return w.run(0, code, args.timeout)
    finally:
        w.close()


def classify(res: dict) -> tuple[str, str] | None:
    """(kind, detail) for a problem in an ember outcome, None when it behaved."""
    if "crash" in res:
        return "crash", res["crash"]
    if "hang" in res:
        return "hang", res["hang"]
    e = res["ember"]
    if e["status"] == "exc":
        if e["type"] not in EXPECTED_EXC:
            return "unexpected-exception", f"{e['type']}: {e['msg']}"
        if any(u in e["msg"] for u in UNCLEAR):
            return "unclear-message", f"{e['type']}: {e['msg']}"
        if not e["msg"].strip():
            return "unclear-message", f"{e['type']} with an empty message"
        return None
    if e["status"] == "ok" and e.get("problems"):
        return "bad-result", "; ".join(e["problems"])
    return None


def _close(a, b, rtol: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b:
            return True
        return abs(a - b) <= rtol * max(1.0, abs(a), abs(b))
    return a == b


def compare_torch(op: str, res: dict) -> str | None:
    e, t = res["ember"], res.get("torch")
    if t is None or t["status"] == "skip":
        return None
    base = op.split("[")[0]
    if e["status"] == "ok" and t["status"] == "exc":
        return f"ember accepts what torch rejects ({t['type']}: {t['msg'][:160]})"
    if e["status"] == "exc" and t["status"] == "ok":
        return f"ember rejects what torch accepts ({e['type']}: {e['msg'][:160]})"
    if e["status"] == "exc" and t["status"] == "exc":
        if e["type"] != t["type"] and t["type"] in EXPECTED_EXC and \
                t["type"] not in SUBCLASS_OF.get(e["type"], ()):
            return f"exception type {e['type']} (torch {t['type']}): {e['msg'][:120]}"
        return None
    es, ts = e.get("summary"), t.get("summary")
    if es is None or ts is None:
        return None
    es = es if isinstance(es, list) and es and isinstance(es[0], dict) else [es]
    ts = ts if isinstance(ts, list) and ts and isinstance(ts[0], dict) else [ts]
    if base in TIE_DEPENDENT:
        es, ts = es[:1], ts[:1]
    if len(es) != len(ts):
        return f"{len(es)} results (torch {len(ts)})"
    for k, (a, b) in enumerate(zip(es, ts)):
        if isinstance(a, dict) and isinstance(b, dict):
            if a["shape"] != b["shape"] or a["dtype"] != b["dtype"]:
                return f"result {k}: shape/dtype {a['shape']} {a['dtype']} (torch {b['shape']} {b['dtype']})"
            if base in NONDETERMINISTIC or "values" not in a or "values" not in b:
                continue
            rtol = 2e-2 if a["dtype"] in ("float16", "bfloat16") else 1e-5
            if not _close(a["values"], b["values"], rtol):
                return f"result {k}: values differ: {str(a['values'])[:120]} (torch {str(b['values'])[:120]})"
        elif base not in NONDETERMINISTIC and not _close(a, b, 1e-5):
            return f"result {k}: {str(a)[:80]} (torch {str(b)[:80]})"
    return None


def shrink(args, case: Case, kind: str) -> Case:
    """Simplify a crashing/hanging case while it still fails the same way."""
    def still_fails(c: Case) -> bool:
        res = run_one_fresh(args, c.code)
        return kind in res

    best = case
    for i, line in sorted(case.simple.items()):
        trial = Case(best.op, list(best.setup), best.call, best.simple)
        trial.setup[i] = line
        if still_fails(trial):
            best = trial
    # drop keyword arguments one at a time
    while True:
        import re
        kws = re.findall(r", (\w+)=[^,()]*(?=[,)])", best.call)
        improved = False
        for k in kws:
            call = re.sub(rf", {k}=[^,()]*(?=[,)])", "", best.call, count=1)
            trial = Case(best.op, best.setup, call, best.simple)
            if call != best.call and still_fails(trial):
                best, improved = trial, True
                break
        if not improved:
            break
    # drop unused setup lines
    used = [ln for ln in best.setup if ln.split(" = ")[0] in best.call or
            any(ln.split(" = ")[0] in other for other in best.setup if other is not ln)]
    if len(used) != len(best.setup):
        trial = Case(best.op, used, best.call, {})
        if still_fails(trial):
            best = trial
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-op", type=int, default=30, help="random calls per op overload")
    ap.add_argument("--surface", type=int, default=600, help="calls of the hand-written surface")
    ap.add_argument("--ops", default="", help="comma-separated op names (plus 'surface', 'targeted')")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before a case is a hang")
    ap.add_argument("--mem-gb", type=int, default=4, help="address-space limit of the worker")
    ap.add_argument("--threads", type=int, default=1, help="ember.set_num_threads in the worker")
    ap.add_argument("--torch", action="store_true", help="also compare outcomes with PyTorch")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--limit", type=int, default=0, help="run only the first N cases")
    ap.add_argument("--json", default="", help="write all findings to this file")
    args = ap.parse_args(argv)
    if args.torch:
        args.mem_gb = max(args.mem_gb, 12)

    cases = build_cases(args)
    if args.limit:
        cases = cases[: args.limit]
    return run_cases(args, cases)


def run_cases(args, cases: list[Case]) -> int:
    """Runs the cases in workers, shrinks crashes and hangs, prints every finding (and, with
    ``args.torch``, every divergence from PyTorch); 1 when anything but divergences was found.
    Shared with the signature-driven fuzzer next to this file (fuzz_api.py)."""
    print(f"{len(cases)} cases", file=sys.stderr)
    findings: list[dict] = []
    divergences: list[dict] = []
    counts: dict[str, int] = {}
    seen: set[tuple] = set()
    w = Worker(args)
    t0 = time.monotonic()
    for i, case in enumerate(cases):
        res = w.run(i, case.code, args.timeout)
        if "crash" in res or "hang" in res or w.p.poll() is not None:
            w.kill()
            w = Worker(args)
        c = classify(res)
        status = c[0] if c else res["ember"]["status"]
        counts[status] = counts.get(status, 0) + 1
        if c:
            key = (case.op, c[0], c[1][:40])
            if key not in seen:
                seen.add(key)
                findings.append({"op": case.op, "kind": c[0], "detail": c[1], "case": case})
        elif args.torch:
            d = compare_torch(case.op, res)
            if d:
                key = (case.op, "divergence", d[:30])
                if key not in seen:
                    seen.add(key)
                    divergences.append({"op": case.op, "kind": "divergence", "detail": d,
                                        "case": case})
        if (i + 1) % 500 == 0:
            print(f"  {i + 1}/{len(cases)} ({time.monotonic() - t0:.0f} s) {counts}", file=sys.stderr)
    w.close()

    for f in findings:
        if f["kind"] in ("crash", "hang") and not args.no_shrink:
            f["case"] = shrink(args, f["case"], f["kind"])
    order = {"crash": 0, "hang": 1, "bad-result": 2, "unexpected-exception": 3, "unclear-message": 4}
    findings.sort(key=lambda f: (order.get(f["kind"], 9), f["op"]))
    print(f"\n{len(cases)} cases in {time.monotonic() - t0:.0f} s: {counts}")
    for f in findings + divergences:
        print(f"\n== {f['kind']}: {f['op']}: {f['detail'][:400]}")
        print(f["case"].repro())
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"op": f["op"], "kind": f["kind"], "detail": f["detail"], "repro": f["case"].repro()}
             for f in findings + divergences], indent=1))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
