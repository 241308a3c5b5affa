#!/usr/bin/python3
"""bench_budget_ingest.py - what 100 timing budgets cost tlcapd's ingest, quiet and in a storm.

    bench/bench_budget_ingest.py BUILD_DIR [--rounds N] [--mib M] [--passes P] [--store]
                                 [--icount [--cache-sim]] [--icount-mib A,B]

BUILD_DIR holds daemon/tlcapd and bench/benchd_io (bench/run passes build/bench).

Issue 36 asks that 100 budgets cost at most 5 % of engine throughput and that a storm of
violations (every activation over budget) never slows ingest beyond that. bench_budget measures
the engine alone, where a storm's ring writes weigh most; this bench measures ingest itself: the
whole daemon (decode, the default engine with histograms and three rolling windows, the budget
watch, and with --store the storage threads) fed by benchd_io's stream (nested calls on 1,000
function areas on 4 cores) over loopback.

Three configurations, each a fresh `tlcapd --no-store` (or with storage, --store):
  none   no --budgets;
  quiet  100 budgets, one on each of the areas 00000000..00000063 (hex: the first 100
         handles), stat net, gross, call, period, outside in turn, max 1 s: no violation;
  storm  the same with max 1 ns: every sample of a watched area and kind is a violation.
Each round runs the three in turn (the order rotated every round) and each daemon first takes
one unmeasured pass (its rows, and in the storm its rings and counters, exist as in a daemon
that has run a while: the "warm" storm of bench_budget); then P passes of M MiB are measured.
The figures per configuration are CPU per event of the loop thread (it bounds ingest: the
capacity ratio, which foreign load on a shared machine moves far less than throughput) and of
the whole daemon, from /proc/PID/task/TID/schedstat, and the throughput to the sender's close;
each run is checked: records counted == records sent, no decode errors, and in the storm the
violations counted (HTTP /metrics, tlcap_budget_violations_total) above zero, none in quiet.
Printed: each run, then the medians of the per-round ratios quiet/none and storm/none.

--icount also counts instructions (valgrind's callgrind, every thread of the daemon, and the loop
thread alone: the one whose capacity bounds ingest) of each configuration on two stream sizes
(--icount-mib, default 8,24 MiB, one pass, half-closed, then SIGTERM); the difference of the
totals over the difference of the records cancels start-up and shutdown, as
bench/icount_ingest.sh does. Those runs take no periodic checkpoint (--checkpoint-interval 3600):
under callgrind a run lasts minutes, and with storage a checkpoint (the rollups' open minute
copied and encoded: about 270 M instructions) would be counted as often as the wall clock, not
the stream, asks for one. The count does not depend on the host's load.

--cache-sim also simulates the caches (callgrind --cache-sim=yes, about twice as slow): the loop
thread's first-level and last-level misses per event, and valgrind's estimate of cycles from
them (an instruction 1, a first-level miss 10, a last-level miss 100), which counts what
instructions leave out: a violation's records and tables are cold lines between two
violations. The last-level part varies from run to run (valgrind serialises the threads, whose
traffic shares one simulated cache); the L1-only estimate is steadier.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchd as B  # noqa: E402

TARGET = "bench@127.0.0.1"
KINDS = ["net", "gross", "call", "period", "outside"]
REC = 24  # bytes per bin11 record


def budgets_file(path, limit):
    """100 budgets on the first 100 handles, stat in turn, max `limit`."""
    with open(path, "w") as f:
        for i in range(100):
            f.write("[budget b%d]\narea = %08x\nstat = %s\nmax = %s\n\n"
                    % (i, i, KINDS[i % len(KINDS)], limit))


def daemon_args(d, port, hport, conf, store):
    a = ["--listen", "bench=bin11@127.0.0.1:%d" % port, "--serve", "",
         "--state-dir", os.path.join(d, "state"), "--http", "127.0.0.1:%d" % hport]
    if not store:
        a.append("--no-store")
    if conf != "none":
        path = os.path.join(d, conf + ".ini")
        budgets_file(path, "1ns" if conf == "storm" else "1s")
        a += ["--budgets", path]
    return a


def violations(hport):
    """tlcap_budget_violations_total summed over every series of /metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=20) as r:
        text = r.read().decode()
    total = 0
    for line in text.splitlines():
        m = re.match(r"tlcap_budget_violations_total(\{[^}]*\})? (\S+)", line)
        if m:
            total += int(float(m.group(2)))
    return total


def send(io, port, mib, passes):
    out, cpu = B.run_child([io, "send", "127.0.0.1:%d" % port, "--mib", str(mib), "--passes",
                            str(passes)], 900)
    return B.json_lines(out)[0], cpu


