"""The layer rules of packages/core/csrc (docs/architecture.md, "Layers"), checked by
tools/check_layers.py: on the real tree it passes; on small synthetic trees each rule fires with
the file, the line and the offending include or call."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tools" / "check_layers.py"

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="not run from a repository checkout")


def load_checker():
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(root: Path | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, str(SCRIPT)] + ([str(root)] if root else [])
    return subprocess.run(args, capture_output=True, text=True, check=False)


def make_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A csrc-like tree: every file named in `files` (path relative to csrc) with its text."""
    root = tmp_path / "csrc"
    base = {
        "core/tensor.h": "#pragma once\n",
        "kernels/iterator.h": '#pragma once\n#include "core/tensor.h"\n',
        "ops/op_types.h": '#pragma once\n#include "core/tensor.h"\n',
        "autograd/autograd.h": '#pragma once\n#include "ops.h"\n',
        "python/tensor_py.h": '#pragma once\n#include "autograd/autograd.h"\n',
    }
    for rel, text in {**base, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_real_tree_passes():
    proc = run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 violations" in proc.stdout


def test_clean_synthetic_tree_passes(tmp_path):
    root = make_tree(tmp_path, {
        # Kernels may include the op declarations and call dispatch:: and cpu:: helpers.
        "kernels/cpu/add.cpp": (
            '#include "kernels/iterator.h"\n#include "ops.h"\n#include <vector>\n'
            "namespace ember::cpu {\n"
            "// ops::add would record autograd; \"ops::\" in a comment or string is fine\n"
            'Tensor f(const Tensor& a) { EMBER_CHECK(true, "see ops::add"); '
            "return dispatch::clone(a); }\n}\n"
        ),
        "cuda/cuda_add.cpp": '#include "kernels/iterator.h"\n#include "ops/op_types.h"\n',
        "ops/sum_ops.cpp": (
            '#include "kernels/iterator.h"\n#include "ops.h"\n'
            "namespace ember::composite {\nTensor g(const Tensor& a) { return ops::neg(a); }\n}\n"
        ),
        "python/module.cpp": '#include "python/tensor_py.h"\n#include "kernels/iterator.h"\n',
    })
    proc = run(root)
    assert proc.returncode == 0, proc.stdout
    assert load_checker().check(root) == []


def test_upward_include_fails_with_file_line_and_include(tmp_path):
    root = make_tree(tmp_path, {
        "kernels/cpu/bad.cpp": '#include "core/tensor.h"\n\n#include "autograd/autograd.h"\n',
    })
    proc = run(root)
    assert proc.returncode == 1
    assert 'kernels/cpu/bad.cpp:3: #include "autograd/autograd.h"' in proc.stdout
    assert "kernels layer may not include a header of the autograd layer" in proc.stdout
    assert "1 violation" in proc.stdout


@pytest.mark.parametrize(
    ("rel", "include", "message"),
    [
        ("core/bad.cpp", "kernels/iterator.h", "core layer may not include a header of the kernels"),
        ("core/bad.h", "ops.h", "core layer may not include a header of the ops layer"),
        ("ops/bad.cpp", "autograd/autograd.h", "ops layer may not include a header of the autograd"),
        ("autograd/bad.cpp", "python/tensor_py.h", "autograd layer may not include a header of"),
        ("kernels/bad.cpp", "ops/host_sync.h", "kernels layer may not include a header of the ops"),
        ("kernels/meta/bad.cpp", "cuda/stream.h", "kernels layer may not include a header of the"),
        ("cuda/bad.cpp", "autograd/autograd.h", "cuda layer may not include a header of the auto"),
    ],
)
def test_each_upward_include_is_refused(tmp_path, rel, include, message):
    files = {rel: f'#include "{include}"\n'}
    if include == "ops/host_sync.h":
        files["ops/host_sync.h"] = '#pragma once\n#include "core/tensor.h"\n'
    if include == "cuda/stream.h":
        files["cuda/stream.h"] = "#pragma once\n"
    problems = load_checker().check(make_tree(tmp_path, files))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{rel}:1: ")
    assert message in problems[0]


def test_kernel_calling_the_autograd_layer_fails(tmp_path):
    root = make_tree(tmp_path, {
        "kernels/cpu/rnn.cpp": (
            '#include "ops.h"\nnamespace ember::cpu {\n'
            "Tensor f(const Tensor& a) { return ops::clone(a); }\n}\n"
        ),
    })
    proc = run(root)
    assert proc.returncode == 1
    assert "kernels/cpu/rnn.cpp:3: calls ops::, the autograd layer" in proc.stdout
    assert "return ops::clone(a);" in proc.stdout


def test_composite_under_kernels_fails(tmp_path):
    problems = load_checker().check(make_tree(tmp_path, {
        "kernels/cpu/random.cpp": (
            '#include "ops.h"\nnamespace ember {\nnamespace composite {\n'
            "Tensor g(const Tensor& a) { return composite::h(a); }\n}\n}\n"
        ),
    }))
    assert any(p.startswith("kernels/cpu/random.cpp:3: defines namespace composite")
               for p in problems), problems
    assert any(p.startswith("kernels/cpu/random.cpp:4: calls composite::") for p in problems)


def test_kernel_opening_the_ops_or_composite_namespace_fails(tmp_path):
    problems = load_checker().check(make_tree(tmp_path, {
        "kernels/cpu/a.cpp": "namespace ember {\nusing namespace ops;\n}\n",
        "cuda/b.cpp": "namespace ember::composite {\n}\n",
    }))
    assert [p.split(" (")[0] for p in problems] == [
        "cuda/b.cpp:1: defines namespace composite under cuda/",
        "kernels/cpu/a.cpp:2: uses namespace ops under kernels/",
    ]


def test_allowed_table_tolerates_and_reports_stale_entries(tmp_path, monkeypatch):
    checker = load_checker()
    key = ("ops/x.cpp", "autograd/autograd.h")
    monkeypatch.setattr(checker, "ALLOWED", {key: "a documented exception"})
    root = make_tree(tmp_path, {"ops/x.cpp": '#include "autograd/autograd.h"\n'})
    assert checker.check(root) == []
    (root / "ops" / "x.cpp").write_text('#include "ops.h"\n')
    problems = checker.check(root)
    assert len(problems) == 1 and problems[0].startswith("ops/x.cpp:0: stale ALLOWED entry")


def test_header_cycle_fails(tmp_path):
    root = make_tree(tmp_path, {
        "autograd/formulas.h": '#pragma once\n#include "autograd/formulas_math.h"\n',
        "autograd/formulas_math.h": (
            '#pragma once\n#include "autograd/autograd.h"\n#include "autograd/formulas.h"\n'
        ),
    })
    proc = run(root)
    assert proc.returncode == 1
    assert ("autograd/formulas.h:2: #include cycle: autograd/formulas.h -> "
            "autograd/formulas_math.h -> autograd/formulas.h") in proc.stdout


def test_self_include_is_a_cycle(tmp_path):
    problems = load_checker().check(make_tree(tmp_path, {
        "core/loop.h": '#pragma once\n#include "core/loop.h"\n',
    }))
    assert problems == ["core/loop.h:2: #include cycle: core/loop.h -> core/loop.h"]


def test_missing_root_is_an_error(tmp_path):
    proc = run(tmp_path / "nowhere")
    assert proc.returncode == 2
    assert "is not a directory" in proc.stderr
