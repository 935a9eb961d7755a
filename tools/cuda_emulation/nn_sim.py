"""A small CUDA execution emulator for the nn kernel emulations (nn_norm.py, nn_softmax_loss.py,
nn_optim_amp.py, nn_misc.py): a kernel is transcribed into a Python generator function run once
per thread; `yield SYNC` is __syncthreads(), `v = yield Shfl(value, offset)` a full-mask
__shfl_xor_sync. Every block runs its threads in a shuffled order, each thread from one barrier
to the next in one go, so a read of shared memory that is not ordered by a barrier sees whatever
happens to be there (shared memory starts filled with NaN). Blocks run one after another in a
shuffled order; atomics are plain ordered adds. A barrier or a full-mask shuffle reached by only
part of a block / warp (some threads exited or elsewhere) raises: divergent synchronization is
undefined behaviour on the GPU.

Dtypes: `Ty` describes a storage type T and its compute type A (dev_opmath_t<T>): float16 stored as
numpy float16, bfloat16 as float32 values rounded to bfloat16 on every store (round to nearest
even), compute in float32 (float64 for double). Arithmetic on np.float32 scalars rounds after
every operation (the GPU may fuse a multiply-add: compare with a tolerance, not bit for bit)."""

from __future__ import annotations

import random

import numpy as np

SYNC = "sync"


class Shfl:
    __slots__ = ("value", "offset")

    def __init__(self, value, offset):
        self.value = value
        self.offset = offset


class EmulationError(AssertionError):
    pass


def bf16_round(a):
    """float32 values rounded to bfloat16 (nearest even), kept as float32."""
    a = np.asarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    nan = np.isnan(a)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return np.where(nan, np.float32(np.nan), out).astype(np.float32)


class Ty:
    """A storage dtype: name, numpy storage dtype, compute (opmath) numpy dtype."""

    def __init__(self, name, store, acc):
        self.name, self.store, self.acc = name, store, acc

    def mem(self, values):
        """Device memory holding values in this dtype (a flat numpy array)."""
        a = np.asarray(values, dtype=np.float64).ravel()
        if self.name == "bfloat16":
            return bf16_round(a.astype(np.float32))
        return a.astype(self.store)

    def to_op(self, v):
        return self.acc(v)

    def from_op(self, v):
        """A compute-type value rounded to the storage type (returned as a numpy scalar)."""
        if self.name == "bfloat16":
            return bf16_round(np.float32(v))[()]
        return self.store(v)

    def __repr__(self):
        return self.name


F32 = Ty("float32", np.float32, np.float32)
F64 = Ty("float64", np.float64, np.float64)
F16 = Ty("float16", np.float16, np.float32)
BF16 = Ty("bfloat16", np.float32, np.float32)
TYPES = {"float32": F32, "float64": F64, "float16": F16, "bfloat16": BF16}


class Ctx:
    __slots__ = (
        "tx",
        "ty",
        "tz",
        "bx",
        "by",
        "bz",
        "bdx",
        "bdy",
        "bdz",
        "gdx",
        "gdy",
        "gdz",
        "shared",
        "linear",
    )

    def shared_array(self, name, shape, dtype=np.float64):
        """The block's __shared__ array `name` (created on first use, filled with NaN)."""
        a = self.shared.get(name)
        if a is None:
            a = np.full(shape, np.nan, dtype=dtype)
            self.shared[name] = a
        return a


def _dim3(v):
    if isinstance(v, int):
        return (v, 1, 1)
    v = tuple(v) + (1,) * (3 - len(v))
    return v


LIMITS = {"grid": (2**31 - 1, 65535, 65535), "block": (1024, 1024, 64)}
STATS = {"launches": 0, "threads": 0}


def launch(kernel, grid, block, *args, seed=0, max_blocks=None):
    """Runs kernel<<<grid, block>>>(*args). Checks the launch limits as the driver does."""
    g, b = _dim3(grid), _dim3(block)
    for k in range(3):
        if not (1 <= g[k] <= LIMITS["grid"][k]):
            raise EmulationError(f"{kernel.__name__}: invalid grid {g} (dim {k})")
        if not (1 <= b[k] <= LIMITS["block"][k]):
            raise EmulationError(f"{kernel.__name__}: invalid block {b}")
    nthreads = b[0] * b[1] * b[2]
    if nthreads > 1024:
        raise EmulationError(f"{kernel.__name__}: {nthreads} threads per block")
    STATS["launches"] += 1
    rng = random.Random(seed * 7919 + 13)
    blocks = [(x, y, z) for z in range(g[2]) for y in range(g[1]) for x in range(g[0])]
    if max_blocks is not None and len(blocks) > max_blocks:
        raise EmulationError(f"{kernel.__name__}: {len(blocks)} blocks is too many to emulate")
    rng.shuffle(blocks)
    for bx, by, bz in blocks:
        _run_block(kernel, g, b, (bx, by, bz), args, rng)


