#!/usr/bin/python3
"""Where a violation is stored (SPEC 13, issue 36; docs/budgets.md "What a violation holds"):
a real tlcapd with storage and budgets ingests a stream with known violations; the HTTP
violations document and `tlcap violations --json` give each violation's segment and the byte
offsets of its first and closing records, and the test reads those records back from the
segment file (plain bin11: 24-byte records) and finds the violating activation's first and
closing events there (handle, core, type, time worked out by hand from the stream below).
With a rotation in the middle of the stream, a violation whose first record is in the older
segment gets its first location there (counted back across the rotation), and a replay of
the stored segments (`tlcapd replay --state-dir --budgets`) gives the same locations.

Usage: test_violation_location.py TLCAPD TLCAP"""
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import budget_stream as B  # noqa: E402
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = sys.argv[1:3]
NAME = "l@127.0.0.1"

# the stream and budgets worked out by hand (budget_stream.py)
REC = B.REC
BUDGETS = B.budgets("f_net", "main_call", "var_period")

# budget -> indexes in REC of its violation's first and closing record, by hand: f_net is core0
# f's NET 150..250 (its E at 150, its X at 250); main_call is core0 main's CALL 100..400 (E,
# X); var_period is the variable's PERIOD 200..300 (the two writes).
WANT = {"f_net": (3, 6), "main_call": (0, 9), "var_period": (5, 8)}
RECLEN = 24


def http_doc(hport):
    url = "http://127.0.0.1:%d/api/v1/targets/%s/violations" % (hport, NAME)
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def located(doc):
    vs = doc["violations_kept"]
    return doc if len(vs) == 3 and all(v.get("seg_last", 0) != 0 for v in vs) else None


def check(state, budget, v):
    i, j = WANT[budget]
    T.check(v["seg_first"] != 0 and v["seg_last"] != 0, "%s: located: %r" % (budget, v))
    T.eq((v["off_first"], v["off_last"]), (i * RECLEN, j * RECLEN),
         "%s: offsets (the stream's first records are the segment's first)" % budget)
    first = D.stored_record(state, NAME, v["seg_first"], v["off_first"])
    last = D.stored_record(state, NAME, v["seg_last"], v["off_last"])
    T.eq(first, REC[i], "%s: the record at its first location" % budget)
    T.eq(last, REC[j], "%s: the record at its closing location" % budget)


def test_location(d):
    b = os.path.join(d, "b.ini")
    with open(b, "w") as f:
        f.write(BUDGETS)
    port, hport, serve = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port, "--budgets", b],
                  store=True, http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % serve)
    try:
        s = D.connect(port)
        s.sendall(b"".join(T.bin11(*r) for r in REC))
        doc = D.wait_until(lambda: located(http_doc(hport)), 15, "three located violations")
        for v in doc["violations_kept"]:
            check(dm.state, v["budget"], v)
        for v in doc["worst"]:
            check(dm.state, v["budget"], v)

        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % serve, "violations", NAME,
                              "--json"], timeout=30)
        T.eq(rc, 0, "tlcap violations --json: %s" % err)
        by = {x["name"]: x for x in json.loads(out)["budgets"]}
        for name in WANT:
            check(dm.state, name, by[name]["worst"])
            T.eq(len(by[name]["recent"]), 1, "%s: one kept" % name)
            check(dm.state, name, by[name]["recent"][0])
        s.close()
    finally:
        dm.stop()


def where(v):
    return tuple(v.get(k, 0) for k in ("seg_first", "off_first", "seg_last", "off_last"))


def tlcap(serve, *args):
    return T.run([TLCAP, "--connect", "127.0.0.1:%d" % serve] + list(args), timeout=30)


def test_rotation_between(d):
    """The stream's first 4 records, `tlcap rotate`, then the other 6: a violation whose first
    record is in the older segment has its first location there (REC[:4] is all of it), its
    closing one in the new segment (whose first record is REC[4]); one wholly in the new
    segment has both there."""
    b = os.path.join(d, "b.ini")
    with open(b, "w") as f:
        f.write(BUDGETS)
    port, hport, serve = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port, "--budgets", b],
                  store=True, http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % serve)
    try:
        s = D.connect(port)
        s.sendall(b"".join(T.bin11(*r) for r in REC[:4]))

        def events():
            rc, out, _ = tlcap(serve, "targets", "--json")
            return rc == 0 and any(t["counters"]["events"] == 4 for t in json.loads(out))
        D.wait_until(events, 15, "the first 4 records ingested")
        rc, out, err = tlcap(serve, "rotate", NAME)
        T.eq(rc, 0, "tlcap rotate: %s" % err)
        s.sendall(b"".join(T.bin11(*r) for r in REC[4:]))
        doc = D.wait_until(lambda: located(http_doc(hport)), 15, "three located violations")
        by = {v["budget"]: v for v in doc["violations_kept"]}
        seg2 = by["var_period"]["seg_last"]
        T.check(seg2 >= 2, "the new segment: %r" % by["var_period"])
        for name, (i, j) in WANT.items():
            v = by[name]
            T.eq((v["seg_last"], v["off_last"]), (seg2, (j - 4) * RECLEN), "%s: closing" % name)
            T.eq(D.stored_record(dm.state, NAME, seg2, v["off_last"]), REC[j],
                 "%s: the record at its closing location" % name)
            if i < 4:
                # counted back across the rotation: the older segment is REC[:4]
                T.check(0 < v["seg_first"] < seg2, "%s: the older segment: %r" % (name, v))
                T.eq(v["off_first"], i * RECLEN, "%s: first, in the older segment" % name)
                T.eq(D.stored_record(dm.state, NAME, v["seg_first"], v["off_first"]), REC[i],
                     "%s: the record at its first location (older segment)" % name)
            else:
                T.eq((v["seg_first"], v["off_first"]), (seg2, (i - 4) * RECLEN),
                     "%s: first" % name)
                T.eq(D.stored_record(dm.state, NAME, seg2, v["off_first"]), REC[i],
                     "%s: the record at its first location" % name)
        s.close()
    finally:
        dm.stop()
    # a replay of the two stored segments finds the same locations (docs/budgets.md)
    rc, out, err = T.run([TLCAPD, "replay", "--state-dir", dm.state, "--target", NAME,
                          "--budgets", b, "--export", "json"])
    T.eq(rc, 3, "replay of the stored segments: violations (stderr: %s)" % err)
    rep = {v["budget"]: v for v in json.loads(out)["violations_kept"]}
    for name in WANT:
        T.eq(where(rep[name]), where(by[name]), "%s: replay vs live location" % name)


if __name__ == "__main__":
    T.main([test_location, test_rotation_between])
