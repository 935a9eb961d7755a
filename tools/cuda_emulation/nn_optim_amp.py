"""Emulation of packages/core/csrc/cuda/fused_optim.cu (_fused_sgd_, _fused_adam_ / AdamW: the
chunk table, sgd_kernel, adam_kernel, adam_steps_kernel for device step counters) and amp_ops.cu
(_amp_foreach_non_finite_check_and_unscale_'s per-dtype chunk tables and unscale_kernel,
_amp_update_scale_) against ember's CPU kernels. The tables are packed with the C structs'
layout (struct module) and read back through that layout, as the kernels see them. The optimizer
math is compared bit for bit (the kernels round every operation explicitly, as the CPU does).
Run: PYTHONPATH=<build>/site python3 nn_optim_amp.py [-q]."""

from __future__ import annotations

import math
import struct
import sys
import time

import numpy as np
from nn_norm import E, npv, tensor
from nn_sim import BF16, F16, F32, F64, close, launch, report

RNG = np.random.default_rng(5)
K_CHUNK = 1 << 15

# struct TensorMeta { uint64 ptr[5]; int64 n; double neg_step, bc2_sqrt; uint64 step; int64
# step_code; } and struct Chunk { int64 tensor, begin, end; }: natural alignment, no padding.
META = struct.Struct("<5Qqddqq")
CHUNK = struct.Struct("<qqq")
assert META.size == 80 and CHUNK.size == 24


class Memory:
    """Device memory: address -> numpy array (each tensor's buffer at its own address)."""

    def __init__(self):
        self.bufs = {}
        self.next = 0x10000

    def alloc(self, arr):
        addr = self.next
        self.next += (arr.nbytes + 255) // 256 * 256 + 256
        self.bufs[addr] = arr
        return addr

    def at(self, addr):
        return self.bufs[addr]


def run_chunks(metas, device_steps, launch_fn, prep):
    chunks = []
    for t, m in enumerate(metas):
        for b in range(0, m["n"], K_CHUNK):
            chunks.append((t, b, min(m["n"], b + K_CHUNK)))
    if not chunks and not device_steps:
        return
    blob = b"".join(
        META.pack(*m["ptr"], m["n"], m["neg_step"], m["bc2_sqrt"], m["step"], m["step_code"])
        for m in metas
    )
    blob += b"".join(CHUNK.pack(*c) for c in chunks)
    table = bytearray(blob)
    if device_steps:
        prep(table, len(metas))
    if not chunks:
        return
    assert len(chunks) < (1 << 31)
    launch_fn(table, len(metas), len(chunks))


def read_meta(table, t):
    v = META.unpack_from(table, t * META.size)
    return dict(ptr=v[:5], n=v[5], neg_step=v[6], bc2_sqrt=v[7], step=v[8], step_code=v[9])


def read_chunk(table, nmeta, k):
    return CHUNK.unpack_from(table, nmeta * META.size + k * CHUNK.size)


def sgd_kernel(c, mem, table, nmeta, s, T):
    tens, begin, end = read_chunk(table, nmeta, c.bx)
    m = read_meta(table, tens)
    p, g = mem.at(m["ptr"][0]), mem.at(m["ptr"][1])
    buf = mem.at(m["ptr"][2]) if m["ptr"][2] else None
    for i in range(begin + c.tx, end, c.bdx):
        d = -g[i] if s["maximize"] else g[i]
        pv = p[i]
        if s["weight_decay"]:
            d = d + s["wd"] * pv
        if s["momentum"]:
            b = d if s["first_step"] else buf[i] * s["mom"] + s["damp1"] * d
            buf[i] = b
            d = d + s["mom"] * b if s["nesterov"] else b
        p[i] = pv + s["neg_lr"] * d


