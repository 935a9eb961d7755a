"""Hostile input, round 12 (data part): ``default_collate`` of NumPy scalars of mixed dtypes.

A batch of NumPy scalars was collated through ``np.array(batch)``, which promotes the NumPy way:
``[np.float32(1.5), np.int64(2)]`` became a float64 tensor, where PyTorch's collate (and
``ember.tensor`` of the same list) gives float32, so a model in float32 got a float64 batch
("expected scalar type Float but found Double" in the next layer). The scalars now go through
``ember.as_tensor``, which promotes as tensors do.

The rest of round 12: packages/core/tests/test_hostile_input_round12.py and
packages/nn/tests/test_nn_hostile_round12.py.
"""

import ember as E
import pytest
from ember.utils.data import default_collate

np = pytest.importorskip("numpy")


@pytest.mark.parametrize("batch, dtype, values", [
    ([np.float32(1.5), np.int64(2)], "float32", [1.5, 2.0]),  # was float64
    ([np.float16(1.5), np.int32(2)], "float16", [1.5, 2.0]),
    ([np.uint8(1), np.int8(-2)], "int16", [1, -2]),
    ([np.float64(1.5), np.float64(2)], "float64", [1.5, 2.0]),
    ([np.int32(1), np.int32(2)], "int32", [1, 2]),
    ([np.bool_(True), np.bool_(False)], "bool", [True, False]),
])
def test_numpy_scalars_collate_with_tensor_promotion(batch, dtype, values):
    out = default_collate(batch)
    assert out.dtype == getattr(E, dtype) and out.tolist() == values


def test_numpy_scalars_in_a_loader_keep_float32():
    data = [{"x": np.float32(i), "i": np.int64(i)} for i in range(4)]
    batches = list(E.utils.data.DataLoader(data, batch_size=2))
    assert batches[0]["x"].dtype == E.float32 and batches[0]["i"].dtype == E.int64
    assert batches[1]["x"].tolist() == [2.0, 3.0]


def test_torch_collates_the_same_dtypes():
    pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate

    for batch in ([np.float32(1.5), np.int64(2)], [np.uint8(1), np.int8(-2)]):
        assert str(default_collate(batch).dtype).split(".")[-1] == \
            str(torch_collate(batch).dtype).split(".")[-1]
