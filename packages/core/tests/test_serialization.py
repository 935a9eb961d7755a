"""ember.save / ember.load (the no-pickle checkpoint format) and safetensors: bit-exact round
trips of every dtype and layout, shared storages, memory mapping, and clear errors for truncated,
corrupt or foreign files (cross-checked with Hugging Face's safetensors when installed)."""

import collections
import io
import json
import pickle
import struct
import zlib

import ember
import numpy as np
import pytest
from core_helpers import torch
from ember.serialization import CheckpointError, safetensors_metadata

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


def sample(dtype: str, shape=(3, 4), seed=0) -> ember.Tensor:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return ember.tensor(rng.integers(0, 2, shape).astype(bool))
    if dtype in ("uint8", "int8", "int16", "int32", "int64"):
        info = np.iinfo(dtype)
        return ember.tensor(rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True))
    vals = rng.standard_normal(shape) * 100
    return ember.tensor(vals.astype(np.float32)).to(getattr(ember, dtype))


def raw(t: ember.Tensor) -> bytes:
    return ember._C._tensor_to_bytes(t)


def same(a: ember.Tensor, b: ember.Tensor) -> None:
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    assert raw(a) == raw(b)  # bit-exact, NaN payloads and signed zeros included


def roundtrip(obj, **kw):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_roundtrips_bit_exactly(dtype, tmp_path):
    t = sample(dtype)
    same(roundtrip(t), t)
    path = tmp_path / "t.ckpt"
    ember.save({"t": t}, path)
    for mm in (False, True):
        same(ember.load(path, mmap=mm)["t"], t)


def test_special_float_bits_survive():
    bits = np.array([0x7FC00001, 0xFFC00000, 0x80000000, 0x7F800000, 0xFF800000, 1],
                    dtype=np.uint32)
    t = ember.tensor(bits.view(np.float32))
    same(roundtrip(t), t)


def test_layouts_views_and_shared_storage():
    base = ember.arange(24.0).reshape(4, 6)
    obj = {
        "base": base,
        "t": base.t(),
        "strided": base[1:, ::2],
        "row": base[2],
        "scalar": ember.tensor(3.5),
        "empty": ember.empty(0, 3),
        "empty1": ember.zeros(0, dtype=ember.int64),
    }
    out = roundtrip(obj)
    for k, v in obj.items():
        same(out[k].contiguous(), v.contiguous())
        assert tuple(out[k].stride()) == tuple(v.stride()) or v.numel() == 0
    # the views still share the base's memory: written once, seen everywhere
    assert out["t"].untyped_storage_ptr() == out["base"].untyped_storage_ptr()
    out["base"][2, 2] = -1.0
    assert out["strided"][1, 1].item() == -1.0 and out["row"][2].item() == -1.0
    assert out["t"][2, 2].item() == -1.0
    assert out["scalar"].dim() == 0


def test_storage_written_once():
    big = ember.zeros(1 << 16)
    one = io.BytesIO()
    ember.save({"a": big}, one)
    many = io.BytesIO()
    ember.save({"a": big, "b": big[10:], "c": big.view(256, 256).t(), "d": big}, many)
    assert len(many.getvalue()) - len(one.getvalue()) < 1024


def test_nested_python_values_keep_their_types():
    obj = collections.OrderedDict(
        state={0: {"step": 7, "exp_avg": ember.ones(2)}, 1: {}},
        param_groups=[{"lr": 1e-3, "betas": (0.9, 0.999), "amsgrad": False, "params": [0, 1],
                       "name": "groupé ✓", "eps": float("inf"), "nan": float("nan"),
                       "none": None, "big": 2 ** 80, "blob": b"\x00\xff", "dt": ember.bfloat16,
                       "dev": ember.device("cpu")}],
    )
    out = roundtrip(obj)
    assert type(out) is collections.OrderedDict and list(out) == ["state", "param_groups"]
    assert list(out["state"]) == [0, 1] and out["state"][0]["step"] == 7
    g = out["param_groups"][0]
    assert g["betas"] == (0.9, 0.999) and isinstance(g["betas"], tuple)
    assert g["amsgrad"] is False and g["none"] is None and g["big"] == 2 ** 80
    assert g["name"] == "groupé ✓" and g["eps"] == float("inf") and g["nan"] != g["nan"]
    assert g["blob"] == b"\x00\xff" and g["dt"] is ember.bfloat16 and g["dev"] == ember.device("cpu")
    assert isinstance(g["params"], list) and isinstance(g["lr"], float)


