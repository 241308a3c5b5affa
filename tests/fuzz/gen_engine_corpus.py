#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_engine (tests/fuzz/corpus/engine/). Run from anywhere; the files
are committed, so this only needs re-running when the harness's input layout changes.

Input layout (see fuzz_engine.c): byte 0 = mode, byte 1 = caps, byte 2 = window lengths, then
16-byte records: type/gap/snapshot byte, core, area type nibble, handle index, i32 time step,
u64 data. Seeds: nested calls with S/R (winIDEA style) on several cores, RTOS task switches on
the context_area handle, data writes with a mapped state link, state areas, gaps, snapshots of
every option set, and timer extremes; each in every format and with or without histograms and
windows."""
import hashlib
import os
import random
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "engine")
X, S, R, E, W, NONE = 0, 1, 2, 3, 4, 7


def rec(typ, core, area, idx, step, data=0, gap=False, snap=None):
    b0 = typ | (8 if gap else 0) | ((16 | (snap << 5)) if snap is not None else 0)
    return struct.pack("<BBBBiQ", b0, core, area, idx, step, data)


def nested(rnd, n, cores, snaps):
    out, st = b"", {c: [] for c in range(cores)}
    for i in range(n):
        c = rnd.randrange(cores)
        snap = rnd.randrange(8) if rnd.random() < snaps else None
        if not st[c] or (len(st[c]) < 6 and rnd.random() < 0.5):
            h = rnd.randrange(12)
            if st[c]:
                out += rec(S, c, 0, st[c][-1], rnd.randrange(1, 30))
            out += rec(E, c, rnd.choice([0, 0, 1]), h, rnd.randrange(1, 30), c, snap=snap)
            st[c].append(h)
        else:
            out += rec(X, c, 0, st[c].pop(), rnd.randrange(1, 30), snap=snap)
            if st[c]:
                out += rec(R, c, 0, st[c][-1], 0)
    return out


def rtos(rnd, n):
    out = b""
    for i in range(n):
        if rnd.random() < 0.15:  # a task switch: W on the context_area handle 0x30000000
            out += rec(W, rnd.randrange(2), 3, 0, rnd.randrange(1, 50), rnd.randrange(4))
        else:
            out += rec(rnd.choice([E, X, S, R]), rnd.randrange(2), 0, rnd.randrange(6),
                       rnd.randrange(0, 50), snap=rnd.randrange(8) if rnd.random() < 0.1 else None)
    return out


def data_state(rnd, n):
    out = b""
    for i in range(n):
        k = rnd.randrange(4)
        if k == 0:  # the mapped variable 0x20000000 (state link 0x30000001 with mode bit 6)
            out += rec(W, 0, 2, 0, rnd.randrange(1, 100), rnd.randrange(3))
        elif k == 1:
            out += rec(W, 0, rnd.choice([2, 4]), rnd.randrange(4), rnd.randrange(1, 100),
                       rnd.getrandbits(64))
        elif k == 2:
            out += rec(rnd.choice([W, E, X]), 0, rnd.choice([3, 5]), rnd.randrange(3),
                       rnd.randrange(0, 100), rnd.randrange(3))
        else:
            out += rec(rnd.choice([E, X]), 0, 0, rnd.randrange(3), rnd.randrange(0, 100),
                       gap=rnd.random() < 0.1, snap=rnd.randrange(8))
    return out


def extremes(rnd):
    out = nested(rnd, 20, 1, 0.2)
    out += rec(E, 0, 0, 1, 0x7FFFFFFF)  # time jumps to INT64_MAX
    out += rec(X, 0, 0, 1, -(1 << 31), snap=7)  # and to INT64_MIN
    out += rec(E, 0, 0, 1, 5, snap=3)
    out += rec(6, 0, 9, 3, 1) + rec(NONE, 0, 0, 1, 1) + rec(W, 0, 0, 1, 1, gap=True, snap=1)
    return out + nested(rnd, 20, 1, 0.2)


def main():
    os.makedirs(OUT, exist_ok=True)
    rnd = random.Random(7)
    seeds = []
    for fmt in range(3):
        for extra in (0x00, 0x08, 0x30, 0x38):
            seeds.append((bytes([fmt | extra, 0xFF, rnd.randrange(256)]),
                          nested(rnd, 300, 4, 0.05)))
    seeds.append((bytes([0x35, 0xFF, 0x1B]), rtos(rnd, 400)))
    seeds.append((bytes([0x3D, 0x9F, 0x00]), rtos(rnd, 300)))  # no histograms, small caps
    seeds.append((bytes([0x71, 0xFF, 0x06]), data_state(rnd, 300)))
    seeds.append((bytes([0x61, 0x42, 0xE4]), data_state(rnd, 200)))  # small caps
    seeds.append((bytes([0x31, 0x00, 0x00]), nested(rnd, 200, 8, 0.1)))  # 2 areas, 1 context
    seeds.append((bytes([0x32, 0xFF, 0x55]), extremes(rnd)))
    seeds.append((bytes([0x11, 0xFF, 0xAA]), extremes(rnd)))
    for head, body in seeds:
        data = head + body
        name = hashlib.sha1(data).hexdigest()
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
