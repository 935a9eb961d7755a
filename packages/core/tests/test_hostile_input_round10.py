"""Hostile input, round 10 (core part): what a PyTorch checkpoint's pickle says, ``ember.load``'s
argument checks, anomaly-mode flags and ``.grad`` of a non-leaf tensor.

PyTorch saves a lazily conjugated tensor (``x.conj()``) or a negative view (``x._neg_view()``,
what ``conj()`` of a conj view of an imaginary part makes) with the storage of the *unconjugated*
values and a ``{"conj": True}`` / ``{"neg": True}`` dict beside the tensor. ember's reader of
PyTorch checkpoints ignored that dict, so ``torch.save(z.conj())`` loaded as ``z`` (and a neg view
as its negation): a silent wrong number. The bits are now applied (materialized: ember has no
lazy views) in both the zip and the legacy format, and a dict with another key is refused,
naming it. A tensor with a negative size, or with another number of strides than sizes, was
refused by ``as_strided`` without naming the file; it is now a CheckpointError that does. A meta
tensor saved by torch (``_rebuild_meta_tensor_no_storage``) was refused as an unknown global
("Save the model's state_dict() instead", for what often *is* a state dict); it now loads on the
meta device, as ``torch.load`` gives it, and ``ember.save(..., format="torch")`` writes meta
tensors in that form (it refused them as having "no form torch.load reads"). Tensors of kinds or dtypes ember lacks (nested,
quantized, complex32, float8_e4m3fnuz) are still refused, but named as such (the nested/quantized
ones were reported as a corrupt file) instead of with the advice meant for pickled modules.

A bare storage in a PyTorch checkpoint (``torch.save(t.untyped_storage())``, or a storage kept in
a dict beside its tensor) came back as ember's internal reader object, with no ``len()``, no
items and no way to reach the data. It is now an ``ember.TypedStorage``, as ``torch.load`` returns
it, sharing memory with the tensors loaded over the same storage.

``ember.load(buffer, mmap=True)`` with an in-memory buffer silently read the data (PyTorch
checkpoints) or failed deep in the reader with a CheckpointError (ember's own format); it is now
PyTorch's ValueError up front. ``weights_only=True`` together with a ``pickle_module`` silently
ignored the module; it is now PyTorch's RuntimeError (``weights_only`` defaults to None, meaning
True, so the default with a ``pickle_module`` still loads safely). A ``map_location`` that is
neither a device, a string, a dict nor a callable (an int) was read as a device string ("Expected
one of cpu, cuda, ... at start of device string: 5"); it is now a TypeError, PyTorch's class.

``ember.autograd.set_detect_anomaly("off")`` switched anomaly detection *on* (any truthy object
was taken); non-bool flags are now a TypeError, as in PyTorch, and leave the setting alone.

Reading ``.grad`` of a non-leaf tensor (``y = x * 2; y.sum().backward(); y.grad``) silently gave
None; it now warns as PyTorch does (a UserWarning naming the tensor's grad_fn and saying to call
``retain_grad()``), because it is almost always a bug: the leaf was meant.

The rest of round 10: packages/nn/tests/test_nn_hostile_round10.py.
"""

import io
import os
import pickle
import warnings

import ember as E
import pytest
from ember import _torch_checkpoint
from ember.serialization import CheckpointError

# ---- conj / neg bits of PyTorch checkpoints -----------------------------------------------------


def _torch_file_with_metadata(t, metadata, monkeypatch):
    """A PyTorch-format checkpoint of ``t`` whose tensor carries ``metadata``, as torch.save
    writes one for a conj or neg view (written by ember's writer, so no torch is needed)."""

    class _Pickler(_torch_checkpoint._TorchPickler):
        def _tensor(self, x):
            fn, args = super()._tensor(x)
            return fn, args + (metadata,)

    monkeypatch.setattr(_torch_checkpoint, "_TorchPickler", _Pickler)
    buf = io.BytesIO()
    E.save(t, buf, format="torch")
    monkeypatch.undo()
    return io.BytesIO(buf.getvalue())