def test_requires_grad_and_parameters():
    w = ember.ones(3, requires_grad=True)
    out = roundtrip({"w": w, "d": w.detach()})
    assert out["w"].requires_grad and out["w"].is_leaf and not out["d"].requires_grad
    nn = pytest.importorskip("ember.nn")
    if not hasattr(nn, "Parameter"):
        pytest.skip("ember.nn has no Parameter yet")
    p = nn.Parameter(ember.ones(2))
    got = roundtrip([p])[0]
    assert isinstance(got, nn.Parameter) and got.requires_grad


def test_unsupported_objects_are_refused_with_their_path():
    # objects without a native form are pickled (test_compat_serialization.py); what cannot be
    # pickled is refused with its path
    with pytest.raises((pickle.PicklingError, AttributeError), match="the function at obj\\['a'\\]\\[1\\]"):
        ember.save({"a": [1, lambda: 0]}, io.BytesIO())
    loop = []
    loop.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        ember.save(loop, io.BytesIO())
    with pytest.raises(ValueError, match="unknown format 'zip'"):
        ember.save({}, io.BytesIO(), format="zip")


def test_map_location(tmp_path):
    p = tmp_path / "x.ckpt"
    ember.save({"x": ember.ones(2)}, p)
    assert ember.load(p, map_location="cpu")["x"].tolist() == [1.0, 1.0]
    assert ember.load(p, map_location=ember.device("cpu"))["x"].tolist() == [1.0, 1.0]
    assert ember.load(p, map_location=lambda t, loc: t * 2)["x"].tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="unknown map_location device 'tpu'"):
        ember.load(p, map_location="tpu")


def test_mmap_true_maps_storages(tmp_path):
    p = tmp_path / "big.ckpt"
    big = ember.arange(1 << 19, dtype=ember.float32)  # 2 MiB
    small = ember.arange(10.0)
    ember.save({"big": big, "small": small}, p)
    before = ember.memory_allocated()
    out = ember.load(p, mmap=True)
    # mapped from the file, not copied into the allocator
    assert ember.memory_allocated() - before < (1 << 20)
    same(out["big"], big)
    same(out["small"], small)
    out["big"][0] = 42.0  # copy-on-write: writable, and the file is unchanged
    assert ember.load(p, mmap=False)["big"][0].item() == 0.0
    before = ember.memory_allocated()
    eager = ember.load(p, mmap=False)
    assert ember.memory_allocated() - before >= (1 << 21)
    same(eager["big"], big)
    del out, eager


def _rewrite_header(data: bytes, edit) -> bytes:
    magic, version, _, hoff, hlen = struct.unpack("<8sIIQQ", data[:32])
    header = json.loads(data[hoff:hoff + hlen])
    edit(header)
    # "__DEEP__" stands for an array nested h["depth"] levels deep (json.dumps cannot write it)
    deep = "[" * header.pop("depth", 0) + "1" + "]" * 2000
    new = json.dumps(header).replace('"__DEEP__"', deep[:deep.index("1") + 1 + deep.index("1")])
    new = new.encode()
    pre = struct.pack("<8sIIQQ", magic, version, zlib.crc32(new), hoff, len(new))
    return pre + data[32:hoff] + new


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    ember.save(obj, buf)
    return buf.getvalue()


def _load_bytes(data: bytes, tmp_path, name="bad.ckpt", **kw):
    p = tmp_path / name
    p.write_bytes(data)
    return ember.load(p, **kw)