def adam_kernel(c, mem, table, nmeta, s, T):
    tens, begin, end = read_chunk(table, nmeta, c.bx)
    m = read_meta(table, tens)
    p, g, ea, es = (mem.at(m["ptr"][k]) for k in range(4))
    em = mem.at(m["ptr"][4]) if m["ptr"][4] else None
    nss, bc2s = T(m["neg_step"]), T(m["bc2_sqrt"])
    with np.errstate(all="ignore"):
        for i in range(begin + c.tx, end, c.bdx):
            gr = -g[i] if s["maximize"] else g[i]
            pv = p[i]
            if s["wd_mode"] == 2:
                pv = pv * s["decay"]
            if s["wd_mode"] == 1:
                gr = gr + s["wd"] * pv
            e0 = ea[i]
            mv = (
                (e0 + s["one_minus_b1"] * (gr - e0))
                if s["lerp_low"]
                else (gr - (gr - e0) * s["lerp_rest"])
            )
            ea[i] = mv
            v = es[i] * s["b2"] + (s["one_minus_b2"] * gr) * gr
            es[i] = v
            if s["amsgrad"]:
                mx = em[i]
                nm = mx if mx != mx else (v if v != v else (v if v > mx else mx))
                em[i] = nm
                v = nm
            denom = T(np.sqrt(v)) / bc2s + s["eps"]
            p[i] = pv + (nss * mv) / denom


def adam_steps_kernel(c, mem, table, n, lr, beta1, beta2, T):
    t = c.bx * c.bdx + c.tx
    if t >= n:
        return
    m = read_meta(table, t)
    if m["step"] == 0:
        return
    arr = mem.at(m["step"])
    code = m["step_code"]
    if code == 0:
        arr[0] = np.float32(float(arr[0]) + 1.0)
    elif code == 1:
        arr[0] = arr[0] + 1.0
    else:
        arr[0] = int(float(arr[0]) + 1.0)
    step = float(arr[0])
    bc1 = 1.0 - math.pow(beta1, step)
    bc2 = 1.0 - math.pow(beta2, step)
    neg = float(T(-(lr / bc1)))
    b2s = float(T(math.sqrt(bc2)))
    off = t * META.size
    struct.pack_into("<dd", table, off + 48, neg, b2s)


def fused_sgd(mem, ps, gs, bufs, wd, mom, lr, damp, nesterov, maximize, first, T):
    metas = []
    for i in range(len(ps)):
        metas.append(
            dict(
                ptr=(ps[i], gs[i], bufs[i] if mom != 0 else 0, 0, 0),
                n=mem.at(ps[i]).size,
                neg_step=0.0,
                bc2_sqrt=0.0,
                step=0,
                step_code=0,
            )
        )
    s = dict(
        wd=T(wd),
        mom=T(mom),
        damp1=T(1.0 - damp),
        neg_lr=T(-lr),
        weight_decay=wd != 0,
        momentum=mom != 0,
        nesterov=nesterov,
        maximize=maximize,
        first_step=first,
    )
    run_chunks(
        metas,
        False,
        lambda table, nm, nch: launch(sgd_kernel, nch, 256, mem, table, nm, s, T),
        None,
    )


def fused_adam(
    mem, ps, gs, m1, m2, mx, steps, lr, beta1, beta2, wd, eps, amsgrad, maximize, decoupled, T
):
    metas = []
    device_steps = False
    for i in range(len(ps)):
        m = dict(
            ptr=(ps[i], gs[i], m1[i], m2[i], mx[i] if amsgrad else 0),
            n=mem.at(ps[i]).size,
            neg_step=0.0,
            bc2_sqrt=0.0,
            step=0,
            step_code=0,
        )
        st_kind, st_addr, st_code = steps[i]
        if st_kind == "cpu":
            arr = mem.at(st_addr)
            v = float(arr[0]) + 1.0
            arr[0] = v
            bc1 = 1.0 - math.pow(beta1, v)
            bc2 = 1.0 - math.pow(beta2, v)
            if T is np.float64:
                m["neg_step"], m["bc2_sqrt"] = -(lr / bc1), math.sqrt(bc2)
            else:
                m["neg_step"] = float(np.float32(-(lr / bc1)))
                m["bc2_sqrt"] = float(np.float32(math.sqrt(bc2)))
        else:
            m["step"] = st_addr
            m["step_code"] = st_code
            device_steps = True
        metas.append(m)
    omb1 = T(1.0 - beta1)
    s = dict(
        one_minus_b1=omb1,
        lerp_rest=T(1) - omb1,
        b2=T(beta2),
        one_minus_b2=T(1.0 - beta2),
        wd=T(wd),
        decay=T(1.0 - lr * wd),
        eps=T(eps),
        lerp_low=omb1 < T(0.5),
        maximize=maximize,
        amsgrad=amsgrad,
        wd_mode=0 if wd == 0 else (2 if decoupled else 1),
    )
    nt = len(metas)
    run_chunks(
        metas,
        device_steps,
        lambda table, nm, nch: launch(adam_kernel, nch, 256, mem, table, nm, s, T),
        lambda table, nm: launch(
            adam_steps_kernel, (nt + 255) // 256, 256, mem, table, nt, lr, beta1, beta2, T
        ),
    )


