"""Core compatibility gaps with PyTorch (session 22): the storage classes' Python API (indexing,
fill_/copy_, clone, conversions, pickling, ember.save) sharing memory with their tensors, and
the refusal of recorded in-place writes into outputs of multi-output views (split, chunk,
unbind, split_with_sizes) with PyTorch's message."""

import copy
import io
import pickle
import struct

import ember
import pytest

try:
    import torch
except ImportError:  # the comparisons against PyTorch skip without it
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- storages --------------------------------------------------------------------------------

def test_typed_storage_indexing_shares_memory():
    x = ember.arange(4, dtype=ember.float32)
    s = x.storage()
    assert (s[0], s[1], s[-1]) == (0.0, 1.0, 3.0)
    s[0] = 5
    s[2:4] = 7
    assert x.tolist() == [5.0, 1.0, 7.0, 7.0]
    assert list(s) == [5.0, 1.0, 7.0, 7.0]
    assert len(s) == 4 and s.size() == 4 and s.nbytes() == 16 and s.element_size() == 4
    assert s.dtype == ember.float32 and s.device == ember.device("cpu")
    assert s.data_ptr() == x.data_ptr()
    with pytest.raises(IndexError, match="index 4 out of range for storage of size 4"):
        s[4]
    with pytest.raises(IndexError, match="out of range"):
        s[-5]
    with pytest.raises(IndexError, match="index 4 is out of bounds"):
        s[4] = 1
    with pytest.raises(RuntimeError, match="slices are only supported in UntypedStorage"):
        s[1:3]
    with pytest.raises(RuntimeError, match="can't index"):
        s[ember.tensor(1)]
    # a float written into an int64 storage truncates, as PyTorch
    y = ember.zeros(2, dtype=ember.int64)
    y.storage()[0] = 2.7
    assert y.tolist() == [2, 0]


def test_untyped_storage_indexing_and_slices_share_memory():
    x = ember.tensor([1.0, 2.0], dtype=ember.float32)
    u = x.untyped_storage()
    assert u.tolist() == list(struct.pack("<ff", 1.0, 2.0))
    assert (u[2], u[3], u[-1]) == (128, 63, 64)
    assert len(u) == 8 and u.element_size() == 1
    with pytest.raises(IndexError, match="index 8 out of range for storage of size 8"):
        u[8]
    with pytest.raises(RuntimeError, match="only a step of 1"):
        u[0:8:2]
    with pytest.raises(TypeError, match="can't index"):
        u["a"]
    part = u[4:8]
    assert isinstance(part, ember.UntypedStorage) and part.nbytes() == 4
    assert part.data_ptr() == u.data_ptr() + 4
    part[3] = 0x40  # the second float, 2.0, is 0x40000000: its top byte already 0x40
    part[2] = 0x40  # 0x40400000 is 3.0
    assert x.tolist() == [1.0, 3.0]
    u[0:4] = 0
    assert x.tolist() == [0.0, 3.0]
    u[0] = 300  # modulo 256, as PyTorch
    assert u[0] == 44
    with pytest.raises(RuntimeError, match="out of bounds"):
        u[8] = 1
    # a slice of a view's storage covers the whole storage's bytes, not the view's
    z = ember.zeros(4)
    z[2:4].untyped_storage()[0] = 0x40
    assert z[0].item() == struct.unpack("<f", bytes([0x40, 0, 0, 0]))[0]


