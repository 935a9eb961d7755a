"""Hostile input, round 11 (core part): corrupt PyTorch checkpoints, map_location errors of
legacy checkpoints, sparse compressed tensors built with ``check_invariants=False`` and linalg
edge cases (non-finite ``matrix_exp``, ``lu_unpack``'s pivots, ``vector_norm``'s ord).

A PyTorch zip checkpoint whose pickle was well-formed at the byte level (its CRC matches) but
whose opcodes make no sense (``SETITEMS`` on an int, ``APPEND`` to an int, ``REDUCE`` of a
number, a ``BINBYTES8`` past the stream) escaped ``ember.load`` as a bare TypeError,
AttributeError or OverflowError without the file's name; so did damage to the zip structure that
zipfile reports with other classes: a bad CRC or local header of ``byteorder`` (BadZipFile
raised while the reader was being set up), a mangled member name (UnicodeDecodeError), a zip
version zipfile does not read (NotImplementedError) or a local header offset before the start
of the file (ValueError). All of them are now a CheckpointError (a RuntimeError, the class
``torch.load`` raises for a corrupt archive) naming the file and the original error. A storage
location tag in the file that is not a device (``"cpv"``) is a CheckpointError too (it was a
bare device-parsing RuntimeError).

The other way round, errors that are *not* the file's were reported as a corrupt checkpoint for
the legacy (non-zip) format: a ``map_location`` callable that raised ``ValueError("...")`` gave
``CheckpointError: truncated or corrupt legacy PyTorch checkpoint (ValueError: ...)``, and so did
loading a CUDA checkpoint on a machine without CUDA, which invites deleting a good file. Those
errors now reach the caller as they are (the callable's own exception; PyTorch's RuntimeError
about ``map_location``), as ``torch.load`` and the zip path do; so does ember running out of
memory for a storage (a good file must not be called corrupt).

A CSR/CSC/BSR/BSC tensor built with ``check_invariants=False`` and a compressed index array of
the wrong length gave a matrix product with the wrong number of rows, silently
(``csr(crow=[0, 2]) of size (2, 2) @ ones(2, 3)`` had shape (1, 3)); it is now refused naming
the array, its length and the expected one. Its other conversions (``to_dense``, ``sum``,
``to_sparse_coo``, ``t()``) failed with messages about internal ops ("stack expects each tensor
to be equal size", "repeat_interleave: repeats can not be negative", "index 3 is out of bounds
for dimension 1 with size 1"); they now name the array (``crow_indices``, ``ccol_indices``,
``col_indices``, ``row_indices``), what it holds and that the tensor skipped its invariant
check. (PyTorch crashes with a segmentation fault on several of these, so there is no torch
comparison here.)

The rest of round 11: packages/nn/tests/test_nn_hostile_round11.py.
"""

import io
import math
import pickle
import re
import struct
import zipfile

import ember as E
import pytest
from ember import _torch_checkpoint
from ember.serialization import CheckpointError

# ---- corrupt PyTorch zip checkpoints ------------------------------------------------------------


def _torch_zip(obj=None) -> bytes:
    buf = io.BytesIO()
    E.save({"w": E.arange(3.0)} if obj is None else obj, buf, format="torch")
    return buf.getvalue()


