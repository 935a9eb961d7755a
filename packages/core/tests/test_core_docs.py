"""The ``>>>`` examples in the docstrings of ember-core run and print what they show.

Every module of the ``ember`` package that ember-core installs is found by walking the package
(a new module is covered without touching this file), and so are the docstrings the YAML op
table gives the functions and Tensor methods of ``ember._C``. A public object without an example
is fine; an example that exists must pass.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import io
import pkgutil
import types

import ember
import pytest

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class _Finder(doctest.DocTestFinder):
    """doctest's finder, for which ember.Tensor belongs to ember._C (which defines it, with the
    op table's examples on its C++ methods) although it names ``ember`` as its module, as
    torch.Tensor names ``torch``."""

    def _from_module(self, module, object):  # noqa: A002 (doctest's parameter name)
        if object is ember.Tensor:
            return module is ember._C
        return super()._from_module(module, object)


def _skip_reason(name: str) -> str | None:
    """Why a name the package walk yields is not a core module to doctest (None: doctest it)."""
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in ember._DISTRIBUTIONS:
        return "installed by another distribution, whose own tests run its examples"
    if parts[-1] == "_version":
        return "written by setuptools-scm at build time; no docstrings"
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None else None
    if parts[-1].startswith("lib") and origin is not None and origin.endswith(".so"):
        return "a C++ shared library (the engine _C links against), not a Python module"
    return None


def core_modules() -> list[str]:
    # Walked by hand rather than with pkgutil.walk_packages, which would import the other
    # distributions' packages (ember.nn, ember.distributed) to look inside them.
    names, packages = ["ember"], [ember]
    while packages:
        package = packages.pop()
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if _skip_reason(info.name) is None:
                names.append(info.name)
                if info.ispkg:
                    packages.append(importlib.import_module(info.name))
    return sorted(names)


def run_examples(module: types.ModuleType) -> tuple[int, int, str]:
    """Runs every example doctest finds in ``module``; (attempted, failed, report)."""
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    # `ember` is there for the C++ docstrings, whose examples do not import it.
    tests = _Finder().find(module, extraglobs={"ember": ember})
    # The examples assume torch's defaults whatever ran before, and leave the settings as found.
    device, grad = ember.get_default_device(), ember.is_grad_enabled()
    printoptions = ember._printing.get_printoptions()
    dynamo_config = dict(ember._dynamo.config._DEFAULTS)  # examples assign settings there
    ember.set_default_device("cpu")
    ember.set_grad_enabled(True)
    ember.set_printoptions(profile="default")
    attempted = failed = 0
    try:
        for test in sorted(tests, key=lambda t: t.name):
            result = runner.run(test, out=out.write)
            attempted, failed = attempted + result.attempted, failed + result.failed
    finally:
        ember.set_default_device(device)
        ember.set_grad_enabled(grad)
        ember.set_printoptions(**printoptions)
        ember._dynamo.config._DEFAULTS.update(dynamo_config)
    return attempted, failed, out.getvalue()


@pytest.mark.parametrize("name", core_modules())
def test_docstring_examples(name):
    ember.manual_seed(0)
    attempted, failed, report = run_examples(importlib.import_module(name))
    assert failed == 0, f"{failed} of {attempted} docstring example(s) failed in {name}:\n{report}"


def test_walk_finds_the_core_modules():
    names = core_modules()
    for expected in ("ember._C", "ember._tensor", "ember.autograd.functional", "ember.func",
                     "ember.random", "ember.serialization", "ember.utils.checkpoint", "ember.cuda"):
        assert expected in names
    others = {"nn", "optim", "data", "distributed", "multiprocessing"}  # other distributions
    assert not [n for n in names if n.split(".")[1:2] and n.split(".")[1] in others]


def _reachable_docstrings() -> dict[str, str]:
    """Docstrings with ``>>>`` of everything reachable from the core modules' namespaces and
    their classes' attributes (Tensor methods and properties included), by where they were found."""
    modules = set(core_modules())
    found: dict[str, str] = {}
    seen: set[int] = set()

    def visit(obj, path: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        doc = getattr(obj, "__doc__", None)
        if isinstance(obj, types.ModuleType):
            owner = obj.__name__
        elif isinstance(obj, property):
            owner = getattr(obj.fget, "__module__", None)
        else:  # plain data (an int's docstring is int's) has no __module__ and is skipped
            owner = getattr(obj, "__module__", None)
        if isinstance(doc, str) and ">>>" in doc and owner in modules:
            found.setdefault(doc, path)
        if inspect.isclass(obj) and obj.__module__ in modules:
            for key, value in vars(obj).items():
                visit(value, f"{obj.__module__}.{obj.__qualname__}.{key}")

    for name in modules:
        module = importlib.import_module(name)
        visit(module, name)
        for key, value in vars(module).items():
            visit(value, f"{name}.{key}")
    return found


def test_every_example_is_run():
    # doctest only collects what it believes a module defines; an example on an object it
    # never visits (a function attached from elsewhere, a bound method) would go unchecked.
    collected = set()
    for name in core_modules():
        for test in _Finder().find(importlib.import_module(name)):
            collected.add(test.docstring)
    reachable = _reachable_docstrings()
    assert reachable, "no docstring with an example found: the walk is broken"
    missed = sorted(path for doc, path in reachable.items() if doc not in collected)
    assert not missed, f"examples no doctest run reaches: {missed}"


def test_tensor_methods_are_covered():
    # Methods bound from C++ carry the op table's examples; they run through ember._C.
    docs = {t.docstring for t in _Finder().find(ember._C)}
    assert ember.Tensor.permute.__doc__ in docs