def test_fill_copy_clone_and_conversions():
    x = ember.arange(4.0)
    s = x.storage()
    assert s.fill_(2.5) is s and x.tolist() == [2.5] * 4
    assert s.copy_(ember.arange(4.0).storage()) is s and x.tolist() == [0.0, 1.0, 2.0, 3.0]
    u = x.untyped_storage()
    u.copy_(ember.ones(4).untyped_storage())
    assert x.tolist() == [1.0] * 4
    with pytest.raises(RuntimeError, match="self was 16 bytes but src was 12 bytes"):
        u.copy_(ember.ones(3).untyped_storage())
    with pytest.raises(RuntimeError, match="size does not match"):
        s.copy_(ember.ones(3).storage())
    assert ember.zeros(2).untyped_storage().fill_(1).tolist() == [1] * 8
    c = s.clone()
    assert isinstance(c, ember.TypedStorage) and c.tolist() == [1.0] * 4
    assert c.data_ptr() != s.data_ptr()
    c[0] = 9
    assert x[0].item() == 1.0
    uc = u.clone()
    assert isinstance(uc, ember.UntypedStorage) and uc.tolist() == u.tolist()
    assert uc.data_ptr() != u.data_ptr()
    assert copy.copy(s).data_ptr() != s.data_ptr()
    d = copy.deepcopy(s)
    assert d.tolist() == s.tolist() and d.data_ptr() != s.data_ptr()
    assert u.cpu() is u and s.cpu().tolist() == s.tolist()
    assert s.to(device="cpu") is s
    # dtype conversions: typed converts values, untyped converts the byte values
    assert s.double().dtype == ember.float64 and s.long().tolist() == [1, 1, 1, 1]
    assert s.float() is s
    assert (s.int().dtype, s.half().dtype, s.bool().dtype, s.byte().dtype) == (
        ember.int32, ember.float16, ember.bool, ember.uint8)
    b = ember.ones(1).untyped_storage().float()
    assert b.dtype == ember.float32 and b.tolist() == [0.0, 0.0, 128.0, 63.0]
    assert s.type() == "ember.FloatStorage" and u.type() == "ember.storage.UntypedStorage"
    assert s.pickle_storage_type() == "FloatStorage"
    assert s.untyped() is u or s.untyped().data_ptr() == u.data_ptr()
    assert u.untyped() is u
    assert s.get_device() is None and u.get_device() is None
    assert not s.is_pinned() and not u.is_sparse and s.resizable()


def test_constructors_from_buffer_and_resize():
    assert ember.TypedStorage([1, 2, 3], dtype=ember.float64).tolist() == [1.0, 2.0, 3.0]
    assert ember.TypedStorage(3, dtype=ember.int32).size() == 3
    e = ember.TypedStorage()
    assert e.dtype == ember.get_default_dtype() and e.size() == 0
    w = ember.TypedStorage(wrap_storage=ember.ones(2).untyped_storage(), dtype=ember.float32)
    assert w.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="invalid combination"):
        ember.TypedStorage(2.5)
    assert ember.UntypedStorage([1, 2, 3]).tolist() == [1, 2, 3]
    assert ember.UntypedStorage.from_buffer(b"\x01\x02\x03", dtype=ember.uint8).tolist() == \
        [1, 2, 3]
    assert ember.UntypedStorage.from_buffer(b"\x00\x01", "big", dtype=ember.int16).tolist() == \
        [1, 0]
    assert ember.UntypedStorage.from_buffer(b"\x01\x02\x03\x04", "little", dtype=ember.int16,
                                            count=1, offset=2).tolist() == [3, 4]
    t = ember.TypedStorage.from_buffer(struct.pack(">i", 7), "big", dtype=ember.int32)
    assert isinstance(t, ember.TypedStorage) and t.tolist() == [7]
    with pytest.raises(ValueError, match="multiple of element size"):
        ember.UntypedStorage.from_buffer(b"\x01\x02\x03", "little", dtype=ember.int16)
    with pytest.raises(ValueError, match="specified a size of 5"):
        ember.UntypedStorage.from_buffer(b"\x01\x02\x03", dtype=ember.uint8, count=5)
    with pytest.raises(ValueError, match="invalid byte_order"):
        ember.UntypedStorage.from_buffer(b"\x01\x02", "middle", dtype=ember.int16)
    with pytest.raises(RuntimeError, match="byte_order is required"):
        ember.UntypedStorage.from_buffer(b"\x01\x02", dtype=ember.int16)
    g = ember.TypedStorage([1, 2], dtype=ember.int32)
    g.resize_(3)
    assert g.size() == 3 and g.tolist()[:2] == [1, 2]


def test_share_memory_and_repr():
    x = ember.ones(2)
    s = x.storage()
    assert not s.is_shared()
    assert s.share_memory_() is s
    assert s.is_shared() and x.is_shared() and x.untyped_storage().is_shared()
    x.add_(1)
    assert s.tolist() == [2.0, 2.0]
    assert repr(ember.arange(3.0).storage()) == (
        " 0.0\n 1.0\n 2.0\n[ember.storage.TypedStorage(dtype=ember.float32, device=cpu) of size 3]")
    assert repr(ember.arange(2, dtype=ember.uint8).untyped_storage()) == (
        " 0\n 1\n[ember.storage.UntypedStorage(device=cpu) of size 2]")


