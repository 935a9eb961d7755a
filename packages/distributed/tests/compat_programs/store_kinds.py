"""The same key-value calls on every kind of store, as launchers and trainers make them, on 2
ranks: a FileStore both ranks open, a TCPStore, a PrefixStore over each, and a HashStore (one
process's): set with str and bytes values, get, add (negative steps, a counter read back with
get), compare_set (missing key with and without an expected value, a wrong expectation), multi_set
/ multi_get, append, check, delete_key, num_keys, wait for a key the other rank sets later,
and the errors and their classes of get / wait for a key nobody sets (within the timeout).
Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket
import time
from datetime import timedelta

import torch.distributed as dist
import torch.multiprocessing as mp


def err(fn, file_store):
    t0 = time.monotonic()
    try:
        fn()
        return "no error"
    except Exception as e:  # noqa: BLE001
        # torch's FileStore raises a plain RuntimeError (ember's DistStoreError is one)
        return [isinstance(e, RuntimeError), file_store or isinstance(e, dist.DistStoreError),
                time.monotonic() - t0 < 5]


def exercise(store, rank, shared, file_store=False):
    """Calls on `store`; `shared` stores are the same for both ranks."""
    res = {}
    k = f"r{rank}/" if shared else ""
    store.set(k + "s", "text")
    store.set(k + "b", b"\x00\xffbytes")
    res["get"] = [store.get(k + "s").decode(), list(store.get(k + "b"))]
    res["add"] = [store.add(k + "n", 5), store.add(k + "n", -7), store.add(k + "n", 0)]
    res["counter_bytes"] = store.get(k + "n").decode()
    res["compare_set"] = [store.compare_set(k + "c", "", "first").decode(),
                          store.compare_set(k + "c", "wrong", "second").decode(),
                          store.compare_set(k + "c", "first", "third").decode(),
                          store.compare_set(k + "missing", "x", "y").decode(),
                          store.get(k + "c").decode()]
    store.multi_set([k + "m1", k + "m2"], ["one", b"two"])
    res["multi_get"] = [v.decode() for v in store.multi_get([k + "m2", k + "m1"])]
    store.append(k + "log", "a")
    store.append(k + "log", b"b")
    res["append"] = store.get(k + "log").decode()
    res["check"] = [store.check([k + "s", k + "m1"]), store.check([k + "s", k + "zz"])]
    res["delete"] = store.delete_key(k + "m1")
    if not file_store:  # torch's FileStore says True for a key that is not there
        res["delete_again"] = store.delete_key(k + "m1")
    store.set_timeout(timedelta(seconds=0.1))
    res["get_missing"] = err(lambda: store.get(k + "never"), file_store)
    res["wait_missing"] = err(lambda: store.wait([k + "never"]), file_store)
    res["wait_override"] = err(lambda: store.wait([k + "s", k + "never"],
                                                  timedelta(seconds=0.05)), file_store)
    store.set_timeout(timedelta(seconds=30))
    if shared:
        # each rank waits for a key the other sets
        store.set(f"hello{rank}", str(rank))
        store.wait([f"hello{1 - rank}"])
        res["other"] = store.get(f"hello{1 - rank}").decode()
    return res


def worker(rank, world_size, port, path, out):
    res = {}
    fs = dist.FileStore(path, world_size)
    res["file"] = exercise(fs, rank, True, True)
    res["file_prefix"] = exercise(dist.PrefixStore("pre", fs), rank, True, True)
    tcp = dist.TCPStore("127.0.0.1", port, world_size, rank == 0, timeout=timedelta(seconds=30))
    res["tcp"] = exercise(tcp, rank, True)
    res["tcp_prefix"] = exercise(dist.PrefixStore("p", tcp), rank, True)
    res["hash"] = exercise(dist.HashStore(), rank, False)
    res["hash_prefix"] = exercise(dist.PrefixStore("h", dist.HashStore()), rank, False)
    # counts of keys: the FileStore and TCPStore both ranks use, after both are done
    fs.add("done", 1)
    while int(fs.get("done")) < world_size:
        time.sleep(0.01)
    hs = dist.HashStore()
    hs.set("a", "1")
    hs.add("b", 2)
    res["hash_num_keys"] = hs.num_keys()
    dist.init_process_group("gloo", store=tcp, rank=rank, world_size=world_size)
    every = [None] * world_size
    dist.all_gather_object(every, res)
    if rank == 0:
        merged = {f"{key}_{r}": v for r, e in enumerate(every) for key, v in e.items()}
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(merged, f, sort_keys=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(2, free_port(), os.path.join(args.out, "filestore"), args.out),
             nprocs=2, join=True)