def _run_block(kernel, g, b, bid, args, rng):
    shared = {}
    threads = []
    for tz in range(b[2]):
        for ty in range(b[1]):
            for tx in range(b[0]):
                c = Ctx()
                c.tx, c.ty, c.tz = tx, ty, tz
                c.bx, c.by, c.bz = bid
                c.bdx, c.bdy, c.bdz = b
                c.gdx, c.gdy, c.gdz = g
                c.shared = shared
                c.linear = tx + b[0] * (ty + b[1] * tz)
                threads.append(c)
    STATS["threads"] += len(threads)
    gens = []
    for c in threads:
        r = kernel(c, *args)
        gens.append(r if hasattr(r, "send") else None)
    n = len(gens)
    state = [None] * n  # None: runnable; SYNC; a Shfl; "done"
    send = [None] * n
    for i in range(n):
        if gens[i] is None:
            state[i] = "done"
    while True:
        order = [i for i in range(n) if state[i] is None]
        rng.shuffle(order)
        for i in order:
            try:
                y = gens[i].send(send[i])
            except StopIteration:
                state[i] = "done"
                continue
            send[i] = None
            state[i] = y
        if all(s == "done" for s in state):
            return
        progressed = False
        # Warp shuffles: every lane of the warp at a shuffle with the same offset.
        for w0 in range(0, n, 32):
            lanes = range(w0, min(n, w0 + 32))
            st = [state[i] for i in lanes]
            if any(isinstance(s, Shfl) for s in st):
                if not all(isinstance(s, Shfl) for s in st):
                    raise EmulationError(
                        f"{kernel.__name__}: full-mask shuffle in warp {w0 // 32} of block {bid} "
                        f"not reached by every lane: {[s if isinstance(s, str) else 'shfl' for s in st]}"
                    )
                offs = {s.offset for s in st}
                if len(offs) != 1:
                    raise EmulationError(f"{kernel.__name__}: lanes shuffle with offsets {offs}")
                o = offs.pop()
                vals = [s.value for s in st]
                if len(vals) != 32:
                    raise EmulationError(f"{kernel.__name__}: partial warp of {len(vals)} lanes")
                for k, i in enumerate(lanes):
                    send[i] = vals[k ^ o]
                    state[i] = None
                progressed = True
        if progressed:
            continue
        live = [s for s in state if s != "done"]
        if live and all(s == SYNC for s in live):
            if len(live) != n:
                raise EmulationError(
                    f"{kernel.__name__}: __syncthreads reached by {len(live)} of {n} threads of "
                    f"block {bid} (the others exited)"
                )
            for i in range(n):
                state[i] = None
            continue
        raise EmulationError(f"{kernel.__name__}: deadlock in block {bid}: {set(map(str, live))}")


# ---- helpers shared by the emulations ----------------------------------------------------------


def blocks_for(n, per_thread=1, block=256):
    b = (n + block * per_thread - 1) // (block * per_thread)
    return int(min(max(b, 1), 1 << 30))


K_BLOCK_SIZE = 256


def close(name, got, want, rtol, atol=None, failures=None):
    """Compares emulated against CPU values (NaN where the CPU has NaN); records a failure."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    atol = rtol if atol is None else atol
    ok = got.shape == want.shape and bool(
        np.all(np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    )
    if not ok:
        msg = f"MISMATCH {name}: shape {got.shape} vs {want.shape}"
        if got.shape == want.shape:
            bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
            idx = np.argwhere(bad)[:3]
            msg += f"; {int(bad.sum())} bad, e.g. at {idx.tolist()}: " + ", ".join(
                f"{got[tuple(i)]!r} vs {want[tuple(i)]!r}" for i in idx
            )
        if failures is not None:
            failures.append(msg)
        print(msg)
    return ok


TOL = {"float32": 3e-5, "float64": 1e-10, "float16": 1e-2, "bfloat16": 4e-2}


def report(name, fails, t0, quiet):
    """Prints the run's summary line (and the failures unless quiet); the exit status."""
    import time

    print(f"{name}: {len(fails)} failures ({time.time() - t0:.1f}s)")
    if fails and not quiet:
        for f in fails:
            print("  ", f)
    return 1 if fails else 0
