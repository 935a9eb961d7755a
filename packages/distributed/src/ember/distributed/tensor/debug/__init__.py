"""torch.distributed.tensor.debug: visualize_sharding prints which ranks hold which block of a
1-D or 2-D DTensor; CommDebugMode counts the collectives issued inside it."""

from __future__ import annotations

import itertools
from typing import Any

from ._comm_mode import CommDebugMode

__all__ = ["CommDebugMode", "visualize_sharding"]


def _blocks(dtensor: Any) -> dict[tuple, list[int]]:
    """(row range, col range) of each block -> the global ranks holding it."""
    from .._dtensor import _local_region

    mesh, spec = dtensor.device_mesh, dtensor._spec
    ranks = mesh.mesh.tolist()
    blocks: dict[tuple, list[int]] = {}
    for coord in itertools.product(*(range(n) for n in mesh.shape)):
        offsets, sizes = _local_region(spec.shape, mesh, spec.placements, coord)
        if any(s == 0 for s in sizes):
            continue
        key = tuple((o, o + s - 1) for o, s in zip(offsets, sizes))
        rank = ranks
        for c in coord:
            rank = rank[c]
        blocks.setdefault(key, []).append(int(rank))
    return blocks


def visualize_sharding(dtensor: Any, header: str = "", use_rich: bool = False) -> None:
    """Prints (on the rank at index 0 of every mesh dim) a table of the blocks of a 1-D or 2-D
    DTensor and the ranks holding each; nothing for an empty tensor.

    Example (2 ranks)::

        >>> visualize_sharding(distribute_tensor(ember.ones(4, 4), mesh, [Shard(0)]))  # doctest: +SKIP
        Row ranges   Col ranges   Ranks
        0-1          0-3          0
        2-3          0-3          1
    """
    if dtensor.numel() == 0:
        return
    if dtensor.ndim >= 3:
        raise RuntimeError("visualize sharding supports only 1D or 2D DTensor")
    coord = dtensor.device_mesh.get_coordinate()
    if coord is None or any(coord):
        return
    blocks = _blocks(dtensor)
    names = ["Col ranges"] if dtensor.ndim == 1 else ["Row ranges", "Col ranges"]
    rows = [[f"{a}-{b}" for a, b in key] + [", ".join(str(r) for r in sorted(ranks))]
            for key, ranks in sorted(blocks.items())]
    cols = names + ["Ranks"]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines = ["   ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
    lines += ["   ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    if header:
        print(header)
    print("\n".join(lines))
