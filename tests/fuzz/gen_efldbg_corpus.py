#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_efldbg (tests/fuzz/corpus/efldbg/): streams as efl_debugd
sends them to a debugger (docs/efl.md), each behind the harness's 4 setting bytes
(chunk size, max_ctl/4, prefix, streamed opcode). Written from the protocol description."""
import hashlib
import os
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "efldbg")
GET = 7  # the streamed opcode in these seeds ("EvLog/get")


def pkt(cid, op, payload=b""):
    return struct.pack("<Iii", 12 + len(payload), cid, op) + payload


def added(cid, pid, name):
    return pkt(0, 3, struct.pack("<ii", cid, pid) + name + b"\0")


def item(tim, thread, event):
    e = event + b"\0"
    nxt = (40 + len(e) + 7) // 8 * 8
    body = struct.pack("<ddQQHHH", tim, 0.0, thread, 0, 40, 0, nxt) + b"\0\0" + e
    return body + b"\xaa" * (nxt - len(body))


def evlog_reply(cid, items, overflow=0):
    return pkt(cid, GET, struct.pack("<I", overflow) + b"".join(items))


def main():
    os.makedirs(OUT, exist_ok=True)
    items = [item(1.0 + i * 1e-3, 0x7f00 + i % 3, ev) for i, ev in
             enumerate([b"+tlc_outer", b"+tlc_inner", b"-tlc_inner", b">tlc_state0",
                        b"<tlc_state0", b"!tlc_tick", b"-tlc_outer"])]
    register = pkt(0, 0, struct.pack("<Q", 0x1122334455667788) +
                   struct.pack("<8i", 2, 3, 4, 5, 6, 7, 8, 9))
    seeds = {
        "conversation": register + added(1, 4242, b"efl_app") + added(2, 4243, b"elementary_test")
        + evlog_reply(1, []) + evlog_reply(1, items) + pkt(2, GET) + pkt(0, 4, struct.pack("<i", 2)),
        "empty_reply_bug": pkt(3, GET) + pkt(3, GET),
        "several_added": pkt(0, 3, b"".join(struct.pack("<ii", c, 1000 + c) + b"app%d\0" % c
                                            for c in range(1, 6))),
        "deleted_many": pkt(0, 4, struct.pack("<4i", 1, 2, 3, 4)),
        "bad_size_small": struct.pack("<Iii", 5, 0, 0),
        "bad_size_huge": struct.pack("<Iii", 0x7fffffff, 1, GET),
        "truncated_added": pkt(0, 3, struct.pack("<ii", 1, 2) + b"noname"),
        "register_bad_id": pkt(0, 0, struct.pack("<Qi", 1, 5000)),
        "big_reply": evlog_reply(1, items * 40, overflow=3),
    }
    settings = [bytes([0, 64, 4, GET]), bytes([1, 64, 4, GET]), bytes([7, 2, 16, GET]),
                bytes([13, 255, 0, 255])]
    for name, body in seeds.items():
        for s in settings:
            data = s + body
            with open(os.path.join(OUT, hashlib.sha1(data).hexdigest()), "wb") as f:
                f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