def test_truncated_and_corrupt_files_raise_clear_errors(tmp_path):
    data = _saved({"w": ember.arange(100.0), "b": [1, 2]})
    for cut in (0, 5, 20, 63, 64, 300, len(data) - 10, len(data) - 1):
        with pytest.raises(CheckpointError, match="bad.ckpt: (truncated|not an ember)"):
            _load_bytes(data[:cut], tmp_path)
    flipped = bytearray(data)
    flipped[100] ^= 0x10  # inside w's data
    with pytest.raises(CheckpointError, match="storage 0 .* checksum"):
        _load_bytes(bytes(flipped), tmp_path, mmap=False)
    flipped = bytearray(data)
    flipped[-5] ^= 0x01  # inside the header
    with pytest.raises(CheckpointError, match="header's checksum"):
        _load_bytes(bytes(flipped), tmp_path)
    with pytest.raises(CheckpointError, match="not an ember checkpoint"):
        _load_bytes(b"hello world, this is not a checkpoint at all" * 3, tmp_path)
    with pytest.raises(CheckpointError, match="pickle-based"):
        _load_bytes(b"PK\x03\x04" + b"\0" * 100, tmp_path)


def test_crafted_headers_cannot_reach_outside_their_storage(tmp_path):
    data = _saved({"w": ember.arange(10.0)})

    def stretch(h):
        h["tensors"][0]["shape"] = [1000]

    with pytest.raises(CheckpointError, match="tensor 0 .* reaches element 999 of a storage of 10"):
        _load_bytes(_rewrite_header(data, stretch), tmp_path)

    def far(h):
        h["storages"][0]["nbytes"] = 10 ** 9

    with pytest.raises(CheckpointError, match="storage 0 needs bytes"):
        _load_bytes(_rewrite_header(data, far), tmp_path)

    def negative(h):
        h["tensors"][0]["stride"] = [-1]

    with pytest.raises(CheckpointError, match="tensor 0 entry is malformed"):
        _load_bytes(_rewrite_header(data, negative), tmp_path)

    def unknown(h):
        h["root"] = {"$pickle": "os.system"}

    with pytest.raises(CheckpointError, match="pickle index 'os.system' out of range"):
        _load_bytes(_rewrite_header(data, unknown), tmp_path)

    for depth, msg in ((300, "nested more than 200"), (5000, "nested too deeply")):
        def deep(h):
            h["root"] = "__DEEP__"
            h["depth"] = depth

        with pytest.raises(CheckpointError, match=msg):
            _load_bytes(_rewrite_header(data, deep), tmp_path)


def test_random_corruption_never_crashes(tmp_path):
    data = _saved({"a": ember.arange(40.0).reshape(5, 8).t(), "b": (ember.ones(3, dtype=ember.int8),
                                                                     "x", 1.5)})
    rng = np.random.default_rng(0)
    p = tmp_path / "fuzz.ckpt"
    for _ in range(150):
        buf = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            buf[int(rng.integers(0, len(buf)))] = int(rng.integers(0, 256))
        if rng.random() < 0.3:
            buf = buf[:int(rng.integers(0, len(buf)))]
        p.write_bytes(bytes(buf))
        try:
            ember.load(p, mmap=False)
        except CheckpointError:
            pass


# ---- safetensors -------------------------------------------------------------------------------


def test_safetensors_roundtrip_every_dtype_and_metadata(tmp_path):
    tensors = {f"t_{d}": sample(d, seed=i) for i, d in enumerate(DTYPES)}
    tensors["scalar"] = ember.tensor(2.5)
    tensors["empty"] = ember.empty(0, 4)
    tensors["noncontig"] = ember.arange(12.0).reshape(3, 4).t()
    p = tmp_path / "m.safetensors"
    ember.save_safetensors(tensors, p, metadata={"format": "pt", "note": "ünï"})
    for mm in (None, True, False):
        out = ember.load_safetensors(p, mmap=mm)
        assert set(out) == set(tensors)
        for k, v in tensors.items():
            same(out[k], v.contiguous())
    assert safetensors_metadata(p) == {"format": "pt", "note": "ünï"}
    # the header: u64 length, then JSON padded to 8 bytes
    blob = p.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0
    header = json.loads(blob[8:8 + n])
    assert header["t_float32"]["dtype"] == "F32" and header["t_bfloat16"]["dtype"] == "BF16"
    assert header["scalar"]["shape"] == [] and header["__metadata__"]["format"] == "pt"


