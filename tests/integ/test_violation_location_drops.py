#!/usr/bin/python3
"""Where a violation is stored when storage drops records (SPEC 13, issue 36; docs/budgets.md
"What a violation holds": a location is given only while the count is exact).

A real tlcapd keeps its state on a small tmpfs (needs root and `mount -t tmpfs`; SKIP
otherwise) that a filler file has nearly filled, with a budget every activation of the stream
breaks (a storm) and every violation kept (`--budget-keep`). The first part of the stream is
more than the space left: storage writes what fits and drops the rest (disk_full). The filler
goes, and the stream goes on, a round at a time, until storage writes again and a violation of
the last round is located (the first 16 of each batch are).
Must hold: every violation counted (one per activation, dropped records or not); every
location given points at the violating activation's own records in the segment file (its
entry at the first, its exit at the closing location): none is counted across the dropped
records, and none given to a violation whose records were dropped; violations are located
again once it was freed (those before it filled only when their mark came back before the first
drop: a drop seen by a mark's answer leaves everything counted so far unlocated).

Usage: test_violation_location_drops.py TLCAPD"""
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import budget_stream as B  # noqa: E402
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
NAME = "l@127.0.0.1"
STEP = 200  # ns between two activations; each runs 100 ns, over f_net's 60 ns
PART1 = 20000  # activations of the first part: 960 KB, the tmpfs has about 400 KiB free
ROUND = 500  # activations a round of the second part


def stream(first, n):
    """Activations first .. first + n - 1 of area 1 on core 0: E at 1000 + STEP * i, X 100
    ns later."""
    out = []
    for i in range(first, first + n):
        t = 1000 + STEP * i
        out.append(T.bin11(1, 3, 0, 0, t))
        out.append(T.bin11(1, 0, 0, 0, t + 100))
    return b"".join(out)


def get(hport, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (hport, path), timeout=30) as r:
        return r.read()


def dropped(hport):
    for line in get(hport, "/metrics").decode().splitlines():
        if line.startswith("tlcap_store_dropped_records_total "):
            return float(line.split()[1])
    raise T.Failure("no tlcap_store_dropped_records_total in /metrics")


def violations(hport):
    return json.loads(get(hport, "/api/v1/targets/%s/violations" % NAME))


def test_drops(d):
    mnt = os.path.join(d, "state")  # the daemon's state directory (daemonlib.Daemon)
    os.mkdir(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("SKIP: mount -t tmpfs -o size=2m failed: %s" % r.stderr.strip())
        sys.exit(T.SKIP)
    dm = None
    try:
        filler = os.path.join(mnt, ".filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * (1600 * 1024))
        b = os.path.join(d, "b.ini")
        with open(b, "w") as f:
            f.write(B.budgets("f_net"))
        port, hport = D.free_port(), D.free_port()
        dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port, "--budgets", b,
                                  "--budget-keep", "100000"],
                      store=True, http="127.0.0.1:%d" % hport)
        s = D.connect(port)
        s.sendall(stream(0, PART1))
        sent = [PART1]

        def counted():
            doc = violations(hport)
            return doc if doc["budgets"][0]["violations"] == sent[0] else None
        D.wait_until(counted, 30, "the first part's %d violations counted" % PART1)
        D.wait_until(lambda: dropped(hport) > 0, 30, "storage dropping records (disk full)")
        os.unlink(filler)

        def newest_located():
            doc = violations(hport)
            kept = doc["violations_kept"]
            if doc["budgets"][0]["violations"] == sent[0] and sent[0] > PART1 and \
                    any(v.get("seg_last", 0) != 0 for v in kept[-ROUND:]):
                return doc
            if doc["budgets"][0]["violations"] == sent[0] and sent[0] < PART1 + 40 * ROUND:
                s.sendall(stream(sent[0], ROUND))  # another round: storage may still drop
                sent[0] += ROUND
            return None
        doc = D.wait_until(newest_located, 60, "storage writing again, the last round located",
                           step=0.1)
        s.close()

        kept = doc["violations_kept"]
        T.eq(doc["budgets"][0]["violations"], sent[0], "every activation's violation counted")
        T.eq(len(kept), sent[0], "every violation kept (--budget-keep 100000)")
        T.eq([v["start_ns"] for v in kept], [1000 + STEP * i for i in range(sent[0])],
             "the kept violations, in order")
        located = {"first": 0, "last": 0}
        for v in kept + doc["worst"]:
            for end, seg, off, want in (("first", "seg_first", "off_first",
                                         (1, 3, 0, 0, v["start_ns"])),
                                        ("last", "seg_last", "off_last",
                                         (1, 0, 0, 0, v["end_ns"]))):
                if v.get(seg, 0) != 0:
                    located[end] += 1
                    T.eq(D.stored_record(dm.state, NAME, v[seg], v[off]), want,
                         "violation %d..%d: the record at its %s location %d:%d"
                         % (v["start_ns"], v["end_ns"], end, v[seg], v[off]))
        T.check(dropped(hport) > 0, "records dropped")
        T.check(any(v.get("seg_last", 0) != 0 for v in kept[-ROUND:]),
                "violations located again after it was freed")
        print("located %d first and %d closing records of %d violations; %d records dropped"
              % (located["first"], located["last"], len(kept), dropped(hport)))
    finally:
        if dm is not None:
            dm.stop()
        subprocess.run(["umount", "-l", mnt])


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: not root (mount -t tmpfs needs it)")
        sys.exit(T.SKIP)
    T.main([test_drops])
