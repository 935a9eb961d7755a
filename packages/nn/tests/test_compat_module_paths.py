"""Every public ``torch.nn.modules.<sub>`` / ``torch.nn.utils.<sub>`` / ``torch.nn.<sub>`` path of a
class or function that ember.nn has is importable from the same path under ``ember.nn``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import ember
import ember.nn as enn
import pytest

torch = pytest.importorskip("torch")


def _public_defs(mod) -> list[str]:
    """Public classes and functions defined in a torch module (not merely imported there)."""
    out = []
    for name, v in vars(mod).items():
        if name.startswith("_") or not (inspect.isclass(v) or inspect.isfunction(v)):
            continue
        if getattr(v, "__module__", None) == mod.__name__:
            out.append(name)
    return out


def _ember_has(name: str, *namespaces) -> bool:
    return any(hasattr(ns, name) for ns in namespaces)


def _pairs(package: str, ember_namespaces) -> list[tuple[str, str]]:
    pkg = importlib.import_module(package)
    pairs = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        try:
            mod = importlib.import_module(f"{package}.{info.name}")
        except Exception:  # an optional torch submodule that cannot import here
            continue
        for name in _public_defs(mod):
            if _ember_has(name, *ember_namespaces):
                pairs.append((info.name, name))
    return pairs


MODULE_PAIRS = _pairs("torch.nn.modules", [enn])

def _ember_utils_namespaces() -> list:
    spaces = [enn.utils]
    for info in pkgutil.iter_modules(enn.utils.__path__):
        spaces.append(importlib.import_module(f"ember.nn.utils.{info.name}"))
    return spaces


UTILS_PAIRS = _pairs("torch.nn.utils", _ember_utils_namespaces())


def test_the_walk_finds_the_common_layers():
    assert ("activation", "MultiheadAttention") in MODULE_PAIRS
    assert ("rnn", "LSTM") in MODULE_PAIRS and ("conv", "Conv2d") in MODULE_PAIRS
    assert len(MODULE_PAIRS) > 100
    assert ("rnn", "pack_padded_sequence") in UTILS_PAIRS


@pytest.mark.parametrize("sub,name", MODULE_PAIRS, ids=[f"{s}.{n}" for s, n in MODULE_PAIRS])
def test_nn_modules_path(sub, name):
    mod = importlib.import_module(f"ember.nn.modules.{sub}")
    obj = getattr(mod, name, None)
    assert obj is not None, f"ember.nn.modules.{sub} lacks {name} (torch.nn.modules.{sub}.{name})"
    assert obj is getattr(enn, name)


@pytest.mark.parametrize("sub,name", UTILS_PAIRS, ids=[f"{s}.{n}" for s, n in UTILS_PAIRS])
def test_nn_utils_path(sub, name):
    mod = importlib.import_module(f"ember.nn.utils.{sub}")
    obj = getattr(mod, name, None)
    assert obj is not None, f"ember.nn.utils.{sub} lacks {name} (torch.nn.utils.{sub}.{name})"
    # (parametrizations.weight_norm and utils.weight_norm are different functions, as in torch)
    assert callable(obj)


def test_nn_top_level_paths():
    from torch.nn import parameter as tparam

    for name in ("Parameter", "UninitializedParameter", "UninitializedBuffer"):
        assert hasattr(tparam, name)
        assert getattr(importlib.import_module("ember.nn.parameter"), name) is getattr(enn, name)
    for sub in ("functional", "init", "utils", "parameter", "modules"):
        importlib.import_module(f"ember.nn.{sub}")


def test_programs_import_paths_from_the_issue():
    from ember.nn.modules.activation import MultiheadAttention
    from ember.nn.modules.linear import NonDynamicallyQuantizableLinear

    assert MultiheadAttention is enn.MultiheadAttention
    lin = NonDynamicallyQuantizableLinear(4, 3)
    assert isinstance(lin, enn.Linear)
    assert lin(ember.ones(2, 4)).shape == (2, 3)
    # the same class torch uses for MultiheadAttention's output projection
    assert type(torch.nn.MultiheadAttention(4, 2).out_proj).__name__ == "NonDynamicallyQuantizableLinear"
