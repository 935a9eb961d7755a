"""Hostile input, round 9 (core part): complex seed gradients and checkpoint recomputation.

``backward(gradient)`` / ``autograd.grad(grad_outputs=)`` / ``autograd.functional.vjp`` /
``func.vjp`` with a complex seed for a real output cast the seed to the output's dtype, which
dropped its imaginary part: ``grad(x * 2, x, [1+1j, 1j])`` gave ``[2., 0.]`` with no error. A
real seed for a complex output was widened the same way. PyTorch refuses both ("For complex
Tensors, both grad_output and output are required to have the same dtype"); ember now does too,
with PyTorch's words. Real seeds of another floating dtype are still cast, as in PyTorch.

A checkpointed function (``use_reentrant=False``) whose recomputation saves tensors of another
shape or dtype than its forward (a function that depends on outside state) failed with a
message about an internal saved-tensor hook named 'unpack' (shape) or went on with float64
activations for float32 ones (dtype). It is now ``CheckpointError`` (a RuntimeError, PyTorch's
class) listing each tensor's saved and recomputed shape, dtype and device;
``determinism_check="none"`` skips the check, as in PyTorch.

``ember.save`` wrote every subclass of dict, list, tuple and bytes as its base class, so what
came back was silently another type, even with ``weights_only=False``: a ``defaultdict`` lost its
default factory (a missing key became a KeyError), a ``Counter`` and a program's own dict or list
class became plain ones, ``ember.Size`` a tuple without ``numel()``, a ``bytearray`` immutable
bytes and ``ember.return_types.max`` a bare tuple. Only the plain containers are tree nodes now;
subclasses are pickled and load as themselves: ``Size``, ``Counter``, ``bytearray`` and ember's
return types also under ``weights_only=True``; a ``defaultdict`` or a program's class, as in
PyTorch, only with ``weights_only=False`` or once allow-listed (UnpicklingError naming it
otherwise). ``get_unsafe_globals_in_checkpoint`` missed a global whose module name a later
pickle of the same file reused from an earlier one (a Counter then a defaultdict: only
'builtins.int' was listed, not 'collections.defaultdict'); it now reads the stream with the one
memo the loader uses. A PyTorch checkpoint holding a ``collections.Counter`` (which
``torch.load`` reads with ``weights_only=True``) was refused by ember's reader of that format;
it now loads.

``autograd.grad(..., is_grads_batched=True)`` with grad_outputs whose non-batch dims do not match
the outputs was refused as an ordinary shape mismatch ("Mismatch in shape: grad_output[0] has a
shape of ()"), which does not say that the first dim was taken as the batch; it is now PyTorch's
message, which does, checked before any backward runs.

A backward run from inside another backward (a custom Function's backward or a hook calling
``.backward()``), nested about 2000 deep with the recursion limit raised, overflowed the C stack:
a segfault. Past 1000 levels it is now a RuntimeError that says why (PyTorch moves deep
reentrant backwards to other threads; ember runs them on the caller's stack).

A custom Function whose backward returned a meta tensor for a CPU input failed while copying it
("Cannot copy out of meta tensor; no data!", a NotImplementedError naming neither the Function
nor the devices); it is now PyTorch's RuntimeError "Function XBackward returned an invalid
gradient at index 0 - expected device cpu but got meta".

The rest of round 9: packages/nn/tests/test_nn_hostile_round9.py and
packages/data/tests/test_data_hostile_round9.py.
"""

import ember as E
import pytest
from ember.utils.checkpoint import CheckpointError, checkpoint

COMPLEX_SEED = r"For complex Tensors, both grad_output and output are required to have the same dtype"


# ---- complex seeds ---------------------------------------------------------------------------


def test_a_complex_seed_for_a_real_output_is_refused():
    x = E.ones(2, requires_grad=True)
    seed = E.tensor([1 + 1j, 1j], dtype=E.complex64)
    msg = (COMPLEX_SEED + r"\. Mismatch in dtype: grad_output\[0\] has a dtype of ember.complex64 "
           r"and output\[0\] has a dtype of ember.float32\.")
    with pytest.raises(RuntimeError, match=msg):
        E.autograd.grad(x * 2, x, seed)
    with pytest.raises(RuntimeError, match=msg):
        (x * 2).backward(seed)
    assert x.grad is None  # nothing was accumulated
    with pytest.raises(RuntimeError, match=COMPLEX_SEED):
        E.autograd.functional.vjp(lambda t: t * 2, E.ones(2), seed)
    with pytest.raises(RuntimeError, match=COMPLEX_SEED):
        E.func.vjp(lambda t: t * 2, E.ones(2))[1](seed)


