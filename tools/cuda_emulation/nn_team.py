"""nn_common.cuh's teams, transcribed for the emulations (nn_sim.py): make_team, team_reduce /
team_sum (warp shuffles, then one shared buffer per <V, Op> instantiation for whole blocks),
MaxSum merging and the online softmax step."""

from __future__ import annotations

import math

import numpy as np
from nn_sim import SYNC, Shfl

K_THREAD, K_WARP, K_BLOCK = 0, 1, 2
K_TEAM_BLOCK = 256
K_ROW_BLOCK = 512


def make_team(c, mode):
    gt = c.bx * c.bdx + c.tx
    if mode == K_THREAD:
        return gt, 0, 1
    if mode == K_WARP:
        return gt >> 5, c.tx & 31, 32
    return c.bx, c.tx, c.bdx


def team_mode(n, stride):
    if stride != 1:
        return K_THREAD
    return K_WARP if n <= 1024 else K_BLOCK


def team_blocks(mode, rows):
    if mode == K_BLOCK:
        return rows
    threads = rows * 32 if mode == K_WARP else rows
    return (threads + K_TEAM_BLOCK - 1) // K_TEAM_BLOCK


def team_threads(mode):
    return K_ROW_BLOCK if mode == K_BLOCK else K_TEAM_BLOCK


def add(a, b):
    return a + b


def merge_max_sum(a, b):
    """MergeMaxSum: (m, s) pairs."""
    if b[0] > a[0]:
        a, b = b, a
    am, as_ = a
    bm, bs = b
    A = type(as_)
    with np.errstate(all="ignore"):
        return (am, as_ + (A(0) if bs == A(0) else bs * _exp(bm - am)))


def _exp(v):
    with np.errstate(all="ignore"):
        return type(v)(np.exp(v))


def _log(v):
    with np.errstate(all="ignore"):
        return type(v)(np.log(v))


def maxsum_step(ms, x):
    m, s = ms
    A = type(s)
    if x > m:
        with np.errstate(all="ignore"):
            return (x, s * _exp(m - x) + (x - x + A(1)))
    if x != A(-math.inf):
        return (m, s + _exp(x - m))
    return (m, s)


def team_reduce(c, v, mode, op, key):
    """Generator: `v = yield from team_reduce(...)`; key names the <V, Op> instantiation (its
    own __shared__ buffer)."""
    if mode == K_THREAD:
        return v
    o = 16
    while o > 0:
        other = yield Shfl(v, o)
        v = op(v, other)
        o >>= 1
    if mode == K_WARP:
        return v
    buf = c.shared.setdefault(("team_buf", key), [float("nan")] * 32)
    lane, wid, nw = c.tx & 31, c.tx >> 5, c.bdx >> 5
    yield SYNC
    if lane == 0:
        buf[wid] = v
    yield SYNC
    t = buf[0]
    for w in range(1, nw):
        t = op(t, buf[w])
    return t


def team_sum(c, v, mode):
    return (yield from team_reduce(c, v, mode, add, ("sum", type(v).__name__)))
