#!/usr/bin/python3
"""torch_fm_s.py: the PyTorch anchor for quorum-train's fm-s on Fashion-MNIST.

Trains the same network (conv5 1->16 pad 2, ReLU, pool 2, conv5 16->32 pad 2,
ReLU, pool 2, linear 1568->128, ReLU, linear 128->10) with the same SGD
(momentum, weight decay), batch and normalisation, on the same IDX .gz files
(read with gzip, no downloads), on one thread by default. Per epoch it prints
train loss, test accuracy and training images/s (evaluation not timed), and
with --json one JSON line per epoch for perf/train_vs_torch.sh.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path, magic_expected):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    if magic != magic_expected:
        sys.exit(f"{path}: wrong magic 0x{magic:08x}, expected 0x{magic_expected:08x}")
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(count, 1, rows, cols)
    return np.frombuffer(data, dtype=np.uint8, offset=8)


def load(data_dir, prefix):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 0x803)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 0x801)
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
    return x.contiguous(), torch.from_numpy(labels.astype(np.int64))


class FmS(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.fc1 = nn.Linear(1568, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--train-limit", type=int, default=0, help="first N training images (0: all)")
    p.add_argument("--max-steps", type=int, default=-1, help="stop each epoch after N steps")
    p.add_argument("--json", action="store_true", help="one JSON line per epoch")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x_train, y_train = load(a.data_dir, "train")
    x_test, y_test = load(a.data_dir, "t10k")
    if a.train_limit > 0:
        x_train, y_train = x_train[: a.train_limit], y_train[: a.train_limit]
    model = FmS()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    steps = len(x_train) // a.batch  # the last partial batch is dropped, as in quorum-train
    if a.max_steps >= 0:
        steps = min(steps, a.max_steps)
    gen = torch.Generator().manual_seed(a.seed)
    for epoch in range(a.epochs):
        order = torch.randperm(len(x_train), generator=gen)
        model.train()
        loss_sum, seen = 0.0, 0
        t0, c0 = time.perf_counter(), time.process_time()
        for s in range(steps):
            idx = order[s * a.batch:(s + 1) * a.batch]
            xb, yb = x_train[idx], y_train[idx]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
            seen += len(idx)
        train_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(x_test), 1000):
                correct += (model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum().item()
        rec = {"epoch": epoch + 1, "train_loss": loss_sum / max(seen, 1),
               "test_accuracy": correct / len(x_test), "images_per_s": seen / train_s,
               "seconds": train_s, "cpu_seconds": cpu_s, "images_per_cpu_s": seen / cpu_s}
        if a.json:
            print(json.dumps(rec), flush=True)
        else:
            print(f"epoch {rec['epoch']}: train loss {rec['train_loss']:.4f} | test acc "
                  f"{100 * rec['test_accuracy']:.2f}% | {rec['images_per_s']:.0f} img/s | "
                  f"{rec['images_per_cpu_s']:.0f} img/cpu-s | {train_s:.2f} s", flush=True)


if __name__ == "__main__":
    main()
