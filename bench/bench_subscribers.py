#!/usr/bin/python3
"""bench_subscribers.py - 100 subscribers at 10 Hz over 1,000 areas while tlcapd ingests at full
speed: ingest throughput with vs without them (same run), and the latency from a marker event's
arrival to its appearance in the subscribers' snapshots.

    bench/bench_subscribers.py BUILD_DIR [--pairs N] [--seconds S] [--subs N] [--interval MS]
                               [--profile heavy|top|light|cores|default] [--full-decode]
                               [--dump-markers FILE]

BUILD_DIR holds daemon/tlcapd, bench/benchd_io and bench/benchd_subs (bench/run passes
build/bench).

Design. One `tlcapd --no-store --serve` for the whole run. A warm-up connection creates the
bulk target (the stream of bench_ingest: nested calls on 1,000 areas, 4 cores). Then N pairs,
in alternation:
  A (baseline): benchd_subs with 0 subscribers (its latency-marker connection only), and
    benchd_io sending the bulk stream at full speed for S seconds (whole 64 MiB passes on one
    connection, half-close, wait for the close);
  B: the same with 100 subscribers (every target, every area, interval 100 ms) connected and
    reading, each with the subscription of --profile (see benchd_subs.c):
      heavy (default): windows and Neutral rows, every field, as Row messages (the subscription
        `tlcap top` made before it used columns);
      top: `tlcap top`'s subscription now: columnar rows, Neutral rows only, the columns it
        shows, for the cumulative statistics and 3 rolling windows;
      light: a dashboard line per area: columnar rows, Neutral rows only, COUNT, NET
        total/n/sum/max, VALUE;
      cores: the same columns per area and context (4 cores: 4,000 rows), no Neutral rows;
      default: every Subscribe option at its default: Row messages with every cumulative field
        per area and context (4,000 rows), no windows, quantiles or Neutral rows.
Ratio = B's ingest MB/s / A's. Target >= 0.95x.
Latency: benchd_subs writes a bin11 Write record (value k) to a separate marker target every
37 ms (not a divisor of the interval, so markers fall at every phase of it) on its own idle
connection, stamping CLOCK_MONOTONIC just before the write; each subscriber stamps, on the same
clock, the read that completes the first snapshot showing a value >= k. Markers sent while the
bulk sender was running count (idle reference: from 1 s after all subscribers had their first
snapshot, for 5 s); a marker a subscriber never saw (its reader stopped 1.5 s after
the sender) counts as infinitely late. Target p99 <= interval + 5 ms. The same latency is also
measured with no ingest at all (reference). The subscribers walk only the frame's target name
(protobuf wire format) and the marker target's rows, to keep their share of the 2 shared cores
small; --full-decode makes them unpack every message with protobuf-c, as a real client would.
"""
import argparse
import os
import signal
import shutil
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchd as B  # noqa: E402

BULK = "bench@127.0.0.1"


def pct(xs, q):
    s = sorted(xs)
    if not s:
        return float("nan")
    i = min(len(s) - 1, max(0, int(q * len(s) + 0.999999) - 1))
    return s[i]