def test_pickle_and_save_round_trips():
    x = ember.arange(4.0)
    s = x.storage()
    r = pickle.loads(pickle.dumps(s))
    assert isinstance(r, ember.TypedStorage) and r.dtype == ember.float32
    assert r.tolist() == [0.0, 1.0, 2.0, 3.0]
    ru = pickle.loads(pickle.dumps(x.untyped_storage()))
    assert isinstance(ru, ember.UntypedStorage) and ru.tolist() == x.untyped_storage().tolist()
    buf = io.BytesIO()
    ember.save({"x": x, "s": s, "u": x.untyped_storage()}, buf)
    buf.seek(0)
    d = ember.load(buf)
    assert isinstance(d["s"], ember.TypedStorage) and d["s"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert isinstance(d["u"], ember.UntypedStorage) and d["u"].nbytes() == 16
    # one storage on file: the loaded storage still shares memory with the loaded tensor
    d["s"][0] = 42
    assert d["x"][0].item() == 42.0 and d["u"].data_ptr() == d["x"].data_ptr()


def test_tensor_from_typed_storage():
    s = ember.tensor([1.5, 2.5]).storage()
    t = ember.tensor(s)
    assert t.dtype == ember.float32 and t.tolist() == [1.5, 2.5]
    t[0] = 0  # a view of the storage, as PyTorch's tensor(storage) (not a copy)
    assert s[0] == 0.0


@needs_torch
def test_storages_match_torch():
    import warnings

    warnings.simplefilter("ignore")
    vals = [0.5, -1.0, 3.25]
    es, ts = ember.tensor(vals).storage(), torch.tensor(vals).storage()
    assert es.tolist() == ts.tolist() and len(es) == len(ts)
    assert [es[i] for i in range(-3, 3)] == [ts[i] for i in range(-3, 3)]
    eu, tu = es.untyped(), ts.untyped()
    assert eu.tolist() == tu.tolist() and eu[2:9].tolist() == tu[2:9].tolist()
    assert list(eu) == list(tu)
    for bad in (3, -4):
        with pytest.raises(IndexError):
            ts[bad]
        with pytest.raises(IndexError):
            es[bad]
    with pytest.raises(IndexError):
        tu[12]
    with pytest.raises(IndexError):
        eu[12]
    assert es.long().tolist() == ts.long().tolist()
    assert eu.double().tolist() == tu.double().tolist()
    assert ember.UntypedStorage.from_buffer(b"\x00\x01\x02\x03", "big", dtype=ember.int16) \
        .tolist() == torch.UntypedStorage.from_buffer(b"\x00\x01\x02\x03", "big",
                                                      dtype=torch.int16).tolist()
    assert es.pickle_storage_type() == ts.pickle_storage_type()


# ---- in-place writes into multi-output views -------------------------------------------------

MSG = ("is a view and is being modified inplace. This view is the output of a function that "
       "returns multiple views")


def _nonleaf(L):
    return L.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], dtype=L.float64,
                    requires_grad=True).clone()


@pytest.mark.parametrize("make, label", [
    (lambda x: x.split(2)[0], "Output 0 of Split "),
    (lambda x: x.split(2)[1], "Output 1 of Split "),
    (lambda x: x.chunk(2)[1], "Output 1 of Split "),
    (lambda x: x.unbind()[2], "Output 2 of Unbind "),
    (lambda x: x.split_with_sizes([1, 3])[1], "Output 1 of SplitWithSizes "),
    (lambda x: x.split([1, 3])[0], "Output 0 of SplitWithSizes "),
    (lambda x: ember.split(x, 2)[0], "Output 0 of Split "),
    (lambda x: x.split(2)[0][0], "Output 0 of Select "),
    (lambda x: x.split(2)[0].view(-1), "Output 0 of View "),
])
def test_multi_output_view_inplace_refused(make, label):
    x = _nonleaf(ember)
    v = make(x)
    with pytest.raises(RuntimeError, match=label + MSG):
        v.mul_(2)
    # a leaf requiring grad as the base gives the same error (before the leaf one)
    leaf = ember.ones(4, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match=MSG):
        leaf.split(2)[0].add_(1)


def test_multi_output_view_setitem_refused():
    x = _nonleaf(ember)
    a = x.split(2)[0]
    with pytest.raises(RuntimeError, match=MSG):
        a[0] = 1.0
    with pytest.raises(RuntimeError, match=MSG):
        a[:, 0] = ember.ones(2, dtype=ember.float64)
    assert x.tolist()[0] == [1.0, 2.0]


