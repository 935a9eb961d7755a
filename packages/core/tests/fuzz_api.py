#!/usr/bin/env python3
"""Signature-driven differential fuzzer for ember's whole public Python surface (a standalone
tool next to ``fuzz_ops.py``, whose workers, checks, shrinking and torch comparison it reuses).

Where ``fuzz_ops.py`` builds its calls from the YAML op schemas, this tool enumerates every public
callable of ``ember``, ``ember.nn.functional``, ``ember.special``, ``ember.linalg``, ``ember.fft``
and every public ``Tensor`` method -- hand-written Python functions included -- and builds the
arguments from each one's signature (``inspect.signature``, or the first overload of a pybind11
docstring): parameter names (input/other/dim/size/p/ord/out/dtype/reduction, ...), annotations and
defaults pick the generator, and hostile values are mixed in (nan/inf, huge ints, negative and
out-of-range dims, empty and 0-d tensors, non-contiguous views, complex and integer dtypes where
floats are expected, ``True`` where an int is expected, values of the wrong Python type). Every
case runs in a worker subprocess with a timeout (crashes and hangs are caught and shrunk); with
``--torch`` the same source runs against PyTorch and outcome (ok vs. error class), result
dtype/shape and values (allclose, nan == nan) are compared.

    PYTHONPATH=build/dev/site python3 packages/core/tests/fuzz_api.py --seed 0 --per-fn 4 --torch
    PYTHONPATH=build/dev/site python3 packages/core/tests/fuzz_api.py --only special.,linalg.det

Every finding is printed as a standalone repro (``import ember as M`` + the case's code). Exit
status 1 when anything but divergences was found.
"""

from __future__ import annotations

import argparse
import inspect
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_ops as fo  # noqa: E402

# (prefix in the case source, attribute path from the module `M`)
MODULES = [("M.", ""), ("M.nn.functional.", "nn.functional"), ("M.special.", "special"),
           ("M.linalg.", "linalg"), ("M.fft.", "fft")]
# Global state, file system, process or device control, or no tensor semantics worth comparing.
SKIP_PREFIX = ("set_", "save", "load", "manual_seed", "seed", "compile", "use_deterministic",
               "empty_cache", "reset_", "memory", "max_memory", "allocator", "from_file", "is_",
               "get_", "register_", "share_memory", "pin_memory", "cuda", "initial_seed",
               "enable_grad", "no_grad", "inference_mode", "autocast", "vmap", "export",
               "typename", "from_dlpack", "to_dlpack", "backward", "apply_", "map_", "map2_",
               "storage", "untyped_storage", "record_stream", "data_ptr", "const_data_ptr",
               "mutable_data_ptr", "sym_", "frombuffer",
               "asarray", "library", "ops", "compiled_with_cxx11_abi", "get_rng_state",
               "set_rng_state", "fork_rng", "random", "use_", "are_deterministic", "align_",
               "rename", "refine_names", "to_mkldnn", "to_sparse", "sparse_", "is_set_to",
               "retain_grad", "register", "dump_", "_")
SKIP_NAMES = {"wait", "matrix_power_", "pow_", "requires_grad_", "detach_", "set_", "resize_",
              "resize_as_", "module_load", "type", "new", "dim_order", "element_size", "numpy",
              "tolist", "item", "nbytes", "itemsize", "__array__", "print", "printoptions",
              "vander", "classes", "assert_", "Size", "broadcast_shapes", "result_type",
              "promote_types", "can_cast", "chunk_"}
# Results that are random / uninitialized (shapes and dtypes compared only).
RANDOM_NAME = re.compile(r"rand|dropout|bernoulli|normal|poisson|multinomial|gumbel|rrelu|empty|"
                         r"exponential_|geometric_|cauchy_|log_normal_|uniform_|random_|"
                         r"fractional_max_pool|binomial|sample|feature_alpha|lowrank|lobpcg")
TIE_NAME = re.compile(r"(^|\.)(sort|argsort|topk|kthvalue|median|nanmedian|mode|max|min|cummax|"
                      r"cummin|argmax|argmin|msort|unique|max_pool\w*|adaptive_max_pool\w*|"
                      r"svd\w*|lu\w*|qr|ldl\w*|pca_lowrank|lobpcg)$")