def check_sgd(sizes, T, kw, fails, steps=2):
    ember = E()
    Ty = F64 if T is np.float64 else F32
    mem = Memory()
    vals = [RNG.standard_normal(n).astype(T) for n in sizes]
    cps = [tensor(v, Ty, [v.size]) for v in vals]
    cbufs = [ember.zeros(v.size, dtype=getattr(ember, Ty.name)) for v in vals]
    ps = [mem.alloc(v.copy()) for v in vals]
    bufs = [mem.alloc(np.zeros(v.size, dtype=T)) for v in vals]
    tag = f"_fused_sgd_ sizes={sizes} {Ty} {kw}"
    for step in range(steps):
        grads = [RNG.standard_normal(n).astype(T) for n in sizes]
        if step == 1:
            grads[0][0] = np.inf
        gs = [mem.alloc(g) for g in grads]
        cgs = [tensor(g, Ty, [g.size]) for g in grads]
        args = (
            kw["weight_decay"],
            kw["momentum"],
            kw["lr"],
            kw["dampening"],
            kw["nesterov"],
            kw["maximize"],
            step == 0,
        )
        fused_sgd(mem, ps, gs, bufs, *args, T)
        names = (
            "weight_decay",
            "momentum",
            "lr",
            "dampening",
            "nesterov",
            "maximize",
            "is_first_step",
        )
        ember._C._fused_sgd_(cps, cgs, cbufs if kw["momentum"] else [], **dict(zip(names, args)))
    for i in range(len(sizes)):
        close(tag + f" param[{i}]", mem.at(ps[i]), npv(cps[i]), 0.0, failures=fails)
        if kw["momentum"]:
            close(tag + f" buf[{i}]", mem.at(bufs[i]), npv(cbufs[i]), 0.0, failures=fails)


def check_adam(sizes, T, kw, step_kind, fails, steps=3):
    ember = E()
    Ty = F64 if T is np.float64 else F32
    mem = Memory()
    vals = [RNG.standard_normal(n).astype(T) for n in sizes]
    cps = [tensor(v, Ty, [v.size]) for v in vals]
    ps = [mem.alloc(v.copy()) for v in vals]
    zeros = lambda: [mem.alloc(np.zeros(v.size, dtype=T)) for v in vals]  # noqa: E731
    czeros = lambda: [ember.zeros(v.size, dtype=getattr(ember, Ty.name)) for v in vals]  # noqa
    m1, m2, mx = zeros(), zeros(), zeros()
    c1, c2, cx = czeros(), czeros(), czeros()
    steps_l, csteps = [], []
    # step counters: float32 on the CPU (torch's default), or on the device in each dtype
    codes = {
        "f32": (0, np.float32, "float32"),
        "f64": (1, np.float64, "float64"),
        "i64": (2, np.int64, "int64"),
        "i32": (3, np.int32, "int32"),
    }
    for i in range(len(sizes)):
        kind = step_kind if step_kind != "mixed" else ("cpu" if i % 2 else "f64")
        if kind == "cpu":
            steps_l.append(("cpu", mem.alloc(np.zeros(1, dtype=np.float32)), 0))
            csteps.append(ember.zeros((), dtype=ember.float32))
        else:
            code, npt, name = codes[kind]
            steps_l.append(("dev", mem.alloc(np.zeros(1, dtype=npt)), code))
            csteps.append(ember.zeros((), dtype=getattr(ember, name)))
    tag = f"_fused_adam_ sizes={sizes} {Ty} steps={step_kind} {kw}"
    for step in range(steps):
        grads = [RNG.standard_normal(n).astype(T) for n in sizes]
        gs = [mem.alloc(g) for g in grads]
        cgs = [tensor(g, Ty, [g.size]) for g in grads]
        args = (
            kw["lr"],
            kw["beta1"],
            kw["beta2"],
            kw["weight_decay"],
            kw["eps"],
            kw["amsgrad"],
            kw["maximize"],
            kw["decoupled"],
        )
        fused_adam(mem, ps, gs, m1, m2, mx, steps_l, *args, T)
        names = ("lr", "beta1", "beta2", "weight_decay", "eps", "amsgrad", "maximize", "decoupled")
        ember._C._fused_adam_(
            cps, cgs, c1, c2, cx if kw["amsgrad"] else [], csteps, **dict(zip(names, args))
        )
    for i in range(len(sizes)):
        close(tag + f" param[{i}]", mem.at(ps[i]), npv(cps[i]), 0.0, failures=fails)
        close(tag + f" exp_avg[{i}]", mem.at(m1[i]), npv(c1[i]), 0.0, failures=fails)
        close(tag + f" exp_avg_sq[{i}]", mem.at(m2[i]), npv(c2[i]), 0.0, failures=fails)
        if kw["amsgrad"]:
            close(tag + f" max_exp_avg_sq[{i}]", mem.at(mx[i]), npv(cx[i]), 0.0, failures=fails)
        close(tag + f" step[{i}]", mem.at(steps_l[i][1]), npv(csteps[i]), 0.0, failures=fails)


