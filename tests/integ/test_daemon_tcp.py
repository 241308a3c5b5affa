#!/usr/bin/python3
"""tlcapd TCP ingest end to end (RELIABILITY T16, T18, T19): naming, strict decoding, half-close,
resets, the partial-record deadline, many targets at once, SIGTERM.

Usage: test_daemon_tcp.py TLCAPD"""
import os
import socket
import struct
import sys
import time

import daemonlib as D
import tlctest as T

TLCAPD = sys.argv[1]


def start(d, extra=()):
    p11, pev = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % p11,
                              "--listen", "ev=evlog@127.0.0.1:%d" % pev,
                              "--partial-timeout", "600ms"] + list(extra))
    return dm, p11, pev


def test_naming_halfclose_and_strict(d):
    dm, port, _ = start(d)
    try:
        # 1. listener@IP naming; half-close: all processed, then the daemon closes.
        a = D.connect(port)
        a.sendall(D.calls(500))
        a.shutdown(socket.SHUT_WR)
        D.wait_eof(a)
        a.close()
        t = dm.target("ing@127.0.0.1")
        T.eq(t["records"], 1000, "records of ing@127.0.0.1")
        T.eq(t["events"], 1000, "events of ing@127.0.0.1")
        T.eq(t["connected"], 0, "connected after half-close")
        # 2. reconnect keeps the target and its statistics; a second simultaneous one is #2.
        b1 = D.connect(port)
        b1.sendall(D.calls(10, t0=10 ** 6))
        dm.wait_stats(lambda s: D.by_name(s, "ing@127.0.0.1")["connected"] == 1,
                      what="reconnected")
        b2 = D.connect(port)
        b2.sendall(D.calls(7))
        t2 = dm.wait_stats(lambda s: any(x["name"] == "ing@127.0.0.1#2" and x["records"] == 14
                                         for x in s["targets"]), what="target #2")
        t1 = D.by_name(t2, "ing@127.0.0.1")
        T.eq(t1["records"], 1020, "records after reconnect")
        T.eq(t1["reconnects"], 1, "reconnects")
        # 3. preamble overrides name and format.
        c = D.connect(port)
        c.sendall(b"TLCAP/1 target=board7 format=bin10\n" +
                  b"".join(T.bin10(0, 3, 0, 100 + i) for i in range(5)))
        c.shutdown(socket.SHUT_WR)
        D.wait_eof(c)
        c.close()
        t = dm.target("board7")
        T.eq((t["format"], t["records"]), ("bin10", 5), "preamble target")
        # 4. garbage: strict decoding closes that connection, counts it; b1/b2 unaffected.
        g = D.connect(port)
        g.sendall(b"TLCAP/1 target=junk\n" + D.calls(2) + b"\xff" * 24 + D.calls(2, t0=9000))
        D.wait_eof(g, 5)
        g.close()
        s = dm.stats()
        j = D.by_name(s, "junk")
        T.eq((j["decode_errors"], j["records"], j["connected"]), (1, 4, 0), "junk target")
        T.check(s["daemon"]["closed_decode"] == 1, "closed_decode counted")
        b1.sendall(D.calls(5, t0=2 * 10 ** 6))
        b2.sendall(D.calls(5, t0=10 ** 5))
        dm.wait_stats(lambda s: D.by_name(s, "ing@127.0.0.1")["records"] == 1030 and
                      D.by_name(s, "ing@127.0.0.1#2")["records"] == 24, what="others unaffected")
        log = dm.log()
        T.check("decode error at byte offset 96" in log and "junk" in log and
                "127.0.0.1:" in log, "decode error logged with target, peer and offset")
        # 5. a bad preamble (bad name) is refused and counted.
        e = D.connect(port)
        e.sendall(b"TLCAP/1 target=../etc format=bin11\n")
        D.wait_eof(e, 5)
        e.close()
        b1.close()
        b2.close()
    finally:
        rc, st = dm.stop()
    T.eq(rc, 0, "exit status after SIGTERM")
    T.check(st["daemon"]["preamble_errors"] == 1, "preamble error counted")


