"""Unknown names under installed sub-packages get Python's own import errors; only a missing
distribution is reported as one (issue 15 item 11)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import ember
import pytest


@pytest.mark.parametrize("pkg", ["ember.nn", "ember.optim", "ember.data", "ember.distributed"])
def test_unknown_name_in_an_installed_subpackage(pkg):
    try:
        importlib.import_module(pkg)
    except ImportError:
        pytest.skip(f"{pkg} is not installed here")
    with pytest.raises(ImportError) as info:
        exec(f"from {pkg} import NoSuchThing", {})
    msg = str(info.value)
    assert "cannot import name 'NoSuchThing'" in msg
    assert "not installed" not in msg and "pip install" not in msg
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module(f"{pkg}.no_such_module")
    assert info.value.name == f"{pkg}.no_such_module"
    assert "not installed" not in str(info.value)


def test_a_missing_distribution_is_still_named():
    # Simulate an absent ember-data: nothing on sys.path provides ember.data except the finder.
    code = (
        "import sys, ember\n"
        "import importlib.machinery as m\n"
        "class Hide:\n"
        "    @staticmethod\n"
        "    def find_spec(name, path=None, target=None):\n"
        "        if name == 'ember.data': return None\n"
        "        return m.PathFinder.find_spec(name, path, target)\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if f is not m.PathFinder]\n"
        "sys.meta_path.insert(0, Hide)\n"
        "sys.meta_path.remove(ember._MissingSubpackageFinder)\n"
        "sys.meta_path.append(ember._MissingSubpackageFinder)\n"
        "try:\n"
        "    from ember.data import DataLoader\n"
        "except ModuleNotFoundError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "ember.data is part of the 'ember-data' distribution" in out.stdout, out.stderr
    assert "pip install ember-data" in out.stdout


def test_finder_answers_only_for_the_subpackage_itself():
    finder = ember._MissingSubpackageFinder
    assert finder.find_spec("ember.nn.NoSuchLayer") is None
    assert finder.find_spec("ember.data.nothing.deeper") is None
    with pytest.raises(ModuleNotFoundError, match="pip install ember-nn"):
        finder.find_spec("ember.nn")
