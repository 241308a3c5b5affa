#!/usr/bin/python3
"""tlcapd against hostile and unlucky peers (RELIABILITY T16, T18, T22).

T16: 1000 cycles of connect / send / disconnect, a third ending with a reset in the middle of a
     record, a third with a half-close, a third idle: the fd count returns to its baseline, RSS
     stays within 5% of its warm baseline, partial records are counted as truncated tails and
     never as records, every disconnect is a gap.
T18: evlog block headers announcing giant or impossible sizes: the connection is closed with a
     decode error before anything is allocated for them (RSS does not move), others unaffected.
T22: a target reboots (time back to 0), jumps forward by hours and wraps at the 64-bit timer:
     no negative duration reaches the statistics (SPEC 2: a negative duration counts 0 and an
     anomaly; the wrap's subtraction must not overflow, which the UBSan build checks),
     anomalies are counted, and the live statistics still equal an offline replay of the same
     bytes. A forward jump is elapsed time by SPEC 2's definitions, not a gap.

Usage: test_daemon_hostile.py TLCAPD TLCAP [XSD]"""
import os
import random
import shutil
import socket
import struct
import sys

import daemonlib as D
import tlctest as T

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]
XSD = sys.argv[3] if len(sys.argv) > 3 else None
with open(TLCAPD, "rb") as _f:
    SANITIZED = b"AddressSanitizer" in _f.read()


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rst_close(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def test_connection_churn(d):
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % port,
                              "--partial-timeout", "5s"])
    pid = dm.p.pid
    sent = {"records": 0, "tails": 0, "disconnects": 0}

    def cycle(i):
        s = D.connect(port)
        kind = i % 3
        if kind == 0:  # two records and 5 bytes of a third, then a reset
            s.sendall(b"TLCAP/1 target=churn\n" + D.calls(1, t0=1000 * i) + b"\x01\x02\x03\x04\x05")
            sent["records"] += 2
            sent["tails"] += 1
            # the reset may discard what the daemon has not read yet: wait until it has
            want = sent["records"]
            dm.wait_stats(lambda st: any(t["name"] == "churn" and t["records"] == want
                                         for t in st["targets"]), what="records read")
            rst_close(s)
        elif kind == 1:  # two records and a half-close: answered once processed
            s.sendall(b"TLCAP/1 target=churn\n" + D.calls(1, t0=1000 * i))
            sent["records"] += 2
            s.shutdown(socket.SHUT_WR)
            D.wait_eof(s)
            s.close()
        else:  # idle: connect and go away without a byte
            s.close()
        if kind != 2:
            sent["disconnects"] += 1

    try:
        for i in range(99):
            cycle(i)
        dm.wait_stats(lambda st: st["daemon"]["connections"] == 0, what="warm-up closed")
        base_fds, base_rss = fds(pid), D.proc_status_kib(pid, "VmRSS")
        for i in range(99, 1000):
            cycle(i)
        st = dm.wait_stats(lambda s: s["daemon"]["connections"] == 0 and
                           D.by_name(s, "churn")["connected"] == 0, what="all closed")
        t = D.by_name(st, "churn")
        T.eq(t["records"], sent["records"], "whole records (partial ones never counted)")
        T.eq(t["truncated_tails"], sent["tails"], "truncated tails, one per reset mid-record")
        T.eq(t["gaps"], sent["disconnects"], "a gap per disconnect")
        T.eq(t["decode_errors"], 0, "no decode errors")
        T.eq(fds(pid), base_fds, "fd count back to its baseline")
        end_rss = D.proc_status_kib(pid, "VmRSS")
        if SANITIZED:
            print("note: RSS not checked: AddressSanitizer keeps freed memory in quarantine")
        else:
            T.check(end_rss <= base_rss * 1.05,
                    "RSS within 5%% of the warm baseline: %d KiB -> %d KiB" % (base_rss, end_rss))
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_giant_lengths(d):
    p11, pev = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % p11,
                              "--listen", "ev=evlog@127.0.0.1:%d" % pev])
    pid = dm.p.pid
    try:
        good = D.connect(p11)
        good.sendall(b"TLCAP/1 target=good\n" + D.calls(10))
        dm.wait_stats(lambda s: any(t["name"] == "good" and t["records"] == 20
                                    for t in s["targets"]), what="good target")
        base = D.proc_status_kib(pid, "VmRSS")
        sizes = [0xFFFFFFFF, 0xFFFFFFFC, 0x80000000, 0x7FFFFFFF, 12 - 1, 3]
        for i, size in enumerate(sizes):
            s = D.connect(pev)
            hdr = struct.pack("<III", 0x0FFEE211, size, 0) + b"\0" * 64
            s.sendall(b"TLCAP/1 target=giant%d format=evlog\n" % i + hdr)
            D.wait_eof(s)  # closed by the daemon: strict mode, bad block header
            s.close()
        st = dm.wait_stats(lambda s: all(D.by_name(s, "giant%d" % i)["connected"] == 0
                                         for i in range(len(sizes))), what="giants closed")
        for i in range(len(sizes)):
            T.eq(D.by_name(st, "giant%d" % i)["decode_errors"], 1, "decode error giant%d" % i)
        T.check(D.proc_status_kib(pid, "VmRSS") < base + 8 * 1024,
                "nothing was allocated for the announced sizes")
        good.sendall(D.calls(10, t0=10 ** 6))
        dm.wait_stats(lambda s: D.by_name(s, "good")["records"] == 40, what="good unaffected")
        good.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def reboot_stream(seed):
    """Nested calls on two cores with a reboot (time back to 0), a jump of 3 hours and a wrap
    of the 64-bit timer in the middle of open activations."""
    r = random.Random(seed)
    out = []
    epochs = [10 ** 9, 0, 3 * 3600 * 10 ** 9, 2 ** 63 - 10 ** 6, -(2 ** 63)]
    for k, t in enumerate(epochs):
        stacks = [[], []]
        for _ in range(300):
            c = r.randrange(2)
            t += r.randrange(1, 50)
            st = stacks[c]
            if st and (len(st) > 6 or r.random() < 0.45):
                out.append(T.bin11(st.pop(), 0, c, 0, t))
            else:
                f = r.randrange(12)
                out.append(T.bin11(f, 3, c, 0, t))
                st.append(f)
            if k == 3 and t > 2 ** 63 - 2000:
                break
        # activations left open across the discontinuity on purpose
    return b"".join(out)


