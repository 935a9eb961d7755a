"""What DistributedDataParallel's communication hooks see and return: ``GradBucket`` (one
bucket of flattened gradients) and ``Future`` (a result that is ready after ``wait()``).

A hook ``hook(state, bucket) -> Future`` starts the bucket's reduction and returns a future of
the reduced flat tensor; DDP waits for it at the end of backward and copies the result into the
parameters' gradients.

>>> import ember
>>> from ember.distributed.algorithms._comm_types import Future
>>> f = Future()
>>> g = f.then(lambda fut: fut.value() * 2)
>>> f.set_result(ember.ones(2))
>>> g.wait().tolist()
[2.0, 2.0]
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ember import futures as _futures

__all__ = ["Future", "GradBucket"]

T = TypeVar("T")


class Future(_futures.Future[T]):
    """``ember.futures.Future`` (the public type a comm hook returns), made complete either by
    ``set_result`` or by a waiter function given at construction, which the first ``wait()``
    calls once (e.g. one that waits for a collective's ``Work``). ``then(callback)`` chains:
    the returned future's value is ``callback(self)``, computed once this one completes.
    """

    def __init__(self, waiter: Callable[[], T] | None = None, *,
                 devices: list[Any] | None = None) -> None:
        super().__init__(devices=devices)
        if waiter is not None:
            if not callable(waiter):
                raise TypeError(
                    f"Future: waiter must be callable, got {type(waiter).__name__}"
                )
            self._set_waiter(waiter)


class GradBucket:
    """One bucket of DistributedDataParallel's gradient reduction: a flat tensor holding the
    gradients of some parameters (those registered last come first), views into it per
    parameter, and where it stands in the iteration."""

    def __init__(
        self, index: int, buffer: Any, gradients: list, parameters: list, is_last: bool
    ) -> None:
        self._index = index
        self._buffer = buffer
        self._gradients = gradients
        self._parameters = parameters
        self._is_last = is_last

    def index(self) -> int:
        """The bucket's index; bucket 0 is reduced first."""
        return self._index

    def buffer(self) -> Any:
        """The flat 1-D tensor of the bucket's gradients."""
        return self._buffer

    def set_buffer(self, buffer: Any) -> None:
        """Replaces the bucket's tensor with buffer (as torch: e.g. a float16 copy that a hook
        wrapper hands to the hook it wraps). DDP takes the gradients from the value of the
        hook's future, not from this tensor; buffer must have the bucket's number of elements.

        >>> import ember
        >>> b = GradBucket(0, ember.ones(3), [], [], True)
        >>> b.set_buffer(b.buffer().half()); b.buffer().dtype
        ember.float16
        """
        import ember

        if not isinstance(buffer, ember.Tensor) or buffer.numel() != self._buffer.numel():
            raise ValueError(
                f"GradBucket.set_buffer: expected a tensor of {self._buffer.numel()} elements "
                f"(the bucket's), got {type(buffer).__name__} "
                f"{tuple(getattr(buffer, 'shape', ()))}"
            )
        self._buffer = buffer

    def gradients(self) -> list:
        """Per parameter, its gradient as a view into ``buffer()``."""
        return list(self._gradients)

    def parameters(self) -> list:
        """The bucket's parameters, in the order of ``gradients()``."""
        return list(self._parameters)

    def is_last(self) -> bool:
        """Whether this is the last bucket of the iteration."""
        return self._is_last

    def __repr__(self) -> str:
        return (
            f"GradBucket(index={self._index}, numel={self._buffer.numel()}, "
            f"parameters={len(self._parameters)}, is_last={self._is_last})"
        )
