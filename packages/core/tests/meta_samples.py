"""Sample calls for every op declared in packages/core/ops/*.yaml, for the tests that run one op
on several devices (test_op_devices.py: each device against the CPU).

Most calls come from the op's schema: each argument gets a value from its type and name, tried
over a few "worlds" of shapes until the CPU accepts the call. Ops whose arguments must agree in
ways a schema does not say (convolutions, losses with class targets, scatter indices ...) have
hand-written samples in SAMPLES. `calls(op)` yields (function, args, kwargs) with CPU tensors.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import ember

ROOT = Path(__file__).resolve().parents[3]


def load_ops() -> list[Any]:
    sys.path.insert(0, str(ROOT / "tools" / "codegen"))
    try:
        from schema import load_ops as load
    finally:
        sys.path.pop(0)
    return [op for ops in load(ROOT / "packages/core/ops").values() for op in ops]


def randn(*shape, dtype=None):
    t = ember.randn(*shape)
    return t if dtype is None else t.to(dtype)


def idx(*shape, high=2):
    return ember.randint(0, high, shape)


# A world: the shape of "self" and of other tensor arguments, and small ints for dims.
WORLDS = [
    {"self": (2, 3), "other": (2, 3), "dim": 1, "int": 1},
    {"self": (2, 3), "other": (3,), "dim": 0, "int": 2},
    {"self": (3,), "other": (3,), "dim": 0, "int": 1},
    {"self": (2, 3, 4), "other": (2, 3, 4), "dim": 1, "int": 1},
    {"self": (2, 3, 4, 5), "other": (2, 3, 4, 5), "dim": 1, "int": 1},
    {"self": (2, 3), "other": (3, 2), "dim": 1, "int": 1},
    {"self": (2, 2, 3), "other": (2, 3, 2), "dim": 1, "int": 1},
    {"self": (), "other": (), "dim": 0, "int": 1},
]

INDEX_NAMES = {"index", "indices", "target_indices", "offsets", "repeats", "lengths"}
BOOL_NAMES = {"mask", "condition"}


def _tensor(name: str, world: dict, first: bool) -> Any:
    shape = world["self"] if first else world["other"]
    if name in BOOL_NAMES:
        return ember.randn(*world["self"]) > 0
    if name in INDEX_NAMES:
        return idx(*shape)
    if name == "boundaries" or name == "sorted_sequence":
        return ember.arange(4.0)
    return randn(*shape)


def _value(arg: Any, world: dict, first_tensor: bool) -> Any:
    t, name = arg.type, arg.name
    if t in ("Tensor", "Tensor|Scalar"):
        return _tensor(name, world, first_tensor)
    if t in ("Tensor[]",):
        return [randn(*world["self"]), randn(*world["self"])]
    if t == "Tensor?[]":
        return [idx(2)]
    if t == "Scalar":
        return 0.5 if name not in ("min", "max") else (0.0 if name == "min" else 1.0)
    if t == "int":
        if "dim" in name or name in ("axis", "axis0", "axis1", "source", "destination"):
            return world["dim"]
        return world["int"]
    if t == "int[]" or t == "int[]...":
        if "dim" in name or name in ("dims", "axis", "source", "destination"):
            return [world["dim"]]
        if name in ("size", "shape", "sizes"):
            return list(world["self"]) or [1]
        return [world["int"]]
    if t == "float":
        return 0.5
    if t == "bool":
        return False
    if t == "ScalarType":
        return ember.float64
    if t == "str":
        return "mean"
    raise KeyError(t)


def schema_calls(op: Any) -> Iterator[tuple[Callable, list, dict]]:
    """Calls built from the schema: required arguments only, in each world."""
    fn = getattr(ember._C, op.name, None)
    method = fn is None
    for world in WORLDS:
        args, kwargs = [], {}
        first = True
        ok = True
        for a in op.args:
            if a.default is not None or a.type.endswith("?"):
                continue
            try:
                v = _value(a, world, first)
            except KeyError:
                ok = False
                break
            if a.type.startswith("Tensor"):
                first = False
            if a.type == "int[]...":
                args.extend(v)
            elif a.kwonly:
                kwargs[a.name] = v
            else:
                args.append(v)
        if not ok:
            continue
        if method:
            if not args or not isinstance(args[0], ember.Tensor):
                continue
            self_, rest = args[0], args[1:]
            m = getattr(type(self_), op.name, None)
            if m is None:
                continue
            yield (lambda s, *r, _m=m, **k: _m(s, *r, **k)), [self_, *rest], kwargs
        else:
            yield fn, args, kwargs


def _conv(nd):
    return lambda: [randn(2, 3, *([6] * nd)), randn(4, 3, *([3] * nd))]


# Hand-written samples: op name -> callables returning (args, kwargs) for ember._C.<op> or the
# Tensor method of that name.
SAMPLES: dict[str, list[Callable[[], tuple[list, dict]]]] = {
    "conv1d": [lambda: (_conv(1)(), {})],
    "conv2d": [lambda: (_conv(2)(), {"padding": [1, 1]})],
    "conv3d": [lambda: (_conv(3)(), {})],
    "conv_transpose1d": [lambda: ([randn(2, 3, 5), randn(3, 4, 3)], {})],
    "conv_transpose2d": [lambda: ([randn(2, 3, 5, 5), randn(3, 4, 3, 3)], {})],
    "embedding": [lambda: ([randn(5, 4), idx(2, 3, high=5)], {})],
    "embedding_bag": [lambda: ([randn(5, 4), idx(2, 3, high=5)], {})],
    "nll_loss": [lambda: ([randn(4, 3).log_softmax(1), idx(4, high=3)], {})],
    "cross_entropy": [lambda: ([randn(4, 3), idx(4, high=3)], {})],
    "_cross_entropy_loss": [lambda: ([randn(4, 3), idx(4, high=3)], {})],
    "binary_cross_entropy": [lambda: ([ember.rand(4, 3), ember.rand(4, 3)], {})],
    "gather": [lambda: ([randn(3, 4), 1, idx(3, 2, high=4)], {})],
    "scatter": [lambda: ([randn(3, 4), 1, idx(3, 2, high=4), randn(3, 2)], {})],
    "scatter_add": [lambda: ([randn(3, 4), 1, idx(3, 2, high=4), randn(3, 2)], {})],
    "scatter_reduce": [lambda: ([randn(3, 4), 1, idx(3, 2, high=4), randn(3, 2), "sum"], {})],
    "index_select": [lambda: ([randn(3, 4), 1, idx(2, high=4)], {})],
    "index_add": [lambda: ([randn(3, 4), 1, idx(2, high=4), randn(3, 2)], {})],
    "index_copy": [lambda: ([randn(3, 4), 1, ember.tensor([0, 2]), randn(3, 2)], {})],
    "index_fill": [lambda: ([randn(3, 4), 1, idx(2, high=4), 1.5], {})],
    "index_put": [lambda: ([randn(3, 4), [idx(2, high=3)], randn(2, 4)], {})],
    "masked_fill": [lambda: ([randn(3, 4), ember.randn(3, 4) > 0, 1.5], {})],
    "masked_scatter": [lambda: ([randn(3, 4), ember.randn(3, 4) > 0, randn(3, 4)], {})],
    "take": [lambda: ([randn(3, 4), idx(5, high=12)], {})],
    "take_along_dim": [lambda: ([randn(3, 4), idx(3, 2, high=4)], {"dim": 1})],
    "mm": [lambda: ([randn(2, 3), randn(3, 4)], {})],
    "bmm": [lambda: ([randn(2, 2, 3), randn(2, 3, 4)], {})],
    "addmm": [lambda: ([randn(2, 4), randn(2, 3), randn(3, 4)], {})],
    "baddbmm": [lambda: ([randn(2, 2, 4), randn(2, 2, 3), randn(2, 3, 4)], {})],
    "addbmm": [lambda: ([randn(2, 4), randn(2, 2, 3), randn(2, 3, 4)], {})],
    "addmv": [lambda: ([randn(2), randn(2, 3), randn(3)], {})],
    "addr": [lambda: ([randn(2, 3), randn(2), randn(3)], {})],
    "mv": [lambda: ([randn(2, 3), randn(3)], {})],
    "linear": [lambda: ([randn(2, 3), randn(4, 3), randn(4)], {})],
    "bilinear": [lambda: ([randn(2, 3), randn(2, 5), randn(4, 3, 5)], {})],
    "layer_norm": [lambda: ([randn(2, 3, 4), [4]], {})],
    "group_norm": [lambda: ([randn(2, 4, 3), 2], {})],
    "batch_norm": [lambda: ([randn(4, 3, 5), randn(3), ember.rand(3) + 0.5, None, None, True,
                             0.1, 1e-5], {})],
    "rms_norm": [lambda: ([randn(2, 3, 4), [4]], {})],
    "max_pool1d": [lambda: ([randn(2, 3, 8), [2]], {})],
    "max_pool2d": [lambda: ([randn(2, 3, 8, 8), [2, 2]], {})],
    "max_pool1d_with_indices": [lambda: ([randn(2, 3, 8), [2]], {})],
    "max_pool2d_with_indices": [lambda: ([randn(2, 3, 8, 8), [2, 2]], {})],
    "avg_pool1d": [lambda: ([randn(2, 3, 8), [2]], {})],
    "avg_pool2d": [lambda: ([randn(2, 3, 8, 8), [2, 2]], {})],
    "adaptive_avg_pool1d": [lambda: ([randn(2, 3, 8), [3]], {})],
    "adaptive_avg_pool2d": [lambda: ([randn(2, 3, 8, 8), [3, 3]], {})],
    "adaptive_max_pool1d": [lambda: ([randn(2, 3, 8), [3]], {})],
    "adaptive_max_pool2d": [lambda: ([randn(2, 3, 8, 8), [3, 3]], {})],
    "pad": [lambda: ([randn(2, 3, 4), [1, 2]], {})],
    "scaled_dot_product_attention": [lambda: ([randn(2, 4, 5, 8), randn(2, 4, 6, 8),
                                               randn(2, 4, 6, 8)], {})],
    "ctc_loss": [lambda: ([randn(6, 2, 4).log_softmax(2), ember.tensor([[1, 2], [1, 1]]),
                           ember.tensor([6, 5]), ember.tensor([2, 2])], {})],
    "multinomial": [lambda: ([ember.rand(3, 4) + 0.1, 2], {})],
    "cumsum": [lambda: ([randn(3, 4), 1], {})],
    "einsum": [lambda: (["ij,jk->ik", [randn(2, 3), randn(3, 4)]], {})],
    "tensordot": [lambda: ([randn(2, 3), randn(3, 4), 1], {})],
    "kron": [lambda: ([randn(2, 3), randn(2, 2)], {})],
    "repeat_interleave": [lambda: ([randn(3), 2], {})],
    "unflatten": [lambda: ([randn(2, 6), 1, [2, 3]], {})],
    "view": [lambda: ([randn(2, 6), [3, 4]], {})],
    "reshape": [lambda: ([randn(2, 6), [3, 4]], {})],
    "expand": [lambda: ([randn(3, 1), [3, 4]], {})],
    "broadcast_to": [lambda: ([randn(3, 1), [3, 4]], {})],
    "as_strided": [lambda: ([randn(3, 4), [2, 2], [1, 2]], {})],
    "narrow": [lambda: ([randn(3, 4), 1, 1, 2], {})],
    "unfold": [lambda: ([randn(3, 8), 1, 3, 2], {})],
    "diagonal": [lambda: ([randn(3, 4)], {})],
    "tril": [lambda: ([randn(3, 4)], {})],
    "triu": [lambda: ([randn(3, 4)], {})],
    "topk": [lambda: ([randn(3, 5), 2], {})],
    "kthvalue": [lambda: ([randn(3, 5), 2], {})],
    "searchsorted": [lambda: ([ember.arange(5.0), randn(3)], {})],
    "bucketize": [lambda: ([randn(3), ember.arange(5.0)], {})],
    "histc": [lambda: ([randn(10)], {"bins": 4, "min": -1, "max": 1})],
    "lerp": [lambda: ([randn(3), randn(3), 0.5], {})],
    "clamp": [lambda: ([randn(3, 4), -0.5, 0.5], {})],
    "clip": [lambda: ([randn(3, 4), -0.5, 0.5], {})],
    "constant_pad_nd": [lambda: ([randn(3, 4), [1, 2]], {})],
    "convolution": [lambda: ([*_conv(2)(), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1], {})],
    "index_fill_": [lambda: ([randn(3, 4), 1, idx(2, high=4), 1.5], {})],
    "instance_norm": [lambda: ([randn(2, 3, 5), None, None, None, None, True, 0.1, 1e-5], {})],
    "native_batch_norm": [lambda: ([randn(4, 3, 5), randn(3), randn(3), None, None, True, 0.1,
                                    1e-5], {})],
    "native_batch_norm_backward": [lambda: ([randn(4, 3, 5), randn(4, 3, 5), randn(3), randn(3),
                                             ember.rand(3), True, True, True, True], {})],
    "native_group_norm": [lambda: ([randn(2, 4, 3), 2, randn(4), randn(4), 1e-5], {})],
    "native_group_norm_backward": [lambda: ([randn(2, 4, 3), randn(2, 4, 3), 2, randn(2, 2),
                                             ember.rand(2, 2), randn(4), True, True, True], {})],
    "native_layer_norm": [lambda: ([randn(2, 3, 4), [4], randn(4), randn(4), 1e-5], {})],
    "native_layer_norm_backward": [lambda: ([randn(2, 3, 4), randn(2, 3, 4), [4], randn(2, 3, 1),
                                             ember.rand(2, 3, 1), randn(4), True, True, True], {})],
    "_fused_rms_norm": [lambda: ([randn(2, 3, 4), [4], randn(4), 1e-5], {})],
    "_fused_rms_norm_backward": [lambda: ([randn(2, 3, 4), randn(2, 3, 4), [4], ember.rand(2, 3, 1),
                                           randn(4), True, True], {})],
    "nll_loss_backward": [lambda: ([ember.tensor(1.0), randn(4, 3), idx(4, high=3), None, "mean",
                                    -100], {})],
    "_cross_entropy_loss_backward": [lambda: ([ember.tensor(1.0), randn(4, 3), idx(4, high=3), None,
                                               randn(4), "mean", -100, 0.0], {})],
    "embedding_dense_backward": [lambda: ([randn(2, 3, 4), idx(2, 3, high=5), 5, -1, False], {})],
    "_activation_derivative": [lambda: ([randn(3, 4), "gelu", 1], {})],
    "_avg_pool": [lambda: ([randn(2, 3, 8, 8), [2, 2], [2, 2], [0, 0], False, True, None], {})],
    "_avg_pool_backward": [lambda: ([randn(2, 3, 4, 4), [2, 3, 8, 8], [2, 2], [2, 2], [0, 0], False,
                                     True, None], {})],
    "_max_pool": [lambda: ([randn(2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False], {})],
    "_max_pool_backward": [lambda: ([randn(2, 3, 4, 4), idx(2, 3, 4, 4, high=64), [2, 3, 8, 8], 2],
                                    {})],
    "_adaptive_avg_pool_backward": [lambda: ([randn(2, 3, 3, 3), [2, 3, 8, 8], [3, 3]], {})],
    "_pad_backward": [lambda: ([randn(2, 3, 7), [2, 3, 4], [1, 2], "reflect"], {})],
    "upsample_bicubic2d": [lambda: ([randn(1, 2, 4, 4), [8, 6], False], {})],
    "upsample_bilinear2d": [lambda: ([randn(1, 2, 4, 4), [8, 6], False], {})],
    "upsample_nearest2d": [lambda: ([randn(1, 2, 4, 4), [8, 6]], {})],
    "_upsample_nearest_exact2d": [lambda: ([randn(1, 2, 4, 4), [8, 6]], {})],
    "upsample_nearest3d": [lambda: ([randn(1, 2, 2, 4, 4), [4, 8, 6]], {})],
    "_upsample_nearest_exact3d": [lambda: ([randn(1, 2, 2, 4, 4), [4, 8, 6]], {})],
    "upsample_trilinear3d": [lambda: ([randn(1, 2, 2, 4, 4), [4, 8, 6], False], {})],
    "upsample_bicubic2d_backward": [lambda: ([randn(1, 2, 8, 6), [8, 6], [1, 2, 4, 4], False], {})],
    "upsample_bilinear2d_backward": [lambda: ([randn(1, 2, 8, 6), [8, 6], [1, 2, 4, 4], False],
                                              {})],
    "upsample_nearest2d_backward": [lambda: ([randn(1, 2, 8, 6), [8, 6], [1, 2, 4, 4]], {})],
    "_upsample_nearest_exact2d_backward": [lambda: ([randn(1, 2, 8, 6), [8, 6], [1, 2, 4, 4]], {})],
    "upsample_nearest3d_backward": [lambda: ([randn(1, 2, 4, 8, 6), [4, 8, 6], [1, 2, 2, 4, 4]],
                                             {})],
    "_upsample_nearest_exact3d_backward": [lambda: ([randn(1, 2, 4, 8, 6), [4, 8, 6],
                                                     [1, 2, 2, 4, 4]], {})],
    "upsample_trilinear3d_backward": [lambda: ([randn(1, 2, 4, 8, 6), [4, 8, 6], [1, 2, 2, 4, 4],
                                                False], {})],
    "upsample_linear1d_backward": [lambda: ([randn(1, 2, 8), [8], [1, 2, 4], False], {})],
    "upsample_nearest1d_backward": [lambda: ([randn(1, 2, 8), [8], [1, 2, 4]], {})],
    "_upsample_nearest_exact1d_backward": [lambda: ([randn(1, 2, 8), [8], [1, 2, 4]], {})],
    "_lstm_layer": [lambda: ([[randn(3, 2, 20), randn(2, 5), randn(2, 5), randn(20, 5)]], {})],
    "_gru_layer": [lambda: ([[randn(3, 2, 15), randn(2, 5), randn(15, 5), randn(15)]], {})],
    "_lstm_layer_backward": [lambda: _rnn_backward("lstm")],
    "_gru_layer_backward": [lambda: _rnn_backward("gru")],
    "bincount": [lambda: ([idx(6, high=4)], {})],
}
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
              "bitwise_right_shift"):
    SAMPLES[_name] = [lambda: ([idx(2, 3, high=8), idx(2, 3, high=3)], {})]
SAMPLES["bitwise_not"] = [lambda: ([idx(2, 3, high=8)], {})]


def _rnn_backward(kind: str) -> tuple[list, dict]:
    if kind == "lstm":
        h0, c0, w = randn(2, 5), randn(2, 5), randn(20, 5)
        out, hn, cn, ws = ember._C._lstm_layer([randn(3, 2, 20), h0, c0, w])
        return [randn(3, 2, 5), randn(2, 5), randn(2, 5), h0, c0, w, out, ws, False], {}
    h0, w = randn(2, 5), randn(15, 5)
    out, hn, ws = ember._C._gru_layer([randn(3, 2, 15), h0, w, randn(15)])
    return [randn(3, 2, 5), randn(2, 5), h0, w, out, ws, False], {}
