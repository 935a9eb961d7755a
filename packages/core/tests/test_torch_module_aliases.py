"""ember.cpu.amp, ember.types, ember.storage, ember.futures and ember.utils.benchmark as
module attributes and imports (PyTorch's torch.cpu.amp, torch.types, torch.storage, ...)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import ember
import pytest


def test_lazy_submodules_resolve():
    import ember.futures
    import ember.storage
    import ember.types
    import ember.utils.benchmark

    assert ember.futures.Future.__name__ == "Future"
    assert ember.utils.benchmark.Timer.__name__ == "Timer"
    assert ember.storage.UntypedStorage is ember.UntypedStorage
    assert ember.types.Number is not None


def test_import_ember_does_not_load_new_modules():
    code = ("import sys, ember; mods = ['ember.futures', 'ember.types', 'ember.storage', "
            "'ember.utils.benchmark', 'ember.cpu.amp']; "
            "print([m for m in mods if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    assert out == "[]"


def test_cpu_amp_autocast_deprecated_alias():
    from ember.cpu.amp import GradScaler, autocast

    assert ember.cpu.amp.autocast is autocast
    with pytest.warns(FutureWarning, match=r"ember.amp.autocast\('cpu'"):
        ctx = autocast()
    assert isinstance(ctx, ember.amp.autocast) and ctx.device == "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with autocast():
            y = ember.mm(ember.randn(2, 3), ember.randn(3, 2))
        assert y.dtype == ember.bfloat16
        with autocast(dtype=ember.float16):
            assert ember.mm(ember.randn(2, 3), ember.randn(3, 2)).dtype == ember.float16
        with autocast(enabled=False):
            assert ember.mm(ember.randn(2, 3), ember.randn(3, 2)).dtype == ember.float32
        scaler = GradScaler(init_scale=4.0)
    assert scaler.get_scale() == 4.0
    with pytest.warns(FutureWarning, match=r"ember.amp.GradScaler\('cpu'"):
        GradScaler()


def test_cpu_amp_matches_torch():
    torch = pytest.importorskip("torch")
    import inspect

    for name in ("autocast", "GradScaler"):
        te = inspect.signature(getattr(torch.cpu.amp, name).__init__).parameters
        ee = inspect.signature(getattr(ember.cpu.amp, name).__init__).parameters
        assert list(te) == list(ee), name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with torch.cpu.amp.autocast():
            t = torch.mm(torch.randn(2, 3), torch.randn(3, 2))
        with ember.cpu.amp.autocast():
            e = ember.mm(ember.randn(2, 3), ember.randn(3, 2))
    assert str(t.dtype).split(".")[1] == str(e.dtype).split(".")[1] == "bfloat16"


def test_types_aliases():
    from ember import types

    assert types._dtype is ember.dtype and types._device is ember.device
    assert types._int is int and types._float is float and types._bool is bool
    assert set(types.Number.__args__) == {int, float, bool}
    assert set(types.Device.__args__) == {ember.device, str, int, type(None)}
    assert ember.Size in types._size.__args__
    assert types.py_sym_types == ()


def test_types_names_match_torch():
    pytest.importorskip("torch")
    import torch.types as tt
    from ember import types

    # every public alias (and the common private ones) torch.types has, except the
    # symbolic-shape and quantization types ember does not have
    skip = {"SymInt", "SymFloat", "SymBool", "PySymType", "_qscheme", "DispatchKey",
            "annotations", "TYPE_CHECKING", "TypeAlias", "Self", "IO", "Any", "Sequence",
            "Union", "os", "Tensor", "Size"}
    names = {n for n in dir(tt) if not n.startswith("__") and n not in skip}
    missing = sorted(n for n in names if not hasattr(types, n))
    assert missing == []


def test_storage_module():
    from ember.storage import TypedStorage, UntypedStorage

    x = ember.arange(4.)
    assert isinstance(x.untyped_storage(), UntypedStorage)
    s = x.storage()
    assert isinstance(s, TypedStorage) and s.size() == 4 and s.dtype == ember.float32
    assert ember.storage.TypedStorage is ember.TypedStorage