def test_a_real_seed_for_a_complex_output_is_refused():
    z = E.ones(2, dtype=E.complex64, requires_grad=True)
    with pytest.raises(RuntimeError, match=COMPLEX_SEED + r".*grad_output\[0\] has a dtype of "
                                           r"ember.float32 and output\[0\] has a dtype of "
                                           r"ember.complex64"):
        (z * 2).backward(E.ones(2))
    # the second output is the one named
    x = E.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"grad_output\[1\] has a dtype of ember.complex128"):
        E.autograd.grad([x * 2, x * 3], x, [E.ones(2), E.ones(2, dtype=E.complex128)])


def test_seeds_of_the_same_kind_still_work():
    # another floating dtype is cast to the output's
    x = E.ones(2, requires_grad=True)
    (x * 2).backward(E.tensor([1.0, 3.0], dtype=E.float64))
    assert x.grad.dtype == E.float32 and x.grad.tolist() == [2.0, 6.0]
    # another complex dtype too
    z = E.ones(2, dtype=E.complex64, requires_grad=True)
    (z * 2).backward(E.tensor([1 + 1j, 2j], dtype=E.complex128))
    assert z.grad.dtype == E.complex64 and z.grad.tolist() == [2 + 2j, 4j]
    # a complex output of a real input, seeded with a complex gradient: the real part flows back
    r = E.ones(2, requires_grad=True)
    (r * (1 + 2j)).backward(E.tensor([1 + 0j, 1j]))
    # d/dr of Re(conj(g) * r * (1+2j)): g=1 -> 1, g=1j -> 2
    assert r.grad.tolist() == [1.0, 2.0]


def test_torch_refuses_the_complex_seed_the_same_way():
    torch = pytest.importorskip("torch")
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=COMPLEX_SEED):
        torch.autograd.grad(x * 2, x, torch.tensor([1 + 1j, 1j]))
    z = torch.ones(2, dtype=torch.complex64, requires_grad=True)
    with pytest.raises(RuntimeError, match=COMPLEX_SEED):
        (z * 2).backward(torch.ones(2))
    r = torch.ones(2, requires_grad=True)
    (r * (1 + 2j)).backward(torch.tensor([1 + 0j, 1j]))
    assert r.grad.tolist() == [1.0, 2.0]


# ---- checkpoint recomputation ----------------------------------------------------------------


def _growing(calls):
    def f(t):
        calls[0] += 1
        return (t * 2)[: calls[0] + 1].exp()
    return f


def _widening(calls):
    def f(t):
        calls[0] += 1
        return (t.double() if calls[0] > 1 else t).exp().float()
    return f


def test_a_recomputation_of_another_shape_is_a_checkpoint_error():
    x = E.ones(5, requires_grad=True)
    y = checkpoint(_growing([0]), x, use_reentrant=False)
    with pytest.raises(CheckpointError, match=(
            r"checkpoint: recomputing 'f' gave tensors with different metadata than during the "
            r"forward pass .*\ntensor at position 0:\nsaved metadata: \{'shape': \(2,\), 'dtype': "
            r"ember.float32, 'device': device\(type='cpu'\)\}\nrecomputed metadata: \{'shape': "
            r"\(3,\)")):
        y.sum().backward()
    assert issubclass(CheckpointError, RuntimeError)
    assert x.grad is None


def test_a_recomputation_of_another_dtype_is_a_checkpoint_error():
    x = E.ones(3, requires_grad=True)
    y = checkpoint(_widening([0]), x, use_reentrant=False)
    with pytest.raises(CheckpointError, match=r"saved metadata: \{'shape': \(3,\), 'dtype': "
                                              r"ember.float32.*\nrecomputed metadata: \{'shape': "
                                              r"\(3,\), 'dtype': ember.float64"):
        y.sum().backward()


def test_determinism_check_none_skips_the_metadata_check():
    x = E.ones(3, requires_grad=True)
    y = checkpoint(_widening([0]), x, use_reentrant=False, determinism_check="none")
    y.sum().backward()  # the float64 activations are used; the values are the same
    assert x.grad.tolist() == pytest.approx([2.718281828] * 3)


def test_deterministic_checkpoints_still_match_the_plain_gradient():
    x = E.tensor([0.5, -1.0, 2.0], dtype=E.float64, requires_grad=True)
    y = checkpoint(lambda t: (t.exp() * t.sin()).sum(), x, use_reentrant=False)
    y.backward(retain_graph=True)
    g1 = x.grad.clone()
    y.backward()  # recomputed again after the first backward used the activations up
    expect = [(v.exp() * (v.sin() + v.cos())).item() for v in x.detach()]
    assert g1.tolist() == pytest.approx(expect, rel=1e-12)
    assert x.grad.tolist() == pytest.approx([2 * e for e in expect], rel=1e-12)
    # numerically
    eps = 1e-6
    for i in range(3):
        d = E.zeros(3, dtype=E.float64)
        d[i] = eps
        f = lambda v: (v.exp() * v.sin()).sum().item()  # noqa: E731
        num = (f(x.detach() + d) - f(x.detach() - d)) / (2 * eps)
        assert g1[i].item() == pytest.approx(num, rel=1e-6)