def test_a_conj_bit_in_a_torch_checkpoint_conjugates(monkeypatch):
    f = _torch_file_with_metadata(E.tensor([1 + 2j, 3 - 1j]), {"conj": True}, monkeypatch)
    assert E.load(f).tolist() == [1 - 2j, 3 + 1j]


def test_a_neg_bit_in_a_torch_checkpoint_negates(monkeypatch):
    f = _torch_file_with_metadata(E.tensor([1.0, -2.5]), {"neg": True}, monkeypatch)
    assert E.load(f).tolist() == [-1.0, 2.5]
    f = _torch_file_with_metadata(E.tensor([1 + 2j]), {"neg": True, "conj": True}, monkeypatch)
    assert E.load(f).tolist() == [-1 + 2j]


def test_metadata_with_an_unknown_key_is_refused(monkeypatch):
    f = _torch_file_with_metadata(E.tensor([1.0]), {"sparse_hint": 3}, monkeypatch)
    with pytest.raises(CheckpointError, match=r"metadata \['sparse_hint'\] that ember cannot apply"):
        E.load(f)


def test_plain_torch_checkpoints_are_unchanged(monkeypatch):
    f = _torch_file_with_metadata(E.tensor([1 + 2j]), {}, monkeypatch)
    assert E.load(f).tolist() == [1 + 2j]
    f = _torch_file_with_metadata(E.tensor([1.0]), {"conj": False, "neg": False}, monkeypatch)
    assert E.load(f).tolist() == [1.0]


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_conj_and_neg_views_load_with_torchs_values(legacy):
    torch = pytest.importorskip("torch")
    z = torch.tensor([1 + 2j, 3 - 1j])
    cases = [z.conj(), torch.tensor([1.0, 2.0])._neg_view(), z.conj()._neg_view(),
             torch.arange(6.0).reshape(2, 3)._neg_view().t()]
    for t in cases:
        buf = io.BytesIO()
        torch.save({"t": t, "w": torch.ones(1)}, buf, _use_new_zipfile_serialization=not legacy)
        got = E.load(io.BytesIO(buf.getvalue()))
        assert got["t"].tolist() == t.resolve_conj().resolve_neg().tolist()
        assert got["w"].tolist() == [1.0]
        assert torch.load(io.BytesIO(buf.getvalue()))["t"].tolist() == got["t"].tolist()


def _torch_file_with_geometry(monkeypatch, size, stride):
    class _Pickler(_torch_checkpoint._TorchPickler):
        def _tensor(self, x):
            fn, args = super()._tensor(x)
            return fn, (args[0], args[1], size, stride) + args[4:]

    monkeypatch.setattr(_torch_checkpoint, "_TorchPickler", _Pickler)
    buf = io.BytesIO()
    E.save(E.arange(4.0), buf, format="torch")
    monkeypatch.undo()
    return io.BytesIO(buf.getvalue())


@pytest.mark.parametrize("size,stride", [((-1,), (1,)), ((-2, -3), (1, 1)), ((2,), (1, 1)),
                                         ((2, 2), (1,))])
def test_a_negative_size_or_a_stride_count_mismatch_is_a_checkpoint_error(monkeypatch, size,
                                                                          stride):
    f = _torch_file_with_geometry(monkeypatch, size, stride)
    with pytest.raises(CheckpointError, match=r"corrupt PyTorch checkpoint: a tensor with size "
                                              r".* \(sizes must be >= 0, one stride per dim\)"):
        E.load(f)


def test_a_valid_geometry_still_loads(monkeypatch):
    f = _torch_file_with_geometry(monkeypatch, (2, 2), (1, 2))
    assert E.load(f).tolist() == [[0.0, 2.0], [1.0, 3.0]]


