"""Training with uneven inputs: the ``Join`` context manager (torch.distributed.algorithms.join's
API).

When the ranks hold different numbers of batches, a rank that runs out would leave the others
waiting forever in their next collective. Inside ``with Join([model, ...]):`` a rank that has
left its training loop ("joined") keeps answering the collectives of the ranks that still train:
each of their iterations starts with a one-element all-reduce (the join signal, started by
``Join.notify_join_context`` from the joinable's forward); a joined rank answers it with 0 and
then runs every joinable's ``JoinHook.main_hook`` (DDP's all-reduces zero gradients for each
bucket). Once every rank has joined, each ``JoinHook.post_hook(is_last_joiner)`` runs (DDP
broadcasts the model from the last rank that joined, so all replicas end equal).

Every rank of the group must enter the context, with the joinables in the same order. The first
joinable drives the join signal; all of them must share a process group and device.

Example (each rank with its own number of batches)::

    from ember.distributed.algorithms.join import Join
    model = DistributedDataParallel(net)
    with Join([model]):                    # or: with model.join():
        for x, y in my_batches:            # fewer batches on some ranks: no hang
            loss_fn(model(x), y).backward()
            opt.step(); opt.zero_grad()
"""

from __future__ import annotations

import abc
import warnings
from typing import Any, NamedTuple

import ember

__all__ = ["Join", "JoinHook", "Joinable"]

# After this many iterations in which a joined rank shadowed the others, Join warns once that
# the inputs are very uneven (the joined rank only spins in collectives).
_SKEW_WARNING = 1000


class JoinHook:
    """What a joinable does on a rank that has joined (both methods do nothing by default).

    ``main_hook()`` runs once per iteration of the ranks that still train, and must issue the
    same collectives as one of their iterations; ``post_hook(is_last_joiner)`` runs once every
    rank has joined.

    Example::

        >>> class Counter(JoinHook):
        ...     def __init__(self): self.shadowed = 0
        ...     def main_hook(self): self.shadowed += 1
        >>> h = Counter(); h.main_hook(); h.shadowed
        1
    """

    def main_hook(self) -> None:
        """Shadows one iteration of the ranks that have not joined yet."""

    def post_hook(self, is_last_joiner: bool) -> None:
        """Runs after every rank joined; ``is_last_joiner`` tells whether this rank was among
        the last ones to join."""


class _JoinConfig(NamedTuple):
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def disabled() -> _JoinConfig:
        return _JoinConfig(False, False, False)


class Joinable(abc.ABC):
    """A class whose instances ``Join`` can manage: it provides ``join_hook(**kwargs)``, and the
    properties ``join_device`` and ``join_process_group``, and calls
    ``Join.notify_join_context(self)`` once per iteration (before its collectives).

    Any class with these three members counts as a Joinable (``isinstance`` checks them), so a
    class need not inherit from this one; ``DistributedDataParallel`` is one.
    """

    def __init__(self) -> None:
        super().__init__()
        self._join_config = _JoinConfig.disabled()

    @abc.abstractmethod
    def join_hook(self, **kwargs: Any) -> JoinHook:
        """The JoinHook to run on a joined rank (kwargs come from ``Join(..., **kwargs)``)."""

    @property
    @abc.abstractmethod
    def join_device(self) -> Any:
        """The device of the join signal's tensors."""

    @property
    @abc.abstractmethod
    def join_process_group(self) -> Any:
        """The process group over which the join signal is all-reduced (None: the default)."""

    @classmethod
    def __subclasshook__(cls, other: type) -> bool:
        if cls is Joinable:
            members = ("join_hook", "join_device", "join_process_group")
            if all(any(m in base.__dict__ for base in other.__mro__) for m in members):
                return True
        return NotImplemented


def _dist() -> Any:
    import ember.distributed as dist

    return dist


def _group(pg: Any) -> Any:
    """A joinable's process group, None read as the default group it stands for."""
    return _dist().distributed_c10d._get_default_group() if pg is None else pg


