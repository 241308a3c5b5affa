#!/usr/bin/python3
"""Budget violations served by a running tlcapd (SPEC 13, docs/budgets.md "Served"): a daemon
with --budgets ingests a capture; `tlcap violations TARGET` (table and --json) shows the
violations as the stream makes them, and an unknown target is an error.

Usage: test_violations_serve.py TLCAPD TLCAP. Expected values are worked out by hand from the
stream below (SPEC 2's rules), independently of the C code. Needs the daemon's live budgets
(the watch attached to each target and the view's budgets hook).
"""
import json
import os
import sys

import budget_stream as B
import daemonlib as D
import tlctest as T

TLCAPD, TLCAP = sys.argv[1:3]

# the stream and its samples worked out by hand (budget_stream.py). f_net: core0 f NET 100 > 60
# (150..250); core1's 50 is within. main_call: CALL 300 > 250 (100..400). var_period: PERIOD
# 100 < 150 (200..300). fine: nothing.
REC = B.REC
BUDGETS = B.budgets("f_net", "main_call", "var_period", "fine")


def tlcap(dm, *args):
    return T.run([TLCAP, "--connect", "127.0.0.1:%d" % dm.serve] + list(args), timeout=30)


def test_violations(d):
    bfile = os.path.join(d, "budgets.ini")
    with open(bfile, "w") as f:
        f.write(BUDGETS)
    port, serve = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % port, "--budgets", bfile],
                  serve="127.0.0.1:%d" % serve)
    dm.serve = serve
    try:
        s = D.connect(port)
        s.sendall(B.data())
        s.close()

        def ingested():
            rc, out, _ = tlcap(dm, "targets", "--json")
            if rc != 0:
                return False
            ts = json.loads(out)
            return any(t["counters"]["events"] == len(REC) for t in ts)
        D.wait_until(ingested, 15, "the capture ingested")
        rc, out, _ = tlcap(dm, "targets", "--json")
        name = json.loads(out)[0]["name"]

        rc, out, err = tlcap(dm, "violations", name, "--json")
        T.eq(rc, 0, "tlcap violations --json: %s" % err)
        doc = json.loads(out)
        T.eq(doc["target"], name, "target")
        T.eq(doc["total"], 3, "every violation")
        by = {b["name"]: b for b in doc["budgets"]}
        T.eq(sorted(by), ["f_net", "fine", "main_call", "var_period"], "budgets")
        f = by["f_net"]
        T.eq(f["total"], 1, "f_net total")
        w = f["worst"]
        T.eq((w["value"], w["limit"], w["start_ns"], w["end_ns"], w["over"], w["context"],
              w["number"], w["ref"]),
             (100, 60, 150, 250, True, "core0", 1, "v:f_net:1"), "f_net's violation")
        T.eq([(c["context"], c["count"]) for c in f["counts"]], [("core0", 1)], "f_net counts")
        m = by["main_call"]["worst"]
        T.eq((m["value"], m["limit"], m["start_ns"], m["end_ns"]), (300, 250, 100, 400),
             "main_call's violation")
        v = by["var_period"]["worst"]
        T.eq((v["value"], v["limit"], v["over"], v["start_ns"], v["end_ns"]),
             (100, 150, False, 200, 300), "var_period's violation")
        T.eq((by["fine"]["total"], by["fine"]["worst"]), (0, None), "fine")
        T.check(all(x["wall_ms"] > 0 for b in doc["budgets"] for x in b["recent"]),
                "live violations carry the wall clock")

        rc, out, err = tlcap(dm, "violations", name, "--budget", "f_net")
        T.eq(rc, 0, "tlcap violations --budget: %s" % err)
        lines = out.decode().splitlines()
        T.eq(len(lines), 2, "header and one row: %r" % lines)
        T.eq(lines[1].split()[0:6], ["f_net", "00000001", "core0", "net", "<=60ns", "1"],
             "the row")
        T.eq(lines[1].split()[-1], "v:f_net:1", "its REF")

        rc, out, err = tlcap(dm, "violations", "nosuch")
        T.eq(rc, 1, "an unknown target")
        T.check("no such target" in err, "the error says so: %r" % err)
    finally:
        dm.stop()


if __name__ == "__main__":
    T.main([test_violations])
