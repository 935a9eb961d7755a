"""Shared by every package's tests: each test starts from the same random state, so a result
never depends on which tests ran before it (torch's and NumPy's global generators included)."""

from __future__ import annotations

import random
import sys

import pytest


@pytest.fixture(autouse=True)
def _seed_global_generators():
    import ember

    ember.manual_seed(0)
    random.seed(0)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(0)
    torch = sys.modules.get("torch")  # seeded only when a test module already imported it
    if torch is not None:
        torch.manual_seed(0)
    yield
