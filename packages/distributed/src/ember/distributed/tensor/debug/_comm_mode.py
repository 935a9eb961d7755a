"""CommDebugMode (torch.distributed.tensor.debug.CommDebugMode): counts the collectives issued
inside it, overall and per module (forward / backward), under torch's op names.

ember's collectives are Python calls rather than dispatcher ops, so every collective entry point
reports itself (ember.distributed._comm_count) under the name torch counts it by:
``dist.all_reduce`` as ``c10d.allreduce_``, a functional collective or a DTensor redistribution
as ``c10d_functional.all_reduce`` / ``all_gather_into_tensor`` / ``reduce_scatter_tensor`` /
``all_to_all_single``, ``distribute_tensor`` as ``c10d.scatter_`` / ``c10d.broadcast_``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from ember.utils.module_tracker import ModuleTracker

from ... import _comm_count

__all__ = ["CommDebugMode"]


class _CommModuleTracker(ModuleTracker):
    """ModuleTracker plus what CommDebugMode reports per module: the running module's name
    (``name``; during backward the module whose backward started last), each module's type,
    depth, parameters and their placements, and the modules enclosing it."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "Global"
        self.module_helper_dict: dict[str, dict[str, Any]] = {}
        self.module_parameters_dict: dict[str, dict[str, Any]] = {}
        self.module_parents_dict: dict[str, set[str]] = {}
        self.parent_dict: dict[str, list[str]] = {}
        self.sharding_dict: dict[str, Any] = {}
        self.parent_list: list[str] = ["Global"]
        self.activation_checkpointing = False
        self._leave_handles: dict[int, Any] = {}

    def _pre_hook(self, mod: Any, args: Any) -> None:
        from .._dtensor import DTensor

        self.activation_checkpointing = self.is_bw  # a forward inside backward: recomputation
        name = self._name(mod)
        self.name = name
        super()._pre_hook(mod, args)
        if self.activation_checkpointing:
            return
        info = self.module_helper_dict.setdefault(name, {})
        info["module_type"] = str(type(mod)).replace("<", "").replace(">", "")
        info["depth"] = len(self.parents) - 1
        for pname, param in mod.named_parameters(recurse=False):
            self.module_parameters_dict.setdefault(name, {})[pname] = param.data
            if isinstance(param.data, DTensor):
                self.sharding_dict[f"{name}.{pname}"] = param.data.placements
                info.setdefault("parameters", {})[pname] = str(param.data.placements)
        self.module_parents_dict.setdefault(name, set(self.parents))
        self.parent_dict.setdefault(self.parent_list[-1], []).append(name)
        self.parent_list.append(name)
        if id(mod) not in self._leave_handles:
            # the module's own forward hook, after those registered before it (a parallel
            # style's output redistribution still belongs to the module)
            self._leave_handles[id(mod)] = mod.register_forward_hook(self._leave)

    def _leave(self, mod: Any, args: Any, output: Any) -> None:
        self.activation_checkpointing = self.is_bw
        if not self.activation_checkpointing and len(self.parent_list) > 1:
            self.parent_list.pop()
            self.name = self.parent_list[-1]

    def _bw_pre_hook(self, mod: Any, grad_output: Any) -> None:
        self.activation_checkpointing = False
        self.name = self._name(mod)

    def __enter__(self) -> _CommModuleTracker:
        from ember.nn.modules.module import register_module_full_backward_pre_hook

        self.activation_checkpointing = False
        for d in (self.module_parameters_dict, self.sharding_dict, self.parent_dict,
                  self.module_helper_dict, self.module_parents_dict):
            d.clear()
        self.parent_list = ["Global"]
        self.module_helper_dict["Global"] = {"depth": 0}
        self.module_parents_dict["Global"] = set()
        self.name = "Global"
        super().__enter__()
        self._bw_handle = register_module_full_backward_pre_hook(self._bw_pre_hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._bw_handle.remove()
        for handle in self._leave_handles.values():
            handle.remove()
        self._leave_handles.clear()


def _noise(noise_level: int) -> tuple[bool, bool]:
    """(module data shown, i.e. level >= 1; operations shown: never, see CommDebugMode)."""
    return noise_level > 0, False


class CommDebugMode:
    """A context manager counting the collectives issued inside it: ``get_comm_counts()`` maps
    torch's op packets (``ember.ops.c10d_functional.all_gather_into_tensor``,
    ``ember.ops.c10d.allreduce_``, ...) to counts, per module and pass in
    ``comm_module_counts`` and the tracing table.

    Operations are not traced: the tracing table and JSON dump list modules, their types and
    parameter placements, and their collectives, but not the DTensor operations PyTorch adds at
    noise levels 1-3.

    Example (2 ranks)::

        >>> with CommDebugMode() as comm_mode:  # doctest: +SKIP
        ...     d.redistribute(mesh, [Replicate()])
        >>> comm_mode.get_comm_counts()[ember.ops.c10d_functional.all_gather_into_tensor]  # doctest: +SKIP
        1
    """

    def __init__(self) -> None:
        self.comm_counts: dict[Any, int] = defaultdict(int)
        self.comm_module_counts: dict[str, dict[str, dict[Any, int]]] = {}
        self.comm_module_operation_counts: dict[str, Any] = {}
        self.advanced_module_tracker = _CommModuleTracker()

    # ---- counting ----
    def _record_comm(self, packet: Any) -> None:
        tracker = self.advanced_module_tracker
        self.comm_counts[packet] += 1
        key = "backward" if tracker.is_bw else "forward"
        for fqn in {tracker.name} | tracker.module_parents_dict.get(tracker.name, set()):
            counts = self.comm_module_counts.setdefault(
                fqn, {"forward": defaultdict(int), "backward": defaultdict(int)})
            counts[key][packet] += 1

    def __enter__(self) -> CommDebugMode:
        self.comm_counts.clear()
        self.comm_module_counts.clear()
        self.comm_module_counts["Global"] = {"forward": defaultdict(int),
                                             "backward": defaultdict(int)}
        self.comm_module_operation_counts.clear()
        self.advanced_module_tracker.__enter__()
        _comm_count.observers.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in _comm_count.observers:
            _comm_count.observers.remove(self)
        self.advanced_module_tracker.__exit__(*exc)

    # ---- results ----
    def get_total_counts(self) -> int:
        """The number of collectives counted."""
        return sum(self.comm_counts.values())

    def get_comm_counts(self) -> dict[Any, int]:
        """Collective op packet -> count (a defaultdict: an op never issued reads 0)."""
        return self.comm_counts

    def get_parameter_info(self) -> dict[str, dict[str, Any]]:
        """Module name -> {parameter name: parameter data}, for the modules run inside."""
        return self.advanced_module_tracker.module_parameters_dict

    def get_sharding_info(self) -> dict[str, Any]:
        """"<module>.<parameter>" -> placements, for the DTensor parameters of the modules run
        inside."""
        return self.advanced_module_tracker.sharding_dict

    def generate_comm_debug_tracing_table(self, noise_level: int = 3) -> str:
        """Per module (indented by depth): its collectives, forward and backward; from
        noise_level 1 on also its type and its parameters' placements."""
        module_data, _ = _noise(noise_level)
        tracker = self.advanced_module_tracker
        table = ""
        for fqn, info in tracker.module_helper_dict.items():
            indent = "  " * (2 * info["depth"])
            table += f"{indent}{fqn}\n"
            if module_data:
                if "module_type" in info:
                    table += f"{indent}*module type: {info['module_type']}\n"
                if "parameters" in info:
                    table += f"{indent}*Parameter List\n"
                    for pname, placement in info["parameters"].items():
                        table += f"{indent} *{pname}: {placement}\n"
            indent += "  "
            coll_indent = "  " * (2 * info["depth"] + 2)
            counts = self.comm_module_counts.get(fqn, {"forward": {}, "backward": {}})
            for key, title in (("forward", "FORWARD PASS"), ("backward", "BACKWARD PASS")):
                if counts[key]:
                    table += f"{indent}{title}\n"
                    for packet, count in counts[key].items():
                        table += f"\033[1;33m{coll_indent}*{packet}: {count}\033[0m\n"
        return table

    def log_comm_debug_tracing_table_to_file(self, file_name: str = "comm_mode_log.txt",
                                             noise_level: int = 3) -> None:
        """Writes the tracing table (without colour codes) to file_name."""
        table = re.sub(r"\x1B\[[0-?]*[ -/]*[@-~]", "",
                       self.generate_comm_debug_tracing_table(noise_level))
        with open(file_name, "w") as f:
            f.write(table)

    def generate_json_dump(self, file_name: str = "comm_mode_log.json",
                           noise_level: int = 3) -> None:
        """Writes the module tree as JSON: per module its fqn, type, parameters, children and
        collectives (forward / backward); the operation lists are empty (not traced)."""
        module_data, _ = _noise(noise_level)
        tracker = self.advanced_module_tracker

        def node(fqn: str) -> dict[str, Any]:
            info = tracker.module_helper_dict.get(fqn, {})
            counts = self.comm_module_counts.get(fqn, {"forward": {}, "backward": {}})
            return {
                "fqn": fqn,
                "module_type": info.get("module_type", "") if module_data else "",
                "parameters": list(info.get("parameters", {}).items()) if module_data else [],
                "children": [node(c) for c in tracker.parent_dict.get(fqn, [])],
                "collectives_forward": [(str(k), v) for k, v in counts["forward"].items()],
                "collectives_backward": [(str(k), v) for k, v in counts["backward"].items()],
                "operations_forward": [],
                "operations_backward": [],
                "operations_checkpointing": [],
            }

        with open(file_name, "w") as f:
            json.dump(node("Global"), f, indent=4)

    def __repr__(self) -> str:
        return f"CommDebugMode(get_total_counts()={self.get_total_counts()})"
