"""ZeroRedundancyOptimizer: optimizer state sharded over the ranks of a group (ZeRO stage 1).

Each rank owns some parameters (per param group, largest first, each to the rank whose share is
smallest so far, as PyTorch assigns them) and keeps the wrapped optimizer's state only for
those; step() updates the owned parameters and then broadcasts every parameter from its owner,
so all ranks end with the same parameters, as with the plain optimizer (gradients must already
be the same on every rank, e.g. averaged by DistributedDataParallel).

Example::

    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=ember.optim.Adam, lr=1e-3)
    loss.backward(); opt.step()
    opt.consolidate_state_dict(to=0)          # every rank calls it
    if dist.get_rank() == 0:
        ember.save(opt.state_dict(), "optim.pt")
"""

from __future__ import annotations

from typing import Any, Callable

from ember.optim import Optimizer

from .. import distributed_c10d as c10d
from ..algorithms.join import Join, JoinHook, _JoinConfig

__all__ = ["ZeroRedundancyOptimizer"]


class _ZeROJoinHook(JoinHook):
    """On a rank that ran out of inputs (under Join): each iteration of the others, a step,
    so that this rank still broadcasts the parameters it owns (updated by whatever gradients
    it holds: none after zero_grad, as torch)."""

    def __init__(self, zero: ZeroRedundancyOptimizer) -> None:
        self.zero = zero

    def main_hook(self) -> None:
        self.zero.step()


