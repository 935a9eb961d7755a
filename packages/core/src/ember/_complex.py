"""The Python side of complex tensors: ``Tensor.real`` / ``Tensor.imag`` as writable view
properties, ``complex(t)``, the conjugate/negative-bit predicates (ember never conjugates
lazily: ``conj()`` makes a new tensor, so ``is_conj()`` is always False) and the
``Tensor.stft`` / ``Tensor.istft`` methods.

>>> import ember
>>> z = ember.tensor([1 + 2j, 3 - 1j])
>>> z
tensor([1.+2.j, 3.-1.j])
>>> z.real, z.imag
(tensor([1., 3.]), tensor([ 2., -1.]))
>>> z.imag = ember.zeros(2)
>>> z
tensor([1.+0.j, 3.+0.j])
"""

from __future__ import annotations

from typing import Any

from ember import _C
from ember._argcheck import method_args
from ember._C import Tensor

__all__ = ["is_conj", "resolve_conj", "is_neg", "resolve_neg"]


def _get_real(self: Tensor) -> Tensor:
    return _C.real(self)


def _set_real(self: Tensor, value: Any) -> None:
    _C.real(self).copy_(value if isinstance(value, Tensor) else _C.tensor(value))


def _get_imag(self: Tensor) -> Tensor:
    return _C.imag(self)


def _set_imag(self: Tensor, value: Any) -> None:
    _C.imag(self).copy_(value if isinstance(value, Tensor) else _C.tensor(value))


def is_conj(input: Tensor) -> bool:
    """Whether the tensor's conjugate bit is set: never in ember (``conj()`` materializes).

    >>> import ember
    >>> ember.is_conj(ember.tensor([1j]).conj())
    False
    """
    return False


def _require_tensor(op: str, input: Any) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")


def resolve_conj(input: Tensor) -> Tensor:
    """``input`` itself: ember has no lazy conjugation to resolve.

    >>> import ember
    >>> ember.resolve_conj(ember.tensor([1j])).tolist()
    [1j]
    """
    _require_tensor("resolve_conj", input)
    return input


def is_neg(input: Tensor) -> bool:
    """Whether the tensor's negative bit is set: never in ember.

    >>> import ember
    >>> ember.is_neg(ember.ones(1))
    False
    """
    return False


def resolve_neg(input: Tensor) -> Tensor:
    """``input`` itself: ember has no lazy negation to resolve.

    >>> import ember
    >>> ember.resolve_neg(ember.ones(1)).tolist()
    [1.0]
    """
    _require_tensor("resolve_neg", input)
    return input


def _complex(self: Tensor) -> complex:
    from ember._tensor import _check_one_element

    _check_one_element(self)
    return complex(self.item())


def _stft(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    from ember._spectral import stft

    return stft(self, *args, **kwargs)


def _istft(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    from ember._spectral import istft

    return istft(self, *args, **kwargs)


_stft.__doc__ = "``ember.stft`` of this tensor."
_istft.__doc__ = "``ember.istft`` of this tensor."


_real_uniform_ = Tensor.uniform_
_real_normal_ = Tensor.normal_


def _uniform_stub(from_: float = 0.0, to: float = 1.0, *, generator: Any = None) -> None:
    """uniform_'s signature, for its argument errors (ember._argcheck.method_args)."""


def _normal_stub(mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> None:
    """normal_'s signature, for its argument errors."""


_RANDOM_KINDS = {"from_": "float", "to": "float", "mean": "float", "std": "float",
                 "generator": "Generator"}


@method_args("uniform_", _uniform_stub, _RANDOM_KINDS)
def _uniform_(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Fills self with U(from, to) draws; a complex tensor's real and imaginary parts are each
    drawn from U(from, to), as in PyTorch."""
    if "from" in kwargs:  # uniform_(**{"from": a}): PyTorch's name of from_
        kwargs["from_"] = kwargs.pop("from")
    if not self.is_complex():
        return _real_uniform_(self, *args, **kwargs)
    _real_uniform_(_C.view_as_real(self), *args, **kwargs)
    return self


@method_args("normal_", _normal_stub, _RANDOM_KINDS)
def _normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) \
        -> Tensor:
    """Fills self with N(mean, std) draws; a complex tensor's real and imaginary parts are each
    drawn from N(mean, std / sqrt(2)) (so E|z - mean|^2 = std^2), as in PyTorch."""
    if not self.is_complex():
        return _real_normal_(self, mean, std, generator=generator)
    _real_normal_(_C.view_as_real(self), mean, std / 2 ** 0.5, generator=generator)
    return self


def install(namespace: dict) -> None:
    Tensor.uniform_ = _uniform_
    Tensor.normal_ = _normal_
    Tensor.real = property(_get_real, _set_real, doc="The real parts (a view; assignable).")
    Tensor.imag = property(_get_imag, _set_imag,
                           doc="The imaginary parts of a complex tensor (a view; assignable).")
    Tensor.is_conj = is_conj
    Tensor.resolve_conj = resolve_conj
    Tensor.is_neg = is_neg
    Tensor.resolve_neg = resolve_neg
    Tensor.__complex__ = _complex
    Tensor.stft = _stft
    Tensor.istft = _istft
    for name in __all__:
        namespace[name] = globals()[name]
