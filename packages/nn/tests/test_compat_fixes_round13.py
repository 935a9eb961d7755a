"""Fixes from the thirteenth drop-in compatibility round: ``torch.export`` (export / Dim /
ExportedProgram.module / save / load) was missing; deployment scripts call it after a plain
``import torch``. Each behaviour is pinned explicitly and, where torch is installed, against
it."""

from __future__ import annotations

import io

import ember
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(), lib.nn.Linear(4, 2)).eval()


def test_export_is_reachable_from_the_top_level():
    assert ember.export.export is __import__("ember.export").export.export
    assert repr(ember.export.Dim("b", min=2, max=8)) == "Dim('b', min=2, max=8)"
    assert repr(ember.export.Dim("b")) == "Dim('b', min=0)"
    assert [d.__name__ for d in ember.export.dims("h", "w")] == ["h", "w"]
    with pytest.raises(ValueError, match="inconsistent"):
        ember.export.Dim("b", min=4, max=2)


def test_exported_module_runs_dynamic_batches_and_guards_static_dims():
    m = _model(ember)
    x = ember.randn(5, 3)
    ep = ember.export.export(m, (x,), dynamic_shapes={"input": {0: ember.export.Dim("batch", max=64)}})
    mod = ep.module()
    for b in (1, 5, 9):
        y = ember.randn(b, 3)
        assert ember.allclose(mod(y), m(y))
    with pytest.raises(AssertionError, match=r"Guard failed: input.size\(\)\[1\] == 3"):
        mod(ember.randn(5, 4))
    static = ember.export.export(m, (x,)).module()
    with pytest.raises(AssertionError, match=r"Guard failed: input.size\(\)\[0\] == 5"):
        static(ember.randn(6, 3))
    assert ember.equal(static(x), m(x))


def test_exported_program_surface():
    m = _model(ember)
    ep = ember.export.export(m, (ember.randn(5, 3),))
    sig = ep.graph_signature
    assert sig.user_inputs == ("input",)
    assert sig.parameters == ("0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias")
    assert sig.buffers == ("1.running_mean", "1.running_var", "1.num_batches_tracked")
    assert set(ep.state_dict) == set(m.state_dict())
    with pytest.raises(RuntimeError, match="exported_program.module"):
        ep(ember.randn(5, 3))
    with pytest.raises(NotImplementedError, match=r"Calling eval\(\) is not supported yet."):
        ep.module().eval()
    with pytest.raises(NotImplementedError, match=r"Calling train\(\) is not supported yet."):
        ep.module().train()
    assert isinstance(ep.run_decompositions(), ember.export.ExportedProgram)
    with pytest.raises(ValueError, match="tuple of example positional inputs"):
        ember.export.export(m, ember.randn(5, 3))
    with pytest.raises(ValueError, match="instance of `torch.nn.Module`"):
        ember.export.export(lambda t: t, (ember.randn(2),))
    with pytest.raises(ValueError, match="not arguments"):
        ember.export.export(m, (ember.randn(5, 3),), dynamic_shapes={"x": {0: ember.export.Dim.AUTO}})


def test_save_load_round_trip_with_extra_files():
    m = _model(ember)
    x = ember.randn(5, 3)
    ep = ember.export.export(m, (x,))
    buf = io.BytesIO()
    ember.export.save(ep, buf, extra_files={"note.txt": "v1"})
    buf.seek(0)
    extra = {"note.txt": ""}
    loaded = ember.export.load(buf, extra_files=extra)
    assert extra == {"note.txt": "v1"}
    assert ember.equal(loaded.module()(x), m(x))
    with pytest.raises(TypeError, match="ExportedProgram"):
        ember.export.save(m, io.BytesIO())


@needs_torch
def test_export_matches_torch():
    results = []
    for lib in (torch, ember):
        m = _model(lib)
        with lib.no_grad():
            for i, p in enumerate(m.parameters()):
                p.copy_(lib.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1) / 3)
        x = lib.linspace(-2, 2, 21).reshape(7, 3)
        ep = lib.export.export(m, (x[:4],), dynamic_shapes={"input": {0: lib.export.Dim("batch")}})
        sig = ep.graph_signature
        results.append((ep.module()(x).tolist(), list(sig.user_inputs), list(sig.parameters), list(sig.buffers),
                        sorted(ep.state_dict)))
    (t_out, *t_rest), (e_out, *e_rest) = results
    assert t_rest == e_rest
    assert ember.allclose(ember.tensor(e_out), ember.tensor(t_out), atol=1e-6)
