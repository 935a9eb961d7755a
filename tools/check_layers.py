#!/usr/bin/env python3
"""Check that packages/core/csrc keeps its layers (docs/architecture.md, "Layers").

Fast and pure Python: it reads the sources and needs no build. Layers, bottom-up::

    core (csrc/core)
      -> kernels (csrc/kernels, with cpu/ and meta/; csrc/cuda is a backend at this level)
        -> ops (csrc/ops and the generated "ops.h")
          -> autograd (csrc/autograd)
            -> python (csrc/python)

Rules (each violation prints ``file:line: message`` and the script exits with status 1):

1. A file includes only headers of its own layer or a lower one. The exceptions are the
   op declarations: ``"ops.h"`` (generated from ops/*.yaml: the ``dispatch::`` entry points
   and every kernel's signature) and ``"ops/op_types.h"`` (the types of those signatures) may
   be included from kernels and from the cuda backend, since a kernel must see its own
   declaration and may call ``dispatch::`` (raw device dispatch, no autograd).
   Headers under csrc/cuda are included only from csrc/cuda; csrc/python only from
   csrc/python.
2. No file under csrc/kernels or csrc/cuda calls ``ops::`` (the autograd layer) or
   ``composite::`` (ops written on other ops, which live in csrc/ops), nor opens
   ``namespace ops`` / ``namespace composite`` (defining or ``using`` it).
3. The ``#include`` graph among the headers has no cycle.

A tolerated upward include would be listed in ALLOWED below with its reason (the table is
empty); an entry that no longer matches anything is reported, so the list only shrinks.

Usage: ``python3 tools/check_layers.py [CSRC_ROOT]`` (default: packages/core/csrc of this
repository). Example::

    $ python3 tools/check_layers.py
    check_layers: 101 files, 0 violations
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Rank of each layer; a file may include headers of its own rank or lower.
# extension (the C++ frontend and casters extensions include) sits beside python, which includes
# its C API header; torch_compat (<torch/extension.h>, <ATen/...>, <c10/...> for PyTorch
# extensions) sits on top.
LAYERS = {"core": 0, "kernels": 1, "cuda": 1, "ops": 2, "autograd": 3, "python": 4, "extension": 4,
          "torch_compat": 5}
# Generated headers (not in the source tree): their layer, and what they include.
GENERATED = {"ops.h": ("ops", ["ops/op_types.h"]),
             "frontend_ops.h": ("extension", ["extension/tensor_base.h",
                                              "extension/tensor_methods.inc",
                                              "extension/tensor_args.h"])}
# Headers of the ops layer that kernels and the cuda backend may include (rule 1).
OP_DECLARATIONS = {"ops.h", "ops/op_types.h"}
# Layers that only include themselves from the same directory tree (backends, bindings).
PRIVATE = {"cuda", "python"}
SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc"}
HEADER_SUFFIXES = {".h", ".hpp", ".cuh", ".inc"}

# (including file, included header) -> why this upward include is tolerated for now.
ALLOWED: dict[tuple[str, str], str] = {}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
CALL_RE = re.compile(r"(?<![\w:])(ops|composite)::")
NAMESPACE_RE = re.compile(r"\b(using\s+)?namespace\s+(?:\w+::)*(ops|composite)\b")


def default_root() -> Path:
    return Path(__file__).resolve().parent.parent / "packages" / "core" / "csrc"


def layer_of(rel: str) -> str | None:
    """Layer of a path relative to csrc ("ops.h" is the generated op declarations)."""
    if rel in GENERATED:
        return GENERATED[rel][0]
    top = rel.split("/", 1)[0]
    return top if top in LAYERS and "/" in rel else None


def strip_code(text: str) -> list[str]:
    """The lines of a C++ source with comments and string literals blanked out (line numbers
    kept), so that `ops::` in a comment or an error message is not taken for a call."""
    out: list[str] = []
    in_block = False
    for line in text.splitlines():
        res = []
        i = 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    i = len(line)
                else:
                    in_block = False
                    i = end + 2
                continue
            c = line[i]
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block = True
                i += 2
                continue
            if c == '"' or c == "'":
                j = i + 1
                while j < len(line) and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                res.append(" ")
                i = j + 1
                continue
            res.append(c)
            i += 1
        out.append("".join(res))
    return out


def resolve(root: Path, src: Path, inc: str) -> str | None:
    """csrc-relative path of a quoted include, or None when it is outside csrc (a library)."""
    if inc in GENERATED:
        return inc
    if (root / inc).is_file():
        return inc
    local = src.parent / inc
    if local.is_file():
        return local.resolve().relative_to(root.resolve()).as_posix()
    return None


def include_allowed(src_rel: str, inc_rel: str) -> bool:
    src_layer, inc_layer = layer_of(src_rel), layer_of(inc_rel)
    if src_layer is None or inc_layer is None:
        return True
    if inc_layer in PRIVATE and inc_layer != src_layer:
        return False
    if LAYERS[inc_layer] <= LAYERS[src_layer]:
        return True
    return src_layer in ("kernels", "cuda") and inc_rel in OP_DECLARATIONS


def find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one node (or a self loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        # Iterative Tarjan: (node, iterator over its successors).
        work = [(start, iter(graph.get(start, [])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, succ = work[-1]
            advanced = False
            for nxt in succ:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, []))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in graph.get(node, []):
                    comps.append(comp)
    cycles = []
    for comp in comps:
        members = set(comp)
        # Walk inside the component from its smallest node until a node repeats.
        path = [min(comp)]
        while True:
            nxt = next(n for n in graph[path[-1]] if n in members)
            if nxt in path:
                cycles.append(path[path.index(nxt) :] + [nxt])
                break
            path.append(nxt)
    return cycles


def check(root: Path) -> list[str]:
    """All violations under the csrc directory `root`, as "file:line: message" strings."""
    root = root.resolve()
    problems: list[str] = []
    graph: dict[str, list[str]] = {}
    where: dict[tuple[str, str], int] = {}
    used_allowances: set[tuple[str, str]] = set()
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    for path in files:
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines()
        edges = graph.setdefault(rel, [])
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            inc = resolve(root, path, m.group(1))
            if inc is None:
                continue
            if inc not in edges:
                edges.append(inc)
                where[(rel, inc)] = lineno
            if include_allowed(rel, inc):
                continue
            if (rel, inc) in ALLOWED:
                used_allowances.add((rel, inc))
                continue
            problems.append(
                f"{rel}:{lineno}: #include \"{m.group(1)}\": the {layer_of(rel)} layer may not "
                f"include a header of the {layer_of(inc)} layer"
            )
        if layer_of(rel) in ("kernels", "cuda"):
            for lineno, code in enumerate(strip_code(text), 1):
                for name in dict.fromkeys(m.group(1) for m in CALL_RE.finditer(code)):
                    what = (
                        "the autograd layer (use dispatch:: or a cpu:: helper)"
                        if name == "ops"
                        else "a composite (composites live in csrc/ops)"
                    )
                    problems.append(f"{rel}:{lineno}: calls {name}::, {what}: "
                                    f"{lines[lineno - 1].strip()}")
                for m in NAMESPACE_RE.finditer(code):
                    verb = "uses" if m.group(1) else "defines"
                    problems.append(f"{rel}:{lineno}: {verb} namespace {m.group(2)} under "
                                    f"{rel.split('/', 1)[0]}/ (ops:: is the autograd layer; "
                                    "composites live in csrc/ops)")
    for name, (_, incs) in GENERATED.items():
        graph[name] = list(incs)
    headers = {n: [i for i in e if Path(i).suffix in HEADER_SUFFIXES or i in GENERATED]
               for n, e in graph.items() if Path(n).suffix in HEADER_SUFFIXES or n in GENERATED}
    for cycle in find_cycles(headers):
        first, second = cycle[0], cycle[1]
        line = where.get((first, second), 0)
        problems.append(f"{first}:{line}: #include cycle: {' -> '.join(cycle)}")
    for key in sorted(set(ALLOWED) - used_allowances):
        if not (root / key[0]).is_file():
            continue  # a tree without that file (a test's synthetic tree)
        problems.append(f"{key[0]}:0: stale ALLOWED entry for \"{key[1]}\" in "
                        "tools/check_layers.py (the include is gone: remove the entry)")
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else default_root()
    if not root.is_dir():
        print(f"check_layers: {root} is not a directory", file=sys.stderr)
        return 2
    problems = check(root)
    for p in problems:
        print(p)
    n = sum(1 for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    print(f"check_layers: {n} files, {len(problems)} violation{'s' * (len(problems) != 1)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
