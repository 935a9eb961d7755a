"""The examples in the docstrings of ember.nn, ember.optim and ember.export run and print what
they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import ember.export
import ember.nn
import ember.optim
import pytest


def _modules():
    names = []
    for pkg in (ember.nn, ember.optim, ember.export):
        names.append(pkg.__name__)
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if not info.name.endswith("_version"):
                names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
