"""``ember.quasirandom``: low-discrepancy sequences (PyTorch's ``torch.quasirandom``).

:class:`SobolEngine` draws Sobol' points in ``[0, 1)^d`` for ``d <= 1111``, with the Joe-Kuo
direction numbers: the unscrambled sequence is PyTorch's, point for point.

How the points are made: dimension ``j`` has a primitive polynomial over GF(2) of degree ``s``
(the ``j-1``-th in the order of degree, then value; the first dimension has none and gives the
van der Corput sequence) and initial odd numbers ``m_1 .. m_s`` (``ember._sobol_directions``).
The polynomial ``x^s + a_1 x^(s-1) + ... + a_(s-1) x + 1`` extends them by the recurrence
``m_k = 2 a_1 m_(k-1) ^ 4 a_2 m_(k-2) ^ ... ^ 2^s m_(k-s) ^ m_(k-s)``, and the direction numbers are
``v_k = m_k * 2^(30-k)`` for ``k = 1..30``. Point ``n`` is the XOR of the ``v_k`` whose bit is set
in the Gray code ``n ^ (n >> 1)``, divided by ``2^30``. Scrambling multiplies every direction
number by a random lower-triangular binary matrix (per dimension) and XORs a random shift into
every point (Owen's linear matrix scrambling with a digital shift): the points stay a (t, m, s)
net, each power-of-two block still stratifies every dimension.

>>> import ember
>>> engine = ember.quasirandom.SobolEngine(2)
>>> engine.draw(4).tolist()
[[0.0, 0.0], [0.5, 0.5], [0.75, 0.25], [0.25, 0.75]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import _C
from ember._C import Tensor

__all__ = ["SobolEngine"]

_MAXBIT = 30


def _primitive_polynomials(count: int) -> list[int]:
    """The first ``count`` primitive polynomials over GF(2) of degree >= 1, as bit masks
    (``x^s + ... + 1`` -> ``(1 << s) | ... | 1``), ordered by degree then value."""
    out: list[int] = []
    degree = 1
    while len(out) < count:
        order = (1 << degree) - 1
        primes = _prime_factors(order)
        for p in range((1 << degree) | 1, 1 << (degree + 1), 2):  # odd: constant term 1
            if _x_pow_mod(order, p) == 1 and all(_x_pow_mod(order // q, p) != 1 for q in primes):
                out.append(p)
                if len(out) == count:
                    break
        degree += 1
    return out


def _prime_factors(n: int) -> list[int]:
    out, f = [], 2
    while f * f <= n:
        if n % f == 0:
            out.append(f)
            while n % f == 0:
                n //= f
        f += 1
    if n > 1:
        out.append(n)
    return out


def _x_pow_mod(e: int, poly: int) -> int:
    """``x^e mod poly`` over GF(2) (polynomials as bit masks)."""
    deg = poly.bit_length() - 1
    result, base = 1, 2  # 1 and x
    if deg == 1:
        base = 2 ^ poly  # x mod (x + 1) = 1
    while e:
        if e & 1:
            result = _mulmod(result, base, poly, deg)
        base = _mulmod(base, base, poly, deg)
        e >>= 1
    return result


def _mulmod(a: int, b: int, poly: int, deg: int) -> int:
    r = 0
    while b:
        if b & 1:
            r ^= a
        b >>= 1
        a <<= 1
        if a >> deg & 1:
            a ^= poly
    return r


_DIRECTIONS: list[np.ndarray] = []  # per dimension, the 30 direction numbers (built lazily)


def _direction_numbers(dimension: int) -> np.ndarray:
    """(dimension, 30) int64 direction numbers ``v_k`` of the first ``dimension`` dimensions."""
    if len(_DIRECTIONS) < dimension:
        from ember._sobol_directions import INITIAL_DIRECTIONS

        rows = INITIAL_DIRECTIONS.split("\n")[1:]
        polys = _primitive_polynomials(dimension - 1)
        while len(_DIRECTIONS) < dimension:
            j = len(_DIRECTIONS)
            m = [1] * _MAXBIT
            if j:
                poly = polys[j - 1]
                s = poly.bit_length() - 1
                init = [int(v) for v in rows[j - 1].split()]
                if len(init) != s:
                    raise RuntimeError(f"SobolEngine: corrupt direction table at dimension {j}")
                m[:s] = init
                for k in range(s, _MAXBIT):
                    v = m[k - s] ^ (m[k - s] << s)
                    for i in range(1, s):
                        if poly >> (s - i) & 1:  # a_i
                            v ^= m[k - i] << i
                    m[k] = v
            _DIRECTIONS.append(np.array([m[k] << (_MAXBIT - 1 - k) for k in range(_MAXBIT)],
                                        dtype=np.int64))
    return np.stack(_DIRECTIONS[:dimension])


def _xor_columns(v: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """For each mask (n,), the XOR of the columns of ``v`` (dim, 30) whose bit is set: (n, dim)."""
    out = np.zeros((masks.shape[0], v.shape[0]), dtype=np.int64)
    for k in range(_MAXBIT):
        sel = ((masks >> k) & 1).astype(bool)
        if sel.any():
            out[sel] ^= v[:, k]
    return out


class SobolEngine:
    """Draws points of the Sobol' sequence in ``[0, 1)^dimension``.

    ``SobolEngine(dimension, scramble=False, seed=None)``: ``dimension`` from 1 to 1111;
    ``scramble=True`` randomizes the points (reproducibly for a given ``seed``; from ember's
    global generator when ``seed`` is None).

    >>> import ember
    >>> e = ember.quasirandom.SobolEngine(3, scramble=True, seed=0)
    >>> x = e.draw_base2(3)
    >>> x.shape, bool(((x >= 0) & (x < 1)).all())
    (ember.Size([8, 3]), True)
    """

    MAXBIT = _MAXBIT
    MAXDIM = 1111

    def __init__(self, dimension: int, scramble: bool = False, seed: int | None = None) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or \
                not 1 <= dimension <= self.MAXDIM:
            raise ValueError(
                f"Supported range of dimensionality for SobolEngine is [1, {self.MAXDIM}], got "
                f"{dimension!r}"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"SobolEngine(): seed must be an int or None, got {type(seed).__name__}")
        self.dimension = dimension
        self.scramble = bool(scramble)
        self.seed = seed
        self._v = _direction_numbers(dimension)
        self._shift = np.zeros(dimension, dtype=np.int64)
        if self.scramble:
            self._scramble()
        self._quasi = self._shift.copy()
        self.num_generated = 0

    def _scramble(self) -> None:
        gen = _C.Generator()
        if self.seed is not None:
            gen.manual_seed(self.seed)
        else:
            gen.manual_seed(int(_C.randint(0, 2**62, (1,)).item()))
        bits = _C.randint(0, 2, (self.dimension, _MAXBIT), generator=gen).numpy().astype(np.int64)
        self._shift = (bits << np.arange(_MAXBIT - 1, -1, -1, dtype=np.int64)).sum(1)
        # lower-triangular (most significant bit first) matrices with a unit diagonal
        ltm = _C.randint(0, 2, (self.dimension, _MAXBIT, _MAXBIT), generator=gen).numpy()
        ltm = np.tril(ltm.astype(np.int64), -1) + np.eye(_MAXBIT, dtype=np.int64)
        weights = np.int64(1) << np.arange(_MAXBIT - 1, -1, -1, dtype=np.int64)
        rows = (ltm * weights).sum(2)  # (dim, 30): row p of each matrix as a bit mask
        v = self._v
        out = np.zeros_like(v)
        for p in range(_MAXBIT):
            parity = np.bitwise_count(rows[:, p, None] & v) & 1  # (dim, 30)
            out |= parity.astype(np.int64) << (_MAXBIT - 1 - p)
        self._v = out

    @property
    def sobolstate(self) -> Tensor:
        """The (dimension, 30) direction numbers (scrambled when ``scramble=True``)."""
        return _C.from_numpy(self._v.copy())

    @property
    def shift(self) -> Tensor:
        """The random digital shift of each dimension (zeros without scrambling)."""
        return _C.from_numpy(self._shift.copy())

    @property
    def quasi(self) -> Tensor:
        """The last point drawn, as 30-bit integers."""
        return _C.from_numpy(self._quasi.copy())

    def _points(self, start: int, n: int) -> np.ndarray:
        """Points ``start .. start + n - 1`` as (n, dim) integers: the first from its Gray code,
        each next one from the one before, ``p(k) = p(k - 1) ^ v[ctz(k)]``."""
        if n == 0:
            return np.zeros((0, self.dimension), dtype=np.int64)
        first = _xor_columns(self._v, np.array([start ^ (start >> 1)], dtype=np.int64))[0]
        if n == 1:
            return (first ^ self._shift)[None, :]
        k = np.arange(start + 1, start + n, dtype=np.int64)
        ctz = np.frexp((k & -k).astype(np.float64))[1] - 1  # exponent of the lowest set bit
        steps = np.empty((n, self.dimension), dtype=np.int64)
        steps[0] = first ^ self._shift
        steps[1:] = self._v[:, ctz].T
        return np.bitwise_xor.accumulate(steps, axis=0)

    def draw(self, n: int = 1, out: Tensor | None = None, dtype: Any = None) -> Tensor:
        """The next ``n`` points, an (n, dimension) tensor of ``dtype`` (the default dtype when
        None); written into ``out`` too when given.

        >>> import ember
        >>> ember.quasirandom.SobolEngine(1).draw(3).flatten().tolist()
        [0.0, 0.5, 0.75]
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"SobolEngine.draw(): n must be a non-negative int, got {n!r}")
        if self.num_generated + n > 2**_MAXBIT:
            raise ValueError(
                f"SobolEngine.draw(): at most 2**{_MAXBIT} points exist; {self.num_generated} "
                f"drawn, {n} more asked"
            )
        dtype = _C.get_default_dtype() if dtype is None else dtype
        pts = self._points(self.num_generated, n)
        if n:
            self._quasi = pts[-1].copy()
        self.num_generated += n
        result = _C.from_numpy(pts.astype(np.float64) / 2.0**_MAXBIT).to(dtype)
        if out is not None:
            if not isinstance(out, Tensor):
                raise TypeError(f"SobolEngine.draw(): out must be a Tensor, got {type(out).__name__}")
            out.resize_(result.shape).copy_(result)
            return out
        return result

    def draw_base2(self, m: int, out: Tensor | None = None, dtype: Any = None) -> Tensor:
        """The next ``2**m`` points; the total drawn must stay a power of two (the balance of
        Sobol' points holds for such blocks).

        >>> import ember
        >>> ember.quasirandom.SobolEngine(2).draw_base2(1).tolist()
        [[0.0, 0.0], [0.5, 0.5]]
        """
        if isinstance(m, bool) or not isinstance(m, int) or m < 0:
            raise ValueError(f"SobolEngine.draw_base2(): m must be a non-negative int, got {m!r}")
        n = 2**m
        total = self.num_generated + n
        if total & (total - 1):
            raise ValueError(
                "The balance properties of Sobol' points require n to be a power of 2. "
                f"{self.num_generated} points have been previously generated, then: "
                f"n={self.num_generated}+2**{m}={total}. If you still want to do this, please "
                "use 'SobolEngine.draw()' instead."
            )
        return self.draw(n, out=out, dtype=dtype)

    def reset(self) -> SobolEngine:
        """Back to the first point.

        >>> import ember
        >>> e = ember.quasirandom.SobolEngine(1)
        >>> _ = e.draw(5)
        >>> e.reset().draw(1).tolist()
        [[0.0]]
        """
        self._quasi = self._shift.copy()
        self.num_generated = 0
        return self

    def fast_forward(self, n: int) -> SobolEngine:
        """Skips the next ``n`` points.

        >>> import ember
        >>> ember.quasirandom.SobolEngine(1).fast_forward(2).draw(1).tolist()
        [[0.75]]
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"SobolEngine.fast_forward(): n must be a non-negative int, got {n!r}")
        if n:
            self.num_generated += n
            self._quasi = self._points(self.num_generated - 1, 1)[0]
        return self

    def __repr__(self) -> str:
        fields = [f"dimension={self.dimension}"]
        if self.scramble:
            fields.append("scramble=True")
        if self.seed is not None:
            fields.append(f"seed={self.seed}")
        return f"SobolEngine({', '.join(fields)})"