def _with_pickle(payload: bytes) -> bytes:
    """The checkpoint with its data.pkl replaced by ``payload`` (stored with a valid CRC)."""
    src = zipfile.ZipFile(io.BytesIO(_torch_zip()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name in src.namelist():
            z.writestr(name, payload if name.endswith("data.pkl") else src.read(name))
    return out.getvalue()


@pytest.mark.parametrize("payload, cause", [
    (b"\x80\x02K\x01K\x02K\x03s.", "TypeError: 'int' object does not support item assignment"),
    (b"\x80\x02K\x01K\x02a.", "AttributeError: 'int' object has no attribute 'append'"),
    (b"\x80\x02K\x01)R.", "TypeError: 'int' object is not callable"),
    (b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f.", "OverflowError: byte string is too large"),
    (b"\x80\x02}(K\x01u.", "UnpicklingError: odd number of items for SETITEMS"),
])
def test_a_nonsensical_pickle_is_a_checkpoint_error(payload, cause):
    with pytest.raises(CheckpointError) as info:
        E.load(io.BytesIO(_with_pickle(payload)))
    assert str(info.value) == f"<BytesIO>: corrupt PyTorch checkpoint ({cause})"
    assert isinstance(info.value, RuntimeError)


def _member(data: bytes, name: str) -> zipfile.ZipInfo:
    return zipfile.ZipFile(io.BytesIO(data)).getinfo(name)


def test_a_damaged_local_header_of_the_byteorder_is_a_checkpoint_error(tmp_path):
    data = bytearray(_torch_zip())
    at = _member(bytes(data), "archive/byteorder").header_offset + 30  # the local header's name
    assert data[at:at + 7] == b"archive"
    data[at] = ord("X")
    path = tmp_path / "ckpt.pt"
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as info:
        E.load(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: corrupt PyTorch checkpoint: cannot read 'archive/byteorder'")
    assert "BadZipFile: File name in directory 'archive/byteorder' and header" in msg


def test_a_member_name_that_is_not_utf8_is_a_checkpoint_error():
    data = bytearray(_torch_zip())
    at = _member(bytes(data), "archive/data.pkl").header_offset + 30
    data[at] = 0xAF  # the local header's name no longer decodes (its flags say UTF-8)
    data[at - 24] |= 0x08  # general purpose flag bit 11 (UTF-8 names) lives in byte 7
    data[at - 23] |= 0x08
    with pytest.raises(CheckpointError, match=r"^<BytesIO>: corrupt PyTorch checkpoint: cannot "
                                              r"read 'archive/data\.pkl' from the archive "
                                              r"\((UnicodeDecodeError|BadZipFile)"):
        E.load(io.BytesIO(bytes(data)))


def test_an_unknown_zip_version_is_a_checkpoint_error():
    data = bytearray(_torch_zip())
    cd = data.find(b"PK\x01\x02")  # the first central directory entry
    data[cd + 6] = 128  # "version needed to extract": 12.8, past what zipfile reads
    with pytest.raises(CheckpointError) as info:
        E.load(io.BytesIO(bytes(data)))
    assert str(info.value) == ("<BytesIO>: a zip-based (pickle-based PyTorch) checkpoint that is "
                               "truncated or corrupt (NotImplementedError: zip file version "
                               "12.8)")


def test_a_central_directory_offset_past_the_archive_is_a_checkpoint_error():
    data = bytearray(_torch_zip())
    eocd = data.rfind(b"PK\x05\x06")
    # the end record's offset of the central directory (bytes 16..19) made larger than the
    # archive: zipfile takes the difference for a prefix and seeks before the file's start
    struct.pack_into("<I", data, eocd + 16, 0x7FFFFF00)
    with pytest.raises(CheckpointError, match=r"^<BytesIO>: corrupt PyTorch checkpoint: cannot "
                                              r"read '.*' from the archive \(ValueError: "
                                              r"negative seek value"):
        E.load(io.BytesIO(bytes(data)))


def test_every_single_bit_flip_of_a_torch_checkpoint_is_caught_or_harmless():
    """No flip of one bit anywhere in the archive escapes as anything but a CheckpointError
    (or the loader's refusal of an unknown global), and none loads different numbers."""
    data = _torch_zip({"w": E.arange(4.0), "i": E.tensor([7, 8], dtype=E.int64)})
    for i in range(len(data)):
        for bit in (0x01, 0x80):
            b = bytearray(data)
            b[i] ^= bit
            try:
                got = E.load(io.BytesIO(bytes(b)))
            except (CheckpointError, pickle.UnpicklingError):
                continue
            assert got["w"].tolist() == [0.0, 1.0, 2.0, 3.0], (i, bit)
            assert got["i"].tolist() == [7, 8], (i, bit)


def test_a_storage_location_that_is_not_a_device_is_a_checkpoint_error(monkeypatch):
    class _Pickler(_torch_checkpoint._TorchPickler):
        def persistent_id(self, obj):
            pid = super().persistent_id(obj)
            return None if pid is None else pid[:3] + ("cpv",) + pid[4:]

    monkeypatch.setattr(_torch_checkpoint, "_TorchPickler", _Pickler)
    buf = io.BytesIO()
    E.save(E.arange(2.0), buf, format="torch")
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match=r"^<BytesIO>: corrupt PyTorch checkpoint: a "
                                              r"storage saved at 'cpv', which is not a device"):
        E.load(io.BytesIO(buf.getvalue()))
    # a map_location that replaces the tag still loads it
    got = E.load(io.BytesIO(buf.getvalue()), map_location={"cpv": "cpu"})
    assert got.tolist() == [0.0, 1.0]


def test_running_out_of_memory_is_not_called_a_corrupt_file(monkeypatch):
    error = E.OutOfMemoryError
    data = _torch_zip()
    real_empty = E.empty

    def empty(*args, **kwargs):
        if kwargs.get("dtype") is E.uint8:  # the reader's buffer for a storage's bytes
            raise error("out of memory for a storage")
        return real_empty(*args, **kwargs)

    monkeypatch.setattr(E, "empty", empty)
    with pytest.raises(error, match="^out of memory for a storage$") as info:
        E.load(io.BytesIO(data))
    assert not isinstance(info.value, CheckpointError)


def test_a_garbage_length_in_the_pickle_is_still_a_checkpoint_error():
    # BINBYTES8 of 2**62 bytes: the unpickler cannot allocate them (a MemoryError of a corrupt
    # file, or a truncation) and that is the file's fault
    with pytest.raises(CheckpointError, match=r"^<BytesIO>: corrupt PyTorch checkpoint"):
        E.load(io.BytesIO(_with_pickle(b"\x80\x04\x8e" + (2**62).to_bytes(8, "little") + b".")))


def test_good_torch_checkpoints_still_load():
    got = E.load(io.BytesIO(_torch_zip({"w": E.arange(3.0), "n": 5})))
    assert got["w"].tolist() == [0.0, 1.0, 2.0] and got["n"] == 5


# ---- map_location errors are the caller's, not a corrupt file -----------------------------------


def _failing_map_location(t, location):
    raise ValueError("my map_location failed")


def test_a_failing_map_location_reaches_the_caller_from_a_zip_checkpoint():
    with pytest.raises(ValueError, match="^my map_location failed$"):
        E.load(io.BytesIO(_torch_zip()), map_location=_failing_map_location)


@pytest.mark.parametrize("legacy", [False, True])
def test_map_location_errors_of_torch_checkpoints_are_not_called_corruption(legacy):
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buf, _use_new_zipfile_serialization=not legacy)
    data = buf.getvalue()
    with pytest.raises(ValueError, match="^my map_location failed$") as info:
        E.load(io.BytesIO(data), map_location=_failing_map_location)
    assert not isinstance(info.value, CheckpointError)
    with pytest.raises(ValueError, match="^my map_location failed$"):
        torch.load(io.BytesIO(data), map_location=_failing_map_location)
    if not E.cuda.is_available():
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA "
                                               "device") as info:
            E.load(io.BytesIO(data), map_location={"cpu": "cuda:0"})
        assert not isinstance(info.value, CheckpointError)
    # the same legacy file still loads, and gives torch's numbers
    assert E.load(io.BytesIO(data))["w"].tolist() == [0.0, 1.0, 2.0]
    assert E.load(io.BytesIO(data), map_location=lambda t, loc: t * 2)["w"].tolist() == \
        [0.0, 2.0, 4.0]


def test_a_corrupt_legacy_checkpoint_is_still_a_checkpoint_error():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buf, _use_new_zipfile_serialization=False)
    data = buf.getvalue()
    with pytest.raises(CheckpointError, match="legacy PyTorch checkpoint"):
        E.load(io.BytesIO(data[:len(data) - 5]))


