#!/usr/bin/python3
"""pytorch_eager_sgd.py: eager-SGD in PyTorch with quorum's DDP hook.

The fm-s CNN on Fashion-MNIST (perf/torch_fm_s.py's model and data) trained
data-parallel under DistributedDataParallel, with the paper's load imbalance
injected (each step one rank, drawn from a shared seed, sleeps --delay-ms
before its backward pass), reducing the gradient with

  --reduce ddp       DDP's own allreduce (gloo)
  --reduce sync      quorum's allreduce (the hook, synchronous)
  --reduce solo      quorum's solo allreduce (eager-SGD: the first rank ready
                     starts the round; late gradients ride in a later one)
  --reduce majority  quorum's majority allreduce (a drawn rank starts it)

Launch on one host with quorum-run (which starts torch.distributed too):

  quorum-run -n 2 -- python3 examples/pytorch_eager_sgd.py --reduce solo

or under torchrun / mpirun / srun (see docs/python.md for the environment).
Rank 0 prints one JSON line per evaluation (training seconds so far, not
counting evaluations, and test accuracy) and a summary; with the same seed
every reduce mode sees the same data order and the same delays.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import quorum
import quorum.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perf"))
from torch_fm_s import FmS, load  # noqa: E402  (the same model and data as the anchor)


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reduce", choices=["ddp", "sync", "solo", "majority"], default="sync")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--delay-ms", type=float, default=20.0,
                   help="injected imbalance: the drawn rank sleeps this long per step")
    p.add_argument("--delayed-ranks", type=int, default=1, help="ranks drawn per step")
    p.add_argument("--evals-per-epoch", type=int, default=4)
    p.add_argument("--train-limit", type=int, default=0, help="first N training images")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--max-staleness", type=int, default=32)
    p.add_argument("--carry-weight", type=float, default=0.5)
    p.add_argument("--partial-scale", choices=["world", "sqrt", "count"], default="world")
    return p.parse_args()


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x)


def main():
    a = parse()
    torch.set_num_threads(a.threads)
    if "TORCHELASTIC_RUN_ID" in os.environ or "QUORUM_RANK" not in os.environ and \
            "MASTER_ADDR" in os.environ:
        # torchrun (or MASTER_ADDR/RANK/WORLD_SIZE set by hand): torch.distributed
        # first, then quorum over its ranks (the hand-over).
        dist.init_process_group("gloo")
        comm = quorum.torch.init()
    else:
        # quorum-run, mpirun, srun: quorum first, torch.distributed over its ranks.
        comm = quorum.init()
        quorum.torch.init_process_group(comm, backend="gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    x_train, y_train = load(a.data_dir, "train")
    x_test, y_test = load(a.data_dir, "t10k")
    if a.train_limit > 0:
        x_train, y_train = x_train[:a.train_limit], y_train[:a.train_limit]

    torch.manual_seed(a.seed)
    model = FmS()
    ddp = DDP(model)
    hook = None
    if a.reduce != "ddp":
        hook = quorum.torch.hook(reduce=a.reduce, max_staleness=a.max_staleness,
                                 carry_weight=a.carry_weight, partial_scale=a.partial_scale,
                                 seed=a.seed)
        ddp.register_comm_hook(comm, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum)

    steps = len(x_train) // (a.batch * size)
    eval_at = {round(steps * (i + 1) / a.evals_per_epoch) for i in range(a.evals_per_epoch)}
    order_gen = torch.Generator().manual_seed(a.seed)
    delays = np.random.default_rng(a.seed)  # the same draw on every rank
    train_s, images, curve = 0.0, 0, []
    for epoch in range(a.epochs):
        order = torch.randperm(len(x_train), generator=order_gen)
        comm.barrier()
        t0 = time.perf_counter()
        for s in range(steps):
            base = (s * size + rank) * a.batch
            idx = order[base:base + a.batch]
            loss = F.cross_entropy(ddp(x_train[idx]), y_train[idx])
            slow = delays.choice(size, size=min(a.delayed_ranks, size), replace=False)
            if rank in slow:
                time.sleep(a.delay_ms / 1000)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            images += len(idx) * size
            if s + 1 in eval_at:
                comm.barrier()  # the clock stops while the ranks evaluate
                train_s += time.perf_counter() - t0
                acc = evaluate(model, x_test, y_test)
                point = {"reduce": a.reduce, "epoch": epoch + (s + 1) / steps,
                         "train_seconds": round(train_s, 3), "test_accuracy": acc}
                curve.append(point)
                if rank == 0:
                    print(json.dumps(point), flush=True)
                comm.barrier()
                t0 = time.perf_counter()
    # Replicas must agree: every rank applied the same sequence of updates.
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = torch.zeros(size, params.numel())
    comm.allgather(params, everyone)
    agree = all(torch.equal(everyone[0], everyone[r]) for r in range(size))
    summary = {"summary": True, "reduce": a.reduce, "ranks": size, "train_seconds": train_s,
               "images_per_s": images / train_s, "final_accuracy": curve[-1]["test_accuracy"],
               "replicas_agree": agree, "curve": [(p["train_seconds"], p["test_accuracy"])
                                                  for p in curve]}
    if hook is not None:
        summary.update(hook.stats())
        hook.close()
    if rank == 0:
        print(json.dumps(summary), flush=True)
    comm.finalize()  # first: a communicator handed over from torch finalizes through it
    dist.destroy_process_group()
    return 0 if agree else 3


if __name__ == "__main__":
    sys.exit(main())
