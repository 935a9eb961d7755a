"""Hostile input, round 12 (core part): file objects that write or read in pieces, files opened
for appending, a state_dict's ``_metadata`` in ember's own format, NaN quantile levels and
``hypot`` of complex tensors.

``ember.save(obj, f)`` to a raw file object (``open(p, "wb", buffering=0)``, a socket or pipe
wrapper: an ``io.RawIOBase``) took each ``f.write(data)`` as complete, whatever count it
returned; a raw file may take only part of a buffer, so the checkpoint came out truncated
without an error (torch.save does the same). The rest of the buffer is now written again; a
write that takes nothing (0, or None from a raw file that would block) is an OSError naming the
file and how far it got. Other file objects (buffered files, BytesIO, a compressor whose
write() returns what it wrote downstream) are called once per buffer, as before. Reading had
the mirror problem: a raw file that returned fewer bytes than asked was reported as a truncated
checkpoint (a good file called corrupt); the reader now asks again until the file really ends.

``ember.save`` to a file opened with ``"ab"`` (or an O_APPEND descriptor) wrote a file nothing
could load, silently: both formats seek back to fill in a header, and in append mode that write
lands after the data instead. Such a file is now written in one sequential pass (as torch.save's
writer does), so appending a checkpoint to a log-like file works.

ember's own format dropped the attributes of an ``OrderedDict``; a ``Module.state_dict()`` keeps
the modules' ``_version`` in its ``_metadata`` attribute, which ``_load_from_state_dict`` reads
to migrate old checkpoints. After ``ember.save`` / ``ember.load`` every module looked like a
version-less (oldest) one, so a module that migrates (transposes, renames) old checkpoints
migrated a current one too: a silent wrong number. The attributes are now saved and restored.

``ember.quantile`` / ``nanquantile`` with ``q=nan`` (or a q tensor holding NaN) returned NaN:
the range check ``q < 0 or q > 1`` is false for NaN. It is now refused like any q outside
[0, 1], as torch refuses it, and the message names the bad value.

``ember.hypot`` of complex tensors returned ``sqrt(a*a + b*b)`` with complex arithmetic, which
is no length (``hypot(1j, 1) == 0``); torch has no complex hypot. It is now a
NotImplementedError saying to take the magnitudes first.

``x.index_copy_(0, i, x[:2])``, ``x.scatter_(0, i, x[:2])``, ``index_add_``, ``scatter_add_``,
``scatter_reduce_`` and ``masked_scatter_`` with a source (or index) that is a view of ``x``
itself read rows they had already overwritten: ``arange(6).index_copy_(0, [1, 2], x[:2])`` gave
``[0, 0, 0, ...]`` instead of ``[0, 0, 1, ...]``, silently. torch refuses most of them ("some
elements of the input tensor and the written-to tensor refer to a single memory location") and
gets ``masked_scatter_`` and ``index_copy_`` along dim 1 wrong the same way; ember now reads
such an input from a copy, as its ``index_put_`` already did, and gives the true result.

The same held for element-wise in-place ops reading a broadcast or strided view of their own
output: ``x.sub_(x[:, :1])`` (subtract each row's first column) gave wrong rows for a (3, 70000)
``x`` once the kernel split the rows into chunks, and ``x.mul_(x.diagonal())`` read diagonal
entries it had already scaled; torch gives wrong numbers for both too. Such an input is now read
from a copy (dense partial overlaps, ``x[1:].add_(x[:-1])``, are still refused as in torch).
The CUDA kernels of the index ops take the same copies (there the reads raced with the writes).

``ember.cat([x[:2], x[:2]], out=x[2:6])`` was refused as sharing memory with an input because
the tensors share a storage, although no byte of the output is read (torch writes it); only
inputs whose elements meet the output's are refused now (``stack([x[0], x[1]], out=x[1:3])``).

``ember.amp.GradScaler("cpu", init_scale=0)`` (or NaN, or a negative scale, or
``growth_factor=inf``) was taken, and so was such a scale from ``load_state_dict``: every
scaled gradient was then 0 / inf / NaN, every ``scaler.step`` was skipped as an overflow and the
model never trained, without an error (torch takes them too). They are now a ValueError naming
the setting; ``load_state_dict`` checks every entry before applying any (a missing key left the
scale already replaced).

A byte-swapped NumPy array (``dtype=">f4"``) given to ``from_numpy`` / ``tensor`` /
``as_tensor`` was a TypeError listing "the only supported types" (float32 among them, which
reads as a contradiction); torch raises a ValueError about the byte order, and ember now does
too, saying how to convert the array. The list of supported types also names the complex and
wide unsigned dtypes ember takes.

``ember.tensor([a, b])`` of one-element tensors of shape (1,) gave shape (2, 1); torch takes a
one-element tensor inside a list as a number and gives (2,) (``torch.tensor([model(x) for x in
xs])``), so the extra dim broadcast silently against a (2,) target later. One-element tensors
are numbers now; larger tensors are still rows (which torch refuses). NumPy arrays inside a list
(``[np.array([1.0]), np.array([2.0])]``) were a TypeError; they are rows of their dtype now, as
in torch.

The rest of round 12: packages/nn/tests/test_nn_hostile_round12.py.
"""

