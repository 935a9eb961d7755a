import importlib
from pathlib import Path

import pytest

MODULES = ["nn", "optim"]


@pytest.mark.parametrize("name", MODULES)
def test_nn_subpackage_version(name):
    mod = importlib.import_module(f"ember.{name}")
    assert isinstance(mod.__version__, str)
    assert mod.__version__


@pytest.mark.parametrize("name", MODULES)
def test_nn_subpackage_lives_in_ember(name):
    import ember

    mod = importlib.import_module(f"ember.{name}")
    assert mod.__name__ == f"ember.{name}"
    assert getattr(ember, name) is mod
    # The dev site links each subpackage directory into ember/, so compare unresolved paths too.
    pkg_dirs = {Path(p).resolve() for p in ember.__path__} | {Path(p) for p in ember.__path__}
    here = Path(mod.__file__)
    assert here.parent.parent in pkg_dirs or here.resolve().parent.parent in pkg_dirs
