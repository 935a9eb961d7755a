"""The ``>>>`` examples in the docstrings of ember-data run and print what they show.

Every module under ``ember.data`` is found by walking the package, so a new module is covered
without touching this file. A public object without an example is fine; an example that exists
must pass.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import io
import pkgutil

import ember
import ember.data
import pytest

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def data_modules() -> list[str]:
    names = [ember.data.__name__]
    for info in pkgutil.walk_packages(ember.data.__path__, "ember.data."):
        names.append(info.name)
    return names


@pytest.mark.parametrize("name", data_modules())
def test_docstring_examples(name):
    ember.manual_seed(0)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    # The examples assume torch's defaults whatever ran before, and leave the settings as found.
    device, printoptions = ember.get_default_device(), ember._printing.get_printoptions()
    ember.set_default_device("cpu")
    ember.set_printoptions(profile="default")
    attempted = failed = 0
    try:
        for test in doctest.DocTestFinder().find(importlib.import_module(name)):
            result = runner.run(test, out=out.write)
            attempted, failed = attempted + result.attempted, failed + result.failed
    finally:
        ember.set_default_device(device)
        ember.set_printoptions(**printoptions)
    assert failed == 0, f"{failed} of {attempted} docstring example(s) failed in {name}:\n{out.getvalue()}"


def test_every_example_is_run():
    # An example on a public object doctest does not visit (one defined in a module under
    # another name, say) would go unchecked; every public name's example must be collected.
    collected = set()
    for name in data_modules():
        collected.update(t.docstring for t in doctest.DocTestFinder().find(importlib.import_module(name)))
    missed = []
    for key in dir(ember.data):
        obj = getattr(ember.data, key)
        for member in [obj] + (list(vars(obj).values()) if inspect.isclass(obj) else []):
            fn = member.fget if isinstance(member, property) else member
            owner = str(getattr(fn, "__module__", None))  # plain data has none: not ours
            doc = getattr(member, "__doc__", None)
            if owner.startswith("ember.data") and isinstance(doc, str) and ">>>" in doc \
                    and doc not in collected:
                missed.append(f"ember.data.{key}")
    assert not missed, f"examples no doctest run reaches: {missed}"
    assert collected, "no docstring example found in ember.data: the walk is broken"