# ---- sparse compressed tensors that skipped their invariant check --------------------------------


def _csr(crow, col=(0, 1), size=(2, 2)):
    return E.sparse_csr_tensor(E.tensor(crow), E.tensor(list(col)), E.tensor([1.0, 2.0]), size,
                               check_invariants=False)


def _csc(ccol, row=(0, 1), size=(2, 2)):
    return E.sparse_csc_tensor(E.tensor(ccol), E.tensor(list(row)), E.tensor([1.0, 2.0]), size,
                               check_invariants=False)


@pytest.mark.parametrize("crow", [[0, 2], [0, 1, 2, 2]])
def test_a_product_with_a_compressed_array_of_the_wrong_length_is_refused(crow):
    m = len(crow)
    with pytest.raises(RuntimeError, match=rf"^sparse\.mm: crow_indices of a ember\.sparse_csr "
                                           rf"tensor of size \(2, 2\) must have 3 elements, got "
                                           rf"{m} \(a tensor built with check_invariants=False\)"):
        _csr(crow) @ E.ones(2, 3)
    with pytest.raises(RuntimeError, match=rf"crow_indices .* must have 3 elements, got {m}"):
        E.ones(3, 2) @ _csr(crow)
    with pytest.raises(RuntimeError, match=rf"crow_indices .* must have 3 elements, got {m}"):
        E.mv(_csr(crow), E.ones(2))
    with pytest.raises(RuntimeError, match=rf"ccol_indices of a ember\.sparse_csc tensor of size "
                                           rf"\(2, 2\) must have 3 elements, got {m}"):
        _csc(crow) @ E.ones(2, 3)
    with pytest.raises(RuntimeError, match=rf"ccol_indices .* must have 3 elements, got {m}"):
        E.ones(3, 2) @ _csc(crow)


