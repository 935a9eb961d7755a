"""DefaultSavePlanner / DefaultLoadPlanner: accepted for the default behaviour (flatten nested
dicts, deduplicate replicated entries); ember has no planner hooks to customize."""

from __future__ import annotations

from typing import Any

__all__ = ["DefaultLoadPlanner", "DefaultSavePlanner"]


class DefaultSavePlanner:
    def __init__(self, flatten_state_dict: bool = True, flatten_sharded_tensors: bool = True,
                 dedup_replicated_tensors: Any = None, dedup_save_to_lowest_rank: bool = False,
                 enable_plan_caching: bool = False) -> None:
        if not flatten_state_dict:
            raise NotImplementedError("DefaultSavePlanner(flatten_state_dict=False) is not "
                                      "supported by ember's dcp.save")


class DefaultLoadPlanner:
    def __init__(self, flatten_state_dict: bool = True, flatten_sharded_tensors: bool = True,
                 allow_partial_load: bool = False) -> None:
        if not flatten_state_dict or allow_partial_load:
            raise NotImplementedError("DefaultLoadPlanner: only the defaults (flatten, no "
                                      "partial load) are supported by ember's dcp.load")
