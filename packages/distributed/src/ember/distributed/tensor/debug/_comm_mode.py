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

from ember.utils._python_dispatch import TorchDispatchMode
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


# ops left out of the tables below noise level 3
_TRIVIAL_OPS = {"aten.detach.default", "aten.t.default", "aten.view.default",
                "aten._to_copy.default", "aten.as_strided.default", "aten.transpose.int"}


def _noise(noise_level: int) -> tuple[bool, bool, bool]:
    """(level >= 1: module data and DTensor operations, >= 2: every operation, >= 3: the
    trivial ones too)."""
    return noise_level > 0, noise_level > 1, noise_level > 2


def _shown(op: dict[str, Any], noise_level: int) -> bool:
    dtensor_ops, all_ops, trivial = _noise(noise_level)
    if trivial:
        return True
    if str(op["name"]) in _TRIVIAL_OPS:
        return False
    return all_ops or (dtensor_ops and bool(op["input_shape"]))


class CommDebugMode(TorchDispatchMode):
    """A context manager counting the collectives issued inside it: ``get_comm_counts()`` maps
    torch's op packets (``ember.ops.c10d_functional.all_gather_into_tensor``,
    ``ember.ops.c10d.allreduce_``, ...) to counts; per module and pass (forward / backward) in
    ``comm_module_counts``, the tracing table and the JSON dump, with the operations run in
    each module (a TorchDispatchMode: every op inside goes through Python, as in PyTorch).

    ember's collectives are not dispatcher ops, so the operation lists do not show them (nor
    the ops of the shm backend's own copies, which ember does run as tensor ops).

    Example (2 ranks)::

        >>> with CommDebugMode() as comm_mode:  # doctest: +SKIP
        ...     d.redistribute(mesh, [Replicate()])
        >>> comm_mode.get_comm_counts()[ember.ops.c10d_functional.all_gather_into_tensor]  # doctest: +SKIP
        1
    """

    def __init__(self) -> None:
        super().__init__()
        self.comm_counts: dict[Any, int] = defaultdict(int)
        self.comm_module_counts: dict[str, dict[str, dict[Any, int]]] = {}
        self.comm_module_operation_counts: dict[str, dict[str, list]] = {}
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

    def __torch_dispatch__(self, func: Any, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        from .._dtensor import DTensor

        tracker = self.advanced_module_tracker
        op: dict[str, Any] = {"name": func, "input_shape": [], "input_sharding": [],
                              "device_mesh": "", "is_bw": tracker.is_bw,
                              "is_activation_checkpointing": tracker.activation_checkpointing}
        ops = self.comm_module_operation_counts.setdefault(
            tracker.name, {"operations_list": []})["operations_list"]
        if any(t is DTensor for t in types):
            for a in args:
                if isinstance(a, DTensor):
                    op["input_shape"].append(a.shape)
                    op["input_sharding"].append(a.placements)
                    op["device_mesh"] = str(a.device_mesh)
            ops.append(op)
            return NotImplemented  # DTensor runs it (its pieces' ops come back here)
        out = func(*args, **(kwargs or {}))
        ops.append(op)
        return out

    def __enter__(self) -> CommDebugMode:
        self.comm_counts.clear()
        self.comm_module_counts.clear()
        self.comm_module_counts["Global"] = {"forward": defaultdict(int),
                                             "backward": defaultdict(int)}
        self.comm_module_operation_counts.clear()
        super().__enter__()
        self.advanced_module_tracker.__enter__()
        _comm_count.observers.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in _comm_count.observers:
            _comm_count.observers.remove(self)
        self.advanced_module_tracker.__exit__(*exc)
        super().__exit__(*exc)

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

    def _operations(self, fqn: str) -> tuple[list, list, list]:
        """A module's (forward, backward, recomputation) operations."""
        ops = self.comm_module_operation_counts.get(fqn, {"operations_list": []})
        ops = ops["operations_list"]
        return ([o for o in ops if not o["is_bw"]],
                [o for o in ops if o["is_bw"] and not o["is_activation_checkpointing"]],
                [o for o in ops if o["is_activation_checkpointing"]])

    def generate_comm_debug_tracing_table(self, noise_level: int = 3) -> str:
        """Per module (indented by depth): its collectives and operations, forward and backward.
        noise_level 0: the collectives; 1: also each module's type and parameter placements and
        its non-trivial DTensor operations; 2: all non-trivial operations; 3: all operations."""
        module_data = _noise(noise_level)[0]
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
            op_indent = "  " * (2 * info["depth"] + 3)
            counts = self.comm_module_counts.get(fqn, {"forward": {}, "backward": {}})
            fw, bw, ckpt = self._operations(fqn) if module_data else ([], [], [])

            def section(title: str, collectives: dict, ops: list) -> str:
                text = f"{indent}{title}\n"
                for packet, count in collectives.items():
                    text += f"\033[1;33m{coll_indent}*{packet}: {count}\033[0m\n"
                for o in ops:
                    if not _shown(o, noise_level):
                        continue
                    text += f"\033[1;33m{coll_indent}**{o['name']}\033[0m\n"
                    if o["input_shape"]:
                        text += f"\033[1;31m{op_indent}shape: {o['input_shape']}\033[0m\n"
                        text += (f"\033[1;31m{op_indent}sharding: {o['input_sharding']}"
                                 "\033[0m\n")
                        text += (f"\033[1;31m{op_indent}device mesh: {o['device_mesh']}"
                                 "\033[0m\n")
                return text

            if counts["forward"] or fw:
                table += section("FORWARD PASS", counts["forward"], fw)
            if counts["backward"] or bw:
                table += section("BACKWARD PASS", counts["backward"], bw)
            if ckpt:
                table += section("ACTIVATION CHECKPOINTING", {}, ckpt)
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
        """Writes the module tree as JSON: per module its fqn, type, parameters, children,
        collectives and operations (forward / backward / recomputation) at noise_level."""
        module_data = _noise(noise_level)[0]
        tracker = self.advanced_module_tracker

        def as_json(ops: list) -> list:
            return [{**o, "name": str(o["name"]),
                     "input_shape": [str(x) for x in o["input_shape"]],
                     "input_sharding": [str(x) for x in o["input_sharding"]]}
                    for o in ops if _shown(o, noise_level)]

        def node(fqn: str) -> dict[str, Any]:
            info = tracker.module_helper_dict.get(fqn, {})
            counts = self.comm_module_counts.get(fqn, {"forward": {}, "backward": {}})
            fw, bw, ckpt = self._operations(fqn) if module_data else ([], [], [])
            return {
                "fqn": fqn,
                "module_type": info.get("module_type", "") if module_data else "",
                "parameters": list(info.get("parameters", {}).items()) if module_data else [],
                "children": [node(c) for c in tracker.parent_dict.get(fqn, [])],
                "collectives_forward": [(str(k), v) for k, v in counts["forward"].items()],
                "collectives_backward": [(str(k), v) for k, v in counts["backward"].items()],
                "operations_forward": as_json(fw),
                "operations_backward": as_json(bw),
                "operations_checkpointing": as_json(ckpt),
            }

        with open(file_name, "w") as f:
            json.dump(node("Global"), f, indent=4)

    def __repr__(self) -> str:
        return f"CommDebugMode(get_total_counts()={self.get_total_counts()})"
