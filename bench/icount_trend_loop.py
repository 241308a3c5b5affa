#!/usr/bin/env python3
"""icount_trend_loop.py - what trend and diff queries (SPEC 14) cost the event loop, in
instructions of the loop thread (callgrind, one file per thread): steady whatever the machine's
load, where a Ping's round trip on a shared 2-vCPU host mostly measures the scheduler.

   icount_trend_loop.py BUILD_DIR [--areas A] [--days D] [--queries Q]

1. Stores a week (D days, default 7) of target time on target `l@127.0.0.1`: A areas (default
   10), one call each per minute of target time, so every area has a rollup block per minute
   (D x 1,440 minutes), then stops tlcapd cleanly (the open minute written). Not counted.
2. Runs tlcapd under `valgrind --tool=callgrind --separate-threads=yes` on that state three
   times: with no query, with Q queries and with 2Q queries (default Q = 10), each query one
   GET /trend of one area over the whole range by the minute (D x 1,440 steps) and one GET
   /diff of the first half against the second (every area), answered before the next is asked.
3. The loop thread's instructions (callgrind's thread 1) of the 2Q run minus the Q run,
   divided by Q, is what one trend and one diff cost the loop, with what every run pays alike
   (start-up, restore, shutdown, timers) cancelled; the same for the worker threads. The loop
   stalls for at most its part of one answer: at 1 instruction per ns (a slow core) 5 ms are
   5 M instructions.

Figures go to bench/RESULTS.md "Rollups"."""
import argparse
import glob
import json
import os
import random
import shutil
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integ"))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

NAME = "l@127.0.0.1"
MIN = 60 * 10**9


def stream(areas, minutes):
    rnd = random.Random(1)
    out = []
    for m in range(minutes):
        t = m * MIN + 1000
        for a in range(areas):
            d = 1000 + rnd.randrange(0, 4000)
            out.append(T.bin11(0x1000 + a, 3, 0, 0, t))
            out.append(T.bin11(0x1000 + a, 0, 0, 0, t + d))
            t += 10000
    return b"".join(out)


def get(hport, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (hport, path), timeout=600) as r:
        return json.loads(r.read())


def thread_irs(prefix):
    """{thread number: instructions} of a callgrind run with --separate-threads=yes."""
    out = {}
    for f in glob.glob(prefix + "-*"):
        n = int(f.rsplit("-", 1)[1])
        with open(f) as fh:
            for ln in fh:
                if ln.startswith("totals:") or ln.startswith("summary:"):
                    out[n] = int(ln.split()[1])
                    break
    return out


def run(tlcapd, d, port, hport, areas, minutes, queries, out):
    dm = D.Daemon("valgrind", d, ["--tool=callgrind", "--separate-threads=yes",
                                  "--callgrind-out-file=" + out, tlcapd,
                                  "--listen", "l=bin11@127.0.0.1:%d" % port],
                  store=True, http="127.0.0.1:%d" % hport, wait_ready=False)
    dm.notify.wait_for("READY=1", timeout=300)
    half = minutes // 2 * MIN
    t0 = time.time()
    for q in range(queries):
        a = 0x1000 + q % areas
        doc = get(hport, "/api/v1/targets/%s/trend?area=%d&since=ns:0&step=1m" % (NAME, a))
        if len(doc["steps"]) != minutes:
            raise SystemExit("trend of area %d: %d steps, want %d" % (a, len(doc["steps"]),
                                                                      minutes))
        doc = get(hport, "/api/v1/targets/%s/diff?a=ns:0..ns:%d&b=ns:%d..ns:%d"
                  % (NAME, half, half, minutes * MIN))
        if len(doc["areas"]) < areas:
            raise SystemExit("diff: %d areas, want %d" % (len(doc["areas"]), areas))
    wall = time.time() - t0
    dm.stop(timeout=600)
    return thread_irs(out), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--areas", type=int, default=10)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--keep", action="store_true", help="keep the state and callgrind files")
    a = ap.parse_args()
    tlcapd = os.path.join(a.build, "daemon", "tlcapd")
    minutes = a.days * 1440
    d = tempfile.mkdtemp(prefix="icount_trend.")
    try:
        port, hport = D.free_port(), D.free_port()
        dm = D.Daemon(tlcapd, d, ["--listen", "l=bin11@127.0.0.1:%d" % port], store=True,
                      http="127.0.0.1:%d" % hport)
        s = D.connect(port)
        s.sendall(stream(a.areas, minutes))
        s.shutdown(1)
        D.wait_eof(s, timeout=600)
        s.close()
        dm.stop()
        res = {}
        for q in (0, a.queries, 2 * a.queries):
            irs, wall = run(tlcapd, d, port, hport, a.areas, minutes, q,
                            os.path.join(d, "cg.%d" % q))
            res[q] = irs
            print(json.dumps({"queries": q, "threads": irs, "wall_s": round(wall, 1)}))
        lo, hi = res[a.queries], res[2 * a.queries]
        loop = (hi.get(1, 0) - lo.get(1, 0)) / a.queries
        rest = (sum(v for k, v in hi.items() if k != 1) -
                sum(v for k, v in lo.items() if k != 1)) / a.queries
        print("one trend (%d steps) and one diff (%d areas), %d queries more: the loop %.0f "
              "instructions (%.2f ms at 1 per ns), the other threads %.0f"
              % (minutes, a.areas, a.queries, loop, loop / 1e6, rest))
    finally:
        if a.keep:
            print("kept: " + d)
        else:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