def run(build, io, a, conf):
    """One fresh daemon of configuration conf: a warm-up pass, then the measured passes."""
    d = B.tempdir("tlcbench-budget.")
    port, hport = B.free_port(), B.free_port()
    dm = B.Daemon(build, d, daemon_args(d, port, hport, conf, a.store))
    try:
        send(io, port, a.mib, 1)  # warm-up: rows, rings and counters exist
        t0 = dm.target(TARGET)
        v0 = violations(hport)
        c0, l0 = dm.cpu(), B.loop_cpu_s(dm.pid)
        c, _ = send(io, port, a.mib, a.passes)
        c1, l1 = dm.cpu(), B.loop_cpu_s(dm.pid)
        t1 = dm.target(TARGET)
        v1 = violations(hport)
        if (t1["records"] - t0["records"] != c["records"] or t1["decode_errors"]
                or t1["anomalies"]):
            raise B.BenchError("%s: daemon stats disagree: sent %d records, target %r"
                               % (conf, c["records"], {k: v for k, v in t1.items()
                                                        if k != "stats"}))
        if (conf == "storm") != (v1 - v0 > 0):
            raise B.BenchError("%s: %d violations in the measured passes" % (conf, v1 - v0))
        dm.stop()
    finally:
        dm.kill()
        shutil.rmtree(d, ignore_errors=True)
    n = c["records"]
    return dict(loop_ns=(l1 - l0) * 1e9 / n, all_ns=(c1 - c0) * 1e9 / n, mbps=c["mbps"],
                violations=v1 - v0, records=n)


# Work done per second of wall clock, not per event: the violation events the rate limit lets
# through (at most 10 a second per budget, encoded for subscribers: the calls of the subscriber
# server's limiter, which budgetd makes only when its last answer allows one to go, and each
# send) and the watch's saves with each statistics checkpoint (checkpoint_interval). Under
# callgrind the daemon runs about 50 times slower, so it does about 50 times more of this work
# per event than at full speed; the figures "without the work per second" leave it out
# (inclusive counts of these functions).
SENDS = ["tlc_pubsub_violation", "tlc_bwatch_save"]


def thread_icount(path):
    """The counts of one thread's callgrind file, and those of SENDS in it (inclusive): lists of
    the file's events (Ir alone, or with --cache-sim Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw)."""
    with open(path) as f:
        m = re.search(r"^(?:summary|totals): (.*)$", f.read(), re.M)
    if m is None:
        raise B.BenchError("no summary line in callgrind's file %s" % path)
    total = [int(x) for x in m.group(1).split()]
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", path],
                         capture_output=True, text=True).stdout
    sends = [0] * len(total)
    for fn in SENDS:
        for line in ann.splitlines():
            if re.search(r"\S*:%s \[" % fn, line):
                got = [int(x.replace(",", "")) for x in re.findall(r"([\d,]+) \(", line)]
                if len(got) == len(total):
                    sends = [a + b for a, b in zip(sends, got)]
                break
    return total, sends


def icount(build, io, conf, mib, store, cache=False):
    """Counts of a whole daemon run on one pass of `mib` MiB (thread_icount's lists): every
    thread's, those of the violation events sent and checkpoint saves (SENDS, inclusive), and
    the same two of the loop thread alone (the thread whose capacity bounds ingest)."""
    d = B.tempdir("tlcbench-budget-ic.")
    port, hport = B.free_port(), B.free_port()
    # no periodic checkpoint (see the module's text); the one at the end cancels
    args = daemon_args(d, port, hport, conf, store) + ["--checkpoint-interval", "3600"]
    out = os.path.join(d, "cg.out")
    log = open(os.path.join(d, "log"), "wb")
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                          "--callgrind-out-file=" + out] +
                         (["--cache-sim=yes"] if cache else []) +
                         [os.path.join(build, "daemon", "tlcapd")] + args,
                         stdout=subprocess.DEVNULL, stderr=log)
    try:
        B.wait_until(lambda: b"tlcapd ready" in open(os.path.join(d, "log"), "rb").read(), 120,
                     "tlcapd under callgrind")
        send(io, port, mib, 1)
        if conf == "storm" and violations(hport) == 0:
            raise B.BenchError("storm: no violation under callgrind")
        p.terminate()
        p.wait(600)
        # one file per thread (--separate-threads): cg.out-01 is the main thread, the loop's
        files = sorted(f for f in os.listdir(d) if f.startswith("cg.out-"))
        if not files or files[0] != "cg.out-01":
            raise B.BenchError("no per-thread callgrind output in %s" % d)
        counts = [thread_icount(os.path.join(d, f)) for f in files]
        total = [sum(c) for c in zip(*(t for t, _ in counts))]
        sends = [sum(c) for c in zip(*(s for _, s in counts))]
        loop, loop_sends = counts[0]
        return total, sends, loop, loop_sends
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


