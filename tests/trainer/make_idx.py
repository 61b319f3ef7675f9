#!/usr/bin/env python3
"""make_idx.py DIR TRAIN TEST [SIDE]: writes a small Fashion-MNIST-shaped data
set in IDX format (uncompressed, the package's file names without .gz) to DIR:
TRAIN and TEST random images with labels 0..9; the test images are SIDE x SIDE
(default 28, as the training images)."""
import os
import random
import struct
import sys

out, train, test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
side = int(sys.argv[4]) if len(sys.argv) > 4 else 28
os.makedirs(out, exist_ok=True)
rng = random.Random(1)


def write(prefix, count, rows):
    with open(os.path.join(out, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, count, rows, rows))
        f.write(bytes(rng.randrange(256) for _ in range(count * rows * rows)))
    with open(os.path.join(out, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, count))
        f.write(bytes(rng.randrange(10) for _ in range(count)))


write("train", train, 28)
write("t10k", test, side)
