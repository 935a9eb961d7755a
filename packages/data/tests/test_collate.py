"""default_collate / default_convert over every supported sample type."""

from __future__ import annotations

import collections
import dataclasses

import ember
import pytest
from ember.data import default_collate, default_convert

np = pytest.importorskip("numpy")

Point = collections.namedtuple("Point", ["x", "y"])


@dataclasses.dataclass
class Sample:
    image: object
    label: int
    name: str


def test_tensors_are_stacked():
    b = default_collate([ember.ones(2, 3), ember.zeros(2, 3)])
    assert b.shape == (2, 2, 3) and b.dtype == ember.float32
    assert b[0].tolist() == [[1.0] * 3] * 2
    s = default_collate([ember.tensor(1), ember.tensor(2)])  # 0-d
    assert s.tolist() == [1, 2]
    nc = ember.arange(6.0).reshape(2, 3).t()  # non-contiguous samples
    assert default_collate([nc, nc]).tolist() == [nc.tolist(), nc.tolist()]


def test_numbers_strings_bytes():
    f = default_collate([1.5, 2.5])
    assert f.dtype == ember.float64 and f.tolist() == [1.5, 2.5]
    i = default_collate([1, 2, 3])
    assert i.dtype == ember.int64 and i.tolist() == [1, 2, 3]
    assert default_collate([True, False]).dtype == ember.bool
    assert default_collate(["a", "b"]) == ["a", "b"]
    assert default_collate([b"a", b"b"]) == [b"a", b"b"]


def test_numpy_arrays_and_scalars():
    b = default_collate([np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32)])
    assert isinstance(b, ember.Tensor) and b.dtype == ember.float32 and b.shape == (2, 2, 2)
    mixed = default_collate([np.ones(2, np.float32), np.ones(2, np.float64)])
    assert mixed.shape == (2, 2)
    s = default_collate([np.float64(1.0), np.float64(2.0)])
    assert s.dtype == ember.float64 and s.tolist() == [1.0, 2.0]
    s = default_collate([np.int32(1), np.int32(2)])
    assert s.dtype == ember.int32
    with pytest.raises(TypeError, match="numpy array of dtype"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_containers_nested():
    batch = [
        {"img": ember.ones(2), "meta": {"id": 1, "tags": ["a", "b"]}, "pt": Point(1.0, 2)},
        {"img": ember.zeros(2), "meta": {"id": 2, "tags": ["c", "d"]}, "pt": Point(3.0, 4)},
    ]
    out = default_collate(batch)
    assert out["img"].shape == (2, 2)
    assert out["meta"]["id"].tolist() == [1, 2]
    assert out["meta"]["tags"] == [("a", "c"), ("b", "d")]  # as PyTorch: tuples of strings
    assert isinstance(out["pt"], Point) and out["pt"].x.tolist() == [1.0, 3.0]
    t = default_collate([(ember.ones(1), 1), (ember.ones(1), 2)])
    assert isinstance(t, list) and t[1].tolist() == [1, 2]  # tuples collate to lists (PyTorch)
    lst = default_collate([[1, 2], [3, 4]])
    assert [x.tolist() for x in lst] == [[1, 3], [2, 4]]


def test_dataclasses():
    out = default_collate([Sample(ember.ones(3), 1, "a"), Sample(ember.zeros(3), 2, "b")])
    assert isinstance(out, Sample)
    assert out.image.shape == (2, 3) and out.label.tolist() == [1, 2] and out.name == ["a", "b"]


def test_shape_mismatch_names_field_and_shapes():
    batch = [{"image": ember.ones(3, 32, 32)}, {"image": ember.ones(3, 32, 32)},
             {"image": ember.ones(3, 28, 32)}]
    with pytest.raises(RuntimeError, match=r"sample\['image'\].*\[3, 32, 32\].*sample 2.*"
                                           r"\[3, 28, 32\]"):
        default_collate(batch)
    with pytest.raises(RuntimeError, match=r"sample\[0\]"):
        default_collate([(np.ones(2), 1), (np.ones(3), 2)])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(KeyError, match="missing"):
        default_collate([{"a": 1}, {"b": 2}])


def test_unsupported_type():
    with pytest.raises(TypeError, match="found"):
        default_collate([object(), object()])


def test_matches_torch_structure():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as tcollate

    batch = [{"a": 1, "b": [1.0, "x"], "c": (np.ones(2, np.float32), 3)} for _ in range(3)]
    ours, theirs = default_collate(batch), tcollate(batch)

    def same(o, t):
        if isinstance(t, torch.Tensor):
            assert isinstance(o, ember.Tensor) and o.tolist() == t.tolist()
            assert repr(o.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        elif isinstance(t, dict):
            assert type(o) is type(t) and o.keys() == t.keys()
            for k in t:
                same(o[k], t[k])
        elif isinstance(t, (list, tuple)):
            assert type(o) is type(t) and len(o) == len(t)
            for a, b in zip(o, t):
                same(a, b)
        else:
            assert o == t

    same(ours, theirs)


def test_default_convert():
    assert isinstance(default_convert(np.ones(2)), ember.Tensor)
    assert isinstance(default_convert(np.float32(1.0)), ember.Tensor)
    out = default_convert({"a": np.ones(1), "b": (np.zeros(1), "s"), "p": Point(np.ones(1), 2)})
    assert isinstance(out["a"], ember.Tensor)
    assert isinstance(out["b"], list) and out["b"][1] == "s"
    assert isinstance(out["p"], Point) and out["p"].y == 2
    assert default_convert(3) == 3 and default_convert("s") == "s"
    strs = np.array(["a"])
    assert default_convert(strs) is strs


# ---- tensors of other frameworks (torchvision's transforms give torch tensors) ----------------
def test_foreign_tensors_collate_to_ember_tensors():
    torch = pytest.importorskip("torch")
    from ember.data import DataLoader

    class Images:
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return {"img": torch.full((3, 2, 2), float(i)), "label": i,
                    "w": torch.ones(2, requires_grad=True)}

    for workers in (0, 2):
        batch = next(iter(DataLoader(Images(), batch_size=2, num_workers=workers)))
        assert all(isinstance(v, ember.Tensor) for v in batch.values())
        assert batch["img"].shape == (2, 3, 2, 2) and batch["img"][1].sum().item() == 12.0
        assert batch["label"].tolist() == [0, 1] and not batch["w"].requires_grad
    one = default_convert(torch.arange(3))
    assert isinstance(one, ember.Tensor) and one.dtype == ember.int64 and one.tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match=r"sample 0 has shape \[2\] but sample 1 has shape"):
        default_collate([torch.ones(2), torch.ones(3)])

