"""ember.multiprocessing vs torch.multiprocessing: tensors through an mp Queue (issue 13's cases).

A child process (fork, started once per case) makes a fresh tensor (a copy of a template, made
before the clock starts), waits for a ready signal on a pipe, and puts the tensor on an mp Queue;
the parent times signal -> tensor received (one way, child to parent). Each timed call averages
a batch of messages; the harness reports medians over repeats.

    python benchmarks/run.py --filter mp/
"""

from __future__ import annotations

import importlib
import time
import weakref

from harness import SelfTimed, case

BIG = 4 * 1024 * 1024  # float32 elements: 16 MiB
SMALL = 1024  # float32 elements: 4 KiB


def _mp(fw):
    return importlib.import_module(f"{fw.name}.multiprocessing")


def _producer(fw_name: str, numel: int, strategy: str, signal, queue) -> None:
    mod = importlib.import_module(fw_name)
    mod.set_num_threads(1)
    importlib.import_module(f"{fw_name}.multiprocessing").set_sharing_strategy(strategy)
    template = mod.arange(numel, dtype=mod.float32)
    while True:
        t = template.clone()  # a fresh tensor per message (not yet in shared memory)
        if signal.recv() is None:
            return
        queue.put(t)
        del t


class _Channel:
    """The producer process and its pipe and queue; `__call__` times `n` messages."""

    def __init__(self, fw, numel: int, n: int, strategy: str) -> None:
        mp = _mp(fw)
        ctx = mp.get_context("fork")
        self.queue = ctx.Queue()
        self.signal, child_end = ctx.Pipe()
        self.proc = ctx.Process(target=_producer, args=(fw.name, numel, strategy, child_end, self.queue),
                                daemon=True)
        self.proc.start()
        child_end.close()
        self.numel, self.n = numel, n
        weakref.finalize(self, _stop, self.signal, self.proc)

    def __call__(self) -> float:
        total = 0.0
        for _ in range(self.n):
            t0 = time.perf_counter()
            self.signal.send(True)
            t = self.queue.get(timeout=60)
            total += time.perf_counter() - t0
            assert t.numel() == self.numel
            del t
        return total / self.n


def _stop(signal, proc) -> None:
    try:
        signal.send(None)
    except OSError:
        pass
    proc.join(10)
    if proc.is_alive():
        proc.kill()
        proc.join()


def _setup(fw, numel: int, n: int, strategy: str | None = None) -> SelfTimed:
    # Each framework's default strategy unless told: ember "file_system", torch
    # "file_descriptor" (the strategy of the sending child is what counts).
    if strategy is None:
        strategy = "file_system" if fw.name == "ember" else "file_descriptor"
    channel = _Channel(fw, numel, n, strategy)
    channel()  # warm-up (the harness's first call is untimed too)
    return SelfTimed(channel)


def _queue_case(name: str, numel: int, n: int, doc: str, strategy: str | None = None) -> None:
    """Registers `mp/queue <name>`: a fresh float32 tensor of `numel` elements from a child to the
    parent, the mean of `n` messages (target: >= 3x torch's throughput)."""
    case(f"mp/queue {name}", unit="ms", target=1 / 3, check=False, repeats=(11, 3),
         bytes=numel * 4, doc=doc)(lambda fw: _setup(fw, numel, n, strategy))


_queue_case("16MB float32", BIG, 10,
            "a fresh 16 MiB float32 tensor from a child to the parent through an mp Queue, one "
            "way with a ready signal, mean of 10 messages (target: >= 3x torch's throughput)")
_queue_case("4KB float32", SMALL, 100,
            "the same with a 4 KiB float32 tensor, mean of 100 messages "
            "(target: >= 3x torch's throughput)")
_queue_case("16MB float32 fd", BIG, 10,
            "the 16 MiB case with ember's \"file_descriptor\" sharing strategy (torch's default, "
            "its strategy in every row): unnamed segments passed as descriptors "
            "(target: >= 3x torch's throughput)", "file_descriptor")
_queue_case("4KB float32 fd", SMALL, 100,
            "the 4 KiB case with the \"file_descriptor\" strategy for both "
            "(target: >= 3x torch's throughput)", "file_descriptor")
