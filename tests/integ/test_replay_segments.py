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


def test_damaged_zst_never_replays_silently(d):
    """A damaged .zst never replays as 0 events with exit 0, with or without its manifest, and
    its error names the offset. Every cut (each of the first 64 lengths, then every 37th) and
    a flipped byte: exit 1 and a message with the byte offset."""
    if shutil.which("zstd") is None:
        print("SKIP part: zstd not installed")
        return
    seg = segments(d)[0]
    subprocess.run(["zstd", "-q", "--rm", seg], check=True)
    z = seg + ".zst"
    with open(z, "rb") as f:
        whole = f.read()
    manifest = glob.glob(os.path.join(os.path.dirname(seg), "*.manifest"))
    T.check(manifest, "the segment has a manifest")
    cuts = sorted(set(list(range(0, min(64, len(whole)))) +
                      list(range(64, len(whole), 37)) + [len(whole) - 1]))
    for with_manifest in (True, False):
        if not with_manifest:
            for m in glob.glob(os.path.join(os.path.dirname(seg), "*.manifest")):
                os.unlink(m)
        for n in cuts:
            with open(z, "wb") as f:
                f.write(whole[:n])
            rc, out, err = T.run([TLCAPD, "replay", z, "--export", "bin11"])
            T.eq(rc, 1, "cut at %d of %d (manifest %s): exit status (stderr %r)"
                 % (n, len(whole), with_manifest, err))
            T.check("byte " in err and z in err,
                    "cut at %d: the message names the file and a byte offset: %r" % (n, err))
        bad = bytearray(whole)
        bad[len(bad) // 2] ^= 0x5A
        with open(z, "wb") as f:
            f.write(bytes(bad))
        rc, out, err = T.run([TLCAPD, "replay", z, "--export", "bin11"])
        T.eq(rc, 1, "a flipped byte (manifest %s): exit status (stderr %r)" % (with_manifest, err))
        T.check("byte " in err, "a flipped byte: the message names a byte offset: %r" % err)
        with open(z, "wb") as f:
            f.write(whole)
        rc, out, err = T.run([TLCAPD, "replay", z, "--export", "bin11"])
        T.eq(rc, 0, "the whole file still replays (manifest %s): %s" % (with_manifest, err))


T.main([test_full_replay_is_the_capture, test_time_range_through_the_index,
        test_compressed_segments, test_damaged_zst_never_replays_silently])