class Join:
    """Context manager for training with uneven inputs over the ranks (see the module doc).

    Args:
        joinables: the objects taking part (e.g. ``[ddp_model]``), the same on every rank.
        enable: False makes the context do nothing (the joinables act as outside it).
        throw_on_early_termination: instead of shadowing, raise on every rank as soon as one
            rank has run out of inputs (the others raise in their next iteration).
        **kwargs: passed to each joinable's ``join_hook`` (e.g. DDP's
            ``divide_by_initial_world_size``).

    Example::

        >>> with Join([ddp_model], divide_by_initial_world_size=False):  # doctest: +SKIP
        ...     train(ddp_model, my_batches)
    """

    def __init__(
        self,
        joinables: list[Any],
        enable: bool = True,
        throw_on_early_termination: bool = False,
        **kwargs: Any,
    ) -> None:
        joinables = list(joinables)
        if not joinables:
            raise ValueError("Join: joinables must list at least one Joinable")
        for j in joinables:
            if not isinstance(j, Joinable):
                raise TypeError(
                    "Join: every joinable needs join_hook(), join_device and join_process_group "
                    f"(a Joinable such as DistributedDataParallel), got {type(j).__name__}"
                )
        self._joinables = joinables
        self._enable = bool(enable)
        self._throw_on_early_termination = bool(throw_on_early_termination)
        self._join_hooks = [j.join_hook(**kwargs) for j in joinables]
        self._set_configs(enable)
        first = joinables[0]
        self._device = first.join_device
        self._process_group = _group(first.join_process_group)
        for j in joinables[1:]:
            if _group(j.join_process_group) is not self._process_group:
                raise ValueError("Join: every joinable must use the same process group, got "
                                 f"{self._process_group} and {j.join_process_group}")
            if str(j.join_device) != str(self._device):
                raise ValueError(
                    f"Join: every joinable must use the same device, got {self._device} and "
                    f"{j.join_device}"
                )
        self._rank = _dist().get_rank(self._process_group)

    def _set_configs(self, enable: bool) -> None:
        for i, j in enumerate(self._joinables):
            j._join_config = (
                _JoinConfig(enable, self._throw_on_early_termination, i == 0)
                if enable
                else _JoinConfig.disabled()
            )

    def __enter__(self) -> Join:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if not self._enable or exc_type is not None:
                return  # an error propagates as is (the other ranks find out by their timeout)
            is_last_joiner = True
            shadowed = 0
            while True:
                # Answers the join signal of the ranks still training: a sum of zero means
                # that every rank has joined.
                if self._count_not_joined() == 0:
                    break
                if self._throw_on_early_termination:
                    self._notify_ranks_to_terminate()
                for hook in self._join_hooks:
                    hook.main_hook()
                is_last_joiner = False
                shadowed += 1
                if shadowed == _SKEW_WARNING:
                    warnings.warn(
                        f"Join: rank {self._rank} has shadowed {_SKEW_WARNING} iterations of "
                        "ranks that still have inputs: the inputs are very uneven across ranks",
                        stacklevel=2,
                    )
            for hook in self._join_hooks:
                hook.post_hook(is_last_joiner)
        finally:
            self._set_configs(False)

    def _count_not_joined(self) -> int:
        dist = _dist()
        zero = ember.zeros(1, device=self._device)
        dist.all_reduce(zero, group=self._process_group)
        return int(zero.item())

    def _notify_ranks_to_terminate(self) -> None:
        dist = _dist()
        one = ember.ones(1, device=self._device)
        dist.all_reduce(one, group=self._process_group)
        raise RuntimeError(
            f"Join: rank {self._rank} has run out of inputs (throw_on_early_termination=True)"
        )

    @staticmethod
    def notify_join_context(joinable: Any) -> Any:
        """Called by a joinable once per iteration, before its own collectives: tells the
        joined ranks that this rank still trains (an async all-reduce of 1 whose result, once
        waited for, is the number of ranks still training). Returns that all-reduce's Work, or
        None when the joinable is not the first of an enabled Join. With
        throw_on_early_termination, raises when some rank has run out of inputs."""
        config = getattr(joinable, "_join_config", None)
        if config is None:
            raise RuntimeError(
                f"Join.notify_join_context: {type(joinable).__name__} was not set up as a "
                "Joinable (its __init__ must set _join_config, as Joinable.__init__ does)"
            )
        if not (config.enable and config.is_first_joinable):
            return None
        dist = _dist()
        device, group = joinable.join_device, joinable.join_process_group
        ones = ember.ones(1, device=device)
        work = _CountWork(dist.all_reduce(ones, group=group, async_op=True), ones)
        if config.throw_on_early_termination:
            flag = ember.zeros(1, device=device)
            dist.all_reduce(flag, group=group)
            if flag.item() != 0:
                raise RuntimeError(
                    "Join: a rank has run out of inputs (throw_on_early_termination=True); "
                    "raising on every rank"
                )
        return work


class _CountWork:
    """The join signal's all-reduce: ``wait()`` it, then ``count()`` is the number of ranks
    that had not joined."""

    def __init__(self, work: Any, tensor: ember.Tensor) -> None:
        self._work, self._tensor = work, tensor

    def wait(self) -> bool:
        if self._work is not None:
            self._work.wait()
            self._work = None
        return True

    def count(self) -> int:
        self.wait()
        return int(self._tensor.item())

    def result(self) -> list:
        self.wait()
        return [self._tensor]