@pytest.mark.parametrize("crow, shown", [([0, 3, 2], "[0, 3, 2]"), ([0, 1, 9], "[0, 1, 9]"),
                                         ([-5, 1, 2], "[-5, 1, 2]")])
def test_conversions_name_a_bad_crow_array(crow, shown):
    expect = (r"^ember\.sparse_csr: crow_indices must be non-decreasing from 0 to nnz = 2, got "
              + re.escape(shown) + r" \(a tensor built with check_invariants=False\)$")
    for convert in (lambda s: s.to_dense(), lambda s: s.to_sparse_coo(), lambda s: s.sum(),
                    lambda s: s + s, lambda s: s.to_sparse_csc()):
        with pytest.raises(RuntimeError, match=expect):
            convert(_csr(crow))
    with pytest.raises(RuntimeError, match=r"^ember\.sparse_csr: crow_indices must have 3 "
                                           r"elements, got 2 \(a tensor built with"):
        _csr([0, 2]).to_dense()


def test_conversions_name_plain_indices_out_of_range():
    with pytest.raises(RuntimeError, match=r"^ember\.sparse_csr: col_indices must lie in \[0, "
                                           r"2\), got \[0, 7\] \(a tensor built with "
                                           r"check_invariants=False\)$"):
        _csr([0, 1, 2], col=(0, 7)).to_dense()
    with pytest.raises(RuntimeError, match=r"^ember\.sparse_csc: row_indices must lie in \[0, "
                                           r"2\), got \[-1, 0\]"):
        _csc([0, 1, 2], row=(-1, 0)).to_dense()
    bsr = E.sparse_bsr_tensor(E.tensor([0, 1]), E.tensor([3]), E.ones(1, 2, 2), (2, 2),
                              check_invariants=False)
    with pytest.raises(RuntimeError, match=r"^ember\.sparse_bsr: col_indices must lie in \[0, "
                                           r"1\), got \[3, 3\]"):
        bsr.to_dense()