def test_reboot_and_wrap(d):
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % port],
                  serve="127.0.0.1:%d" % sport)
    try:
        data = reboot_stream(7)
        path = os.path.join(d, "reboot.bin")
        open(path, "wb").write(data)
        rep = D.replay_json(TLCAPD, path, "bin11")
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=reboot\n" + data)
        dm.wait_stats(lambda st: any(t["name"] == "reboot" and t["events"] ==
                                     rep["counters"]["events"] for t in st["targets"]),
                      what="all events processed")
        live = D.live_json(TLCAP, sport, "reboot")
        D.compare_stats(live, rep, "reboot")
        T.check(live["counters"]["anomalies"] > 0, "the discontinuities are counted as anomalies")
        # the XML that `tlcap stats` writes from live statistics validates against the schema
        if XSD is not None and shutil.which("xmllint") is not None:
            rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "stats", "reboot",
                                  "--export", "xml"], timeout=30)
            T.eq(rc, 0, "tlcap stats --export xml: %s" % err)
            xp = os.path.join(d, "live.xml")
            open(xp, "wb").write(out)
            rc, _, err = T.run(["xmllint", "--noout", "--schema", XSD, xp])
            T.eq(rc, 0, "live XML validates: %s" % err[-1000:])
        for row in live["rows"]:
            for k in ("net", "gross", "call", "outside", "period"):
                if k in row:
                    dist = row[k]
                    T.check(dist.get("total", 0) >= 0 and dist["sum"] >= 0 and
                            (dist["min"] is None or dist["min"] >= 0),
                            "no negative duration in %s %s: %r" % (row["handle"], k, dist))
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


T.main([test_connection_churn, test_giant_lengths, test_reboot_and_wrap])
