#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_bin1x (tests/fuzz/corpus/bin1x/). Run from anywhere; the files
are committed, so this only needs re-running when the harness's input layout changes.

Input layout (see fuzz_bin1x.c): byte 0 = case (bit 0 bin11, bit 1 resync, bits 2-4 confirm-1,
bits 5-7 batch), byte 1 = chunk seed, then the stream."""
import os
import random
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "bin1x")


def rec(fmt, handle, typ, core, data, time):
    word = (core << 4 | typ) if fmt == 11 else (typ << 24)
    return struct.pack("<IIQq", handle, word, data, time)


def stream(fmt, n, rnd, t0=10**9, reboot_at=None):
    out, t = b"", t0
    for i in range(n):
        t += rnd.randrange(0, 20000)
        if i == reboot_at:
            t = 500
        typ = rnd.randrange(5)
        out += rec(fmt, rnd.randrange(6) << 28 | rnd.randrange(1, 0x10000), typ,
                   rnd.choice([0, 1, 2, 3, 0xFF]), rnd.getrandbits(32) if typ == 4 else 0, t)
    return out


def main():
    rnd = random.Random(1)
    os.makedirs(OUT, exist_ok=True)
    s11, s10 = stream(11, 24, rnd), stream(10, 24, rnd)
    damaged = bytearray(stream(11, 30, rnd))
    damaged[100] ^= 0x40          # flip in record 4
    del damaged[300:303]          # drop 3 bytes in record 12
    damaged[500:500] = b"\x99\x88"  # insert 2 bytes
    bad10 = bytearray(s10)
    bad10[5 * 24 + 7] = 0x07      # bin10 type 7 in record 5
    cases = {
        "bin11_strict": bytes([0x01 | 2 << 2 | 3 << 5, 0x11]) + s11,
        "bin10_strict": bytes([0x00 | 2 << 2 | 6 << 5, 0x23]) + s10,
        "bin10_strict_badtype": bytes([0x00 | 2 << 5, 0x05]) + bytes(bad10),
        "bin11_resync_damaged": bytes([0x03 | 2 << 2 | 4 << 5, 0x31]) + bytes(damaged),
        "bin10_resync_prefix": bytes([0x02 | 0 << 2 | 1 << 5, 0x47]) + b"\x01\x02\x03\x04\x05" + s10,
        "bin11_resync_reboot": bytes([0x03 | 2 << 2 | 6 << 5, 0x5b]) + stream(11, 40, rnd, reboot_at=20),
        "bin11_truncated": bytes([0x01, 0x00]) + s11[:24 * 3 + 7],
        # strict (TCP): a board reset mid-stream, confirmed by the records after it; and one
        # at the very end (two records: confirmed by the end of the stream)
        "bin11_strict_reboot": bytes([0x01 | 2 << 2 | 3 << 5, 0x6d]) + stream(11, 40, rnd, reboot_at=20),
        "bin10_strict_reboot_end": bytes([0x00 | 2 << 2 | 2 << 5, 0x7f]) + stream(10, 30, rnd, reboot_at=28),
    }
    for name, data in cases.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