def test_save_with_format_and_load_autodetects(tmp_path):
    p = tmp_path / "w.safetensors"
    ember.save({"w": ember.ones(2, 2)}, p, format="safetensors")
    same(ember.load(p)["w"], ember.ones(2, 2))
    with pytest.raises(TypeError, match="value of 'w' is a list"):
        ember.save({"w": [1]}, p, format="safetensors")
    with pytest.raises(TypeError, match="expected a dict"):
        ember.save_safetensors([ember.ones(1)], p)
    with pytest.raises(TypeError, match="metadata must be a dict of str -> str"):
        ember.save_safetensors({"w": ember.ones(1)}, p, metadata={"a": 1})


def _st_file(header: dict, data: bytes) -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def test_safetensors_corrupt_files(tmp_path):
    p = tmp_path / "bad.safetensors"
    good = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    cases = [
        (_st_file(good, b"\0" * 4), "truncated safetensors file"),
        (_st_file(good, b"\0" * 12), "4 bytes after the last tensor"),
        (_st_file({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
         "needs 12 bytes"),
        (_st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}}, b"\0" * 8),
         "previous tensor ends at 4"),
        (_st_file({"a": {"dtype": "F8_E8M0", "shape": [1], "data_offsets": [0, 1]}}, b"\0"),
         "dtype 'F8_E8M0'"),
        (_st_file({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4),
         "malformed"),
        (struct.pack("<Q", 10 ** 12) + b"{}", "implausibly large"),
        (struct.pack("<Q", 50) + b"{" + b"\0" * 10, "truncated"),
        (struct.pack("<Q", 4) + b"{xx}", "not valid JSON"),
    ]
    for blob, msg in cases:
        p.write_bytes(blob)
        with pytest.raises(CheckpointError, match=f"bad.safetensors: .*{msg}"):
            ember.load_safetensors(p)


def test_load_safetensors_honours_map_location(tmp_path):
    # safetensors records no device: its tensors are taken as saved at "cpu"
    p = tmp_path / "w.safetensors"
    ember.save_safetensors({"w": ember.arange(4.0)}, p)
    for ml in ("meta", ember.device("meta"), {"cpu": "meta"}):
        t = ember.load(p, map_location=ml)["w"]
        assert t.device.type == "meta" and t.shape == (4,)
    assert ember.load(p, map_location={"cuda:0": "meta"})["w"].device.type == "cpu"
    seen = []
    out = ember.load(p, map_location=lambda t, loc: seen.append(loc) or t * 2)
    assert seen == ["cpu"] and out["w"].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert ember.load(p, map_location=lambda t, loc: None)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="unknown map_location device 'xpu'"):
        ember.load(p, map_location="xpu")


def test_cross_check_with_huggingface_safetensors(tmp_path):
    st_numpy = pytest.importorskip("safetensors.numpy")
    p = tmp_path / "e.safetensors"
    tensors = {d: sample(d, seed=3) for d in DTYPES if d != "bfloat16"}  # NumPy lacks bfloat16
    ember.save_safetensors(tensors, p, metadata={"k": "v"})
    theirs = st_numpy.load_file(str(p))
    for k, v in tensors.items():
        assert theirs[k].tobytes() == raw(v) and theirs[k].shape == tuple(v.shape)
    q = tmp_path / "n.safetensors"
    st_numpy.save_file({k: v.numpy() for k, v in tensors.items()}, str(q), metadata={"a": "b"})
    mine = ember.load_safetensors(q)
    for k, v in tensors.items():
        same(mine[k], v)
    assert safetensors_metadata(q) == {"a": "b"}
    if torch is not None:
        st_torch = pytest.importorskip("safetensors.torch")
        bf = sample("bfloat16", seed=4)
        ember.save_safetensors({"bf": bf}, p)
        tb = st_torch.load_file(str(p))["bf"]
        assert tb.dtype == torch.bfloat16 and tb.view(torch.int16).numpy().tobytes() == raw(bf)
        st_torch.save_file({"bf": tb}, str(q))
        same(ember.load_safetensors(q)["bf"], bf)
