"""Packaging: version, sub-distribution errors, ember.utils."""

import subprocess
import sys

import ember
import pytest


def test_version_is_a_string():
    assert isinstance(ember.__version__, str) and ember.__version__


@pytest.mark.parametrize("name,dist", [("nn", "ember-nn"), ("optim", "ember-nn"), ("data", "ember-data"),
                                       ("multiprocessing", "ember-distributed"),
                                       ("distributed", "ember-distributed")])
def test_missing_subpackage_names_its_distribution(name, dist):
    # The finder sits last on sys.meta_path, so it only answers when nothing installed does.
    with pytest.raises(ImportError, match=f"pip install {dist}"):
        ember._MissingSubpackageFinder.find_spec(f"ember.{name}")
    assert ember._MissingSubpackageFinder.find_spec("ember.something_else") is None


def test_import_does_not_import_numpy():
    code = "import sys, ember; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