class ZeroRedundancyOptimizer(Optimizer):
    """Wraps optimizer_class (built with **defaults) so that each rank of process_group (the
    world when None) holds the state of its share of the parameters only.

    It is a Joinable: ``with Join([ddp_model, zero_optimizer]):`` trains on uneven inputs.

    parameters_as_bucket_view is accepted (the parameters stay separate tensors: the results
    are the same); overlap_with_ddp is not supported."""

    def __init__(self, params: Any, optimizer_class: type[Optimizer],
                 process_group: Any = None, parameters_as_bucket_view: bool = False,
                 overlap_with_ddp: bool = False, **defaults: Any) -> None:
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer: overlap_with_ddp=True is not "
                                      "supported; step after backward instead")
        self._ready = False
        self._join_config = _JoinConfig.disabled()
        super().__init__(params, defaults)
        self.process_group = process_group
        self.world_size = c10d.get_world_size(process_group)
        self.rank = c10d.get_rank(process_group)
        self.global_rank = c10d.get_rank()
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self._optim_constructor = optimizer_class
        self._optim_defaults = defaults
        self._all_state_dicts: list[dict] = []
        self._partition = self._partition_parameters()
        mine = self._partition[self.rank]
        self.optim = optimizer_class(mine, **defaults)
        self._ready = True

    def _partition_parameters(self) -> list[list[dict[str, Any]]]:
        """For each rank, its param groups (the hyper-parameters of self.param_groups, the
        parameters it owns): per group, largest parameters first, each to the rank holding
        the fewest elements so far."""
        sizes = [0] * self.world_size
        out: list[list[dict[str, Any]]] = [[] for _ in range(self.world_size)]
        for group in self.param_groups:
            per_rank: list[list] = [[] for _ in range(self.world_size)]
            for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
                r = sizes.index(min(sizes))
                per_rank[r].append(p)
                sizes[r] += p.numel()
            for r in range(self.world_size):
                g = {k: v for k, v in group.items() if k not in ("params", "param_names")}
                g["params"] = per_rank[r]
                out[r].append(g)
        return out

    def _owner(self) -> dict[int, int]:
        return {id(p): r for r, groups in enumerate(self._partition)
                for g in groups for p in g["params"]}

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Adds a param group; its parameters are shared out like the others'."""
        super().add_param_group(param_group)
        if getattr(self, "_ready", False):
            self._partition = self._partition_parameters()
            self.optim.add_param_group(self._partition[self.rank][-1])

    def _sync_hyperparameters(self, src: list[dict], dst: list[dict]) -> None:
        for s, d in zip(src, dst):
            for k, v in s.items():
                if k not in ("params", "param_names"):
                    d[k] = v

    def step(self, closure: Callable[[], Any] | None = None, **kwargs: Any) -> Any:
        """Updates this rank's parameters with the wrapped optimizer, then broadcasts every
        parameter from its owner. Every rank of the group calls it."""
        Join.notify_join_context(self)
        self._sync_hyperparameters(self.param_groups, self.optim.param_groups)
        loss = self.optim.step(closure, **kwargs) if closure is not None or kwargs \
            else self.optim.step()
        self._sync_hyperparameters(self.optim.param_groups, self.param_groups)
        for r, groups in enumerate(self._partition):
            tensors = [p.data for g in groups for p in g["params"]]
            if tensors:
                c10d._broadcast_coalesced(self.process_group, tensors,
                                          src=self._global(r))
        return loss

    def join_hook(self, **kwargs: Any) -> JoinHook:
        """The hook Join runs on this rank once it has run out of inputs (a step per
        iteration of the other ranks)."""
        return _ZeROJoinHook(self)

    @property
    def join_device(self) -> Any:
        """The device of the parameters (of the join signal)."""
        return self.param_groups[0]["params"][0].device

    @property
    def join_process_group(self) -> Any:
        """The group the parameters are broadcast over."""
        return self.process_group

    def _global(self, group_rank: int) -> int:
        if self.process_group is None:
            return group_rank
        return c10d.get_global_rank(self.process_group, group_rank)

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gathers every rank's share of the optimizer state on rank `to` (a rank of the
        group) for state_dict(). Every rank of the group calls it."""
        self._sync_hyperparameters(self.param_groups, self.optim.param_groups)
        local = self.optim.state_dict()
        gathered: list | None = [None] * self.world_size if self.rank == to else None
        c10d.gather_object(local, gathered, dst=self._global(to), group=self.process_group)
        self._all_state_dicts = gathered or []

    def state_dict(self) -> dict[str, Any]:
        """The whole optimizer's state dict, as the wrapped optimizer over all parameters
        would give it (loadable into one); only on the rank consolidate_state_dict gathered to."""
        if not self._all_state_dicts:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. Please "
                               "call `consolidate_state_dict(to=0)` on all ranks beforehand if "
                               "you meant to save the global state.")
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state: dict[int, Any] = {}
        for r, sd in enumerate(self._all_state_dicts):
            local_params = [p for g in self._partition[r] for p in g["params"]]
            for i, s in sd["state"].items():
                state[index[id(local_params[i])]] = s
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Loads a whole optimizer's state dict (from state_dict(), or from the wrapped
        optimizer over the same parameters); each rank keeps its share."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"ZeroRedundancyOptimizer.load_state_dict: the state dict has "
                             f"{len(saved_groups)} parameter groups, the optimizer has "
                             f"{len(self.param_groups)}")
        index: dict[int, Any] = {}
        for g, sg in zip(self.param_groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("ZeroRedundancyOptimizer.load_state_dict: a parameter group "
                                 "has a different number of parameters")
            for p, i in zip(g["params"], sg["params"]):
                index[id(p)] = i
            for k, v in sg.items():
                if k != "params":
                    g[k] = v
        local_groups, local_state, n = [], {}, 0
        for g in self._partition_parameters()[self.rank]:
            packed = {k: v for k, v in saved_groups[len(local_groups)].items() if k != "params"}
            packed["params"] = list(range(n, n + len(g["params"])))
            for j, p in enumerate(g["params"]):
                s = state_dict["state"].get(index[id(p)])
                if s is not None:
                    local_state[n + j] = s
            n += len(g["params"])
            local_groups.append(packed)
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})
        self._sync_hyperparameters(self.optim.param_groups, self.param_groups)
