"""Random benchmark inputs (PyTorch's ``torch.utils.benchmark`` fuzzers): ``FuzzedParameter``s
are drawn from distributions (optionally aliasing each other with ``ParameterAlias``),
``FuzzedTensor``s are built from them (any layout: permuted, strided by ``steps``), and
``Fuzzer.take(n)`` yields ``n`` reproducible draws that satisfy the constraints.

>>> import ember
>>> from ember.utils.benchmark import Fuzzer, FuzzedParameter, FuzzedTensor
>>> fuzzer = Fuzzer(
...     parameters=[FuzzedParameter("n", 4, 64, distribution="loguniform"),
...                 FuzzedParameter("k", distribution={1: 0.5, 3: 0.5})],
...     tensors=[FuzzedTensor("x", size=("n", "k"), probability_contiguous=0.5)],
...     seed=0)
>>> for tensors, properties, params in fuzzer.take(2):
...     assert tensors["x"].shape == (params["n"], params["k"])
...     assert properties["x"]["numel"] == params["n"] * params["k"]
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import numpy as np

__all__ = ["Fuzzer", "FuzzedParameter", "FuzzedTensor", "ParameterAlias"]

_MAX_TRIES = 10000  # draws before giving up on the constraints (never loop forever)


class ParameterAlias:
    """A parameter value that is another parameter's value (chains allowed, no cycles).

    >>> from ember.utils.benchmark import FuzzedParameter, Fuzzer, ParameterAlias
    >>> f = Fuzzer([FuzzedParameter("a", 1, 9, distribution="uniform"),
    ...             FuzzedParameter("b", distribution={ParameterAlias("a"): 1.0})], [], seed=1)
    >>> _, _, p = next(f.take(1))
    >>> p["a"] == p["b"]
    True
    """

    def __init__(self, alias_to: str) -> None:
        self.alias_to = alias_to

    def __repr__(self) -> str:
        return f"ParameterAlias[alias_to: {self.alias_to}]"


class FuzzedParameter:
    """A named value drawn from ``distribution``: "uniform" (integers when ``minval`` and
    ``maxval`` are ints, else floats, bounds included), "loguniform" (uniform in log space),
    or a dict ``{choice: probability}`` (probabilities summing to one; no bounds then).
    A ``strict`` parameter is kept fixed while the others are redrawn to meet constraints."""

    def __init__(self, name: str, minval: int | float | None = None,
                 maxval: int | float | None = None,
                 distribution: str | dict[Any, float] | None = None,
                 strict: bool = False) -> None:
        if not isinstance(name, str):
            raise TypeError(f"FuzzedParameter: name must be a str, got {type(name).__name__}")
        self._name = name
        self._minval, self._maxval = minval, maxval
        self.strict = bool(strict)
        if isinstance(distribution, dict):
            if minval is not None or maxval is not None:
                raise ValueError(f"FuzzedParameter {name!r}: minval and maxval must not be "
                                 "set with a dict distribution")
            probs = np.asarray(list(distribution.values()), dtype=np.float64)
            if probs.size == 0 or (probs < 0).any() or abs(probs.sum() - 1.0) > 1e-5:
                raise ValueError(f"FuzzedParameter {name!r}: the dict distribution's "
                                 f"probabilities must be >= 0 and sum to 1, got "
                                 f"{list(distribution.values())}")
            self._choices = list(distribution.keys())
            self._probs = probs / probs.sum()
        elif distribution in ("uniform", "loguniform"):
            if minval is None or maxval is None:
                raise ValueError(f"FuzzedParameter {name!r}: distribution {distribution!r} "
                                 "needs minval and maxval")
            if maxval < minval:
                raise ValueError(f"FuzzedParameter {name!r}: maxval ({maxval}) < minval "
                                 f"({minval})")
            if distribution == "loguniform" and minval <= 0:
                raise ValueError(f"FuzzedParameter {name!r}: loguniform needs minval > 0, got "
                                 f"{minval}")
        else:
            raise ValueError(f"FuzzedParameter {name!r}: distribution must be 'uniform', "
                             f"'loguniform' or a dict of probabilities, got {distribution!r}")
        self._distribution = distribution

    @property
    def name(self) -> str:
        return self._name

    def sample(self, state: np.random.RandomState) -> Any:
        """One value drawn with ``state``."""
        lo, hi, dist = self._minval, self._maxval, self._distribution
        if isinstance(dist, dict):
            return self._choices[int(state.choice(len(self._choices), p=self._probs))]
        ints = isinstance(lo, int) and isinstance(hi, int)
        if dist == "uniform":
            return int(state.randint(lo, hi + 1)) if ints else float(state.uniform(lo, hi))
        assert lo is not None and hi is not None
        if ints:  # uniform in log space over [lo, hi + 1), floored: every int reachable
            value = math.exp(state.uniform(math.log(lo), math.log(hi + 1)))
            return min(int(value), hi)
        return float(math.exp(state.uniform(math.log(lo), math.log(hi))))


class FuzzedTensor:
    """A tensor built from the drawn parameters: ``size`` (ints or parameter names),
    optional ``steps`` (allocate ``size * steps`` and slice every ``step``-th element, for
    strided inputs), a layout that is contiguous with ``probability_contiguous`` (otherwise
    its dimensions are stored in a random order), bounds on its element count and
    allocation, ``dim_parameter`` (a parameter giving how many leading dimensions to keep),
    ``dtype``, ``cuda`` and an optional ``tensor_constructor(size=..., dtype=...,
    **params)``."""

    def __init__(self, name: str, size: tuple[str | int, ...],
                 steps: tuple[str | int, ...] | None = None,
                 probability_contiguous: float = 0.5, min_elements: int | None = None,
                 max_elements: int | None = None, max_allocation_bytes: int | None = None,
                 dim_parameter: str | None = None, roll_parameter: str | None = None,
                 dtype: Any = None, cuda: bool = False,
                 tensor_constructor: Callable[..., Any] | None = None) -> None:
        import ember

        if steps is not None and len(steps) != len(size):
            raise ValueError(f"FuzzedTensor {name!r}: steps ({len(steps)}) must have as many "
                             f"entries as size ({len(size)})")
        if not 0.0 <= probability_contiguous <= 1.0:
            raise ValueError(f"FuzzedTensor {name!r}: probability_contiguous must be in "
                             f"[0, 1], got {probability_contiguous}")
        if roll_parameter is not None:
            raise ValueError(f"FuzzedTensor {name!r}: roll_parameter is not supported by "
                             "ember; leave it None")
        self._name = name
        self._size = tuple(size)
        self._steps = tuple(steps) if steps is not None else (1,) * len(size)
        self._probability_contiguous = probability_contiguous
        self._min_elements, self._max_elements = min_elements, max_elements
        self._max_allocation_bytes = max_allocation_bytes
        self._dim_parameter = dim_parameter
        self._dtype = ember.float32 if dtype is None else dtype
        self._cuda = bool(cuda)
        self._tensor_constructor = tensor_constructor

    @property
    def name(self) -> str:
        return self._name

    @staticmethod
    def default_tensor_constructor(size: tuple[int, ...], dtype: Any, **kwargs: Any) -> Any:
        """Random values: uniform [0, 1) for floating dtypes, 0/1 for bool, 1..126 else."""
        import ember

        if dtype.is_floating_point or dtype.is_complex:
            return ember.rand(size, dtype=dtype)
        if dtype == ember.bool:
            return ember.randint(0, 2, size) > 0
        return ember.randint(1, 127, size, dtype=dtype)

    def _size_and_steps(self, params: dict[str, Any]) -> tuple[list[int], list[int]]:
        def value(v: str | int) -> int:
            if isinstance(v, str):
                if v not in params:
                    raise KeyError(f"FuzzedTensor {self._name!r}: unknown parameter {v!r}")
                return int(params[v])
            return int(v)

        size = [value(s) for s in self._size]
        steps = [value(s) for s in self._steps]
        if self._dim_parameter is not None:
            ndim = int(params[self._dim_parameter])
            size, steps = size[:ndim], steps[:ndim]
        return size, steps

    def satisfies_constraints(self, params: dict[str, Any]) -> bool:
        """Whether the tensor these parameters describe is within its element and
        allocation bounds."""
        import ember

        size, steps = self._size_and_steps(params)
        numel = math.prod(size)
        if self._min_elements is not None and numel < self._min_elements:
            return False
        if self._max_elements is not None and numel > self._max_elements:
            return False
        if self._max_allocation_bytes is not None:
            itemsize = ember.empty(0, dtype=self._dtype).element_size()
            if math.prod(s * t for s, t in zip(size, steps)) * itemsize > \
                    self._max_allocation_bytes:
                return False
        return True

    def _make_tensor(self, params: dict[str, Any], state: np.random.RandomState
                     ) -> tuple[Any, dict[str, Any]]:
        size, steps = self._size_and_steps(params)
        alloc = tuple(s * t for s, t in zip(size, steps))
        make = self._tensor_constructor or self.default_tensor_constructor
        x = make(size=alloc, dtype=self._dtype, **params)
        order = np.arange(len(alloc))
        if len(alloc) > 1 and state.rand() > self._probability_contiguous:
            while (order == np.arange(len(alloc))).all():  # a real reordering
                order = state.permutation(len(alloc))
            # store the dims in `order`, then view them back in logical order
            x = x.permute([int(i) for i in order]).contiguous()
            x = x.permute([int(i) for i in np.argsort(order)])
        if any(t != 1 for t in steps):
            x = x[tuple(slice(None, None, t) for t in steps)]
        if self._cuda:
            x = x.cuda()
        props = {"numel": int(math.prod(size)), "order": order, "steps": steps,
                 "is_contiguous": x.is_contiguous(), "dtype": str(x.dtype)}
        return x, props


def _unpack(items: Any, cls: type, what: str) -> list[Any]:
    out: list[Any] = []
    for item in items:
        group = item if isinstance(item, (list, tuple)) else [item]
        for g in group:
            if not isinstance(g, cls):
                raise TypeError(f"Fuzzer: {what} must be {cls.__name__} objects (or lists of "
                                f"them), got {type(g).__name__}")
            out.append(g)
    names = [o.name for o in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"Fuzzer: duplicate {what} names {dup}")
    return out


class Fuzzer:
    """Draws parameter sets (redrawing until every constraint and tensor bound holds) and
    builds the tensors for each; ``seed`` makes ``take`` reproducible (and seeds ember's
    generator, so the tensors' values repeat too).

    >>> from ember.utils.benchmark import Fuzzer, FuzzedParameter
    >>> f = Fuzzer([FuzzedParameter("m", 1, 100, distribution="uniform")], [],
    ...            constraints=[lambda m: m % 2 == 0], seed=3)
    >>> all(p["m"] % 2 == 0 for _, _, p in f.take(5))
    True
    """

    def __init__(self, parameters: list[Any], tensors: list[Any],
                 constraints: list[Callable[..., bool]] | None = None,
                 seed: int | None = None) -> None:
        self._parameters = _unpack(parameters, FuzzedParameter, "parameters")
        self._tensors = _unpack(tensors, FuzzedTensor, "tensors")
        clash = {p.name for p in self._parameters} & {t.name for t in self._tensors}
        if clash:
            raise ValueError(f"Fuzzer: names used by both a parameter and a tensor: "
                             f"{sorted(clash)}")
        self._constraints = list(constraints or ())
        if seed is None:
            seed = int(np.random.RandomState().randint(0, 2**31 - 1))
        self._seed = int(seed)
        self._total = 0
        self._rejections = 0

    def take(self, n: int) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
        """Yields ``n`` triples ``(tensors, tensor_properties, params)``."""
        import ember

        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"Fuzzer.take: n must be an int >= 0, got {n!r}")
        state = np.random.RandomState(self._seed)
        ember.manual_seed(self._seed)
        for _ in range(n):
            params = self._generate(state)
            tensors, props = {}, {}
            for t in self._tensors:
                tensors[t.name], props[t.name] = t._make_tensor(params, state)
            yield tensors, props, params

    @property
    def rejection_rate(self) -> float:
        """The fraction of drawn parameter sets rejected by the constraints so far."""
        return self._rejections / self._total if self._total else 0.0

    def _generate(self, state: np.random.RandomState) -> dict[str, Any]:
        strict = [p for p in self._parameters if p.strict]
        free = [p for p in self._parameters if not p.strict]
        tries = 0
        while tries < _MAX_TRIES:
            fixed = {p.name: p.sample(state) for p in strict}
            for _ in range(100):  # redraw the others with the strict ones held
                tries += 1
                self._total += 1
                params = dict(fixed)
                params.update({p.name: p.sample(state) for p in free})
                params = _resolve_aliases(params)
                if all(c(**params) for c in self._constraints) and all(
                        t.satisfies_constraints(params) for t in self._tensors):
                    return params
                self._rejections += 1
        raise RuntimeError(f"Fuzzer: no parameters satisfying the constraints were found in "
                           f"{_MAX_TRIES} draws; loosen the constraints or the tensors' bounds")


def _resolve_aliases(params: dict[str, Any]) -> dict[str, Any]:
    out = dict(params)
    for name in params:
        seen = [name]
        value = out[name]
        while isinstance(value, ParameterAlias):
            target = value.alias_to
            if target in seen:
                raise ValueError(f"Fuzzer: ParameterAlias cycle {' -> '.join([*seen, target])}")
            if target not in params:
                raise ValueError(f"Fuzzer: ParameterAlias to unknown parameter {target!r}")
            seen.append(target)
            value = out[target]
        out[name] = value
    return out