def per_event(lo, hi, n):
    """Each count of the run on more records less that of the run on fewer, over the n records
    between them (start-up and shutdown cancel)."""
    return [(b - a) / n for a, b in zip(lo, hi)]


def minus(a, b):
    return [x - y for x, y in zip(a, b)]


def cycles(ev, with_ll):
    """valgrind's estimate of cycles from --cache-sim's counts: Ir + 10 a first-level miss
    (+ 100 a last-level miss with with_ll)."""
    ir, _, _, i1, d1r, d1w, ill, dllr, dllw = ev
    return ir + 10 * (i1 + d1r + d1w) + (100 * (ill + dllr + dllw) if with_ll else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--store", action="store_true")
    ap.add_argument("--icount", action="store_true")
    ap.add_argument("--icount-mib", default="8,24")
    ap.add_argument("--cache-sim", action="store_true")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    io = os.path.join(build, "bench", "benchd_io")
    confs = ["none", "quiet", "storm"]
    print("bench_budget_ingest: %s, %d MiB x %d passes a run, %d rounds, storage %s"
          % (build, a.mib, a.passes, a.rounds, "on" if a.store else "off"))
    if a.icount:
        lo, hi = [int(x) for x in a.icount_mib.split(",")]
        per, fast, lper, lfast, lev = {}, {}, {}, {}, {}
        for conf in confs:
            (x, xs, xl, xls), (z, zs, zl, zls) = (icount(build, io, conf, lo, a.store,
                                                         a.cache_sim),
                                                  icount(build, io, conf, hi, a.store,
                                                         a.cache_sim))
            n = (hi - lo) * 1048576 // REC
            # the loop thread's counts per event without the work per second, every event
            lev[conf] = per_event(minus(xl, xls), minus(zl, zls), n)
            per[conf] = per_event(x, z, n)[0]
            fast[conf] = per_event(minus(x, xs), minus(z, zs), n)[0]
            lper[conf], lfast[conf] = per_event(xl, zl, n)[0], lev[conf][0]
            print("icount %-5s %7.1f instructions per event (%.1f without the work per "
                  "second); loop thread %.1f (%.1f)" % (conf, per[conf], fast[conf],
                                                       lper[conf], lfast[conf]))
            if a.cache_sim:
                print("cache-sim %-5s loop thread without the work per second, per event: "
                      "I1 misses %.3f, D1 read misses %.3f, D1 write misses %.3f, LL misses "
                      "%.3f; estimated cycles %.1f (L1 only), %.1f (with LL)"
                      % (conf, lev[conf][3], lev[conf][4], lev[conf][5],
                         sum(lev[conf][6:9]), cycles(lev[conf], False),
                         cycles(lev[conf], True)))
            sys.stdout.flush()
        for what, p, f in (("icount", per, fast), ("icount, loop thread", lper, lfast)):
            print("%s: quiet/none %.4f, storm/none %.4f; without the work per second: "
                  "quiet/none %.4f, storm/none %.4f"
                  % (what, p["quiet"] / p["none"], p["storm"] / p["none"],
                     f["quiet"] / f["none"], f["storm"] / f["none"]))
        if a.cache_sim:
            for ll in (False, True):
                print("cache-sim, loop thread, estimated cycles (%s) without the work per "
                      "second: quiet/none %.4f, storm/none %.4f"
                      % ("with LL" if ll else "L1 only",
                         cycles(lev["quiet"], ll) / cycles(lev["none"], ll),
                         cycles(lev["storm"], ll) / cycles(lev["none"], ll)))
    ratios = {"quiet": [], "storm": []}
    tput = {"quiet": [], "storm": []}
    for r in range(a.rounds):
        order = confs[r % 3:] + confs[:r % 3]
        got = {}
        for conf in order:
            got[conf] = run(build, io, a, conf)
            g = got[conf]
            print("round %d %-5s loop %6.1f ns/event, daemon %6.1f ns/event, %7.1f MB/s, "
                  "%d violations" % (r, conf, g["loop_ns"], g["all_ns"], g["mbps"],
                                     g["violations"]))
            sys.stdout.flush()
        for conf in ("quiet", "storm"):
            ratios[conf].append(got[conf]["loop_ns"] / got["none"]["loop_ns"])
            tput[conf].append(got["none"]["mbps"] / got[conf]["mbps"])
    for conf in ("quiet", "storm"):
        print("%s/none: loop CPU per event median %.3f (rounds %s); time per byte median %.3f"
              % (conf, B.median(ratios[conf]), " ".join("%.3f" % x for x in ratios[conf]),
                 B.median(tput[conf])))


if __name__ == "__main__":
    main()