# Results whose order or phase is not unique (eigenvalues): shapes and dtypes compared only.
UNORDERED_NAME = re.compile(r"(^|\.)(eig|eigvals|eigh|eigvalsh|lobpcg|symeig)$")
DIM_NAMES = fo.DIM_NAMES | {"axis", "dim_", "batch_dim"}
SIZE_NAMES = {"size", "shape", "sizes", "output_size", "normalized_shape", "kernel_size",
              "stride", "padding", "dilation", "output_padding", "pad"}
TENSOR_NAMES = {"input", "self", "other", "x", "x1", "x2", "y", "a", "b", "A", "B", "mat", "mat1",
                "mat2", "vec", "vec1", "vec2", "weight", "bias", "target", "tensor", "tensor1",
                "tensor2", "exponent", "end", "boundaries", "sorted_sequence", "values", "src",
                "source", "mask", "q", "k", "v", "query", "key", "value", "running_mean",
                "running_var", "log_input", "var", "positive", "negative", "anchor", "LU",
                "pivots", "LD", "H", "tau", "elements", "test_elements", "theta", "grid", "u",
                "index", "indices"}
SQUARE_SHAPES = [(3, 3), (2, 3, 3), (0, 0), (1, 1), (4, 4), (3, 4), (4, 3), (2, 0, 0), (3,), (),
                 (2, 2, 2), (5, 5)]
NN_SHAPES = [(2, 3, 8), (1, 3, 5, 5), (2, 3, 4, 4, 4), (4,), (2, 5), (3, 4), (), (0, 3), (2, 0, 5),
             (1, 1, 1), (2, 4, 6, 6), (3, 1)]
COMPLEX = ["complex64", "complex128"]


class Param:
    def __init__(self, name: str, annot: str, default: str | None, kind: str):
        self.name, self.annot, self.default, self.kind = name, annot, default, kind

    def __repr__(self) -> str:
        return f"Param({self.name}, {self.annot!r}, {self.default!r}, {self.kind})"


