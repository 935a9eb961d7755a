"""Emulation of packages/core/csrc/cuda/tensor_ops.cu (_copy_from) and of the dtype conversion it
and reduce_utils.cuh's strided_copy (load_any / store_any) perform: try_memcpy's decision (same
dtype, not bool, not a host scalar, at most one dim of unit stride in both operands), and
convert<D, S> = from_op<D>(to_op<S>(x)) for every dtype pair, with the device's float -> integer
conversion (cvt.rzi: NaN -> 0, out of range saturates) and round-to-nearest-even to the 16-bit
floats. Compared with ember's CPU casts on in-range values; the out-of-range float -> integer
results, undefined in C++ and different between the devices, are listed, not compared.

    python3 tools/cuda_emulation/tensor_ops.py
"""

from __future__ import annotations

import sys

import numpy as np
from common import Report, ember, to_ember

DTS = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8,
       np.bool_]
EDT = {np.float32: ember.float32, np.float64: ember.float64, np.float16: ember.float16,
       np.int64: ember.int64, np.int32: ember.int32, np.int16: ember.int16, np.int8: ember.int8,
       np.uint8: ember.uint8, np.bool_: ember.bool}


def device_convert(x, S, D):
    """convert<D, S> on the device, elementwise."""
    S, D = np.dtype(S), np.dtype(D)
    v = x.astype(np.float32) if S == np.float16 else x  # to_op
    if D == np.bool_:
        return v != 0
    if D.kind == "f":
        if D == np.float16:
            return v.astype(np.float32).astype(np.float16)  # __float2half_rn(float(v))
        return v.astype(D)
    if S.kind == "f":  # cvt.rzi.sat: NaN -> 0, clamp to D's range, truncate toward zero
        info = np.iinfo(D)
        t = np.trunc(np.nan_to_num(v.astype(np.float64), nan=0.0, posinf=info.max, neginf=info.min))
        return np.clip(t, info.min, info.max).astype(D)
    return v.astype(np.int64).astype(D)  # integer -> integer: modulo 2^n, as C++


def try_memcpy(src_dtype, dst_dtype, is_scalar, shape, st_out, st_in, item):
    if src_dtype != dst_dtype or dst_dtype == np.bool_ or is_scalar:
        return False
    if len(shape) > 1:
        return False
    if len(shape) == 1 and (st_out[0] != item or st_in[0] != item):
        return False
    return True


def values(S):
    S = np.dtype(S)
    if S == np.bool_:
        return np.array([0, 1, 1, 0], dtype=np.bool_)
    if S.kind in "iu":
        info = np.iinfo(S)
        return np.array([0, 1, 2, 7, info.max, info.min, info.max - 1] + ([-1, -5, -128] if S.kind == "i" else [200]),
                        dtype=np.int64).clip(info.min, info.max).astype(S)
    return np.array([0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 1e-8, 65504.0, 65519.0, 65520.0, 3.0001,
                     np.nan, np.inf, -np.inf, 127.9, -1.0, 255.0, 100.0, -100.0], dtype=np.float64).astype(S)


def main():
    rep = Report("tensor_ops.cu copy/convert")
    undefined = []
    for S in DTS:
        xs = values(S)
        for D in DTS:
            want = to_ember(xs).to(EDT[D]).numpy()
            got = device_convert(xs, S, D)
            for x, g, w in zip(xs, got, want):
                in_range = True
                if np.dtype(S).kind == "f" and np.dtype(D).kind in "iu":
                    info = np.iinfo(D)
                    xf = float(x)
                    in_range = np.isfinite(xf) and info.min - 1 < xf < info.max + 1
                if not in_range:
                    if not (np.isnan(float(g)) and np.isnan(float(w))) and g != w:
                        undefined.append(f"{np.dtype(S).name} {x} -> {np.dtype(D).name}: device {g}, CPU {w}")
                    continue
                ok = (g == w) or (np.dtype(D).kind == "f" and np.isnan(g) and np.isnan(w))
                if ok and np.dtype(D).kind == "f" and g == 0:
                    ok = np.signbit(g) == np.signbit(w)
                rep.check(bool(ok), f"convert {np.dtype(S).name} {x} -> {np.dtype(D).name}: device {g}, CPU {w}")
    # try_memcpy's decision over plans: the byte copy only where an element loop would give the
    # same bytes
    for S in DTS:
        for D in DTS:
            item = np.dtype(D).itemsize
            for shape, so, si in (((), (), ()), ((10,), (item,), (item,)), ((10,), (item,), (0,)),
                                  ((10,), (2 * item,), (item,)), ((3, 4), (4 * item, item), (4 * item, item))):
                mem = try_memcpy(np.dtype(S), np.dtype(D), False, shape, so, si, item)
                if mem:
                    rep.check(S == D and S != np.bool_ and (not shape or (so[0] == item and si[0] == item)),
                              f"memcpy chosen for {np.dtype(S).name}->{np.dtype(D).name} {shape} {so} {si}")
    print(f"  out-of-range float -> integer casts that differ (undefined in C++; not compared): {len(undefined)}")
    for u in undefined[:6]:
        print("   ", u)
    return rep.close()


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