def test_reset_and_deadline(d):
    dm, port, pev = start(d)
    try:
        # Reset in the middle of a record (SO_LINGER 0): a truncated tail, daemon unharmed.
        r = D.connect(port)
        r.sendall(D.calls(3) + b"\x01\x02\x03\x04\x05")
        dm.wait_stats(lambda s: any(t["records"] == 6 for t in s["targets"]), what="6 records")
        r.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        r.close()
        st = dm.wait_stats(lambda s: D.by_name(s, "ing@127.0.0.1")["connected"] == 0,
                           what="reset seen")
        t = D.by_name(st, "ing@127.0.0.1")
        T.eq((t["records"], t["truncated_tails"], t["gaps"]), (6, 1, 1), "after reset")
        # One byte and then silence (slowloris): closed by the 600 ms partial-record deadline.
        t0 = time.monotonic()
        s1 = D.connect(port)
        s1.sendall(D.calls(1) + b"\x00")
        s2 = D.connect(pev)
        s2.sendall(b"\x11\xe2")  # half an evlog magic
        D.wait_eof(s1, 5)
        D.wait_eof(s2, 5)
        took = time.monotonic() - t0
        T.check(0.5 <= took < 4.0, "deadline closed slow peers after %.2fs" % took)
        # A silent but healthy connection (on a record boundary) is not closed.
        q = D.connect(port)
        q.sendall(D.calls(1, t0=5 * 10 ** 6))
        st = dm.wait_stats(lambda s: s["daemon"]["closed_deadline"] == 2, what="deadline count")
        q.settimeout(1.0)
        try:
            T.check(q.recv(1) != b"", "silent peer on a boundary kept")
        except socket.timeout:
            pass
        q.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_evlog_and_mapping(d):
    mp = os.path.join(d, "map.txt")
    with open(mp, "w") as f:
        f.write("* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n\n00000000,main,\n"
                "00000001,worker,\n")
    dm, port, pev = start(d, ["--mapping", "named=" + mp])
    try:
        # evlog over TCP: two blocks, nested calls on one thread, mapped to engine events.
        items = [T.evlog_item(1.0, 7, "+outer"), T.evlog_item(1.5, 7, "+inner"),
                 T.evlog_item(2.0, 7, "-inner"), T.evlog_item(3.0, 7, "-outer"),
                 T.evlog_item(3.5, 7, "*note", "metadata only")]
        e = D.connect(pev)
        e.sendall(T.evlog_block(items[:2]) + T.evlog_block(items[2:]))
        e.shutdown(socket.SHUT_WR)
        D.wait_eof(e)
        e.close()
        t = dm.target("ev@127.0.0.1")
        T.eq((t["format"], t["records"], t["decode_errors"]), ("evlog", 5, 0), "evlog target")
        # +outer, S outer + E inner, X inner + R outer, X outer: 6 engine events
        T.eq(t["events"], 6, "mapped evlog events")
        rows = {(r["handle"], r["context"]): r for r in t["stats"]["rows"]}
        T.eq(rows[("00000001", "thread7")]["count"], 1, "inner COUNT")
        T.eq(rows[("00000000", "thread7")]["net"]["total"], 1500000000, "outer NET")
        # Per-target mapping from --mapping: names in the statistics.
        c = D.connect(port)
        c.sendall(b"TLCAP/1 target=named\n" + D.calls(2, handle=1))
        c.shutdown(socket.SHUT_WR)
        D.wait_eof(c)
        c.close()
        t = dm.target("named")
        T.eq(t["has_mapping"], 1, "mapping loaded")
        T.eq(t["stats"]["rows"][0]["name"], "worker", "name from the mapping")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_many_targets(d):
    n = 200
    dm, port, _ = start(d)
    try:
        socks = []
        for i in range(n):
            s = D.connect(port)
            s.sendall(b"TLCAP/1 target=t%03d format=bin11\n" % i)
            socks.append(s)
        for i, s in enumerate(socks):
            s.sendall(D.calls(i % 7 + 1))
        st = dm.wait_stats(lambda s: len(s["targets"]) == n and
                           all(t["records"] == 2 * (int(t["name"][1:]) % 7 + 1)
                               for t in s["targets"]), timeout=30, what="200 targets")
        T.eq(st["daemon"]["connections"], n, "connections")
        for s in socks:
            s.close()
        st = dm.wait_stats(lambda s: s["daemon"]["connections"] == 0, what="all closed")
    finally:
        rc, st = dm.stop()
    T.eq(rc, 0, "exit status")
    T.eq(sum(t["records"] for t in st["targets"]), sum(2 * (i % 7 + 1) for i in range(n)),
         "records, all targets")


def test_connection_cap(d):
    dm, port, _ = start(d, ["--max-connections", "4"])
    try:
        keep = [D.connect(port) for _ in range(4)]
        for i, s in enumerate(keep):
            s.sendall(b"TLCAP/1 target=k%d\n" % i + D.calls(1))
        dm.wait_stats(lambda s: s["daemon"]["connections"] == 4, what="4 connections")
        extra = D.connect(port)
        D.wait_eof(extra, 5)  # refused promptly (accepted and closed)
        st = dm.stats()
        T.check(st["daemon"]["refused_limit"] >= 1, "refused_limit counted")
        for s in keep:
            s.close()
        dm.wait_stats(lambda s: s["daemon"]["connections"] == 0, what="closed")
        ok = D.connect(port)
        ok.sendall(b"TLCAP/1 target=later\n" + D.calls(2))
        dm.wait_stats(lambda s: any(t["name"] == "later" and t["records"] == 4
                                    for t in s["targets"]), what="service after the cap")
        ok.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_sigterm_finishes_received(d):
    """Bytes already received when SIGTERM arrives are processed before exit."""
    dm, port, _ = start(d)
    c = D.connect(port)
    c.sendall(b"TLCAP/1 target=last\n")
    dm.wait_stats(lambda s: any(t["name"] == "last" and t["connected"] for t in s["targets"]),
                  what="attached")
    c.sendall(D.calls(1000))  # 48 KB: in the daemon's socket buffer at once (loopback)
    rc, st = dm.stop()
    c.close()
    T.eq(rc, 0, "exit status")
    T.eq(D.by_name(st, "last")["records"], 2000, "records processed at shutdown")


def test_usage_errors(d):
    for args in (["--listen", "x=bin12@127.0.0.1:1"], ["--bogus"], ["--listen"],
                 ["--partial-timeout", "soon"]):
        rc, _, err = T.run([TLCAPD] + args, timeout=10)
        T.eq(rc, 2, "exit status for %r" % args)
        T.check("command line" in err, "message names the command line: %r" % err)


T.main([test_naming_halfclose_and_strict, test_evlog_and_mapping, test_reset_and_deadline, test_many_targets,
        test_connection_cap, test_sigterm_finishes_received, test_usage_errors])
