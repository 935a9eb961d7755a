"""``ember.multiprocessing``: a drop-in for ``multiprocessing`` that shares tensors (PyTorch's
``torch.multiprocessing``).

Everything of the standard library's ``multiprocessing`` is here (Process, Queue, SimpleQueue,
Pipe, Pool, get_context, ...). Tensors put on its queues and pipes, or passed to its processes,
travel by their shared memory: a tensor whose storage is shared (``Tensor.share_memory_()``,
``Module.share_memory()``) arrives as a view of the same pages, so writes on either side are seen
by the other (Hogwild training); another tensor of 64 KiB or more is copied once into shared
memory and the receiver maps it; a smaller one travels by value.

CUDA tensors travel as CUDA IPC handles (both processes on one machine; start them with
"spawn": a forked child cannot use CUDA). The receiver maps the sender's device memory, so
in-place writes are shared; views of one storage arrive as views of one storage. The sender
keeps each sent storage until its receivers have freed it (a reference count in a small
``/dev/shm/ember_<pid>_*`` file; ``ember.cuda.ipc_collect()`` frees the released ones now), and
must itself stay alive until then: a receiver whose sender has exited gets a RuntimeError naming
its pid. ``share_memory_()`` is a no-op on CUDA tensors and ``is_shared()`` is True for them.

Sharing strategies (``set_sharing_strategy``):

* ``"file_system"`` (the default): segments named ``/dev/shm/ember_<pid>_*``. A receiver maps
  them by name, so a process may exit right after sending. Segments of a child that died
  (SIGKILL included) are removed by its parent; the rest go when their last user frees them or
  at exit.
* ``"file_descriptor"``: shared storages (``share_memory_()`` and copies) are segments unlinked
  right after creation, whose descriptors are passed to the receivers; nothing is named, so
  nothing can be left behind, but the sender must be alive while the receiver unpickles (as
  with PyTorch's default strategy), and each shared storage holds a descriptor.

>>> import ember
>>> import ember.multiprocessing as mp
>>> q = mp.SimpleQueue()
>>> q.put(ember.arange(4.0))
>>> q.get()
tensor([0., 1., 2., 3.])
>>> mp.get_sharing_strategy()
'file_system'
"""

from __future__ import annotations

import multiprocessing as _std_mp
import sys as _sys

from ember import _C
from ember import multiprocessing_reductions as _reductions
from ember.multiprocessing_reductions import init_reductions

from . import _context, _fd, _spawn
from ._context import cleanup_segments
from ._spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    SpawnContext,
    spawn,
    start_processes,
)

try:
    from ember.distributed._version import __version__
except ImportError:  # not installed from a git checkout / sdist
    __version__ = "0.0.0"

_STRATEGIES = ("file_descriptor", "file_system")
_sharing_strategy = "file_system"


def get_all_sharing_strategies() -> set[str]:
    """The sharing strategies this system supports.

    >>> sorted(get_all_sharing_strategies())
    ['file_descriptor', 'file_system']
    """
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    """The current sharing strategy ("file_system" by default).

    >>> get_sharing_strategy() in get_all_sharing_strategies()
    True
    """
    return _sharing_strategy


def set_sharing_strategy(new_strategy: str) -> None:
    """Sets how shared storages (``share_memory_()``, and the copies made to send a tensor) are
    made and cross processes: "file_system" (named ``/dev/shm`` segments, sent by name) or
    "file_descriptor" (unnamed segments, descriptors passed over the connection). The setting
    is per process: a forked child inherits it, a child started by ``spawn`` or ``forkserver``
    begins with "file_system" and sets its own.

    >>> set_sharing_strategy("file_descriptor"); get_sharing_strategy()
    'file_descriptor'
    >>> set_sharing_strategy("file_system")
    """
    global _sharing_strategy
    if new_strategy not in _STRATEGIES:
        raise ValueError(
            f"set_sharing_strategy: unknown strategy {new_strategy!r}; expected one of "
            f"{sorted(_STRATEGIES)}"
        )
    fd = new_strategy == "file_descriptor"
    _C._set_share_policy(_fd.UNNAMED if fd else 0)  # what Tensor.share_memory_() creates
    _reductions.fd_reducer = _fd.reduce_fd if fd else None
    _sharing_strategy = new_strategy


# The standard library's API, bound to this module's default context (its Process classes clean
# up after dead children); classes and functions that need no context are the library's own.
Process = _context.Process
_default_context = _context._default_context
for _name in _std_mp.__all__:
    if _name == "Process":
        continue
    _attr = getattr(_default_context, _name, None)
    if _attr is None:
        _attr = getattr(_std_mp, _name)
    globals()[_name] = _attr
del _name, _attr

__all__ = [
    "ProcessContext",
    "ProcessException",
    "ProcessExitedException",
    "ProcessRaisedException",
    "SpawnContext",
    "cleanup_segments",
    "get_all_sharing_strategies",
    "get_sharing_strategy",
    "init_reductions",
    "set_sharing_strategy",
    "spawn",
    "start_processes",
]
__all__ += _std_mp.__all__

# torch's module path of the spawn API (``from torch.multiprocessing.spawn import
# ProcessRaisedException``); registered rather than a spawn.py so that importing it never
# rebinds this package's ``spawn`` function to the module.
_sys.modules.setdefault(__name__ + ".spawn", _spawn)

init_reductions()
_context.install_exit_hook()