def _torch_meta_file(monkeypatch, dtype, size, stride, requires_grad):
    """torch.save's form of a meta tensor (``_rebuild_meta_tensor_no_storage``), written by
    ember's writer."""

    class _Pickler(_torch_checkpoint._TorchPickler):
        def _tensor(self, x):
            return (_torch_checkpoint._TorchName("torch._utils", "_rebuild_meta_tensor_no_storage"),
                    (dtype, size, stride, requires_grad))

    monkeypatch.setattr(_torch_checkpoint, "_TorchPickler", _Pickler)
    buf = io.BytesIO()
    E.save({"m": E.ones(1)}, buf, format="torch")
    monkeypatch.undo()
    return io.BytesIO(buf.getvalue())


def test_a_torch_meta_tensor_loads_on_the_meta_device(monkeypatch):
    got = E.load(_torch_meta_file(monkeypatch, E.float16, (3, 2), (1, 3), True))["m"]
    assert got.device.type == "meta" and got.dtype == E.float16
    assert tuple(got.shape) == (3, 2) and got.stride() == (1, 3) and got.requires_grad
    with pytest.raises(CheckpointError, match="corrupt PyTorch checkpoint: a meta tensor"):
        E.load(_torch_meta_file(monkeypatch, E.float32, (-1,), (1,), False))


def test_meta_tensors_save_in_torchs_format():
    objs = {"t": E.ones(2, 3, device="meta", dtype=E.float16).t(),
            "p": E.nn.Parameter(E.empty(4, device="meta")),
            "g": E.empty(2, device="meta", requires_grad=True), "c": E.ones(2)}
    buf = io.BytesIO()
    E.save(objs, buf, format="torch")  # was a TypeError: "no form torch.load reads"
    got = E.load(io.BytesIO(buf.getvalue()))
    assert [(k, type(v).__name__, v.device.type, tuple(v.shape), v.stride(), v.requires_grad)
            for k, v in got.items()] == [("t", "Tensor", "meta", (3, 2), (1, 3), False),
                                         ("p", "Parameter", "meta", (4,), (1,), True),
                                         ("g", "Tensor", "meta", (2,), (1,), True),
                                         ("c", "Tensor", "cpu", (2,), (1,), False)]
    assert got["t"].dtype == E.float16 and got["c"].tolist() == [1.0, 1.0]
    try:
        import torch
    except ImportError:
        return
    back = torch.load(io.BytesIO(buf.getvalue()))
    assert back["t"].device.type == "meta" and back["t"].dtype == torch.float16
    assert back["t"].stride() == (1, 3) and isinstance(back["p"], torch.nn.Parameter)


def test_torch_meta_tensors_load_as_torch_loads_them():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"t": torch.ones(2, 3, device="meta").t(),
                "p": torch.nn.Parameter(torch.ones(2, device="meta", dtype=torch.float64))}, buf)
    got, want = E.load(io.BytesIO(buf.getvalue())), torch.load(io.BytesIO(buf.getvalue()))
    for k in ("t", "p"):
        assert got[k].device.type == "meta" == want[k].device.type
        assert tuple(got[k].shape) == tuple(want[k].shape)
        assert got[k].stride() == want[k].stride()
        assert str(got[k].dtype).split(".")[-1] == str(want[k].dtype).split(".")[-1]
    assert type(got["p"]).__name__ == "Parameter" and got["p"].requires_grad


def test_tensor_kinds_ember_lacks_are_named_not_called_corrupt():
    torch = pytest.importorskip("torch")
    cases = [(torch.ones(3).to(torch.complex32), "needs torch.complex32, which ember does not have"),
             (torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
              r"torch._utils._rebuild_nested_tensor \(nested tensor\), a kind of tensor ember "
              "cannot load"),
             (torch.nn.Linear(1, 1), "needs the global torch.nn.modules.linear.Linear")]
    for obj, msg in cases:
        for legacy in (False, True):
            buf = io.BytesIO()
            torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
            with pytest.raises(pickle.UnpicklingError, match=msg) as info:
                E.load(io.BytesIO(buf.getvalue()))
            assert not isinstance(info.value, CheckpointError)  # not "corrupt"


# ---- bare storages of PyTorch checkpoints -------------------------------------------------------