# ---- AMP -----------------------------------------------------------------------------------------

SLICE = struct.Struct("<Qq")


def unscale_kernel(c, mem, table, nslices, found_inf, inv_scale, T):
    tens, begin, end = CHUNK.unpack_from(table, nslices * SLICE.size + c.bx * CHUNK.size)
    ptr, n = SLICE.unpack_from(table, tens * SLICE.size)
    p = mem.at(ptr)
    inv = np.float32(inv_scale[0])
    s = T.acc(inv)
    bad = False
    with np.errstate(all="ignore"):
        for i in range(begin + c.tx, end, c.bdx):
            v = T.to_op(p[i])
            bad |= not (v - v == T.acc(0))
            if inv != np.float32(1.0):
                p[i] = T.from_op(v * s)
    if bad:
        found_inf[0] = np.float32(1.0)


def amp_unscale(mem, tensors, found_inf, inv_scale):
    """tensors: (address, Ty) of the (contiguous) gradients; one launch per dtype group."""
    groups = {}
    for addr, T in tensors:
        if mem.at(addr).size == 0:
            continue
        groups.setdefault(T.name, (T, []))[1].append(addr)
    for name in sorted(groups):  # std::map order: by ScalarType (any order is equivalent)
        T, addrs = groups[name]
        slices, chunks = [], []
        for k, a in enumerate(addrs):
            n = mem.at(a).size
            slices.append((a, n))
            for b in range(0, n, K_CHUNK):
                chunks.append((k, b, min(n, b + K_CHUNK)))
        table = bytearray(
            b"".join(SLICE.pack(*s) for s in slices) + b"".join(CHUNK.pack(*c) for c in chunks)
        )
        launch(unscale_kernel, len(chunks), 256, mem, table, len(slices), found_inf, inv_scale, T)


def amp_update_scale(scale, tracker, found_inf, growth, backoff, interval):
    if found_inf[0] != np.float32(0):
        scale[0] = scale[0] * np.float32(backoff)
        tracker[0] = 0
        return
    clean = int(tracker[0]) + 1
    if clean == interval:
        with np.errstate(all="ignore"):
            grown = scale[0] * np.float32(growth)
        if grown - grown == np.float32(0):
            scale[0] = grown
        tracker[0] = 0
    else:
        tracker[0] = clean


