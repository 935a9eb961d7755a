import importlib
from pathlib import Path

import pytest

MODULES = ["data"]


@pytest.mark.parametrize("name", MODULES)
def test_data_subpackage_version(name):
    mod = importlib.import_module(f"ember.{name}")
    assert isinstance(mod.__version__, str)
    assert mod.__version__


@pytest.mark.parametrize("name", MODULES)
def test_data_subpackage_lives_in_ember(name):
    import ember

    mod = importlib.import_module(f"ember.{name}")
    assert mod.__name__ == f"ember.{name}"
    assert getattr(ember, name) is mod
    # Not resolved: a development site links the subpackage into ember's directory.
    pkg_dirs = {Path(p).absolute() for p in ember.__path__}
    assert Path(mod.__file__).absolute().parent.parent in pkg_dirs


def test_utils_data_aliases_data():
    import ember.data

    utils = pytest.importorskip("ember.utils")  # provided by ember-core
    import ember.utils.data

    assert utils.data is ember.data
    assert ember.utils.data is ember.data
