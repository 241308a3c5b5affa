#!/usr/bin/python3
"""When and where each extreme was taken (SPEC 13, issue 36; docs/budgets.md "When each extreme
was taken"): a real tlcapd stores a bin11 target and ingests calls of known durations in three
parts with a segment rotation between them. The HTTP statistics document and `tlcap stats
--export json` (through the protobuf Dist) give each MIN's and MAX's wall clock and the segment
and byte offsets of its sample's first and closing records; the test reads those records back
from the segment files (plain bin11: 24-byte records) and checks they are the sample's events:
their times are the reported start and end, and for NET their difference is the MIN or MAX (the
oracle). The wall clock lies between the part's send and the moment its statistics were seen.
A sample whose first record is in the older segment is located there, counted back across the
rotation. After a restart, the checkpoint gives all of it back.

Usage: test_extreme_location.py TLCAPD TLCAP"""
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = sys.argv[1:3]
NAME = "x@127.0.0.1"
RECLEN = 24
F = 0x00000001

# handle, type (0 X, 3 E), core, data, time: f's calls on core0
PART1 = [(F, 3, 0, 0, 1000), (F, 0, 0, 0, 1100),   # NET 100
         (F, 3, 0, 0, 2000), (F, 0, 0, 0, 2500),   # NET 500
         (F, 3, 0, 0, 3000), (F, 0, 0, 0, 3050)]   # NET 50
PART2 = [(F, 3, 0, 0, 4000), (F, 0, 0, 0, 4900),   # NET 900: MAX, seg2 0..24
         (F, 3, 0, 0, 5000), (F, 0, 0, 0, 5010),   # NET 10: MIN, seg2 48..72
         (F, 3, 0, 0, 6000)]                        # opens a call closed in part 3
PART3 = [(F, 0, 0, 0, 9000)]                        # NET 3000: MAX, first seg2:96, last seg3:0


def http_stats(hport):
    url = "http://127.0.0.1:%d/api/v1/targets/%s/stats" % (hport, NAME)
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def f_net(doc):
    for r in doc["rows"]:
        if r["handle"] == "%08X" % F and r["context"] == "core0":
            return r["net"]
    return None


def tlcap(serve, *args):
    return T.run([TLCAP, "--connect", "127.0.0.1:%d" % serve] + list(args), timeout=30)


def events(serve, n):
    rc, out, _ = tlcap(serve, "targets", "--json")
    return rc == 0 and any(t["counters"]["events"] == n for t in json.loads(out))


def oracle(state, doc):
    """Every located extreme of every row: its records are its sample's first and closing
    events, and for NET their times differ by the extreme's value."""
    n = 0
    for r in doc["rows"]:
        for kind in ("net", "gross", "call", "period", "outside"):
            d = r.get(kind)
            if not d:
                continue
            for which in ("min", "max"):
                a = d.get(which + "_at")
                if not a or not a.get("seg_last"):
                    continue
                last = D.stored_record(state, NAME, a["seg_last"], a["off_last"])
                T.eq(last[4], a["end_ns"], "%s %s %s_at: the closing record's time"
                     % (r["handle"], kind, which))
                if a["seg_first"]:
                    first = D.stored_record(state, NAME, a["seg_first"], a["off_first"])
                    T.eq(first[4], a["start_ns"], "%s %s %s_at: the first record's time"
                         % (r["handle"], kind, which))
                    if kind == "net" and r["handle"] == "%08X" % F:
                        T.eq(last[4] - first[4], d[which], "NET %s = closing - first" % which)
                n += 1
    return n


def wall_in(a, lo, hi, what):
    T.check(lo <= a.get("wall_ms", 0) <= hi, "%s: wall clock %r in [%d, %d]"
            % (what, a.get("wall_ms"), lo, hi))


