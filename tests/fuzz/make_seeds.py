#!/usr/bin/env python3
"""make_seeds.py: writes the small seed corpora of tests/fuzz/corpus/ (run it
from anywhere; the files are checked in, so only rerun after a format change).
Each seed is a valid input (or a near miss) in the format its target parses."""
import gzip
import os
import struct
import zlib

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(here, target), exist_ok=True)
    with open(os.path.join(here, target, name), "wb") as f:
        f.write(data)


# Checkpoints (trainer/checkpoint.cpp): versions 5 (the epoch's start step and
# a batch policy's state, empty or not), 4 (the training time) and 3, with and
# without a moving average, and version 2.
def checkpoint(version, count, ema, policy=b""):
    b = b"QTRNCKPT" + struct.pack("<I", version)
    for text in (b"fm-s", b"synthetic"):
        b += struct.pack("<I", len(text)) + text
    b += struct.pack("<QiiQq", 9, 32, 1, 448, 14)  # seed batch world train_count steps/epoch
    b += struct.pack("<qqq", 17, 1, 3)  # global step, epoch, step in epoch
    b += struct.pack("<dqq", 12.5, 40, 96)
    b += struct.pack("<Q", count)
    b += struct.pack("<%df" % count, *[i * 0.5 for i in range(count)])
    b += struct.pack("<%df" % count, *[-i * 0.25 for i in range(count)])
    if version >= 3:
        b += struct.pack("<Q", count if ema else 0)
        if ema:
            b += struct.pack("<%df" % count, *[i * 0.125 for i in range(count)])
    if version >= 4:
        b += struct.pack("<d", 7.25)  # training seconds so far
    if version >= 5:
        b += struct.pack("<q", 14)  # the epoch's start step
        b += struct.pack("<I", len(policy)) + policy
    return b + struct.pack("<I", zlib.crc32(b))


put("checkpoint", "v5", checkpoint(5, 4, False))
put("checkpoint", "v5_policy", checkpoint(5, 3, True, b"quorum-online-tuner 1\ngrid 2 16 0.01 32 0.02\n"))
put("checkpoint", "v4", checkpoint(4, 4, False))
put("checkpoint", "v4_ema", checkpoint(4, 3, True))
put("checkpoint", "v3", checkpoint(3, 4, False))
put("checkpoint", "v3_ema", checkpoint(3, 3, True))
put("checkpoint", "v2", checkpoint(2, 2, False))
put("checkpoint", "truncated", checkpoint(3, 4, False)[:40])


# Store requests (runtime/bootstrap/tcp_store.hpp). First byte: 1 = the
# fuzzer authenticates first, 0 = the input does.
def msg(op, key=b"", value=b"", arg=0):
    return struct.pack("<IHHIIQ", 0x54535251, 1, op, len(key), len(value), arg) + key + value


AUTH, SET, GET, ADD, DELETE = 1, 2, 3, 4, 5
put("store_wire", "set_get", b"\x01" + msg(SET, b"k", b"value") + msg(GET, b"k", arg=0))
put("store_wire", "add", b"\x01" + msg(ADD, b"n", arg=5) + msg(ADD, b"n", arg=2**64 - 1) +
    msg(GET, b"n", arg=10))
put("store_wire", "delete", b"\x01" + msg(SET, b"a", b"1") + msg(DELETE, b"a") + msg(DELETE, b"a"))
put("store_wire", "get_waits", b"\x01" + msg(GET, b"absent", arg=1))
put("store_wire", "own_auth", b"\x00" + msg(AUTH, value=b"fuzz-token") + msg(SET, b"x", b"y"))
put("store_wire", "bad_token", b"\x00" + msg(AUTH, value=b"wrong") + msg(SET, b"x", b"y"))
put("store_wire", "garbage", b"\x00GET / HTTP/1.0\r\n\r\n")


# Data sets (trainer/dataset.cpp). First byte even: IDX images + labels split
# at the offset in the next two bytes; odd: one CIFAR-10 batch file.
def idx(count, rows, cols, labels):
    images = struct.pack(">IIII", 0x803, count, rows, cols) + bytes(i % 256 for i in range(count * rows * cols))
    return images, struct.pack(">II", 0x801, count) + bytes(labels)


images, labels = idx(2, 2, 2, [3, 9])
put("datasets", "idx", b"\x00" + struct.pack(">H", len(images)) + images + labels)
gi, gl = gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)
put("datasets", "idx_gz", b"\x00" + struct.pack(">H", len(gi)) + gi + gl)
images, labels = idx(1, 28, 28, [10])
put("datasets", "idx_bad_label", b"\x00" + struct.pack(">H", len(images)) + images + labels)
record = bytes([5]) + bytes(i % 256 for i in range(3072))
put("datasets", "cifar", b"\x01" + record)
put("datasets", "cifar_gz", b"\x01" + gzip.compress(record + record, mtime=0))

# Knob values, and QUORUM_* name tails (starting with "_").
for i, text in enumerate([b"64k", b"9000g", b"0x10", b"-1", b"1.5e3", b"yes", b"off", b"bc",
                          b"_TIMOUT_MS", b"_PROGRES_THREAD", b"99999999999999999999", b"1000000000000", b""]):
    put("knobs", "seed%02d" % i, text)
