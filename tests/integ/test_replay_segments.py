#!/usr/bin/python3
"""tlcapd replay over storage segments: a time range read through the segment index equals a
full replay filtered by time, and compressed (.zst) segments replay like plain ones.

Segments are written by store_driver (the storage module itself): bin11 records on handle 0x10,
E/X alternating, data = index, time = index * 1000 ns. Usage: test_replay_segments.py
STORE_DRIVER TLCAPD"""
import glob
import os
import shutil
import struct
import subprocess
import sys

import tlctest as T

DRIVER, TLCAPD = sys.argv[1], sys.argv[2]
N = 3000


def records(lo, hi):
    """The driver's records with index in [lo, hi)."""
    out = []
    for i in range(lo, hi):
        flags = 0 if i % 2 else 3
        out.append(struct.pack("<IIQq", 0x10, flags, i, i * 1000))
    return b"".join(out)


def segments(d):
    rc, out, err = T.run([DRIVER, os.path.join(d, "state"), "write", "lab", str(N), "16384", "1000"])
    T.eq(rc, 0, "store_driver write (stderr %s)" % err)
    segs = sorted(glob.glob(os.path.join(d, "state", "lab", "*.txt.BIN")))
    T.check(len(segs) >= 3, "several segments written: %r" % segs)
    return segs


def replay(args):
    rc, out, err = T.run([TLCAPD, "replay"] + args)
    T.eq(rc, 0, "replay %r (stderr %s)" % (args, err))
    return out


def test_full_replay_is_the_capture(d):
    segs = segments(d)
    T.eq(replay(segs + ["--format", "bin11", "--export", "bin11"]), records(0, N),
         "all segments replay to every record, in order")


def test_time_range_through_the_index(d):
    segs = segments(d)
    for lo, hi in ((0, 10), (1234, 1300), (1500, 2999), (2999, 2999), (100, 2500)):
        out = replay(segs + ["--format", "bin11", "--export", "bin11", "--from", str(lo * 1000),
                             "--to", str(hi * 1000)])
        T.eq(out, records(lo, hi + 1), "range [%d, %d] us" % (lo, hi))
    # one segment alone, a range inside it
    out = replay([segs[1], "--export", "bin11", "--from", "0", "--to", str(10 ** 12)])
    T.check(len(out) > 0 and len(out) % 24 == 0, "a single segment replays alone")


def test_compressed_segments(d):
    if shutil.which("zstd") is None:
        print("SKIP part: zstd not installed")
        return
    segs = segments(d)
    plain = replay(segs + ["--format", "bin11", "--export", "bin11"])
    zs = []
    for s in segs:
        subprocess.run(["zstd", "-q", "--rm", s], check=True)
        zs.append(s + ".zst")
    T.eq(replay(zs + ["--export", "bin11"]), plain, ".zst segments replay like plain ones")
    out = replay(zs + ["--export", "bin11", "--from", "1234000", "--to", "1300000"])
    T.eq(out, records(1234, 1301), "time range over .zst segments")


T.main([test_full_replay_is_the_capture, test_time_range_through_the_index,
        test_compressed_segments])