def test_valid_compressed_tensors_still_convert_and_multiply():
    s = _csr([0, 1, 2], col=(1, 0))
    assert s.to_dense().tolist() == [[0.0, 1.0], [2.0, 0.0]]
    assert (s @ E.tensor([[1.0], [10.0]])).tolist() == [[10.0], [2.0]]
    assert (E.tensor([[1.0, 10.0]]) @ s).tolist() == [[20.0, 1.0]]
    c = _csc([0, 1, 2], row=(1, 0))
    assert c.to_dense().tolist() == [[0.0, 2.0], [1.0, 0.0]]
    assert (c @ E.tensor([[1.0], [10.0]])).tolist() == [[20.0], [1.0]]
    assert s.to_sparse_coo().indices().tolist() == [[0, 1], [1, 0]]
    empty = E.sparse_csr_tensor(E.tensor([0, 0, 0]), E.tensor([], dtype=E.int64), E.tensor([]),
                                (2, 2))
    assert empty.to_dense().tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert (empty @ E.ones(2, 1)).tolist() == [[0.0], [0.0]]


# ---- linalg: non-finite matrix exponentials, lu_unpack's pivots, vector_norm's ord ------------
#
# ``linalg.matrix_exp`` of a matrix holding an inf (or a batch with one) failed with Python's
# "OverflowError: cannot convert float infinity to integer" (the scaling exponent of the whole
# batch came from its infinite norm); PyTorch gives NaN for that matrix and the exponential for
# the others, and so does ember now. ``lu_unpack`` took pivots that lu_factor never returns (0,
# a float tensor, too few of them) and built a wrong permutation with no error, and pivots past
# the matrix failed with NumPy's "index 4 is out of bounds for axis 1"; they are refused now,
# naming lu_unpack and the expected pivots, as in PyTorch. ``linalg.vector_norm(x, "fro")`` (or
# ord=None) failed with "'<' not supported between instances of 'str' and 'int'"; it is now a
# TypeError naming the argument.

_INF = float("inf")


@pytest.mark.parametrize("dtype", [E.float32, E.float64, E.complex128])
def test_a_matrix_exp_of_a_non_finite_matrix_is_nan(dtype):
    a = E.tensor([[_INF, 2.0], [2.0, 4.0]]).to(dtype)
    got = E.linalg.matrix_exp(a)
    assert got.isnan().all().item()
    assert E.linalg.matrix_exp(E.tensor([[-_INF, 0.0], [0.0, 0.0]])).isnan().all().item()


def test_a_batch_with_one_non_finite_matrix_keeps_the_others():
    batch = E.stack([E.eye(2, dtype=E.float64) * 2, E.full((2, 2), _INF, dtype=E.float64)])
    got = E.linalg.matrix_exp(batch)
    assert got[0].reshape(-1).tolist() == pytest.approx([math.e ** 2, 0.0, 0.0, math.e ** 2],
                                                        rel=1e-12)
    assert got[1].isnan().all().item()


def test_the_finite_matrices_of_such_a_batch_keep_their_gradient():
    x = E.tensor([[0.1, 0.2], [0.3, 0.4]], dtype=E.float64, requires_grad=True)
    bad = E.full((2, 2), _INF, dtype=E.float64)
    E.linalg.matrix_exp(E.stack([x, bad]))[0].sum().backward()
    g = x.grad.clone()
    x.grad = None
    E.linalg.matrix_exp(x).sum().backward()
    assert E.allclose(g, x.grad, rtol=0, atol=1e-12)
    # and the numerical derivative of the plain exponential
    eps = 1e-6
    for i in range(2):
        for j in range(2):
            d = E.zeros(2, 2, dtype=E.float64)
            d[i, j] = eps
            num = (E.linalg.matrix_exp(x.detach() + d).sum() -
                   E.linalg.matrix_exp(x.detach() - d).sum()).item() / (2 * eps)
            assert g[i, j].item() == pytest.approx(num, rel=1e-6)