def check_unscale(specs, inv, fails):
    """specs: (n, Ty, bad) per gradient: bad in (None, 'inf', '-inf', 'nan', 'last')."""
    ember = E()
    mem = Memory()
    addrs, cts = [], []
    for n, T, bad in specs:
        v = T.mem(RNG.standard_normal(n) * 100)
        if bad and n:
            pos = n - 1 if bad == "last" else n // 2
            v[pos] = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan, "last": np.inf}[bad]
        addrs.append((mem.alloc(v.copy()), T))
        cts.append(tensor(v, T, [n]))
    found = np.zeros(1, dtype=np.float32)
    inv_a = np.array([inv], dtype=np.float32)
    amp_unscale(mem, addrs, found, inv_a)
    cfound = ember.zeros(1)
    ember._C._amp_foreach_non_finite_check_and_unscale_(cts, cfound, ember.tensor([inv]))
    tag = f"unscale {[(n, T.name, b) for n, T, b in specs]} inv={inv}"
    close(tag + " found_inf", found, npv(cfound), 0.0, failures=fails)
    for i, (a, T) in enumerate(addrs):
        close(tag + f" grad[{i}]", mem.at(a), npv(cts[i]), 0.0, failures=fails)


def check_update_scale(fails):
    ember = E()
    for growth, backoff, interval, seq in [
        (2.0, 0.5, 3, [0, 0, 0, 1, 0, 0, 0, 0]),
        (2.0, 0.5, 1, [0, 0, 1, 0]),
        (1e30, 0.25, 2, [0, 0, 0, 0, 1, 0, 0]),
    ]:
        scale = np.array([65536.0], dtype=np.float32)
        tracker = np.array([0], dtype=np.int32)
        cs, ct = ember.tensor([65536.0]), ember.zeros(1, dtype=ember.int32)
        for f in seq:
            fi = np.array([f], dtype=np.float32)
            amp_update_scale(scale, tracker, fi, growth, backoff, interval)
            ember._C._amp_update_scale_(cs, ct, ember.tensor([float(f)]), growth, backoff, interval)
            close(
                f"update_scale g={growth} b={backoff} i={interval} scale",
                scale,
                npv(cs),
                0.0,
                failures=fails,
            )
            close("update_scale tracker", tracker, npv(ct), 0.0, failures=fails)


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    fails = []
    sgd_kws = [
        dict(
            lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01, nesterov=False, maximize=False
        ),
        dict(lr=0.05, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=True, maximize=True),
        dict(lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.1, nesterov=False, maximize=False),
    ]
    for kw in sgd_kws:
        check_sgd([5, 300, 1], np.float32, kw, fails)
    check_sgd([40000, 7, 0, 33000], np.float32, sgd_kws[0], fails)  # chunks across tensors
    check_sgd([300, 17], np.float64, sgd_kws[1], fails)
    adam_kws = [
        dict(
            lr=0.01,
            beta1=0.9,
            beta2=0.999,
            weight_decay=0.1,
            eps=1e-8,
            amsgrad=True,
            maximize=False,
            decoupled=False,
        ),
        dict(
            lr=0.01,
            beta1=0.6,
            beta2=0.9,
            weight_decay=0.2,
            eps=1e-8,
            amsgrad=False,
            maximize=True,
            decoupled=True,
        ),
        dict(
            lr=0.001,
            beta1=0.3,
            beta2=0.99,
            weight_decay=0.0,
            eps=1e-6,
            amsgrad=False,
            maximize=False,
            decoupled=False,
        ),
    ]
    for kw in adam_kws:
        check_adam([5, 300, 1], np.float32, kw, "cpu", fails)
    for kind in ("f32", "f64", "i64", "i32", "mixed"):
        check_adam([6, 70], np.float32, adam_kws[0], kind, fails)
    check_adam([40000, 3, 0], np.float32, adam_kws[1], "cpu", fails, steps=1)
    check_adam([200, 9], np.float64, adam_kws[0], "cpu", fails)
    check_adam([200, 9], np.float64, adam_kws[1], "f32", fails)
    for bad in (None, "inf", "-inf", "nan", "last"):
        check_unscale(
            [(40, F32, bad), (33000, F16, None), (5, BF16, None), (0, F32, None)], 0.125, fails
        )
        check_unscale(
            [(40, F32, None), (70, F16, bad), (5, BF16, None), (7, F64, None)], 0.5, fails
        )
        check_unscale([(40, F32, None), (7, BF16, bad)], 1.0, fails)
    check_update_scale(fails)
    return report("nn_optim_amp", fails, t0, quiet)


if __name__ == "__main__":
    sys.exit(main())