def test_torch_raises_its_checkpoint_error_for_both():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import CheckpointError as TorchCheckpointError
    for make, x in ((_growing, torch.ones(5, requires_grad=True)),
                    (_widening, torch.ones(3, requires_grad=True))):
        y = torch.utils.checkpoint.checkpoint(make([0]), x, use_reentrant=False)
        with pytest.raises(TorchCheckpointError, match="different metadata than during the "
                                                        "forward pass"):
            y.sum().backward()


# ---- container subclasses keep their type -----------------------------------------------------


class Config(dict):
    """A program's own dict class."""

    def lr(self):
        return self["lr"]


class History(list):
    pass


def _round_trip(obj, **kw):
    import io

    buf = io.BytesIO()
    E.save(obj, buf)
    buf.seek(0)
    return E.load(buf, **kw)


def test_safe_container_subclasses_load_as_themselves():
    import collections

    w = E.arange(4.0)
    back = _round_trip({"size": w.shape, "counts": collections.Counter("aab"),
                        "raw": bytearray(b"\x01\x02"), "best": w.max(0), "w": w,
                        "od": collections.OrderedDict(a=1), "t": (1, 2), "b": b"xy"})
    assert type(back["size"]) is E.Size and back["size"] == (4,) and back["size"].numel() == 4
    assert type(back["counts"]) is collections.Counter and back["counts"] == {"a": 2, "b": 1}
    assert back["counts"]["zzz"] == 0  # still a Counter
    assert type(back["raw"]) is bytearray and back["raw"] == bytearray(b"\x01\x02")
    assert type(back["best"]) is E.return_types.max
    assert back["best"].values.item() == 3.0 and back["best"].indices.item() == 3
    assert type(back["od"]) is collections.OrderedDict and type(back["t"]) is tuple
    assert type(back["b"]) is bytes and back["b"] == b"xy"


def test_other_subclasses_load_as_themselves_once_trusted():
    import collections
    import pickle

    base = E.arange(6.0)
    obj = {"dd": collections.defaultdict(list, a=[1]), "cfg": Config(lr=0.5, w=base[2:4]),
           "hist": History([base, 3]), "base": base}
    with pytest.raises(pickle.UnpicklingError, match="collections.defaultdict"):
        _round_trip(obj)  # weights_only=True refuses code it would have to run, as PyTorch
    back = _round_trip(obj, weights_only=False)
    assert type(back["dd"]) is collections.defaultdict and back["dd"]["new"] == []
    assert type(back["cfg"]) is Config and back["cfg"].lr() == 0.5
    assert type(back["hist"]) is History and back["hist"][1] == 3
    # the tensors inside still share storage with the ones outside
    back["base"][2] = 100.0
    assert back["cfg"]["w"].tolist() == [100.0, 3.0]
    assert back["hist"][0][2].item() == 100.0
    # allow-listed, the program's classes load under weights_only too
    with E.serialization.safe_globals([Config, History]):
        back = _round_trip({"cfg": Config(lr=0.25), "hist": History([1])})
    assert type(back["cfg"]) is Config and back["cfg"].lr() == 0.25
    assert type(back["hist"]) is History


def test_unsafe_globals_are_all_listed_when_pickles_share_a_module_name():
    import collections
    import io
    import pickle

    buf = io.BytesIO()
    E.save({"c": collections.Counter("a"), "d": collections.defaultdict(int),
            "cfg": Config(lr=1.0)}, buf)
    found = E.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(buf.getvalue()))
    assert found == ["collections.defaultdict", "builtins.int", f"{__name__}.Config"]
    # and loading names the first of them
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="collections.defaultdict"):
        E.load(buf)