class Subs:
    def __init__(self, a, sport, iport, nsubs):
        argv = [os.path.join(a.build, "bench", "benchd_subs"), "127.0.0.1:%d" % sport,
                "127.0.0.1:%d" % iport, "--subs", str(nsubs), "--interval", str(a.interval),
                "--seconds", "600", "--profile", a.profile]
        if a.full_decode:
            argv.append("--full-decode")
        argv += getattr(a, "subs_extra", [])  # bench_tls.py: --tls CAFILE --token TOKEN
        self.nsubs = nsubs
        nice = a.subs_nice
        self.p = B.subprocess.Popen(argv, stdout=B.subprocess.PIPE, stderr=B.subprocess.PIPE,
                                    preexec_fn=(lambda: os.nice(nice)) if nice else None)
        line = self.p.stdout.readline().decode()  # bounded: benchd_subs gives up after 20 s
        if line.strip() != "ready":
            self.p.kill()
            raise B.BenchError("subscribers not ready: %s" % self.p.stderr.read().decode())
        self.t_ready = time.monotonic()

    def finish(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            out, err = self.p.communicate(timeout=60)
        except B.subprocess.TimeoutExpired:
            self.p.kill()
            raise B.BenchError("subscribers did not stop")
        if self.p.returncode != 0:
            raise B.BenchError("subscribers failed: %s" % err.decode()[-2000:])
        marks, lats, summary = {}, {}, None
        for line in out.decode().splitlines():
            if line.startswith("M "):
                _, k, t = line.split()
                marks[int(k)] = float(t)
            elif line.startswith("L "):
                _, k, us = line.split()
                lats.setdefault(int(k), []).append(float(us) / 1000.0)
            elif line.startswith("{"):
                summary = B.json.loads(line)
        return marks, lats, summary


def latency(marks, lats, nsubs, t0, t1):
    """Latencies (ms) of markers sent in [t0, t1]; unseen ones as inf."""
    out = []
    for k, ts in marks.items():
        if t0 <= ts <= t1:
            got = lats.get(k, [])
            out += got + [float("inf")] * (nsubs - len(got))
    return out


def lat_line(xs):
    if not xs:
        return "no samples"
    unseen = sum(1 for x in xs if x == float("inf"))
    return ("n %d, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %s; unseen %d"
            % (len(xs), pct(xs, .5), pct(xs, .9), pct(xs, .99),
               "%.1f ms" % max(xs) if unseen == 0 else "inf", unseen))


def run(a, io, dm, sport, iport, nsubs):
    s = Subs(a, sport, iport, nsubs)
    c0 = dm.cpu()
    m0, w0 = B.machine_busy_s(), time.monotonic()
    out, cpu_send = B.run_child([io, "send", "127.0.0.1:%d" % iport, "--mib", "64",
                                 "--seconds", str(a.seconds)], 900)
    m1, w1 = B.machine_busy_s(), time.monotonic()
    c1 = dm.cpu()
    c = B.json_lines(out)[0]
    time.sleep(1.5)
    marks, lats, summ = s.finish()
    if a.dump_markers and nsubs > 0:
        # per marker: its CLOCK_MONOTONIC send time and every subscriber's latency (ms)
        with open(a.dump_markers, "a") as f:
            for k, t in sorted(marks.items()):
                if c["t0"] <= t <= c["t1"]:
                    f.write("M %d %.6f %s\n" % (k, t, " ".join("%.1f" % x
                                                               for x in sorted(lats.get(k, [])))))
    lat = latency(marks, lats, nsubs, c["t0"], c["t1"])
    return dict(mbps=c["mbps"], seconds=c["seconds"], bytes=c["bytes"], cpu_d=c1 - c0,
                cpu_send=cpu_send, foreign_and_subs=max(0.0, (m1 - m0) - (c1 - c0) - cpu_send)
                / (w1 - w0), lat=lat, summ=summ)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--subs", type=int, default=100)
    ap.add_argument("--interval", type=int, default=100)
    ap.add_argument("--profile", choices=("heavy", "top", "light", "cores", "default"), default="heavy")
    ap.add_argument("--dump-markers", metavar="FILE",
                    help="append each marker sent under ingest with its latencies, for analysis")
    ap.add_argument("--full-decode", action="store_true")
    ap.add_argument("--subs-nice", type=int, default=0, metavar="N",
                    help="run the subscriber process at nice N")
    a = ap.parse_args()
    io = os.path.join(a.build, "bench", "benchd_io")
    for f in (io, os.path.join(a.build, "bench", "benchd_subs"),
              os.path.join(a.build, "daemon", "tlcapd")):
        if not os.access(f, os.X_OK):
            sys.exit("bench_subscribers: %s not built" % f)
    print("machine: %s; sender, subscribers and tlcapd share these cores" % B.machine_line())
    print("%d subscribers, interval %d ms, profile %s, %s; ingest: 64 MiB passes of "
          "bin11 (1,000 areas, 4 cores) for %.0f s per run; %d pairs"
          % (a.subs, a.interval, a.profile, "full protobuf decode" if a.full_decode else
             "target-name walk", a.seconds, a.pairs))
    sys.stdout.flush()
    d = B.tempdir("tlcbench-subs.")
    iport, sport = B.free_port(), B.free_port()
    dm = B.Daemon(a.build, d, ["--listen", "bench=bin11@127.0.0.1:%d" % iport, "--no-store",
                               "--serve", "127.0.0.1:%d" % sport, "--state-dir",
                               os.path.join(d, "state"),
                               # every subscriber comes from 127.0.0.1
                               "--max-per-address", "0"])
    ratios, lat_all, A, Bs = [], [], [], []
    try:
        B.run_child([io, "send", "127.0.0.1:%d" % iport, "--mib", "64"], 300)  # warm-up
        # reference: latency with no ingest
        s = Subs(a, sport, iport, a.subs)
        time.sleep(1.0)  # the initial full snapshots (about 2 MB each) drain first
        t0 = time.monotonic()
        time.sleep(min(5.0, a.seconds))
        t1 = time.monotonic()
        time.sleep(1.5)
        marks, lats, summ = s.finish()
        idle = latency(marks, lats, a.subs, t0, t1)
        print("idle (no ingest): latency %s; %d snapshots, %.1f MB to subscribers"
              % (lat_line(idle), summ["snapshots"], summ["bytes"] / 1e6))
        sys.stdout.flush()
        for i in range(a.pairs):
            ra = run(a, io, dm, sport, iport, 0)
            A.append(ra)
            print("pair %d without subscribers: %8.1f MB/s (%.1f s); tlcapd cpu %.2f s, sender "
                  "%.2f s, other load %.2f cores" % (i, ra["mbps"], ra["seconds"], ra["cpu_d"],
                                                    ra["cpu_send"], ra["foreign_and_subs"]))
            rb = run(a, io, dm, sport, iport, a.subs)
            Bs.append(rb)
            ratios.append(rb["mbps"] / ra["mbps"])
            lat_all += rb["lat"]
            sm = rb["summ"]
            print("pair %d with %d subscribers: %8.1f MB/s (%.1f s); tlcapd cpu %.2f s, sender "
                  "%.2f s, subscribers + other load %.2f cores; ratio %.3f" %
                  (i, a.subs, rb["mbps"], rb["seconds"], rb["cpu_d"], rb["cpu_send"],
                   rb["foreign_and_subs"], ratios[-1]))
            print("   latency %s; %d snapshots (%.0f per subscriber per s), %.1f MB/s to "
                  "subscribers, bulk-target snapshot %.1f KB on average" %
                  (lat_line(rb["lat"]), sm["snapshots"],
                   sm["snapshots"] / a.subs / sm["seconds"], sm["bytes"] / 1e6 / sm["seconds"],
                   sm["bulk_bytes"] / 1e3 / max(1, sm["bulk_snapshots"])))
            sys.stdout.flush()
        t = dm.target(BULK)
        if t["decode_errors"] or t["anomalies"]:
            raise B.BenchError("bulk target: decode errors or anomalies")
        dm.stop()
    finally:
        dm.kill()
        shutil.rmtree(d, ignore_errors=True)
    mr = B.median(ratios)
    p99 = pct(lat_all, .99)
    lim = a.interval + 5
    print("throughput: median without %.1f MB/s, with %.1f MB/s; ratios %s; median %.3fx "
          "(target >= 0.95x: %s)" % (B.median([r["mbps"] for r in A]),
                                     B.median([r["mbps"] for r in Bs]),
                                     " ".join("%.3f" % x for x in ratios), mr,
                                     "MET" if mr >= 0.95 else "NOT MET"))
    print("latency under ingest, all pairs: %s (target p99 <= %d ms: %s)"
          % (lat_line(lat_all), lim, "MET" if p99 <= lim else "NOT MET"))
    print("latency idle: p99 %.1f ms (%s)" % (pct(idle, .99),
                                              "MET" if pct(idle, .99) <= lim else "NOT MET"))


if __name__ == "__main__":
    try:
        main()
    except B.BenchError as e:
        sys.exit("bench_subscribers: %s" % e)