def test_a_torch_untyped_storage_loads_as_a_typed_storage():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save(torch.tensor([1.0, 2.0, 3.0]).untyped_storage(), buf)
    got = E.load(io.BytesIO(buf.getvalue()))
    assert isinstance(got, E.TypedStorage) and got.dtype == E.uint8
    assert len(got) == 12 and list(got)[4:8] == [0, 0, 0, 64]  # 2.0 little-endian
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch returns a (deprecated) TypedStorage too
        want = torch.load(io.BytesIO(buf.getvalue()))
        assert len(want) == 12 and list(got) == list(want)


def test_a_torch_typed_storage_shares_memory_with_its_tensor():
    torch = pytest.importorskip("torch")
    t = torch.arange(4.0)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage is deprecated in torch
        torch.save({"t": t, "s": t.storage(), "again": [t.storage()]}, buf)
        for legacy in (False, True):
            if legacy:
                buf = io.BytesIO()
                torch.save({"t": t, "s": t.storage(), "again": [t.storage()]}, buf,
                           _use_new_zipfile_serialization=False)
            got = E.load(io.BytesIO(buf.getvalue()))
            assert isinstance(got["s"], E.TypedStorage) and got["s"].dtype == E.float32
            assert list(got["s"]) == [0.0, 1.0, 2.0, 3.0]
            assert got["again"][0] is got["s"]
            got["t"][0] = 9.0  # one storage, as in torch
            assert list(got["s"]) == [9.0, 1.0, 2.0, 3.0]
            want = torch.load(io.BytesIO(buf.getvalue()))
            want["t"][0] = 9.0
            assert list(want["s"]) == list(got["s"])


def test_state_dict_metadata_survives_the_storage_walk():
    torch = pytest.importorskip("torch")
    sd = torch.nn.Linear(2, 1).state_dict()
    buf = io.BytesIO()
    torch.save({"sd": sd, "raw": torch.ones(1).untyped_storage()}, buf)
    got = E.load(io.BytesIO(buf.getvalue()))
    assert got["sd"]._metadata[""]["version"] == 1
    assert sorted(got["sd"]) == ["bias", "weight"]
    assert isinstance(got["raw"], E.TypedStorage)


# ---- ember.load arguments -----------------------------------------------------------------------


def test_mmap_of_an_in_memory_buffer_is_a_value_error(tmp_path):
    buf = io.BytesIO()
    E.save({"a": E.arange(3.0)}, buf)
    with pytest.raises(ValueError, match=r"mmap=True needs f to be a file path .* got BytesIO"):
        E.load(io.BytesIO(buf.getvalue()), mmap=True)
    # a path and a file opened on disk still map
    path = os.path.join(tmp_path, "a.pt")
    E.save({"a": E.arange(3.0)}, path)
    assert E.load(path, mmap=True)["a"].tolist() == [0.0, 1.0, 2.0]
    with open(path, "rb") as f:
        assert E.load(f, mmap=True)["a"].tolist() == [0.0, 1.0, 2.0]


def test_torch_refuses_mmap_of_a_buffer_with_a_value_error():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save(torch.ones(2), buf)
    with pytest.raises(ValueError):
        torch.load(io.BytesIO(buf.getvalue()), mmap=True)
    with pytest.raises(ValueError):  # ember reads torch's file the same way
        E.load(io.BytesIO(buf.getvalue()), mmap=True)


def test_weights_only_true_with_a_pickle_module_is_refused():
    buf = io.BytesIO()
    E.save({"w": E.ones(2)}, buf)
    with pytest.raises(RuntimeError, match="weights_only=True.* with an explicit pickle_module"):
        E.load(io.BytesIO(buf.getvalue()), weights_only=True, pickle_module=pickle)
    # the default (None: weights-only) and weights_only=False still take the module
    assert E.load(io.BytesIO(buf.getvalue()), pickle_module=pickle)["w"].tolist() == [1.0, 1.0]
    got = E.load(io.BytesIO(buf.getvalue()), pickle_module=pickle, weights_only=False)
    assert got["w"].tolist() == [1.0, 1.0]


