"""The errors a script catches when it calls a collective wrongly, on 2 ranks (gloo): the
exception class and the words of the message for arguments each rank can check itself (wrong
list lengths, sizes and dtypes, a src / dst outside the group, a gather_list or scatter_list on
the wrong rank, a tensor that is not a tensor, all_to_all_single splits that do not add up, an
op gloo does not reduce with), each followed by a collective that shows the group still works;
and monitored_barrier(wait_all_ranks=True) naming the rank that never came. Rank 0 writes
OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def caught(fn, cls, *words):
    """Whether fn raises what a script would catch as cls, and which of words its message
    lacks."""
    try:
        fn()
        return "no error"
    except Exception as e:  # noqa: BLE001
        msg = str(e).lower()
        return [isinstance(e, cls), [w for w in words if w.lower() not in msg]]


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=30))
    res = {}
    t = torch.ones(2)
    res["all_gather_list_len"] = caught(
        lambda: dist.all_gather([torch.empty(2)] * 3, t), RuntimeError)
    res["broadcast_src_out_of_range"] = caught(lambda: dist.broadcast(t, src=5), RuntimeError)
    res["reduce_dst_out_of_range"] = caught(lambda: dist.reduce(t, dst=-3), RuntimeError)
    res["all_reduce_not_tensor"] = caught(lambda: dist.all_reduce([1.0, 2.0]), TypeError)
    res["all_reduce_list_of_tensors"] = caught(lambda: dist.all_reduce([t]), TypeError)
    res["gather_list_on_non_dst"] = caught(
        lambda: dist.gather(t, gather_list=[torch.empty(2)] * 2, dst=1 - rank), ValueError,
        "gather_list", "non-destination")
    res["scatter_list_on_non_src"] = caught(
        lambda: dist.scatter(t, scatter_list=[torch.empty(2)] * 2, src=1 - rank), ValueError,
        "scatter_list", "non-source")
    res["all_to_all_single_bad_splits"] = caught(
        lambda: dist.all_to_all_single(torch.empty(4), torch.arange(4.0),
                                       output_split_sizes=[1, 1], input_split_sizes=[2, 2]),
        RuntimeError)
    res["send_to_self"] = caught(lambda: dist.send(t, dst=rank), ValueError)
    res["group_dst_and_dst"] = caught(lambda: dist.reduce(t, dst=0, group_dst=0), ValueError)
    res["p2p_op_bad_op"] = caught(lambda: dist.P2POp(dist.broadcast, t, 1 - rank), ValueError)
    res["new_group_bad_rank"] = caught(lambda: dist.new_group([0, 7]), ValueError)
    chk = torch.tensor([float(rank)])
    dist.all_reduce(chk)
    res["still_works"] = chk.item()

    # errors that gloo itself raises (every rank calls, so no one hangs)
    res["all_gather_into_tensor_bad_size"] = caught(
        lambda: dist.all_gather_into_tensor(torch.empty(5), torch.ones(2)), RuntimeError)
    res["reduce_scatter_tensor_bad_size"] = caught(
        lambda: dist.reduce_scatter_tensor(torch.empty(3), torch.ones(4)), RuntimeError)
    res["all_gather_dtype_mismatch"] = caught(
        lambda: dist.all_gather([torch.empty(2, dtype=torch.int64)] * 2, torch.ones(2)),
        ValueError)
    chk = torch.tensor([float(rank) + 1])
    dist.all_reduce(chk)
    res["still_works_after_gloo_errors"] = chk.item()

    # monitored_barrier(wait_all_ranks=True): rank 1 does not come in time
    if rank == 1:
        time.sleep(1.5)
    try:
        dist.monitored_barrier(timeout=timedelta(seconds=0.8), wait_all_ranks=True)
        res["monitored"] = "passed"
    except RuntimeError as e:
        msg = str(e)
        # rank 0 names the late rank 1 (which itself sees the group torn down)
        res["monitored"] = ["RuntimeError"] + (["1" in msg, "monitoredBarrier" in msg]
                                               if rank == 0 else [])
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(res, f, sort_keys=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def merge(out):
    """rank 0 cannot gather after the failed monitored_barrier: the ranks' files are merged."""
    merged = {}
    for r in range(2):
        with open(os.path.join(out, f"rank{r}.json")) as f:
            merged.update({f"{k}_{r}": v for k, v in json.load(f).items()})
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(merged, f, sort_keys=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(2, free_port(), args.out), nprocs=2, join=True)
    merge(args.out)
