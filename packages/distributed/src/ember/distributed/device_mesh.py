"""DeviceMesh: the ranks of a job laid out as an n-D grid, with a process group per mesh
dimension (torch.distributed.device_mesh's API).

A 2-D mesh of 4 ranks ``[[0, 1], [2, 3]]`` named ("dp", "tp") gives each rank two groups: its
row (the "tp" group: ranks 0, 1 or 2, 3) and its column (the "dp" group: ranks 0, 2 or 1, 3).
Making a mesh is collective: every rank of the world makes the same mesh, in the same order as
its other groups, since each dimension's groups come from ``new_group``.

Example (4 processes)::

    import ember.distributed as dist
    from ember.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dist.all_reduce(t, group=mesh.get_group("tp"))   # over this rank's row
    dp = mesh["dp"]                                  # a 1-D mesh: this rank's column
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import ember
import numpy as np

from . import distributed_c10d as c10d

__all__ = ["DeviceMesh", "init_device_mesh"]


def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _check_names(names: Any, ndim: int) -> tuple[str, ...] | None:
    if names is None:
        return None
    names = tuple(names)
    if len(names) != ndim:
        raise RuntimeError("mesh_shape and mesh_dim_names should have same length! Found "
                           f"len(mesh_dim_names): {len(names)} and len(mesh_shape):{ndim}.")
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"DeviceMesh: mesh_dim_names must be strings, got {names!r}")
    if len(set(names)) != len(names):
        raise RuntimeError("Each mesh_dim_name must be unique. Found repeated mesh_dim_name in "
                           f"mesh_dim_names {names}")
    return names


def _groups_over(ranks: np.ndarray, dims: Sequence[int]) -> Any:
    """A new_group for each line of ``ranks`` through ``dims`` (the other dimensions fixed, the
    line's ranks in row-major order of dims); returns this rank's, None when it is in none.
    Every rank of the world makes all of them, in the same order, as new_group requires."""
    rest = [d for d in range(ranks.ndim) if d not in dims]
    lines = np.transpose(ranks, rest + list(dims)).reshape(
        -1, math.prod(ranks.shape[d] for d in dims))
    world, me, mine = c10d.get_world_size(), c10d.get_rank(), None
    for line in lines:
        members = [int(r) for r in line]
        # the whole world in order is the default group: no new one
        g = c10d.group.WORLD if members == list(range(world)) else c10d.new_group(members)
        if me in members:
            mine = g
    return mine


class DeviceMesh:
    """An n-D grid of global ranks on one device type, with one process group per dimension
    for each rank of the grid.

    Args:
        device_type: "cpu" or "cuda" (the groups carry that device's tensors).
        mesh: the ranks, any n-D array-like of distinct global ranks (a tensor, a NumPy array
            or nested lists).
        mesh_dim_names: a name per dimension, to slice the mesh with ``mesh["name"]`` and ask
            for groups by name.

    Example::

        >>> mesh = DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp", "tp"))  # doctest: +SKIP
        >>> mesh.get_group("dp")  # this rank's column  # doctest: +SKIP
    """

    def __init__(self, device_type: str, mesh: Any = None, *,
                 mesh_dim_names: Sequence[str] | None = None, backend_override: Any = None,
                 _init_backend: bool = True, _groups: list[Any] | None = None,
                 _strides: tuple[int, ...] | None = None, _root: DeviceMesh | None = None,
                 _root_dims: tuple[int, ...] | None = None) -> None:
        if not isinstance(device_type, str):
            raise TypeError(f"DeviceMesh: device_type must be a str such as 'cpu' or 'cuda', "
                            f"got {type(device_type).__name__}")
        if mesh is None:
            raise ValueError("DeviceMesh: mesh (the n-D array of ranks) is required")
        if isinstance(mesh, ember.Tensor):
            ranks = np.asarray(mesh.detach().cpu().tolist(), dtype=np.int64)
        else:
            ranks = np.asarray(mesh, dtype=np.int64)
        if ranks.ndim == 0 or ranks.size == 0:
            raise ValueError(f"DeviceMesh: mesh must be a non-empty array of ranks with at least "
                             f"one dimension, got shape {tuple(ranks.shape)}")
        if len(np.unique(ranks)) != ranks.size:
            raise RuntimeError(f"DeviceMesh: mesh {ranks.tolist()} holds a rank more than once")
        self.device_type = device_type
        self._ranks = ranks
        self.mesh_dim_names = _check_names(mesh_dim_names, ranks.ndim)
        self._strides = _strides or _row_major_strides(tuple(ranks.shape))
        # a sub-mesh remembers the root mesh and which of its dimensions it spans (_flatten
        # makes its groups over the root); the root keeps its flattened meshes by name
        self._root = _root
        self._root_dims = _root_dims if _root_dims is not None else tuple(range(ranks.ndim))
        self._flattened: dict[str, DeviceMesh] = {}
        if _groups is not None:
            self._groups = _groups
        elif _init_backend:
            if not c10d.is_initialized():
                c10d.init_process_group()
            world = c10d.get_world_size()
            if ranks.min() < 0 or ranks.max() >= world:
                raise RuntimeError(f"DeviceMesh: mesh {ranks.tolist()} names ranks outside the "
                                   f"world of {world} ranks")
            self._groups = [_groups_over(ranks, [d]) for d in range(ranks.ndim)]
        else:
            self._groups = [None] * ranks.ndim
        me = c10d.get_rank() if c10d.is_initialized() else None
        where = np.argwhere(ranks == me) if me is not None else np.empty((0, ranks.ndim))
        self._coordinate = tuple(int(i) for i in where[0]) if len(where) else None

    # ---- shape -------------------------------------------------------------------------------
    @property
    def mesh(self) -> ember.Tensor:
        """The ranks, as an int32 tensor of the mesh's shape (a sub-mesh: this rank's slice)."""
        return ember.tensor(self._ranks.tolist(), dtype=ember.int32)

    @property
    def ndim(self) -> int:
        return int(self._ranks.ndim)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self._ranks.shape)

    def size(self, mesh_dim: int | None = None) -> int:
        """The number of ranks in the mesh, or along mesh_dim."""
        if mesh_dim is None:
            return int(self._ranks.size)
        return self.shape[self._dim(mesh_dim)]

    def _dim(self, mesh_dim: int | str) -> int:
        if isinstance(mesh_dim, str):
            if self.mesh_dim_names is None or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist. Available mesh "
                               f"dimensions are: mesh_dim_names={self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        if isinstance(mesh_dim, bool) or not isinstance(mesh_dim, int):
            raise TypeError(f"DeviceMesh: mesh_dim must be an int or a dimension name, got "
                            f"{type(mesh_dim).__name__}")
        if not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError(f"DeviceMesh: mesh_dim {mesh_dim} is out of range for a "
                             f"{self.ndim}-D mesh")
        return mesh_dim % self.ndim

    def _need_dim(self, mesh_dim: int | str | None, what: str) -> int:
        if mesh_dim is not None:
            return self._dim(mesh_dim)
        if self.ndim > 1:
            hint = ("If you want to get the list of all the ProcessGroups in the DeviceMesh,"
                    "please use `get_all_groups()` instead." if what == "group" else None)
            raise RuntimeError(*(m for m in (
                f"Found the DeviceMesh have {self.ndim} dimensions",
                "Optional kwarg `mesh_dim` needs to be specified when device_mesh.ndim > 1.",
                hint) if m))
        return 0

    # ---- this rank ---------------------------------------------------------------------------
    def get_rank(self) -> int:
        """This process's global rank."""
        return c10d.get_rank()

    def get_coordinate(self) -> tuple[int, ...] | None:
        """This rank's index in the mesh, or None when the mesh does not hold it."""
        return self._coordinate

    def get_local_rank(self, mesh_dim: int | str | None = None) -> int:
        """This rank's index along mesh_dim (its rank in that dimension's group)."""
        dim = self._need_dim(mesh_dim, "local rank")
        if self._coordinate is None:
            raise RuntimeError(f"DeviceMesh: rank {c10d.get_rank()} is not part of the mesh "
                               f"{self._ranks.tolist()}")
        return self._coordinate[dim]

    # ---- groups ------------------------------------------------------------------------------
    def get_group(self, mesh_dim: int | str | None = None) -> Any:
        """The process group of this rank's line of ranks along mesh_dim (optional for 1-D)."""
        g = self._groups[self._need_dim(mesh_dim, "group")]
        if g is None:
            raise RuntimeError(f"DeviceMesh: rank {c10d.get_rank()} is not part of the mesh "
                               f"{self._ranks.tolist()}, so it has no group in it")
        return g

    def get_all_groups(self) -> list[Any]:
        """The group of every dimension, in order."""
        return [self.get_group(d) for d in range(self.ndim)]

    # ---- slicing -----------------------------------------------------------------------------
    def __getitem__(self, mesh_dim_names: str | tuple[str, ...]) -> DeviceMesh:
        """The sub-mesh of the named dimensions (in the mesh's order) through this rank: its
        groups are the parent's, no collective runs."""
        if self.mesh_dim_names is None:
            raise RuntimeError("Cannot slice a DeviceMesh without mesh_dim_names!")
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        if len(names) == 1 and names[0] in self._root_mesh()._flattened:
            return self._root_mesh()._flattened[names[0]]
        if not names or any(n not in self.mesh_dim_names for n in names):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Valid mesh_dim_names are "
                           f"{list(self.mesh_dim_names)}.")
        dims = [self.mesh_dim_names.index(n) for n in names]
        if dims != sorted(dims) or len(set(dims)) != len(dims):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Mesh dim indices should "
                           "be in ascending order.")
        if dims == list(range(self.ndim)):
            return self
        if self._coordinate is None:
            raise RuntimeError(f"DeviceMesh: rank {c10d.get_rank()} is not part of the mesh "
                               f"{self._ranks.tolist()}, so it has no sub-mesh")
        index = tuple(slice(None) if d in dims else self._coordinate[d] for d in range(self.ndim))
        return DeviceMesh(self.device_type, self._ranks[index], mesh_dim_names=names,
                          _groups=[self._groups[d] for d in dims],
                          _strides=tuple(self._strides[d] for d in dims), _root=self._root_mesh(),
                          _root_dims=tuple(self._root_dims[d] for d in dims))

    def _root_mesh(self) -> DeviceMesh:
        return self._root if self._root is not None else self

    def _get_root_mesh(self) -> DeviceMesh:
        return self._root_mesh()

    def _flatten(self, mesh_dim_name: str | None = None, backend_override: Any = None
                 ) -> DeviceMesh:
        """A 1-D mesh of all this mesh's ranks in order, named mesh_dim_name (default: the
        names joined by "_"), with a group over them; collective like making a mesh."""
        if mesh_dim_name is None:
            if self.mesh_dim_names is None:
                raise RuntimeError("DeviceMesh._flatten: give mesh_dim_name for a mesh without "
                                   "mesh_dim_names")
            mesh_dim_name = "_".join(self.mesh_dim_names)
        if self.ndim == 1 and self.mesh_dim_names == (mesh_dim_name,):
            return self
        root = self._root_mesh()
        if mesh_dim_name in root._flattened:
            return root._flattened[mesh_dim_name]
        if root.mesh_dim_names is not None and mesh_dim_name in root.mesh_dim_names:
            raise RuntimeError(f"DeviceMesh._flatten: {mesh_dim_name!r} already names a "
                               "dimension of the root mesh")
        group = _groups_over(root._ranks, self._root_dims)
        flat = DeviceMesh(self.device_type, self._ranks.reshape(-1),
                          mesh_dim_names=(mesh_dim_name,), _groups=[group],
                          _strides=(self._strides[-1],), _root=root)
        root._flattened[mesh_dim_name] = flat
        return flat

    @staticmethod
    def from_group(group: Any, device_type: str, mesh: Any = None, *,
                   mesh_dim_names: Sequence[str] | None = None) -> DeviceMesh:
        """A 1-D mesh over an existing group (its ranks in group order), or an n-D mesh from a
        group per dimension and the mesh of ranks; no new groups are made."""
        if isinstance(group, (list, tuple)):
            if mesh is None:
                raise ValueError("DeviceMesh.from_group: an n-D mesh from a list of groups needs "
                                 "mesh= (the ranks)")
            groups = list(group)
            m = DeviceMesh(device_type, mesh, mesh_dim_names=mesh_dim_names, _groups=groups)
            if len(groups) != m.ndim:
                raise ValueError(f"DeviceMesh.from_group: {len(groups)} groups for a {m.ndim}-D "
                                 "mesh; give one per dimension")
            return m
        ranks = c10d.get_process_group_ranks(group)
        if mesh is not None:
            given = (mesh.tolist() if isinstance(mesh, ember.Tensor)
                     else np.asarray(mesh).tolist())
            if given != ranks:
                raise ValueError(f"DeviceMesh.from_group: mesh {given} is not the group's ranks "
                                 f"{ranks}")
        return DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names, _groups=[group])

    # ---- identity ----------------------------------------------------------------------------
    def __deepcopy__(self, memo: dict) -> DeviceMesh:
        return self  # its process groups are the job's, not copies (as torch)

    def _key(self) -> tuple:
        return (self.device_type, tuple(self._ranks.reshape(-1).tolist()), self.shape,
                self.mesh_dim_names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceMesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self.mesh_dim_names is None:
            dims = f"({', '.join(str(n) for n in self.shape)}{',' if self.ndim == 1 else ''})"
        else:
            dims = "(" + ", ".join(f"{k}={n}" for k, n in zip(self.mesh_dim_names, self.shape)) + ")"
        stride = f"({', '.join(str(s) for s in self._strides)}{',' if self.ndim == 1 else ''})"
        return f"DeviceMesh({dims}, '{self.device_type}', stride={stride})"


def init_device_mesh(device_type: str, mesh_shape: tuple[int, ...], *,
                     mesh_dim_names: tuple[str, ...] | None = None,
                     backend_override: Any = None) -> DeviceMesh:
    """A mesh of the given shape over global ranks 0, 1, ... in row-major order, with its groups.
    Initializes the default process group from the environment first when there is none.

    Example::

        >>> mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))  # doctest: +SKIP
        >>> mesh["tp"].get_group()  # doctest: +SKIP
    """
    if not isinstance(mesh_shape, (tuple, list)) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in mesh_shape):
        raise TypeError(f"init_device_mesh: mesh_shape must be a tuple of ints, got {mesh_shape!r}")
    if not mesh_shape or any(n <= 0 for n in mesh_shape):
        raise ValueError(f"init_device_mesh: mesh_shape must hold positive sizes, got "
                         f"{tuple(mesh_shape)}")
    names = _check_names(mesh_dim_names, len(mesh_shape))
    if not c10d.is_initialized():
        c10d.init_process_group()
    world = c10d.get_world_size()
    need = math.prod(mesh_shape)
    if need > world:
        raise RuntimeError(f"init_device_mesh: mesh_shape {tuple(mesh_shape)} needs {need} ranks "
                           f"but the world has {world}")
    ranks = np.arange(need, dtype=np.int64).reshape(tuple(mesh_shape))
    return DeviceMesh(device_type, ranks, mesh_dim_names=names)