import collections
import io
import math
import os

import ember as E
import pytest

# ---- file objects that take or give fewer bytes than asked ---------------------------------------


class _ShortWriter(io.RawIOBase):
    """A raw file that takes at most a third of each buffer (a pipe or socket under pressure)."""

    def __init__(self, seekable: bool) -> None:
        self.buf = io.BytesIO()
        self._seekable = seekable

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._seekable

    def seek(self, *args):
        return self.buf.seek(*args)

    def tell(self) -> int:
        return self.buf.tell()

    def write(self, b) -> int:
        b = bytes(b)
        n = max(1, len(b) // 3) if b else 0
        self.buf.write(b[:n])
        return n


class _ShortReader(io.RawIOBase):
    """A seekable raw file that returns at most a third of what each read asks for."""

    def __init__(self, data: bytes) -> None:
        self.buf = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, *args):
        return self.buf.seek(*args)

    def tell(self) -> int:
        return self.buf.tell()

    def readinto(self, m) -> int:
        d = self.buf.read(max(1, len(m) // 3) if len(m) else 0)
        m[: len(d)] = d
        return len(d)


def _load_any(fmt, f):
    return E.load_safetensors(f) if fmt == "safetensors" else E.load(f)


@pytest.mark.parametrize("fmt", ["ember", "torch", "safetensors"])
@pytest.mark.parametrize("seekable", [False, True])
def test_a_raw_file_taking_part_of_each_write_gets_the_whole_checkpoint(fmt, seekable):
    f = _ShortWriter(seekable)
    E.save({"w": E.arange(300.0)}, f, format=fmt)  # was truncated to a third, silently
    got = _load_any(fmt, io.BytesIO(f.buf.getvalue()))
    assert got["w"].sum().item() == 44850.0


@pytest.mark.parametrize("fmt", ["ember", "torch", "safetensors"])
def test_a_raw_file_that_takes_nothing_is_an_os_error(fmt):
    class Zero(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            return 0

    class WouldBlock(Zero):
        def write(self, b):
            return None

    with pytest.raises(OSError, match=r"ember.save: writing to <Zero> stopped after 0 of the "
                                      r"\d+ bytes of a write: its write\(\) returned 0"):
        E.save({"w": E.arange(3.0)}, Zero(), format=fmt)
    with pytest.raises(OSError, match=r"returned None \(it would block\); what it holds is an "
                                      r"incomplete checkpoint"):
        E.save({"w": E.arange(3.0)}, WouldBlock(), format=fmt)


def test_a_file_like_object_whose_write_returns_nothing_still_gets_everything():
    class Parts:  # not a raw file: its None is "no count", not "would block"
        def __init__(self):
            self.parts = []

        def write(self, b):
            self.parts.append(bytes(b))

    p = Parts()
    E.save({"w": E.arange(4.0)}, p)
    assert E.load(io.BytesIO(b"".join(p.parts)))["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_file_object_that_is_not_raw_is_called_once_per_write():
    class Compressor:  # counts what it wrote downstream, not what it was given
        def __init__(self):
            self.parts = []

        def write(self, b):
            self.parts.append(bytes(b))
            return 1

    c = Compressor()
    E.save({"w": E.arange(4.0)}, c)  # its small counts must not make the bytes be written again
    assert E.load(io.BytesIO(b"".join(c.parts)))["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("fmt", ["ember", "torch", "safetensors"])
def test_a_raw_file_returning_short_reads_still_loads(fmt):
    buf = io.BytesIO()
    E.save({"w": E.arange(300.0)}, buf, format=fmt)
    # was "truncated file: could read only 10 of the 32 bytes of the prelude"
    assert _load_any(fmt, _ShortReader(buf.getvalue()))["w"].sum().item() == 44850.0


def test_a_really_truncated_file_is_still_a_checkpoint_error():
    buf = io.BytesIO()
    E.save({"w": E.arange(300.0)}, buf)
    with pytest.raises(E.serialization.CheckpointError, match="truncated"):
        E.load(_ShortReader(buf.getvalue()[:-10]))


# ---- files opened for appending ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["ember", "torch"])
def test_save_to_a_file_opened_for_appending_loads(tmp_path, fmt):
    path = os.path.join(tmp_path, "log.bin")
    with open(path, "wb") as f:
        f.write(b"HEADER")
    with open(path, "ab") as f:
        E.save({"w": E.arange(4.0)}, f, format=fmt)  # the header landed after the data
    with open(path, "rb") as f:
        assert f.read(6) == b"HEADER"
        assert E.load(f)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_save_to_an_o_append_descriptor_loads(tmp_path):
    path = os.path.join(tmp_path, "a.pt")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    with os.fdopen(fd, "wb") as f:  # its mode says "wb"; the descriptor appends
        E.save({"w": E.arange(4.0)}, f)
    assert E.load(path)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_torch_saves_to_a_file_opened_for_appending_too(tmp_path):
    torch = pytest.importorskip("torch")
    path = os.path.join(tmp_path, "t.pt")
    with open(path, "ab") as f:
        torch.save({"w": torch.arange(4.0)}, f)
    assert torch.load(path)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    # and ember reads what ember appended in torch's format
    path2 = os.path.join(tmp_path, "e.pt")
    with open(path2, "ab") as f:
        E.save({"w": E.arange(4.0)}, f, format="torch")
    assert torch.load(path2)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


# ---- an OrderedDict's attributes (a state_dict's _metadata) --------------------------------------


def test_ordered_dict_attributes_survive_ember_format():
    od = collections.OrderedDict(a=E.ones(1))
    od._metadata = collections.OrderedDict([("", {"version": 2}), ("sub", {"version": 5})])
    od.note = "x"
    buf = io.BytesIO()
    E.save({"sd": od, "plain": collections.OrderedDict(b=1)}, buf)
    got = E.load(io.BytesIO(buf.getvalue()))
    assert got["sd"]._metadata == {"": {"version": 2}, "sub": {"version": 5}}
    assert got["sd"].note == "x" and list(got["sd"]) == ["a"]
    assert not vars(got["plain"])  # an OrderedDict without attributes gets none


def test_a_module_that_migrates_old_checkpoints_leaves_a_current_one_alone():
    class M(E.nn.Module):
        _version = 2

        def __init__(self):
            super().__init__()
            self.w = E.nn.Parameter(E.tensor([[1.0, 2.0], [3.0, 4.0]]))

        def _load_from_state_dict(self, sd, prefix, meta, *args):
            if meta.get("version") is None or meta["version"] < 2:  # version 1 stored w.t()
                sd[prefix + "w"] = sd[prefix + "w"].t()
            super()._load_from_state_dict(sd, prefix, meta, *args)

    buf = io.BytesIO()
    E.save(M().state_dict(), buf)
    m = M()
    with E.no_grad():
        m.w.zero_()
    m.load_state_dict(E.load(io.BytesIO(buf.getvalue())))
    assert m.w.tolist() == [[1.0, 2.0], [3.0, 4.0]]  # was [[1, 3], [2, 4]]: migrated again


def test_an_attribute_named_class_cannot_change_the_loaded_type():
    od = collections.OrderedDict(a=1)
    vars(od)["__class__"] = "dict"  # lands in __dict__ only, on saving and on loading
    buf = io.BytesIO()
    E.save(od, buf)
    got = E.load(io.BytesIO(buf.getvalue()))
    assert type(got) is collections.OrderedDict and vars(got)["__class__"] == "dict"
    assert got == {"a": 1}


def test_an_attribute_name_that_is_not_a_str_is_refused_at_save():
    od = collections.OrderedDict(a=1)
    vars(od)[3] = "x"
    with pytest.raises(TypeError, match=r"ember.save: the OrderedDict at obj has an attribute "
                                        r"named 3, not a str"):
        E.save(od, io.BytesIO())


# ---- quantile with NaN levels --------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_a_nan_quantile_level_is_refused(fn):
    x = E.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=rf"{fn}\(\) q must be in the range \[0, 1\] but got "
                                           r"nan"):
        getattr(E, fn)(x, float("nan"))  # was a silent nan
    with pytest.raises(RuntimeError, match=rf"{fn}\(\) q values must be in the range \[0, 1\], "
                                           r"got nan"):
        getattr(E, fn)(x, E.tensor([0.5, float("nan")]))
    with pytest.raises(RuntimeError, match=r"but got 1.5"):
        getattr(E, fn)(x, 1.5)
    # levels inside still work
    assert getattr(E, fn)(x, E.tensor([0.0, 0.25, 1.0])).tolist() == [1.0, 1.5, 3.0]


def test_torch_refuses_a_nan_quantile_level_too():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="q must be in the range"):
        torch.quantile(torch.tensor([1.0, 2.0]), float("nan"))
    with pytest.raises(RuntimeError, match="q values must be in the range"):
        torch.quantile(torch.tensor([1.0, 2.0]), torch.tensor([float("nan")]))


# ---- hypot of complex tensors --------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [(1j, 1.0), (1.0, 1j), (1j, 1j)])
def test_hypot_of_complex_tensors_is_refused(a, b):
    with pytest.raises(NotImplementedError, match=r"hypot: not implemented for complex tensors "
                                                  r"\(got ember\.\w+ and ember\.\w+\); take "
                                                  r"the legs' magnitudes with .abs\(\) first"):
        E.hypot(E.tensor([a]), E.tensor([b]))  # hypot(1j, 1) was 0
    with pytest.raises(NotImplementedError, match="hypot"):
        E.tensor([a]).hypot_(E.tensor([b]) if isinstance(b, complex) else E.tensor([a]))
    # the magnitudes give the length
    r = E.hypot(E.tensor([a]).abs(), E.tensor([b]).abs())
    assert r.item() == pytest.approx(math.sqrt(2))


def test_torch_has_no_complex_hypot():
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError):
        torch.hypot(torch.tensor([1j]), torch.tensor([1.0 + 0j]))


# ---- in-place index ops whose source is a view of self -------------------------------------------


_ALIASED = {  # op on x = arange(6.): the result with the source read before any write
    "index_copy_": (lambda x: x.index_copy_(0, E.tensor([1, 2]), x[:2]), [0, 0, 1, 3, 4, 5]),
    "index_copy_ reversed": (lambda x: x.index_copy_(0, E.tensor([2, 1]), x[1:3]),
                             [0, 2, 1, 3, 4, 5]),
    "scatter_": (lambda x: x.scatter_(0, E.tensor([2, 1]), x[1:3]), [0, 2, 1, 3, 4, 5]),
    "index_add_": (lambda x: x.index_add_(0, E.tensor([2, 1]), x[1:3]), [0, 3, 3, 3, 4, 5]),
    "scatter_add_": (lambda x: x.scatter_add_(0, E.tensor([2, 1]), x[1:3]), [0, 3, 3, 3, 4, 5]),
    "scatter_reduce_": (lambda x: x.scatter_reduce_(0, E.tensor([2, 1]), x[1:3], "amax"),
                        [0, 2, 2, 3, 4, 5]),
    "masked_scatter_": (lambda x: x.masked_scatter_(E.tensor([0, 1, 1, 0, 0, 0]).bool(), x[:2]),
                        [0, 0, 1, 3, 4, 5]),
    "put_": (lambda x: x.put_(E.tensor([2, 1]), x[1:3]), [0, 2, 1, 3, 4, 5]),
}


@pytest.mark.parametrize("name", sorted(_ALIASED))
def test_an_in_place_index_op_reads_a_source_aliasing_self_before_writing(name):
    f, want = _ALIASED[name]
    x = E.arange(6.0)
    assert f(x) is x
    assert x.tolist() == [float(v) for v in want]


def test_rows_and_columns_aliasing_self():
    x = E.arange(6.0).reshape(3, 2)
    x.index_copy_(0, E.tensor([1, 2]), x[:2])  # was [[0, 1], [0, 1], [0, 1]]
    assert x.tolist() == [[0.0, 1.0], [0.0, 1.0], [2.0, 3.0]]
    y = E.arange(6.0).reshape(2, 3)
    y.index_copy_(1, E.tensor([1, 2]), y[:, :2])  # (torch gives [[0, 0, 0], [3, 3, 3]])
    assert y.tolist() == [[0.0, 0.0, 1.0], [3.0, 3.0, 4.0]]


def test_an_index_aliasing_self_is_read_before_writing():
    x = E.tensor([2, 0, 1, 5])
    x.scatter_(0, x[:3], E.tensor([7, 8, 9]))  # index [2, 0, 1] read once, before the writes
    assert x.tolist() == [8, 9, 7, 5]


def test_a_gradient_still_flows_through_an_aliased_index_copy():
    w = E.arange(4.0, dtype=E.float64, requires_grad=True)
    x = w * 1.0
    x.index_copy_(0, E.tensor([1, 2]), x[:2] * 3)
    x.sum().backward()
    # x = [w0, 3 w0, 3 w1, w3]: d/dw = [4, 3, 0, 1]
    assert w.grad.tolist() == [4.0, 3.0, 0.0, 1.0]


def test_torch_refuses_most_of_them():
    torch = pytest.importorskip("torch")
    x = torch.arange(6.0)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        x.index_copy_(0, torch.tensor([1, 2]), x[:2])
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        x.scatter_(0, torch.tensor([2, 1]), x[1:3])


# ---- tensor() of lists holding one-element tensors and NumPy arrays ------------------------------


def test_one_element_tensors_in_a_list_are_numbers():
    assert E.tensor([E.tensor([1.0]), E.tensor([2.0])]).shape == (2,)  # was (2, 1)
    assert E.tensor([E.tensor([[1.0]]), E.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert E.tensor([1.0, E.tensor([2.0])]).tolist() == [1.0, 2.0]
    r = E.tensor([E.tensor([1], dtype=E.int8), E.tensor([2], dtype=E.int8)])
    assert r.shape == (2,) and r.dtype == E.int8
    # a (1,) tensor where the first row says a row of one element is wanted stays a row
    assert E.tensor([[1.0], E.tensor([2.0])]).tolist() == [[1.0], [2.0]]
    # larger tensors are rows (torch refuses them)
    assert E.tensor([E.tensor([1.0, 2.0]), E.tensor([3.0, 4.0])]).tolist() == [[1.0, 2.0],
                                                                               [3.0, 4.0]]
    with pytest.raises(ValueError, match=r"expected a tensor of shape \(2,\) at dim 1"):
        E.tensor([E.tensor([1.0, 2.0]), E.tensor([3.0])])


def test_numpy_arrays_in_a_list_are_rows_of_their_dtype():
    np = pytest.importorskip("numpy")
    r = E.tensor([np.array([1], dtype=np.int8), np.array([2], dtype=np.int8)])
    assert r.shape == (2, 1) and r.dtype == E.int8 and r.tolist() == [[1], [2]]
    r = E.tensor([np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]])])
    assert r.shape == (2, 1, 2) and r.dtype == E.float64
    assert E.tensor([np.array(1.5), 2]).tolist() == [1.5, 2.0]
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1"):
        E.tensor([np.array([1, 2]), np.array([3])])


@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy")
def test_torch_builds_the_same_shapes():
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    for data in ([[1.0], [2.0]], [[[1.0]], [[2.0]]], [[1.0], 2.0]):
        e = E.tensor([E.tensor(v) if isinstance(v, list) else v for v in data])
        t = torch.tensor([torch.tensor(v) if isinstance(v, list) else v for v in data])
        assert tuple(e.shape) == tuple(t.shape) and e.tolist() == t.tolist()
    arrs = [np.array([1], dtype=np.int8), np.array([2], dtype=np.int8)]
    assert E.tensor(arrs).tolist() == torch.tensor(arrs).tolist()


# ---- element-wise in-place ops reading a broadcast or strided view of self -----------------------


@pytest.mark.parametrize("shape", [(2, 3), (3, 70000)])
def test_subtracting_the_first_column_in_place_gives_every_row_right(shape):
    x = E.arange(float(shape[0] * shape[1])).reshape(*shape) + 1
    x.sub_(x[:, :1])  # wrong from (3, 70000) on: the column was read after it was zeroed
    assert x[:, 0].tolist() == [0.0] * shape[0]
    assert x[:, -1].tolist() == [float(shape[1] - 1)] * shape[0]
    y = E.arange(float(shape[0] * shape[1])).reshape(*shape) + 1
    E.div(y, y[:, -1:], out=y)
    assert y[:, -1].tolist() == [1.0] * shape[0]


def test_scaling_by_the_own_diagonal_in_place():
    x = E.arange(1.0, 10.0).reshape(3, 3)
    x.mul_(x.diagonal().unsqueeze(0))  # x[2, 1] was 8 * 25 (the scaled diagonal entry)
    assert x.tolist() == [[1.0, 10.0, 27.0], [4.0, 25.0, 54.0], [7.0, 40.0, 81.0]]
    z = E.arange(1.0, 10.0).reshape(3, 3)
    z.t().add_(z.diagonal())  # a transposed output and its own diagonal
    assert z.tolist() == [[2.0, 3.0, 4.0], [9.0, 10.0, 11.0], [16.0, 17.0, 18.0]]


def test_same_elements_and_disjoint_views_need_no_copy_and_dense_overlaps_are_refused():
    x = E.arange(6.0)
    x.mul_(x)
    assert x.tolist() == [0.0, 1.0, 4.0, 9.0, 16.0, 25.0]
    y = E.arange(6.0)
    y[:3].add_(y[3:])  # the same storage, disjoint elements
    assert y.tolist() == [3.0, 5.0, 7.0, 3.0, 4.0, 5.0]
    with pytest.raises(RuntimeError, match="add: unsupported operation: some elements of the "
                                           "input tensor and the written-to tensor refer to a "
                                           "single memory location"):
        y[1:].add_(y[:-1])


def test_torch_gets_the_diagonal_scaling_wrong():
    torch = pytest.importorskip("torch")
    x = torch.arange(1.0, 10.0).reshape(3, 3)
    x.mul_(x.diagonal().unsqueeze(0))
    assert x[2, 1].item() == 200.0  # (the true value is 40: ember's)


# ---- cat's out= in the same storage as its inputs ------------------------------------------------


def test_cat_into_another_part_of_the_inputs_storage():
    x = E.arange(6.0)
    E.cat([x[:2], x[:2]], out=x[2:6])  # was refused: the same storage, no shared element
    assert x.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    y = E.arange(6.0).reshape(3, 2)
    E.stack([y[0], y[0]], out=y[1:3])
    assert y.tolist() == [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]


def test_cat_into_elements_it_reads_is_still_refused():
    y = E.arange(6.0).reshape(3, 2)
    with pytest.raises(RuntimeError, match=r"cat\(\): unsupported operation: some elements of "
                                           r"the input tensor and the written-to tensor"):
        E.stack([y[0], y[1]], out=y[1:3])
    assert y.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    z = E.arange(6.0)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        E.cat([z[:2], z[:2]], out=z[2:4])  # another shape: resizing would move the storage


def test_torch_writes_cat_into_the_same_storage_too():
    torch = pytest.importorskip("torch")
    x = torch.arange(6.0)
    torch.cat([x[:2], x[:2]], out=x[2:6])
    assert x.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


# ---- GradScaler settings -------------------------------------------------------------------------


@pytest.mark.parametrize("kw, what", [
    ({"init_scale": 0.0}, r"the scale must be a positive finite number, got 0.0"),
    ({"init_scale": float("nan")}, r"the scale must be a positive finite number, got nan"),
    ({"init_scale": -8.0}, r"the scale must be a positive finite number, got -8.0"),
    ({"growth_factor": float("inf")}, r"growth_factor must be a finite number > 1, got inf"),
    ({"growth_factor": float("nan")}, r"growth_factor must be a finite number > 1, got nan"),
    ({"backoff_factor": float("nan")}, r"backoff_factor must be in \(0, 1\), got nan"),
])
def test_grad_scaler_settings_that_would_skip_every_step_are_refused(kw, what):
    with pytest.raises(ValueError, match=rf"GradScaler: {what}"):
        E.amp.GradScaler("cpu", **kw)


def test_grad_scaler_load_state_dict_checks_everything_before_applying():
    sc = E.amp.GradScaler("cpu", init_scale=8.0)
    good = sc.state_dict()
    for bad, what in [({"scale": 0.0}, "the scale must be a positive finite number"),
                      ({"scale": float("inf")}, "the scale must be a positive finite number"),
                      ({"_growth_tracker": -1}, "_growth_tracker must be an int >= 0")]:
        with pytest.raises(ValueError, match=f"GradScaler.load_state_dict: {what}"):
            sc.load_state_dict({**good, **bad})
        assert sc.get_scale() == 8.0
    partial = {k: v for k, v in good.items() if k != "backoff_factor"}
    with pytest.raises(KeyError, match=r"lacks \['backoff_factor'\]"):
        sc.load_state_dict({**partial, "scale": 64.0})
    assert sc.get_scale() == 8.0  # was 64 with the KeyError
    sc.load_state_dict({**good, "scale": 32.0})
    assert sc.get_scale() == 32.0


def test_a_valid_grad_scaler_still_scales_and_steps():
    sc = E.amp.GradScaler("cpu", init_scale=4.0, growth_interval=1)
    w = E.nn.Parameter(E.ones(2))
    opt = E.optim.SGD([w], lr=0.5)
    sc.scale((w * 3).sum()).backward()
    assert w.grad.tolist() == [12.0, 12.0]
    sc.step(opt)
    sc.update()
    assert w.tolist() == [-0.5, -0.5] and sc.get_scale() == 8.0


# ---- byte-swapped NumPy arrays -------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["from_numpy", "tensor", "as_tensor"])
@pytest.mark.parametrize("dt", [">f4", ">i4", ">f8", ">c8"])
def test_a_byte_swapped_array_is_a_value_error_about_byte_order(fn, dt):
    np = pytest.importorskip("numpy")
    a = np.array([1, 2], dtype=dt)
    with pytest.raises(ValueError, match=r"its byte order is not the native one; convert it "
                                         r"first"):
        getattr(E, fn)(a)  # was a TypeError
    # the conversion the message suggests works
    assert getattr(E, fn)(a.astype(a.dtype.newbyteorder("="))).tolist() == [1, 2]


def test_unsupported_dtypes_are_still_a_type_error_naming_what_is_supported():
    np = pytest.importorskip("numpy")
    with pytest.raises(TypeError, match=r"float64, float32, float16, complex64, complex128, "
                                        r"int64, int32, int16, int8, uint64, uint32, uint16, "
                                        r"uint8, and bool"):
        E.from_numpy(np.array([1, 2], dtype=object))
    assert E.from_numpy(np.array([1], dtype=">i1")).tolist() == [1]  # one byte: no order


def test_torch_refuses_byte_swapped_arrays_with_a_value_error():
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match="byte order"):
        torch.from_numpy(np.array([1.0], dtype=">f4"))
