"""Compares what a logging ``TorchDispatchMode`` sees in ember and in PyTorch: for ~40 common ops
and modules, the aten op names (``func.__name__``: packet and overload) of the forward pass and,
for the cases marked so, of the backward pass, side by side, then a summary.

    PYTHONPATH=<ember site> python3 tools/compare_dispatch_traces.py [-v] [--packets] [CASE ...]

``--packets`` compares packet names only (``mm`` rather than ``mm.default``); ``-v`` prints the
matching cases' sequences too. Autograd's ``detach`` (saving an output for backward) is left out of
both sequences: where it shows depends on each library's saved-variable bookkeeping.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable
from typing import Any

# (name, setup(lib) -> state, run(lib, state) -> tensor or tuple, backward?)
Case = tuple[str, Callable[[Any], Any], Callable[[Any, Any], Any], bool]


def _f(lib: Any) -> Any:
    return lib.nn.functional


def _req(lib: Any, *shape: int) -> Any:
    return lib.randn(*shape, requires_grad=True)


def _transformer_layer(lib: Any) -> Any:
    return lib.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)


CASES: list[Case] = [
    # matrix products (what FlopCounterMode counts)
    ("mm", lambda L: (_req(L, 3, 4), _req(L, 4, 5)), lambda L, s: L.mm(*s), True),
    ("addmm", lambda L: (_req(L, 5), _req(L, 3, 4), _req(L, 4, 5)), lambda L, s: L.addmm(*s), True),
    ("bmm", lambda L: (_req(L, 2, 3, 4), _req(L, 2, 4, 5)), lambda L, s: L.bmm(*s), True),
    ("matmul_3d_2d", lambda L: (_req(L, 2, 3, 4), _req(L, 4, 5)), lambda L, s: s[0] @ s[1], True),
    ("matmul_4d", lambda L: (_req(L, 2, 2, 3, 4), _req(L, 2, 2, 4, 5)),
     lambda L, s: s[0] @ s[1], True),
    ("t", lambda L: L.randn(3, 4), lambda L, x: x.t(), False),
    ("linear_2d", lambda L: (L.nn.Linear(4, 3), _req(L, 2, 4)), lambda L, s: s[0](s[1]), True),
    ("linear_3d", lambda L: (L.nn.Linear(4, 3), _req(L, 5, 2, 4)), lambda L, s: s[0](s[1]), True),
    ("linear_nobias", lambda L: (L.nn.Linear(4, 3, bias=False), _req(L, 2, 4)),
     lambda L, s: s[0](s[1]), True),
    ("conv1d", lambda L: (L.nn.Conv1d(2, 3, 3), _req(L, 2, 2, 7)), lambda L, s: s[0](s[1]), True),
    ("conv2d", lambda L: (L.nn.Conv2d(2, 3, 3, padding=1), _req(L, 1, 2, 5, 5)),
     lambda L, s: s[0](s[1]), True),
    ("conv_transpose2d", lambda L: (L.nn.ConvTranspose2d(2, 3, 3, stride=2), _req(L, 1, 2, 4, 4)),
     lambda L, s: s[0](s[1]), True),
    ("sdpa", lambda L: (_req(L, 1, 2, 3, 4),), lambda L, s: _f(L).scaled_dot_product_attention(
        s[0], s[0], s[0]), True),
    ("sdpa_causal", lambda L: (_req(L, 1, 2, 3, 4),), lambda L, s: _f(L).scaled_dot_product_attention(
        s[0], s[0], s[0], is_causal=True), True),
    # softmax, losses
    ("softmax", lambda L: _req(L, 3, 4), lambda L, x: x.softmax(-1), True),
    ("log_softmax", lambda L: _req(L, 3, 4), lambda L, x: _f(L).log_softmax(x, 1), True),
    ("cross_entropy", lambda L: (_req(L, 3, 4), L.tensor([0, 1, 3])),
     lambda L, s: _f(L).cross_entropy(*s), True),
    ("nll_loss", lambda L: (_req(L, 3, 4), L.tensor([0, 1, 3])),
     lambda L, s: _f(L).nll_loss(*s), True),
    ("mse_loss", lambda L: (_req(L, 3, 4), L.randn(3, 4)), lambda L, s: _f(L).mse_loss(*s), True),
    # normalization, dropout, embedding, activations
    ("layer_norm", lambda L: (L.nn.LayerNorm(4), _req(L, 2, 4)), lambda L, s: s[0](s[1]), True),
    ("batch_norm_train", lambda L: (L.nn.BatchNorm2d(2), _req(L, 2, 2, 3, 3)),
     lambda L, s: s[0](s[1]), True),
    ("batch_norm_eval", lambda L: (L.nn.BatchNorm2d(2).eval(), _req(L, 2, 2, 3, 3)),
     lambda L, s: s[0](s[1]), False),
    ("group_norm", lambda L: (L.nn.GroupNorm(2, 4), _req(L, 2, 4, 3)), lambda L, s: s[0](s[1]),
     False),
    ("dropout", lambda L: _req(L, 2, 4), lambda L, x: _f(L).dropout(x, 0.5), False),
    ("embedding", lambda L: (L.nn.Embedding(5, 3), L.tensor([1, 2, 1])), lambda L, s: s[0](s[1]),
     True),
    ("gelu", lambda L: _req(L, 3, 4), lambda L, x: _f(L).gelu(x), True),
    ("relu", lambda L: _req(L, 3, 4), lambda L, x: x.relu(), True),
    ("silu", lambda L: _req(L, 3, 4), lambda L, x: _f(L).silu(x), False),
    ("tanh", lambda L: _req(L, 3, 4), lambda L, x: x.tanh(), True),
    # reductions
    ("sum", lambda L: L.randn(3, 4), lambda L, x: x.sum(), False),
    ("sum_dim", lambda L: L.randn(3, 4), lambda L, x: x.sum(1), False),
    ("sum_dim_keepdim", lambda L: L.randn(3, 4), lambda L, x: x.sum((0, 1), keepdim=True), False),
    ("mean", lambda L: L.randn(3, 4), lambda L, x: x.mean(), False),
    ("mean_dim", lambda L: L.randn(3, 4), lambda L, x: x.mean(-1), False),
    ("max_dim", lambda L: L.randn(3, 4), lambda L, x: x.max(1), False),
    # views, reshapes, indexing
    ("view", lambda L: L.randn(3, 4), lambda L, x: x.view(12), False),
    ("reshape_view", lambda L: L.randn(3, 4), lambda L, x: x.reshape(2, 6), False),
    ("reshape_copy", lambda L: L.randn(3, 4), lambda L, x: x.t().reshape(12), False),
    ("flatten", lambda L: L.randn(2, 3, 4), lambda L, x: x.flatten(1), False),
    ("index_tensor", lambda L: (L.randn(4, 3), L.tensor([0, 2])), lambda L, s: s[0][s[1]], False),
    ("index_mask", lambda L: L.randn(3, 4), lambda L, x: x[x > 0], False),
    ("index_basic", lambda L: L.randn(3, 4), lambda L, x: x[1, 1:3], False),
    ("cat_stack", lambda L: (L.randn(2, 3), L.randn(2, 3)),
     lambda L, s: (L.cat(s), L.stack(s)), False),
    # modules made of the above
    ("mlp", lambda L: (L.nn.Sequential(L.nn.Linear(4, 8), L.nn.ReLU(), L.nn.Linear(8, 2)),
                       _req(L, 3, 4)), lambda L, s: s[0](s[1]), True),
    ("transformer_layer", lambda L: (_transformer_layer(L), _req(L, 2, 3, 8)),
     lambda L, s: s[0](s[1]), True),
]


def _log_mode(base: type) -> type:
    class Log(base):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    return Log


def _first_tensor(out: Any) -> Any:
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


def trace(lib: Any, mode_base: type, case: Case) -> tuple[list[str], list[str]]:
    """The names a logging mode sees in the forward pass and in the backward pass."""
    _, setup, run, backward = case
    lib.manual_seed(0)
    state = setup(lib)
    with _log_mode(mode_base)() as fwd:
        out = run(lib, state)
    bwd_names: list[str] = []
    if backward:
        loss = _first_tensor(out).sum()
        with _log_mode(mode_base)() as bwd:
            loss.backward()
        bwd_names = bwd.names
    return ([n for n in fwd.names if not n.startswith("detach.")],
            [n for n in bwd_names if not n.startswith("detach.")])


def _packets(names: list[str]) -> list[str]:
    return [n.split(".")[0] for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("-v", action="store_true", help="print the matching cases too")
    parser.add_argument("--packets", action="store_true", help="compare packet names only")
    opts = parser.parse_args(argv)

    import ember
    import torch
    from ember.utils._python_dispatch import TorchDispatchMode as EmberMode
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    wanted = [c for c in CASES if not opts.cases or c[0] in opts.cases]
    same = differ = 0
    for case in wanted:
        try:
            ours = trace(ember, EmberMode, case)
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            ours = ([f"<{type(e).__name__}: {e}>"], [])
        theirs = trace(torch, TorchMode, case)
        for part, a, b in (("fwd", ours[0], theirs[0]), ("bwd", ours[1], theirs[1])):
            if part == "bwd" and not case[3]:
                continue
            if opts.packets:
                a, b = _packets(a), _packets(b)
            ok = a == b
            same += ok
            differ += not ok
            if ok and not opts.v:
                continue
            print(f"{'OK  ' if ok else 'DIFF'} {case[0]} ({part})")
            if ok:
                print("      " + " ".join(a))
                continue
            width = max([len(n) for n in a] + [5])
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b,
                                                                autojunk=False).get_opcodes():
                for k in range(max(i2 - i1, j2 - j1)):
                    left = a[i1 + k] if i1 + k < i2 else ""
                    right = b[j1 + k] if j1 + k < j2 else ""
                    mark = " " if tag == "equal" else "|"
                    print(f"      {left:<{width}} {mark} {right}")
    print(f"\n{same} sequences match torch {torch.__version__}, {differ} differ "
          f"({len(wanted)} cases; {'packet names' if opts.packets else 'op.overload names'})")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