def params_of(fn, is_method: bool) -> list[Param] | None:
    """The parameters of `fn` (self dropped for methods), None when they cannot be found."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    out: list[Param] = []
    if sig is not None:
        for p in sig.parameters.values():
            kind = {p.VAR_POSITIONAL: "varargs", p.VAR_KEYWORD: "varkw",
                    p.KEYWORD_ONLY: "kwonly"}.get(p.kind, "pos")
            annot = "" if p.annotation is p.empty else str(p.annotation)
            default = None if p.default is p.empty else repr(p.default)
            out.append(Param(p.name, annot, default, kind))
        if is_method and out and out[0].kind == "pos":
            out = out[1:]
        return out
    doc = getattr(fn, "__doc__", None) or ""
    name = getattr(fn, "__name__", "")
    m = re.search(rf"^(?:\d+\. )?{re.escape(name)}\((.*)\) ->", doc, re.M)
    if not m:
        return None
    from ember.library import _split_top  # the schema splitter custom ops use

    kwonly = False
    for part in _split_top(m.group(1)):
        if part == "*":
            kwonly = True
            continue
        if part.startswith("**"):
            out.append(Param(part[2:].split(":")[0], "", None, "varkw"))
            continue
        if part.startswith("*"):
            out.append(Param(part[1:].split(":")[0], "", None, "varargs"))
            continue
        head, _, default = part.partition(" = ")
        pname, _, annot = head.partition(": ")
        out.append(Param(pname.strip(), annot.strip(), default.strip() or None,
                         "kwonly" if kwonly else "pos"))
    if is_method and out and out[0].name in ("self", "arg0"):
        out = out[1:]
    return out


def targets(only: list[str]) -> list[tuple[str, str, list[Param]]]:
    """(case op name, call prefix, params) for every public callable under test."""
    import ember

    res = []
    for prefix, path in MODULES:
        mod = ember
        for part in filter(None, path.split(".")):
            mod = getattr(mod, part)
        label = {"": "", "nn.functional": "F."}.get(path, path + ".")
        for name in sorted(dir(mod)):
            if name.startswith(SKIP_PREFIX) or name in SKIP_NAMES:
                continue
            fn = getattr(mod, name, None)
            if not callable(fn) or isinstance(fn, type) or inspect.ismodule(fn):
                continue
            ps = params_of(fn, False)
            if ps is None:
                continue
            res.append((label + name, prefix + name, ps))
    for name in sorted(dir(ember.Tensor)):
        if name.startswith(SKIP_PREFIX) or name in SKIP_NAMES:
            continue
        fn = getattr(ember.Tensor, name, None)
        if not callable(fn) or isinstance(fn, (type, property)):
            continue
        ps = params_of(fn, True)
        if ps is None:
            continue
        res.append(("Tensor." + name, "." + name, ps))
    if only:
        res = [t for t in res if any(t[0] == o or (o.endswith(".") and t[0].startswith(o))
                                     for o in only)]
    return res


class ApiGen:
    """Builds one call of one target as source text (setup lines + call expression)."""

    def __init__(self, rng: random.Random):
        self.r = rng
        self.g = fo.Gen(rng)

    def _shape_pool(self, op: str) -> list[tuple]:
        if op.startswith("linalg.") or op.split(".")[-1] in (
                "det", "inverse", "cholesky", "logdet", "slogdet", "matrix_exp", "pinverse",
                "matrix_power", "trace", "triu", "tril", "lu", "qr", "svd", "eig"):
            return SQUARE_SHAPES
        if op.startswith("F."):
            return NN_SHAPES
        return fo.SHAPES[:18]

    def _dtype(self, op: str) -> str:
        r = self.r
        floaty = op.startswith(("special.", "linalg.", "fft.", "F."))
        x = r.random()
        if x < (0.1 if floaty else 0.06):
            return r.choice(COMPLEX)
        if floaty and x < 0.75:
            return r.choice(["float32", "float64", "float64", "float16", "bfloat16"])
        return r.choice(fo.DTYPES)

    def tensor(self, shape: tuple, dtype: str) -> str:
        r = self.r
        n = 1
        for s in shape:
            n *= s
        if dtype not in COMPLEX and dtype != "bool" and 0 < n <= 64 and r.random() < 0.35:
            # irregular values: non-singular matrices, ties broken, mixed signs
            lo, hi = (-3.0, 3.0) if dtype in fo.FLOATS else (-5, 9)
            if dtype in fo.FLOATS:
                vals = [round(r.uniform(lo, hi), 3) for _ in range(n)]
            else:
                vals = [r.randint(0 if dtype == "uint8" else lo, hi) for _ in range(n)]
            src = f"M.tensor({vals}, dtype=M.float64).reshape({shape!r}).to(M.{dtype})"
            if self.g.grad and dtype in fo.FLOATS:
                src += ".requires_grad_()"
            return src
        if dtype in COMPLEX:
            base = self.g.tensor(shape, "float64")
            return f"({base} * (1 + 0.5j)).to(M.{dtype})" if r.random() < 0.8 else \
                f"({base}).to(M.{dtype})"
        return self.g.tensor(shape, dtype)

    def case(self, op: str, prefix: str, params: list[Param]) -> fo.Case:
        r, g = self.r, self.g
        g.grad = r.random() < 0.2
        shape = r.choice(self._shape_pool(op))
        dtype = self._dtype(op)
        ndim = len(shape)
        n0 = shape[0] if shape else 1
        setup: list[str] = []
        simple: dict[int, str] = {}
        tvars: list[str] = []

        def new_var(expr: str, simple_expr: str | None = None) -> str:
            v = f"a{len(setup)}"
            if simple_expr is not None and simple_expr != expr:
                simple[len(setup)] = f"{v} = {simple_expr}"
            setup.append(f"{v} = {expr}")
            return v

        def tensor_arg(name: str) -> str:
            if name in fo.INDEX_TENSOR_NAMES or name in ("target", "pivots") and r.random() < 0.5:
                v = new_var(g.index_tensor(n0, shape if r.random() < 0.4 else None))
            elif name == "mask" and r.random() < 0.8:
                v = new_var(self.tensor(shape, "bool"), g.base(shape, "bool"))
            elif not tvars or r.random() < 0.65:
                v = new_var(self.tensor(shape, dtype), g.base(shape, dtype))
            elif r.random() < 0.5:
                sh = r.choice([shape, shape[1:], (1,) + shape[1:], ()])
                dt = self._dtype(op)
                v = new_var(self.tensor(sh, dt), g.base(sh, dt) if dt not in COMPLEX else None)
            else:
                sh, dt = r.choice(self._shape_pool(op)), self._dtype(op)
                v = new_var(self.tensor(sh, dt), g.base(sh, dt) if dt not in COMPLEX else None)
            tvars.append(v)
            return v

        def value(p: Param) -> str | None:
            name, annot, default = p.name, p.annot.lower(), p.default
            if r.random() < 0.05:
                return r.choice(fo.WRONG + tvars[:1])
            if name == "out":
                if r.random() < 0.75 or not tvars or prefix.startswith("."):
                    return None
                return r.choice([tvars[0], "M.empty(0)", f"M.zeros(7, dtype=M.{dtype})",
                                 f"M.zeros(16, dtype=M.{dtype})[::2]"])
            if name == "dtype":
                return None if r.random() < 0.5 else r.choice([g.dtype(), "M.complex64"])
            if name in ("device",):
                return None if r.random() < 0.8 else g.device()
            if name in ("generator", "layout", "memory_format", "pin_memory", "names",
                        "requires_grad") or "generator" in annot:
                return None
            if name in DIM_NAMES or (name == "dims" and "int" in annot and "[" not in annot):
                if "[" in annot or "sequence" in annot or "tuple" in annot or "list" in annot:
                    return g.dim_list(ndim) if r.random() < 0.5 else g.dim(ndim)
                return "True" if r.random() < 0.03 else g.dim(ndim)
            if name in ("dims", "dim_list", "axes"):
                return g.dim_list(ndim)
            if name in SIZE_NAMES:
                if r.random() < 0.5:
                    return g.size_int(n0)
                return g.size_list()
            if name in ("n", "k", "s", "num", "steps", "diagonal", "offset", "repeats",
                        "chunks", "sections", "split_size_or_sections", "num_classes",
                        "upscale_factor", "downscale_factor", "groups", "bins", "m", "q",
                        "niter", "rank", "num_samples", "window_length", "n_fft", "hop_length",
                        "win_length", "decimals", "shifts", "ndim", "minlength", "start",
                        "step", "tol", "atol", "rtol", "hermitian"):
                if name in ("atol", "rtol", "tol"):
                    return r.choice(["None", "1e-5", "0.0", "-1.0", "float('nan')", "1e300"])
                if name == "hermitian":
                    return r.choice(["True", "False"])
                if name == "s" and r.random() < 0.5:
                    return r.choice(["[3]", "[2, 2]", "[0]", "[-1]", "[4, 4, 4]", "None"])
                if name in ("k", "n", "q") and "tensor" in annot and r.random() < 0.3:
                    return tensor_arg(name)
                return "True" if r.random() < 0.04 else g.size_int(n0)
            if name in ("p", "ord"):
                return r.choice(["2", "1", "0", "-1", "3.5", "float('inf')", "-float('inf')",
                                 "float('nan')", "'fro'", "'nuc'", "0.5", "None", "-2", "2**63"])
            if name == "reduction":
                return r.choice(["'mean'", "'sum'", "'none'", "'bogus'", "'batchmean'"])
            if name in ("norm",) and (op.startswith("fft.") or "str" in annot):
                return r.choice(["None", "'ortho'", "'forward'", "'backward'", "'bogus'"])
            if name in ("mode", "padding_mode", "interpolation", "side", "rounding_mode",
                        "approximate", "driver", "UPLO", "indexing", "reduce", "upper",
                        "equation", "nonlinearity"):
                if name in ("upper",):
                    return r.choice(["True", "False"])
                opts = {"mode": ["'reflect'", "'constant'", "'replicate'", "'circular'",
                                 "'nearest'", "'bilinear'", "'linear'", "'reduced'",
                                 "'complete'", "'r'", "'floor'", "'bicubic'", "'area'"],
                        "UPLO": ["'L'", "'U'"], "approximate": ["'none'", "'tanh'"],
                        "driver": ["None", "'gelsd'", "'gels'", "'gelsy'", "'gesvd'"]
                        }.get(name)
                if opts and r.random() < 0.8:
                    return r.choice(opts)
                return g.string(op, name)
            if default is not None and (default in ("True", "False") or "bool" in annot):
                return r.choice(["True", "False", "True", "1", "None"][: 3 if r.random() < 0.9
                                                                           else 5])
            if default is not None and re.fullmatch(r"-?\d+", default) or annot in ("int",
                                                                                    "int | none"):
                if r.random() < 0.04:
                    return "True"
                return r.choice([default or "0", g.size_int(n0), g.dim(ndim)])
            if default is not None and re.fullmatch(r"-?[\d.]+(e-?\d+)?|inf|nan", default) \
                    or annot.startswith("float"):
                return r.choice([default or "1.0", g.float_(), g.float_(), "0.5"])
            if default is not None and default.startswith("'"):
                return r.choice([default, default, g.string(op, name)])
            if "number" in annot and "tensor" not in annot or "scalar" in annot:
                return g.scalar()
            if "tensor" in annot and "number" in annot and r.random() < 0.4:
                return g.scalar()
            if default == "None" and r.random() < 0.5:
                return None
            if name in TENSOR_NAMES or "tensor" in annot or default is None:
                if "sequence" in annot or "list" in annot or name in ("tensors", "inputs"):
                    k = r.choice([0, 1, 2, 2, 3])
                    return "[" + ", ".join(tensor_arg(name) for _ in range(k)) + "]"
                return tensor_arg(name)
            if default == "None":
                return tensor_arg(name) if r.random() < 0.5 else g.scalar()
            return None

        is_method = prefix.startswith(".")
        if is_method:
            self_v = tensor_arg("input")
        pos: list[str] = []
        kw: dict[str, str] = {}
        positional_ok = True
        for p in params:
            if p.kind == "varkw":
                continue
            if p.kind == "varargs":
                k = r.choice([0, 1, 2, 3])
                nm = p.name
                if nm in ("size", "shape", "sizes", "dims", "args") and is_method:
                    vals = [g.dim(ndim) if nm == "dims" else g.size_int(n0) for _ in range(k)]
                    if r.random() < 0.3:
                        vals = [g.size_list()]
                    pos += vals
                else:
                    pos += [tensor_arg("x") for _ in range(k)]
                continue
            if p.default is not None and r.random() < 0.35:
                positional_ok = False
                continue  # leave it at its default
            v = value(p)
            if v is None:
                positional_ok = False
                continue
            if p.kind == "kwonly" or not positional_ok or (p.default is not None and
                                                           r.random() < 0.3):
                kw[p.name] = v
                positional_ok = False
            else:
                pos.append(v)
        argsrc = ", ".join(pos + [f"{k}={v}" for k, v in kw.items()])
        call = f"{self_v}{prefix}({argsrc})" if is_method else f"{prefix}({argsrc})"
        return fo.Case(op, setup, call, simple)


def build(args) -> list[fo.Case]:
    only = [o for o in args.only.split(",") if o]
    tg = targets(only)
    print(f"{len(tg)} callables", file=sys.stderr)
    for op, _, _ in tg:
        if RANDOM_NAME.search(op.split(".")[-1]) or UNORDERED_NAME.search(op):
            fo.NONDETERMINISTIC.add(op)
        if TIE_NAME.search(op):
            fo.TIE_DEPENDENT.add(op)
    rng = random.Random(args.seed)
    gen = ApiGen(rng)
    cases = []
    for op, prefix, ps in tg:
        for _ in range(args.per_fn):
            cases.append(gen.case(op, prefix, ps))
    rng.shuffle(cases)  # a crash-prone callable does not cluster the worker restarts
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-fn", type=int, default=4, help="random calls per callable")
    ap.add_argument("--only", default="", help="comma-separated names (F.relu, Tensor.add, ...); "
                    "a name ending in '.' selects a prefix (special.)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before a case is a hang")
    ap.add_argument("--mem-gb", type=int, default=4, help="address-space limit of the worker")
    ap.add_argument("--threads", type=int, default=1, help="ember.set_num_threads in the worker")
    ap.add_argument("--torch", action="store_true", help="also compare outcomes with PyTorch")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--limit", type=int, default=0, help="run only the first N cases")
    ap.add_argument("--json", default="", help="write all findings to this file")
    ap.add_argument("--list", action="store_true", help="print the cases' code and exit")
    args = ap.parse_args(argv)
    if args.torch:
        args.mem_gb = max(args.mem_gb, 12)
    cases = build(args)
    if args.limit:
        cases = cases[: args.limit]
    if args.list:
        for c in cases:
            print(f"# {c.op}\n{c.code}\n")
        return 0
    return fo.run_cases(args, cases)


if __name__ == "__main__":
    sys.exit(main())