def test_torch_keeps_the_same_types():
    torch = pytest.importorskip("torch")
    import collections
    import io
    import pickle

    buf = io.BytesIO()
    torch.save({"size": torch.Size([4]), "counts": collections.Counter("aab"),
                "raw": bytearray(b"x")}, buf)
    buf.seek(0)
    back = torch.load(buf)
    assert type(back["size"]) is torch.Size and type(back["counts"]) is collections.Counter
    assert type(back["raw"]) is bytearray
    buf = io.BytesIO()
    torch.save({"dd": collections.defaultdict(list, a=[1]), "cfg": Config(lr=0.5)}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    assert type(back["dd"]) is collections.defaultdict and type(back["cfg"]) is Config


def test_a_torch_checkpoint_with_a_counter_loads(tmp_path):
    import collections

    path = tmp_path / "c.pt"
    E.save({"c": collections.Counter("aab"), "s": E.Size([2, 3]), "w": E.ones(2)}, path,
           format="torch")
    back = E.load(path)
    assert type(back["c"]) is collections.Counter and back["c"] == {"a": 2, "b": 1}
    assert type(back["s"]) is E.Size and back["w"].tolist() == [1.0, 1.0]
    torch = pytest.importorskip("torch")
    tback = torch.load(path)
    assert type(tback["c"]) is collections.Counter and tback["c"] == {"a": 2, "b": 1}
    torch.save({"c": collections.Counter("xyy")}, tmp_path / "t.pt")
    assert E.load(tmp_path / "t.pt")["c"] == {"x": 1, "y": 2}


def test_batched_grad_outputs_of_the_wrong_shape_say_they_are_batched():
    x = E.ones(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=r"If `is_grads_batched=True`, we interpret the first "
                                           r"dimension of each grad_output as the batch dimension"
                                           r".*grad_output\[0\] has a shape of \(\) and "
                                           r"output\[0\] has a shape of \(3,\)"):
        E.autograd.grad(y, x, E.ones(3), is_grads_batched=True, retain_graph=True)
    with pytest.raises(RuntimeError, match=r"grad_output\[1\] has a shape of \(4,\) and "
                                           r"output\[1\] has a shape of \(3,\)"):
        E.autograd.grad([y, y * 3], x, [E.ones(2, 3), E.ones(2, 4)], is_grads_batched=True,
                        retain_graph=True)
    # the right shapes: one gradient per row of the batch
    g = E.autograd.grad(y, x, E.tensor([[1.0, 0, 0], [0, 5.0, 0]]), is_grads_batched=True)[0]
    assert g.tolist() == [[2.0, 0.0, 0.0], [0.0, 10.0, 0.0]]


def test_torch_says_the_same():
    torch = pytest.importorskip("torch")
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"If `is_grads_batched=True`, we interpret the first "
                                           r"dimension.*grad_output\[0\] has a shape of "
                                           r"torch.Size\(\[\]\)"):
        torch.autograd.grad(x * 2, x, torch.ones(3), is_grads_batched=True)


_REENTRANT = """
import sys
import ember
sys.setrecursionlimit(100000)


def make(n):
    class Nested(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 3

        @staticmethod
        def backward(ctx, g):
            if n > 0:
                with ember.enable_grad():
                    z = ember.ones(1, requires_grad=True)
                    make(n - 1).apply(z).sum().backward()
            return g * 3
    return Nested


x = ember.ones(1, requires_grad=True)
try:
    make(int(sys.argv[1])).apply(x).sum().backward()
    print("grad", x.grad.item())
except RuntimeError as e:
    print("refused", type(e).__name__, str(e)[:80])
x2 = ember.ones(2, requires_grad=True)
(x2 * 5).sum().backward()
print("after", x2.grad.tolist())
"""


@pytest.mark.parametrize("depth, expect", [
    (40, "grad 3.0"),
    (2500, "refused RuntimeError backward: reentrant backward calls (a backward run from a hook"),
])
def test_deeply_reentrant_backward_is_refused_instead_of_crashing(depth, expect):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _REENTRANT, str(depth)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]  # (was -11, a segfault, at 2500)
    lines = r.stdout.splitlines()
    assert lines[0].startswith(expect)
    assert lines[1] == "after [5.0, 5.0]"  # the engine still works afterwards


class _MetaGrad(E.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g * 2, g.to("meta")


def test_a_function_returning_a_meta_gradient_is_named():
    a = E.ones(2, requires_grad=True)
    b = E.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Function _MetaGradBackward returned an invalid "
                                           r"gradient at index 1 - expected device cpu but got "
                                           r"meta"):
        _MetaGrad.apply(a, b).sum().backward()
    # only b's gradient was wrong; on meta inputs a meta gradient is right
    am = E.ones(2, device="meta", requires_grad=True)
    bm = E.ones(2, device="meta", requires_grad=True)
    _MetaGrad.apply(am, bm).sum().backward()
    assert am.grad.device.type == "meta" and tuple(bm.grad.shape) == (2,)


def test_torch_names_the_meta_gradient_the_same_way():
    torch = pytest.importorskip("torch")

    class MetaGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g * 2, g.to("meta")

    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="returned an invalid gradient at index 1 - expected "
                                           "device cpu but got meta"):
        MetaGrad.apply(a, b).sum().backward()
