"""Rendezvous and coordination through the key-value stores directly, as launchers and
elastic trainers use them, on 2 ranks: a FileStore bootstraps a TCPStore (the master's free
port published through it), the ranks count, elect and barrier on the TCPStore, hand out work
through its queues (blocking and non-blocking pops), a thread waits on a clone() of the
store, timeouts raise DistStoreError, PrefixStore namespaces (and lists only its own keys),
and process groups are initialized twice from PrefixStores of the same TCPStore. A HashStore
coordinates threads of one process. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return {"type": type(e).__name__, "store_error": isinstance(e, dist.DistStoreError),
                "runtime": isinstance(e, RuntimeError)}
    return None


def worker(rank, world_size, out):
    res = {}
    boot = dist.FileStore(os.path.join(out, "bootstrap"), world_size)
    if rank == 0:
        tcp = dist.TCPStore("127.0.0.1", 0, world_size, True, timedelta(seconds=30),
                            wait_for_workers=False)
        boot.set("master_port", str(tcp.port))
    else:
        port = int(boot.get("master_port"))
        tcp = dist.TCPStore("127.0.0.1", port, world_size, False, timedelta(seconds=30))
    res["boot_port_is_int"] = boot.get("master_port").decode().isdigit()

    # counting and a barrier made of add + wait
    n = tcp.add("arrived", 1)
    if n == world_size:
        tcp.set("all_arrived", "yes")
    tcp.wait(["all_arrived"])
    res["arrived"] = int(tcp.get("arrived"))
    res["add_zero"] = tcp.add("arrived", 0)

    # an election with compare_set, in a fixed order
    if rank == 0:
        res["elect0"] = tcp.compare_set("leader", "", "rank0").decode()
    tcp.barrier("elected", world_size)
    if rank == 1:
        tcp.set("elect1", tcp.compare_set("leader", "", "rank1"))
        tcp.set("swap1", tcp.compare_set("leader", "rank0", "rank1"))
        tcp.set("miss1", tcp.compare_set("nobody", "x", "y"))
    tcp.barrier("elected2", world_size, timedelta(seconds=20))
    res["elect1"] = tcp.get("elect1").decode()
    res["swap1"] = tcp.get("swap1").decode()
    res["miss1"] = tcp.get("miss1").decode()
    res["leader"] = tcp.get("leader").decode()

    # a work queue: rank 0 produces, rank 1 consumes
    if rank == 0:
        for i in range(5):
            tcp.queue_push("work", f"item{i}")
        tcp.set("produced", "1")
    else:
        tcp.wait(["produced"])
        got = [tcp.queue_pop("work").decode() for _ in range(3)]
        tcp.set("consumed", ",".join(got))
        tcp.set("left_after", str(tcp.queue_len("work")))
    tcp.barrier("queued", world_size)
    res["consumed"] = tcp.get("consumed").decode().split(",")
    res["left_after"] = int(tcp.get("left_after"))
    if rank == 0:
        res["rest"] = [tcp.queue_pop("work", block=False).decode() for _ in range(2)]
        e = err(lambda: tcp.queue_pop("work", block=False))
        res["empty_pop"] = e
        res["empty_len"] = tcp.queue_len("work")
        res["never_len"] = tcp.queue_len("never_made")
    tcp.barrier("drained", world_size)

    # a helper thread waits on its own clone of the store
    seen = {}

    def watcher(store):
        store.wait(["go"])
        seen["go"] = store.get("go").decode()
        store.add("watchers", 1)

    t = threading.Thread(target=watcher, args=(tcp.clone(),))
    t.start()
    time.sleep(0.05)
    if rank == 1:
        tcp.set("go", "now")
    t.join(20)
    tcp.barrier("watched", world_size)
    res["watcher"] = seen
    res["watchers"] = int(tcp.get("watchers"))

    # timeouts
    short = tcp.clone()
    short.set_timeout(timedelta(seconds=0.3))
    res["timeout_default"] = tcp.timeout.total_seconds()
    res["timeout_short"] = short.timeout.total_seconds()
    res["get_missing"] = err(lambda: short.get(f"missing{rank}"))
    res["wait_missing"] = err(lambda: tcp.wait([f"missing{rank}"], timedelta(seconds=0.2)))
    res["pop_timeout"] = err(lambda: short.queue_pop(f"empty{rank}"))

    # multi-key operations and deletion
    tcp.multi_set([f"m{rank}a", f"m{rank}b"], ["1", b"2"])
    tcp.append(f"log{rank}", "x")
    tcp.append(f"log{rank}", b"y")
    res["multi_get"] = [v.decode() for v in tcp.multi_get([f"m{rank}b", f"m{rank}a"])]
    res["appended"] = tcp.get(f"log{rank}").decode()
    res["check"] = [tcp.check([f"m{rank}a"]), tcp.check([f"m{rank}a", "nope"])]
    res["delete"] = [tcp.delete_key(f"m{rank}a"), tcp.delete_key(f"m{rank}a")]
    res["check_deleted"] = tcp.check([f"m{rank}a"])

    # namespaces
    pa = dist.PrefixStore("jobA", tcp)
    pb = dist.PrefixStore("jobB", tcp)
    pa.set(f"k{rank}", "a")
    pb.set(f"k{rank}", "b")
    pa.add("count", 1)
    tcp.barrier("prefixed", world_size)
    res["prefix_values"] = [pa.get("k0").decode(), pb.get("k1").decode(),
                            tcp.get("jobA/k1").decode()]
    res["prefix_list"] = sorted(pa.list_keys())
    res["prefix_check_other"] = pa.check(["jobB/k0"])
    res["prefix_underlying"] = pa.underlying_store is tcp
    tcp.barrier("listed", world_size)  # every rank has listed before anyone adds under jobA/
    nested = dist.PrefixStore("inner", pa)
    nested.set("deep", "1")
    res["nested_key"] = tcp.check(["jobA/inner/deep"])
    res["prefix_clone"] = pa.clone().get("count").decode()

    # process groups from the same TCPStore, one namespace each
    for gen in range(2):
        dist.init_process_group("gloo", store=dist.PrefixStore(f"pg{gen}", tcp), rank=rank,
                                world_size=world_size)
        x = torch.tensor([float(rank + 1 + gen)])
        dist.all_reduce(x)
        res[f"pg{gen}_sum"] = x.item()
        sub = dist.new_group([0, 1])
        y = torch.tensor([rank * 10.0])
        dist.all_reduce(y, op=dist.ReduceOp.MAX, group=sub)
        res[f"pg{gen}_sub_max"] = y.item()
        dist.destroy_process_group()

    # threads of one process: a HashStore barrier, counters and a queue
    hs = dist.HashStore()
    order = []
    lock = threading.Lock()

    def thread_fn(i):
        hs.add("started", 1)
        hs.barrier("tb", 3)
        with lock:
            order.append(i)
        hs.queue_push("results", str(i * i))

    ths = [threading.Thread(target=thread_fn, args=(i,)) for i in range(3)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(20)
    res["hash_started"] = int(hs.get("started"))
    res["hash_results"] = sorted(int(hs.queue_pop("results")) for _ in range(3))
    res["hash_threads"] = sorted(order)
    hs.set("solo", "1")
    res["hash_clone_shared"] = hs.clone().get("solo").decode()
    res["hash_ext"] = hs.has_extended_api()
    res["file_get"] = boot.get("master_port").decode() == str(tcp.port)
    res["queue_error_is_store_error"] = issubclass(dist.QueueEmptyError, dist.DistStoreError)

    tcp.barrier("done", world_size)
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(res, f)
    tcp.barrier("written", world_size)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(2, args.out), nprocs=2, join=True)