def test_the_default_with_a_pickle_module_still_runs_no_code():
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo hacked",))

    buf = io.BytesIO()
    E.save({"x": Evil()}, buf)
    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system"):
        E.load(io.BytesIO(buf.getvalue()), pickle_module=pickle)


def test_torch_refuses_weights_only_with_a_pickle_module():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save(torch.ones(1), buf)
    with pytest.raises(RuntimeError):
        torch.load(io.BytesIO(buf.getvalue()), weights_only=True, pickle_module=pickle)


@pytest.mark.parametrize("bad", [5, 1.5, [("cpu", "cpu")]])
def test_a_map_location_of_another_type_is_a_type_error(bad):
    buf = io.BytesIO()
    E.save(E.ones(2), buf)
    with pytest.raises(TypeError, match="map_location must be a device, a device string, a dict"):
        E.load(io.BytesIO(buf.getvalue()), map_location=bad)


def test_map_location_forms_that_work_still_work():
    buf = io.BytesIO()
    E.save(E.tensor([1.0, 2.0]), buf)
    for ml in ("cpu", E.device("cpu"), {"cpu": "cpu"}, lambda s, loc: s, None):
        assert E.load(io.BytesIO(buf.getvalue()), map_location=ml).tolist() == [1.0, 2.0]


def test_torch_refuses_an_int_map_location_with_a_type_error():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save(torch.ones(1), buf)
    with pytest.raises(TypeError):
        torch.load(io.BytesIO(buf.getvalue()), map_location=5)


# ---- anomaly-mode flags -------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda: E.autograd.set_detect_anomaly("off"),
    lambda: E.autograd.set_detect_anomaly(1),
    lambda: E.autograd.set_detect_anomaly(None),
    lambda: E.autograd.set_detect_anomaly(True, check_nan="no"),
    lambda: E.autograd.detect_anomaly(check_nan=0),
])
def test_anomaly_flags_must_be_bools(call):
    assert not E.is_anomaly_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match="must be bool, not"):
            call()
    assert not E.is_anomaly_enabled()  # the setting is left alone


def test_bool_anomaly_flags_still_switch_it():
    with E.autograd.set_detect_anomaly(True, check_nan=False):
        assert E.is_anomaly_enabled() and not E.is_anomaly_check_nan_enabled()
    assert not E.is_anomaly_enabled()


def test_torch_refuses_a_str_anomaly_flag():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        torch.autograd.set_detect_anomaly("off")
    assert not torch.is_anomaly_enabled()


# ---- .grad of a non-leaf tensor -----------------------------------------------------------------


def _grad_warnings(t):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = t.grad
    return g, [str(m.message) for m in w if issubclass(m.category, UserWarning)]


def test_reading_grad_of_a_non_leaf_warns():
    x = E.ones(2, requires_grad=True)
    y = x * 2
    (y * 3).sum().backward()
    g, msgs = _grad_warnings(y)
    assert g is None and len(msgs) == 1
    assert "not a leaf Tensor" in msgs[0] and "MulBackward0" in msgs[0]
    assert "retain_grad()" in msgs[0]
    assert x.grad.tolist() == [6.0, 6.0]  # the leaf has it


def test_leaves_retained_and_assigned_grads_do_not_warn():
    x = E.ones(2, requires_grad=True)
    y = x * 2
    y.retain_grad()
    (y * 3).sum().backward()
    for t, want in ((x, [6.0, 6.0]), (y, [3.0, 3.0])):
        g, msgs = _grad_warnings(t)
        assert g.tolist() == want and msgs == []
    z = x * 4
    z.grad = E.tensor([1.0, 5.0])
    g, msgs = _grad_warnings(z)
    assert g.tolist() == [1.0, 5.0] and msgs == []
    g, msgs = _grad_warnings(E.ones(2))  # no autograd at all
    assert g is None and msgs == []


def test_torch_warns_on_a_non_leaf_grad_too():
    torch = pytest.importorskip("torch")
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.sum().backward()
    g, msgs = _grad_warnings(y)
    assert g is None and len(msgs) == 1 and "not a leaf Tensor" in msgs[0]