def test_multi_output_view_allowed_cases():
    # tensor_split / hsplit / vsplit are single views in PyTorch: writable
    for f in (lambda x: x.tensor_split(2)[1], lambda x: x.vsplit(2)[1],
              lambda x: x.hsplit(2)[1], lambda x: x.split(2)[0].detach()):
        x = _nonleaf(ember)
        f(x).mul_(2)
    # nothing requires grad / an integer tensor / all in no_grad / inference mode
    y = ember.arange(6.0)
    y.split(2)[0].mul_(2)
    assert y.tolist() == [0.0, 2.0, 2.0, 3.0, 4.0, 5.0]
    ember.arange(6).split(2)[1].add_(1)
    x = _nonleaf(ember)
    with ember.no_grad():
        a = x.split(2)[0]
        a.mul_(10)
    assert x.tolist()[0] == [10.0, 20.0]
    with ember.inference_mode():
        z = ember.ones(4)
        z.split(2)[0].add_(1)
    assert z.tolist() == [2.0, 2.0, 1.0, 1.0]
    # a view made in grad mode may be written under no_grad
    x = _nonleaf(ember)
    a = x.split(2)[0]
    with ember.no_grad():
        a.zero_()
    assert x.tolist()[0] == [0.0, 0.0]


def test_view_made_in_no_grad_keeps_no_grad_message():
    x = _nonleaf(ember)
    with ember.no_grad():
        a = x.split(2)[0]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        a.mul_(2)


def test_unsafe_split_outputs_are_writable_with_correct_gradients():
    x = ember.tensor([1.0, 2.0, 3.0, 4.0], dtype=ember.float64, requires_grad=True)
    y = x * 1
    a, b = ember.unsafe_split(y, 2)
    a.mul_(3)
    (y * y).sum().backward()
    # as PyTorch: the outputs are not views of y, so the write changes y's values, not its
    # recorded history: d/dx sum(y^2) = 2 y with y = [3x0, 3x1, x2, x3] (session 24)
    assert x.grad.tolist() == [6.0, 12.0, 6.0, 8.0]
    c = ember.unsafe_chunk(ember.arange(5.0), 2)
    assert [t.tolist() for t in c] == [[0.0, 1.0, 2.0], [3.0, 4.0]]
    p = ember.unsafe_split_with_sizes(ember.arange(5.0), [1, 4])
    assert [t.tolist() for t in p] == [[0.0], [1.0, 2.0, 3.0, 4.0]]


def test_lstm_gru_still_train():
    nn = pytest.importorskip("ember.nn")
    ember.manual_seed(0)
    for cls in (nn.LSTM, nn.GRU):
        m = cls(3, 4, num_layers=2)
        out, _ = m(ember.randn(5, 2, 3))
        out.sum().backward()
        assert all(p.grad is not None for p in m.parameters())
    cell = nn.LSTMCell(3, 4)
    h, c = cell(ember.randn(2, 3))
    (h.sum() + c.sum()).backward()


@needs_torch
@pytest.mark.parametrize("op", ["split", "chunk", "unbind", "split_with_sizes", "tensor_split"])
def test_multi_output_matches_torch(op):
    args = {"split": (2,), "chunk": (2,), "unbind": (), "split_with_sizes": ([1, 3],),
            "tensor_split": (2,)}[op]
    outcomes = []
    for L in (ember, torch):
        x = _nonleaf(L)
        v = getattr(x, op)(*args)[1]
        try:
            v.mul_(2)
            outcomes.append(None)
        except RuntimeError as e:
            outcomes.append(str(e).split("Output", 1)[1])
    assert outcomes[0] == outcomes[1]


# ---- Python ints outside int64 ---------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda L: L.tensor([2**64], dtype=L.uint64),
    lambda L: L.full((2,), 2**64, dtype=L.uint64),
    lambda L: L.zeros(2, dtype=L.uint64).fill_(2**64),
    lambda L: L.tensor([-1], dtype=L.uint64),
    lambda L: L.tensor(-5, dtype=L.uint64),
])
def test_ints_no_dtype_holds_raise_overflow_error(make):
    with pytest.raises(OverflowError):
        make(ember)
    if torch is not None:
        with pytest.raises(OverflowError):
            make(torch)


def test_uint64_above_int64_is_taken():
    # tensor(), fill_ and full take 2**63 .. 2**64 - 1 for uint64, as PyTorch
    assert ember.tensor([2**64 - 1], dtype=ember.uint64).tolist() == [2**64 - 1]
    assert ember.zeros(2, dtype=ember.uint64).fill_(2**63).tolist() == [2**63] * 2
    # what fits keeps working: negatives wrap in fill_, as PyTorch; uint32's max
    assert ember.zeros(2, dtype=ember.uint64).fill_(-1).tolist() == [2**64 - 1] * 2
    assert ember.tensor([2**32 - 1], dtype=ember.uint32).tolist() == [2**32 - 1]
    assert ember.tensor([2**63 - 1], dtype=ember.uint64).tolist() == [2**63 - 1]
    assert ember.tensor([-1], dtype=ember.uint8).tolist() == [255]
