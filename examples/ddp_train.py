"""Train the README demo's digit classifier with DistributedDataParallel on several processes.

Each process trains a replica of examples/demo.py's DigitNet on its share of the data
(DistributedSampler); DistributedDataParallel averages the gradients over the processes during
backward, so the replicas stay identical. Start it through the launcher:

    python -m ember.distributed.run --nproc-per-node 2 examples/ddp_train.py
    emberrun --nproc-per-node 2 examples/ddp_train.py --epochs 4 --backend shm

``--batch-size`` is per process (the global batch is that times the number of processes). Run
without the launcher it trains in one process (world size 1).
"""

from __future__ import annotations

import argparse
import os
import time

import ember
import ember.distributed as dist
from demo import DigitNet, evaluate, load_digits, make_loader  # examples/demo.py
from ember.data import DataLoader, DistributedSampler, TensorDataset
from ember.nn.parallel import DistributedDataParallel as DDP


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16, help="per process")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--backend", default="gloo", help="gloo (shm on one machine, mpi across machines), shm, mpi"
    )
    p.add_argument("--limit", type=int, default=0, help="use only the first N train/test images")
    p.add_argument("--save", default="", help="where rank 0 writes the trained model (optional)")
    args = p.parse_args(argv)

    if "RANK" not in os.environ:  # not started by the launcher: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29512")
    dist.init_process_group(args.backend)  # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, world = dist.get_rank(), dist.get_world_size()

    x_tr, y_tr, x_te, y_te = load_digits(args.seed)
    if args.limit:
        x_tr, y_tr, x_te, y_te = (
            x_tr[: args.limit],
            y_tr[: args.limit],
            x_te[: args.limit],
            y_te[: args.limit],
        )
    train_set = TensorDataset(ember.from_numpy(x_tr[:, None].copy()), ember.from_numpy(y_tr))
    sampler = DistributedSampler(
        train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed
    )
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    ember.manual_seed(args.seed + rank)  # different on purpose: DDP broadcasts rank 0's weights
    model = DDP(DigitNet(image_size=x_tr.shape[-1]))
    opt = ember.optim.Adam(model.parameters(), lr=args.lr)
    if rank == 0:
        print(
            f"{world} process(es) x batch {args.batch_size}: {len(sampler)} of {len(y_tr)} "
            f"training images each, backend {args.backend}"
        )

    start = time.perf_counter()
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        model.train()
        totals = ember.zeros(2, dtype=ember.float64)  # (sum of losses, images) on this rank
        for x, y in loader:
            opt.zero_grad()
            loss = ember.cross_entropy(model(x), y)
            loss.backward()  # gradients averaged over the ranks here
            opt.step()
            totals += ember.tensor([loss.item() * y.shape[0], y.shape[0]], dtype=ember.float64)
        dist.all_reduce(totals)  # the epoch's loss over all ranks
        if rank == 0:
            # Every replica holds the same weights: rank 0 evaluates for everyone.
            test_loss, acc = evaluate(model.module, make_loader(x_te, y_te, 256, shuffle=False))
            print(
                f"epoch {epoch:2d}  train loss {totals[0].item() / totals[1].item():.4f}  "
                f"test loss {test_loss:.4f}  test accuracy {100 * acc:.2f}%  "
                f"({time.perf_counter() - start:.1f}s)",
                flush=True,
            )

    if rank == 0 and args.save:
        ember.save(
            {"model": model.module.state_dict(), "image_size": int(x_tr.shape[-1])}, args.save
        )
        print(f"saved {args.save}; evaluate it with: python examples/demo.py --eval {args.save}")
    dist.barrier()
    dist.destroy_process_group()
    return acc


if __name__ == "__main__":
    main()