def test_torch_matrix_exp_of_non_finite_matrices_is_nan_too():
    torch = pytest.importorskip("torch")
    batch = torch.stack([torch.eye(2, dtype=torch.float64) * 2,
                         torch.full((2, 2), _INF, dtype=torch.float64)])
    want = torch.linalg.matrix_exp(batch)
    got = E.linalg.matrix_exp(E.tensor(batch.numpy()))
    assert got[0].reshape(-1).tolist() == pytest.approx(want[0].reshape(-1).tolist(), rel=1e-12)
    assert want[1].isnan().all().item() and got[1].isnan().all().item()


_LU = [[1.0, 2.0], [2.0, 4.0]]


@pytest.mark.parametrize("pivots, message", [
    ([5, 1], r"pivots passed to lu_unpack must be between 1 and LU\.size\(-2\) = 2 inclusive, "
             r"got values in \[1, 5\]"),
    ([-3, 1], r"must be between 1 and LU\.size\(-2\) = 2 inclusive, got values in \[-3, 1\]"),
    ([0, 1], r"must be between 1 and LU\.size\(-2\) = 2 inclusive, got values in \[0, 1\]"),
    ([1], r"LU_pivots of shape \(1,\) do not fit LU_data of shape \(2, 2\) \(expected shape "
          r"\(2,\)\)"),
])
def test_lu_unpack_refuses_pivots_lu_factor_cannot_return(pivots, message):
    with pytest.raises(RuntimeError, match="^lu_unpack: .*" + message):
        E.lu_unpack(E.tensor(_LU), E.tensor(pivots, dtype=E.int32))


def test_lu_unpack_refuses_float_pivots_but_not_when_it_does_not_read_them():
    with pytest.raises(RuntimeError, match=r"^lu_unpack: LU_pivots is expected to be a tensor of "
                                           r"int32 dtype"):
        E.lu_unpack(E.tensor(_LU), E.tensor([1.0, 2.0]))
    _, L, U = E.lu_unpack(E.tensor(_LU), E.tensor([1.0, 2.0]), unpack_pivots=False)
    assert L.tolist() == [[1.0, 0.0], [2.0, 1.0]] and U.tolist() == [[1.0, 2.0], [0.0, 4.0]]


def test_lu_unpack_of_lu_factor_still_rebuilds_the_matrix():
    a = E.tensor([[1.0, 2.0, 0.5], [3.0, 4.0, -1.0], [0.0, 1.0, 2.0]], dtype=E.float64)
    P, L, U = E.lu_unpack(*E.linalg.lu_factor(a))
    assert E.allclose(P @ L @ U, a, atol=1e-12)
    assert P.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]] or \
        E.allclose(P @ P.mT, E.eye(3, dtype=E.float64))
    wide = E.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=E.float64)
    P, L, U = E.lu_unpack(*E.linalg.lu_factor(wide))
    assert E.allclose(P @ L @ U, wide, atol=1e-12)


def test_torch_refuses_the_same_pivots():
    torch = pytest.importorskip("torch")
    for piv in ([5, 1], [0, 1]):
        with pytest.raises(RuntimeError, match="pivots passed to lu_unpack must be between 1"):
            torch.lu_unpack(torch.tensor(_LU), torch.tensor(piv, dtype=torch.int32))


@pytest.mark.parametrize("ord", ["fro", None])
def test_vector_norm_names_an_ord_that_is_not_a_number(ord):
    with pytest.raises(TypeError, match=r"^linalg\.vector_norm: argument 'ord' must be a number, "
                                        rf"not {type(ord).__name__}"):
        E.linalg.vector_norm(E.ones(2), ord)
    assert E.linalg.vector_norm(E.tensor([3.0, 4.0]), 2).item() == 5.0
    assert E.linalg.vector_norm(E.tensor([3.0, -4.0]), _INF).item() == 4.0