def test_extreme_location(d):
    port, hport, serve = D.free_port(), D.free_port(), D.free_port()
    args = ["--listen", "x=bin11@127.0.0.1:%d" % port]
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport,
                  serve="127.0.0.1:%d" % serve)
    try:
        s = D.connect(port)
        t1 = int(time.time() * 1000)
        s.sendall(b"".join(T.bin11(*r) for r in PART1))
        D.wait_until(lambda: events(serve, 6), 15, "part 1 ingested")
        rc, out, err = tlcap(serve, "rotate", NAME)
        T.eq(rc, 0, "tlcap rotate: %s" % err)
        t2 = int(time.time() * 1000)
        s.sendall(b"".join(T.bin11(*r) for r in PART2))

        def located2():
            n = f_net(http_stats(hport))
            return n if n and n["max"] == 900 and n["min"] == 10 and \
                n["max_at"].get("seg_last") and n["min_at"].get("seg_last") else None
        net = D.wait_until(located2, 15, "part 2's MIN and MAX located")
        t2e = int(time.time() * 1000)
        mx, mn = net["max_at"], net["min_at"]
        seg2 = mx["seg_last"]
        T.check(seg2 >= 2, "the second segment: %r" % mx)
        T.eq((mx["start_ns"], mx["end_ns"]), (4000, 4900), "MAX's sample")
        T.eq((mx["seg_first"], mx["off_first"], mx["seg_last"], mx["off_last"]),
             (seg2, 0, seg2, RECLEN), "MAX: the new segment's first two records")
        T.eq((mn["seg_first"], mn["off_first"], mn["seg_last"], mn["off_last"]),
             (seg2, 2 * RECLEN, seg2, 3 * RECLEN), "MIN: the next two")
        T.eq(D.stored_record(dm.state, NAME, seg2, 0), PART2[0], "MAX's first record")
        T.eq(D.stored_record(dm.state, NAME, seg2, RECLEN), PART2[1], "MAX's closing record")
        T.eq(D.stored_record(dm.state, NAME, seg2, 3 * RECLEN), PART2[3], "MIN's closing record")
        wall_in(mx, t2, t2e, "MAX")
        wall_in(mn, t2, t2e, "MIN")
        T.check(oracle(dm.state, http_stats(hport)) >= 2, "located extremes checked")

        rc, out, err = tlcap(serve, "rotate", NAME)
        T.eq(rc, 0, "tlcap rotate: %s" % err)
        t3 = int(time.time() * 1000)
        s.sendall(b"".join(T.bin11(*r) for r in PART3))

        def located3():
            n = f_net(http_stats(hport))
            return n if n and n["max"] == 3000 and n["max_at"].get("seg_last") else None
        net = D.wait_until(located3, 15, "part 3's MAX located")
        t3e = int(time.time() * 1000)
        mx = net["max_at"]
        seg3 = mx["seg_last"]
        T.check(seg3 > seg2, "a third segment: %r" % mx)
        T.eq((mx["start_ns"], mx["end_ns"]), (6000, 9000), "MAX's sample")
        T.eq((mx["seg_first"], mx["off_first"], mx["seg_last"], mx["off_last"]),
             (seg2, 4 * RECLEN, seg3, 0), "MAX: its first record is the older segment's last")
        T.eq(D.stored_record(dm.state, NAME, seg2, 4 * RECLEN), PART2[4], "MAX's first record")
        T.eq(D.stored_record(dm.state, NAME, seg3, 0), PART3[0], "MAX's closing record")
        wall_in(mx, t3, t3e, "MAX of part 3")
        T.eq(net["min_at"], mn, "MIN as it was")
        doc = http_stats(hport)
        T.check(oracle(dm.state, doc) >= 2, "located extremes checked")

        # the same through the protobuf Dist (tlcap stats rebuilds its table from it)
        rc, out, err = tlcap(serve, "stats", NAME, "--export", "json")
        T.eq(rc, 0, "tlcap stats --export json: %s" % err)
        T.eq(f_net(json.loads(out)), f_net(doc), "tlcap stats: NET as HTTP has it")
        rc, out, err = tlcap(serve, "stats", NAME, "--extremes")
        T.eq(rc, 0, "tlcap stats --extremes: %s" % err)
        out = out.decode() if isinstance(out, bytes) else out
        T.check("MAX STORED" in out and (" %d:%d..%d:0" % (seg2, 4 * RECLEN, seg3)) in out and
                (" %d:%d..%d:%d" % (seg2, 2 * RECLEN, seg2, 3 * RECLEN)) in out,
                "tlcap stats --extremes shows the locations:\n" + out)
        s.close()
        before = f_net(doc)
    finally:
        dm.stop()

    # a restart: the checkpoint brings the times, wall clocks and locations back
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport,
                  serve="127.0.0.1:%d" % serve)
    try:
        net = D.wait_until(lambda: f_net(http_stats(hport)), 15, "the restored statistics")
        T.eq(net["max_at"], before["max_at"], "MAX's time, wall clock and location restored")
        T.eq(net["min_at"], before["min_at"], "MIN's time, wall clock and location restored")
    finally:
        dm.stop()


if __name__ == "__main__":
    T.main([test_extreme_location])
