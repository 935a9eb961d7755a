"""Hostile input, round 5: read-only memory and saving onto files that are not regular files.

Read-only memory: a tensor made from a non-writable NumPy array (``np.memmap(mode='r')``, an
array with ``writeable=False``, ``np.frombuffer`` of ``bytes``) shares that memory. PyTorch warns
at ``from_numpy`` and then lets every in-place op write into it: on a read-only mapping the
process dies of a segfault, elsewhere the write silently changes memory NumPy promised would not
change (a ``bytes`` object, a broadcast array). Ember marks such a storage read-only: every
in-place write (in-place ops, ``out=``, item assignment, optimizer steps, ``.numpy()`` of it)
raises a RuntimeError naming the op, before anything is written; reads, views, metadata changes
(``transpose_``, ``unsqueeze_``, ``set_``) and copies (``clone``) still work. These tests need
the engine built from this branch (the flag is StorageImpl::read_only, checked by
TensorImpl::check_writable); the crashing cases run in child processes.

Saving: ``ember.save`` writes a path through a temporary file renamed over it (so a failed save
keeps the previous checkpoint, round 3). Renaming over a device or a FIFO (``/dev/null``, a pipe,
``/proc/self/fd/1``) replaced the device node with a regular file -- and for a FIFO the reader
waited forever. Those are now written to in place, as PyTorch does.

Other round-5 cases: packages/nn/tests/test_nn_hostile_round5.py (lr schedulers),
packages/data/tests/test_data_hostile_round5.py (collate, timeout),
packages/distributed/tests/test_distributed_hostile_round5.py (destroyed groups, timeouts).
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import warnings

import ember
import numpy as np
import pytest


def _child(code: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter: a crash or hang there fails the test, not pytest."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


# ---- read-only memory --------------------------------------------------------------------------

# (the op the error must name, the statement); `t` is a float32 tensor of 64 elements over a
# read-only memory map, `m` its 8 x 8 view, `i` an index tensor.
_WRITES = [
    ("add", "t.add_(1)"),
    ("copy_", "t.copy_(E.ones(64))"),
    ("copy_", "t[::2] = 0"),
    ("masked_fill_", "t[E.ones(64, dtype=E.bool)] = 1"),
    ("fill_", "t.fill_(1)"),
    ("zero_", "t.zero_()"),
    ("uniform_", "t.uniform_()"),
    ("normal_", "E.nn.init.normal_(m)"),
    ("index_put_", "t.index_put_((i,), E.ones(2))"),
    ("scatter", "t.scatter_(0, i, E.ones(2))"),
    ("index_add", "t.index_add_(0, i, E.ones(2))"),
    ("tril", "m.tril_()"),
    ("add", "E.add(E.ones(64), 1, out=t)"),
    ("mm", "E.mm(E.ones(8, 8), E.ones(8, 8), out=m)"),
    ("cumsum", "E.cumsum(E.ones(64), 0, out=t)"),
    ("sort", "E.sort(E.ones(64), out=(t, E.empty(0, dtype=E.int64)))"),
    ("sum", "E.sum(m, 0, out=t[:8])"),
    ("relu", "E.nn.functional.relu(t, inplace=True)"),
    ("add", "E._foreach_add_([t], 1.0)"),
    ("_fused_adam_", "p = E.nn.Parameter(t); p.grad = E.ones(64); "
                     "E.optim.Adam([p], fused=True).step()"),
    ("_fused_sgd_", "p = E.nn.Parameter(t); p.grad = E.ones(64); "
                    "E.optim.SGD([p], lr=0.1).step()"),
]


@pytest.fixture(scope="module")
def read_only_outcomes(tmp_path_factory):
    path = tmp_path_factory.mktemp("ro") / "data.bin"
    np.arange(64, dtype=np.float32).tofile(path)
    r = _child(f"""
        import json, warnings
        import numpy as np
        import ember as E
        warnings.simplefilter("ignore")
        out = []
        for code in {[c for _, c in _WRITES]!r}:
            t = E.from_numpy(np.memmap({str(path)!r}, dtype=np.float32, mode="r"))
            m, i = t.view(8, 8), E.tensor([0, 1])
            try:
                exec(code)
                out.append(["ok", ""])
            except Exception as e:
                out.append([type(e).__name__, str(e)])
        out.append(np.fromfile({str(path)!r}, dtype=np.float32).tolist())
        print(json.dumps(out))
    """, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]  # a segfault before: rc -11
    *outcomes, data = json.loads(r.stdout.strip().splitlines()[-1])
    assert data == list(range(64))  # nothing was written
    return dict(zip([c for _, c in _WRITES], outcomes))


@pytest.mark.parametrize("op, code", _WRITES, ids=[c for _, c in _WRITES])
def test_writes_into_a_read_only_memory_map_raise_naming_the_op(read_only_outcomes, op, code):
    exc, msg = read_only_outcomes[code]
    assert exc == "RuntimeError", (exc, msg)
    assert msg.startswith(f"{op}: can't write into a tensor whose memory is read-only"), msg
    assert "clone()" in msg


def test_a_read_only_memory_map_still_reads_views_and_copies(tmp_path):
    path = tmp_path / "data.bin"
    np.arange(12, dtype=np.float64).tofile(path)
    a = np.memmap(path, dtype=np.float64, mode="r").reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not writable" (once per process)
        t = ember.from_numpy(a)
    assert t.sum().item() == 66.0 and (t @ ember.ones(4, dtype=ember.float64)).tolist() == [
        6.0, 22.0, 38.0]
    assert np.shares_memory(t.numpy(), a)
    assert not t.numpy().flags.writeable  # NumPy refuses writes through it too
    with pytest.raises(ValueError, match="read-only"):
        t.numpy()[0, 0] = 1.0
    # metadata changes write nothing: allowed, as on any tensor
    t.transpose_(0, 1)
    t.unsqueeze_(0)
    t.squeeze_(0)
    assert t.shape == (4, 3) and t[1, 0].item() == 1.0
    c = t.clone()
    c.add_(1)  # a copy is ordinary memory
    assert c[1, 0].item() == 2.0 and t[1, 0].item() == 1.0
    x = t.detach().requires_grad_()  # autograd reads it
    (x * 2).sum().backward()
    assert x.grad.tolist() == [[2.0] * 3] * 4
    t.set_(ember.zeros(2, dtype=ember.float64))  # another storage: writable again
    t.add_(1)
    assert t.tolist() == [1.0, 1.0]


def test_a_non_writable_array_warns_and_keeps_its_data():
    a = np.arange(4.0)
    a.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ember.from_numpy(a)
        u = ember.as_tensor(a)
    for x in (t, u, t[1:], t.view(2, 2)):
        with pytest.raises(RuntimeError, match="memory is read-only"):
            x.mul_(0)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert ember.tensor(a).add_(1).tolist() == [1.0, 2.0, 3.0, 4.0]  # tensor() copies
    b = np.arange(4.0)  # writable arrays are shared and written as before
    ember.from_numpy(b).add_(1)
    assert b.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_a_broadcast_array_cannot_be_written_through_its_aliases():
    # np.broadcast_to is read-only because its elements alias: a write would change them all
    a = np.broadcast_to(np.arange(3.0), (4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ember.from_numpy(a)
    with pytest.raises(RuntimeError, match="copy_: can.t write"):
        t[0, 0] = 5.0
    assert a[3].tolist() == [0.0, 1.0, 2.0]


def test_a_read_only_tensor_is_not_exported_through_dlpack():
    # DLPack has no read-only flag: the consumer would write into it (NumPy refuses the same)
    a = np.arange(3.0)
    a.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ember.from_numpy(a)
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        np.from_dlpack(t)
    assert np.from_dlpack(t.clone()).tolist() == [0.0, 1.0, 2.0]


def test_frombuffer_of_bytes_is_read_only_and_of_bytearray_writable():
    data = bytes(range(8))
    with pytest.warns(UserWarning, match="not writable"):
        t = ember.frombuffer(data, dtype=ember.uint8)
    with pytest.raises(RuntimeError, match="fill_: can't write"):
        t.fill_(0)
    assert data == bytes(range(8))  # an immutable bytes object stays unchanged
    buf = bytearray(8)
    ember.frombuffer(buf, dtype=ember.uint8).fill_(7)
    assert buf == bytearray([7] * 8)


def test_the_warning_no_longer_promises_undefined_behaviour():
    r = _child("""
        import warnings, numpy as np, ember
        a = np.zeros(2); a.flags.writeable = False
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ember.from_numpy(a)
        print(str(w[0].message))
    """)
    assert r.returncode == 0, r.stderr
    assert "not writable" in r.stdout and "raises an error" in r.stdout
    assert "undefined behavior" not in r.stdout


# ---- saving onto a device or a pipe ----------------------------------------------------------

def _read_fifo(path, got):
    with open(path, "rb") as f:
        got.append(f.read())


@pytest.mark.parametrize("fmt", ["ember", "safetensors"])
@pytest.mark.parametrize("through_link", [False, True])
def test_save_to_a_fifo_writes_through_it(tmp_path, fmt, through_link):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    target = fifo
    if through_link:
        target = tmp_path / "link"
        os.symlink(fifo, target)
    got: list = []
    reader = threading.Thread(target=_read_fifo, args=(fifo, got), daemon=True)
    reader.start()
    ember.save({"w": ember.arange(6.0)}, target, format=fmt)
    reader.join(30)
    assert not reader.is_alive()  # before: the FIFO was replaced and the reader never woke
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, not a regular file
    assert through_link == os.path.islink(tmp_path / "link")
    assert sorted(os.listdir(tmp_path)) == sorted(["pipe"] + (["link"] if through_link else []))
    if fmt == "ember":
        assert ember.load(io.BytesIO(got[0]))["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    else:
        assert got[0][8:].startswith(b"{")  # a safetensors header


def test_save_to_a_fifo_whose_reader_leaves_raises(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def early_exit():
        with open(fifo, "rb") as f:
            f.read(1)

    reader = threading.Thread(target=early_exit, daemon=True)
    reader.start()
    with pytest.raises(BrokenPipeError):
        ember.save({"w": ember.zeros(1 << 20)}, fifo)
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_save_over_a_regular_file_is_still_atomic(tmp_path):
    path = tmp_path / "ckpt.pt"
    ember.save({"a": ember.ones(2)}, path)
    before = path.stat().st_ino
    ember.save({"a": ember.zeros(2)}, path)
    assert path.stat().st_ino != before  # renamed over, not rewritten in place
    assert ember.load(path)["a"].tolist() == [0.0, 0.0]
    assert os.listdir(tmp_path) == ["ckpt.pt"]
