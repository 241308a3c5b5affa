#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_ingest (tests/fuzz/corpus/ingest/). Run from anywhere; the
files are committed, so this only needs re-running when the harness's input layout changes.

Input layout (see fuzz_ingest.c): byte 0 = mode (bits 0-1 listener format 0 bin10, 1 bin11,
2 evlog; bit 2 chunked writes; bit 3 storage barrier; bit 4 shutdown drain; bit 5 two
connections; bit 6 deadline sweep; bit 7 small read buffer), byte 1 = seed, then the stream
(two connections: the first stream's length as 16-bit little-endian, then both streams).
Records and blocks come from the integration tests' encoders (tests/integ/tlctest.py)."""
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integ"))
import tlctest as T  # noqa: E402

OUT = os.path.join(HERE, "corpus", "ingest")

BIN10, BIN11, EVLOG = 0, 1, 2
CHUNKED, BARRIER, DRAIN, TWO, DEADLINE, SMALLBUF = 4, 8, 16, 32, 64, 128


def calls11(rnd, n, t0=1000):
    out, t = [], t0
    for _ in range(n):
        h = rnd.randrange(4) | rnd.choice([0, 1, 2, 3, 4, 5]) << 28
        core = rnd.choice([0, 1, 0xFF])
        if h >> 28 in (2, 4):
            out.append(T.bin11(h, 4, core, rnd.getrandbits(32), t))
        else:
            out.append(T.bin11(h, 3, core, 0, t))
            out.append(T.bin11(h, 0, core, 0, t + rnd.randrange(1, 90)))
        t += 100
    return b"".join(out)


def calls10(rnd, n, t0=1000):
    out, t = [], t0
    for _ in range(n):
        h = rnd.randrange(4)
        out.append(T.bin10(h, 3, 0, t))
        out.append(T.bin10(h, 2 if rnd.random() < 0.5 else 0, 0, t + 40))
        out.append(T.bin10(h, 0, 0, t + 80))
        t += 100
    return b"".join(out)


def evlog(rnd, blocks=2):
    out, t = [], 1.0
    for _ in range(blocks):
        items = []
        for th in (7, 8):
            items += [T.evlog_item(t, th, "+outer"), T.evlog_item(t + 0.1, th, "+inner"),
                      T.evlog_item(t + 0.2, th, "-inner"), T.evlog_item(t + 0.3, th, "-outer")]
        items += [T.evlog_item(t + 0.4, 7, ">state"), T.evlog_item(t + 0.5, 7, "<state"),
                  T.evlog_item(t + 0.6, 7, "!var"), T.evlog_item(t + 0.7, 7, "*CPUFREQ 0", "1200"),
                  T.evlog_item(t + 0.8, 7, "*note", "metadata only")]
        out.append(T.evlog_block(items, overflow=rnd.choice([0, 0, 3])))
        t += 1.0
    return b"".join(out)


def pre(name, fmt=None):
    return ("TLCAP/1 target=%s%s\n" % (name, " format=" + fmt if fmt else "")).encode()


def two(a, b):
    """Two connections' streams: the first one's length (16-bit little-endian), then both."""
    return struct.pack("<H", len(a)) + a + b


def main():
    rnd = random.Random(17)
    os.makedirs(OUT, exist_ok=True)
    s11, s10, sev = calls11(rnd, 30), calls10(rnd, 20), evlog(rnd)
    bad = bytearray(calls11(rnd, 10))
    bad[5 * 24 + 4] = 0x07  # event type 7 in record 5: a strict decode error
    cases = {
        "bin11_plain": bytes([BIN11, 0x01]) + s11,
        "bin11_preamble": bytes([BIN10, 0x02]) + pre("probe1", "bin11") + s11,
        "bin11_chunked_barrier": bytes([BIN11 | CHUNKED | BARRIER, 0x03]) + s11,
        "bin11_smallbuf_drain": bytes([BIN11 | SMALLBUF | DRAIN, 0x04]) + pre("b") + s11,
        "bin11_truncated_tail": bytes([BIN11 | BARRIER, 0x05]) + s11[:24 * 7 + 11],
        "bin11_decode_error": bytes([BIN11 | CHUNKED, 0x06]) + bytes(bad),
        "bin11_deadline": bytes([BIN11 | CHUNKED | DEADLINE, 0x07]) + s11[:24 * 20 + 5],
        "bin10_plain": bytes([BIN10, 0x08]) + s10,
        "bin10_preamble": bytes([EVLOG | CHUNKED, 0x09]) + pre("old10", "bin10") + s10,
        "evlog_plain": bytes([EVLOG, 0x0a]) + sev,
        "evlog_preamble": bytes([BIN11 | SMALLBUF, 0x0b]) + pre("app", "evlog") + sev,
        "evlog_chunked_drain": bytes([EVLOG | CHUNKED | DRAIN | BARRIER, 0x0c]) + sev,
        "evlog_truncated": bytes([EVLOG, 0x0d]) + sev[:len(sev) - 30],
        "two_same_listener": bytes([BIN11 | TWO | CHUNKED, 0x5e]) + two(s11, s11),
        "two_preambles": bytes([BIN11 | TWO, 0x33]) + two(pre("x", "evlog") + sev, pre("x") + s11),
        "two_formats": bytes([EVLOG | TWO | BARRIER | CHUNKED, 0x34]) + two(sev, pre("y", "bin10") + s10),
        "bad_preamble": bytes([BIN11, 0x0f]) + b"TLCAP/1 target=.bad format=bin12\n" + s11,
        "partial_preamble": bytes([BIN11, 0x10]) + b"TLCAP/1 target=wait",
        "empty": bytes([BIN11, 0x11]),
    }
    for name, data in cases.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
