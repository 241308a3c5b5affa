#!/usr/bin/python3
"""bench_tls.py - 100 subscribers at 10 Hz over TLS (with a token) against the same over plain
TCP while tlcapd ingests at full speed: the ingest ratio (TLS / plain, same run) and the
latency from a marker event's arrival to its appearance in the subscribers' snapshots.

    bench/bench_tls.py BUILD_DIR [--pairs N] [--seconds S] [--subs N] [--interval MS]
                       [--profile heavy|top|light|cores|default] [--subs-nice N]

Design. Two tlcapd (--no-store) run side by side for the whole run: P serves subscribers on
plain TCP, T on TLS (a self-signed certificate made with `openssl req`, --token-file); each has
its own ingest port and bulk target (warmed up first). Then N pairs, the order alternating: a
run on P and a run on T, each exactly bench_subscribers.py's "with subscribers" run (benchd_io
sends the bulk stream at full speed for S seconds while benchd_subs keeps the subscribers
reading, the TLS ones through OpenSSL with the token). Only one daemon is loaded at a time; the
idle one costs nothing. Ratio = T's ingest MB/s / P's. Target >= 0.9x. Latency as in
bench_subscribers.py (markers every 37 ms on a separate connection; p99 over all pairs; a
marker a subscriber never saw counts as infinitely late).

What TLS adds on the daemon: the serving thread encrypts every message once per subscriber
(the shared encoded message is not shareable once encrypted) and writes the ciphertext; each
subscriber pays its own decryption.

Load. On a shared machine the wall-clock rate of one run measures mostly how much CPU the
scheduler gave the daemon, so besides the per-pair ratios and their median (>= 5 pairs, the
order rotating) the figures reported come from the CPU time of tlcapd's loop thread (ingest,
engines, pubsub's loop work: /proc/PID/task/PID/stat), which load barely moves. That thread's
time is a per-byte part (ingest) and a per-second part (100 subscribers' snapshots at 10 Hz,
the same at any ingest rate once every area changes each interval), so its CPU per GB alone
rises whenever load slows a run. Each round therefore has a third run, ingest with no
subscriber ("none", on the plain daemon): its loop CPU per GB is the per-byte cost c; a run
with subscribers then gives their per-second cost s = (loop CPU - c * GB) / seconds, in cores.
A loop thread that has a whole core ingests (1 - s) / c GB/s; the capacity ratio TLS / plain is
(1 - s_tls) / (1 - s_plain), from the medians. Also reported: the raw CPU per GB of the loop
thread, the other threads (the serving thread: TLS encryption) and the whole daemon.
Run it as `nice -n -5 bench/bench_tls.py ...` so that builds at nice 10 yield.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchd as B  # noqa: E402
import bench_subscribers as S  # noqa: E402


_watch = {"pid": None, "cpu": 0.0, "wall": 0.0}
_run_child = B.run_child


def _timed_run_child(argv, *rest, **kw):
    """B.run_child, and the loop thread CPU of _watch["pid"] over the bulk send (the window
    bench_subscribers.run measures the daemon's CPU over), into _watch["cpu"]."""
    pid = _watch["pid"] if len(argv) > 1 and argv[1] == "send" else None
    l0, w0 = B.loop_cpu_s(pid) if pid else 0.0, time.monotonic()
    out = _run_child(argv, *rest, **kw)
    if pid:
        _watch["cpu"], _watch["wall"] = B.loop_cpu_s(pid) - l0, time.monotonic() - w0
    return out


B.run_child = _timed_run_child  # S.run calls it through the same module


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--subs", type=int, default=100)
    ap.add_argument("--interval", type=int, default=100)
    ap.add_argument("--profile", choices=("heavy", "top", "light", "cores", "default"),
                    default="top")
    ap.add_argument("--subs-nice", type=int, default=0, metavar="N",
                    help="run the subscriber process at nice N (their TLS decryption would run "
                    "on the dashboards' machines, not the daemon's)")
    a = ap.parse_args()
    a.full_decode, a.dump_markers = False, None
    io = os.path.join(a.build, "bench", "benchd_io")
    for f in (io, os.path.join(a.build, "bench", "benchd_subs"),
              os.path.join(a.build, "daemon", "tlcapd")):
        if not os.access(f, os.X_OK):
            sys.exit("bench_tls: %s not built" % f)
    if shutil.which("openssl") is None:
        sys.exit("bench_tls: openssl not installed")
    print("machine: %s; sender, subscribers and tlcapd share these cores" % B.machine_line())
    print("nice %d; load average at start %.1f %.1f %.1f" % ((os.nice(0),) + os.getloadavg()))
    if a.pairs < 5:
        print("note: fewer than 5 pairs: the medians below are weak under load")
    print("%d subscribers, interval %d ms, profile %s; ingest: 64 MiB passes of bin11 (1,000 "
          "areas, 4 cores) for %.0f s per run; %d pairs (plain TCP, TLS)"
          % (a.subs, a.interval, a.profile, a.seconds, a.pairs))
    sys.stdout.flush()
    d = B.tempdir("tlcbench-tls.")
    cert, key, tok = (os.path.join(d, n) for n in ("cert.pem", "key.pem", "token"))
    subprocess.check_call(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out",
                           cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
                           "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    token = "bench-" + os.urandom(8).hex()
    fd = os.open(tok, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (token + "\n").encode())
    os.close(fd)
    daemons = {}
    res = {"plain": [], "tls": [], "none": []}
    try:
        for kind, extra in (("plain", []), ("tls", ["--tls-cert", cert, "--tls-key", key,
                                                     "--token-file", tok])):
            dd = os.path.join(d, kind)
            os.mkdir(dd)
            iport, sport = B.free_port(), B.free_port()
            dm = B.Daemon(a.build, dd, ["--listen", "bench=bin11@127.0.0.1:%d" % iport,
                                        "--no-store", "--serve", "127.0.0.1:%d" % sport,
                                        "--state-dir", os.path.join(dd, "state"),
                                        # every subscriber comes from 127.0.0.1
                                        "--max-per-address", "0"] + extra)
            daemons[kind] = (dm, iport, sport)
            B.run_child([io, "send", "127.0.0.1:%d" % iport, "--mib", "64"], 300)  # warm-up
        kinds = ("plain", "tls", "none")
        for i in range(a.pairs):
            order = kinds[i % 3:] + kinds[:i % 3]  # which goes first rotates
            if i % 2:
                order = order[::-1]
            for kind in order:
                dm, iport, sport = daemons["plain" if kind == "none" else kind]
                a.subs_extra = ["--tls", cert, "--token", token] if kind == "tls" else []
                _watch["pid"] = dm.pid
                r = S.run(a, io, dm, sport, iport, 0 if kind == "none" else a.subs)
                _watch["pid"] = None
                r["loop_cpu"] = _watch["cpu"]  # over the bulk send, as r["cpu_d"]
                r["wall"] = _watch["wall"]
                res[kind].append(r)
                sm = r["summ"]
                print("pair %d %-5s: %8.1f MB/s (%.1f s); tlcapd cpu %.2f s (loop thread %.2f s: "
                      "%.2f s per GB ingested; other threads %.2f s), sender %.2f s, "
                      "subscribers + other load %.2f cores; latency %s; %.1f MB/s to "
                      "subscribers" % (i, kind, r["mbps"], r["seconds"], r["cpu_d"], r["loop_cpu"],
                                       r["loop_cpu"] / (r["bytes"] / 1e9),
                                       r["cpu_d"] - r["loop_cpu"], r["cpu_send"],
                                       r["foreign_and_subs"], S.lat_line(r["lat"]),
                                       sm["bytes"] / 1e6 / sm["seconds"]))
                sys.stdout.flush()
            print("pair %d ratio TLS/plain %.3f" % (i, res["tls"][-1]["mbps"] /
                                                    res["plain"][-1]["mbps"]))
            sys.stdout.flush()
        for kind, (dm, _, _) in daemons.items():
            t = dm.target(S.BULK)
            if t["decode_errors"] or t["anomalies"]:
                raise B.BenchError("%s: bulk target: decode errors or anomalies" % kind)
            dm.stop()
    finally:
        for dm, _, _ in daemons.values():
            dm.kill()
        shutil.rmtree(d, ignore_errors=True)
    print("load average at end %.1f %.1f %.1f" % os.getloadavg())
    ratios = [t["mbps"] / p["mbps"] for p, t in zip(res["plain"], res["tls"])]
    mr = B.median(ratios)
    print("throughput: median plain %.1f MB/s, TLS %.1f MB/s; ratios %s; median %.3fx "
          "(target >= 0.9x: %s)" % (B.median([r["mbps"] for r in res["plain"]]),
                                    B.median([r["mbps"] for r in res["tls"]]),
                                    " ".join("%.3f" % x for x in ratios), mr,
                                    "MET" if mr >= 0.9 else "NOT MET"))
    for kind in ("plain", "tls"):
        lat = [x for r in res[kind] for x in r["lat"]]
        print("latency under ingest, %-5s all pairs: %s" % (kind, S.lat_line(lat)))
    med = {}
    for kind in ("plain", "tls", "none"):
        per_gb = {  # CPU-s per GB ingested, per run
            "loop": [r["loop_cpu"] / (r["bytes"] / 1e9) for r in res[kind]],
            "other": [(r["cpu_d"] - r["loop_cpu"]) / (r["bytes"] / 1e9) for r in res[kind]],
            "all": [r["cpu_d"] / (r["bytes"] / 1e9) for r in res[kind]],
        }
        med[kind] = {k: B.median(v) for k, v in per_gb.items()}
        for k, what in (("loop", "loop thread"), ("other", "other threads (serving)"),
                        ("all", "whole daemon")):
            print("CPU-s per GB ingested, %-5s %-24s %s; median %.2f"
                  % (kind, what + ":", " ".join("%.2f" % x for x in per_gb[k]), med[kind][k]))
    c = med["none"]["loop"]  # loop thread CPU-s per GB of ingest alone
    sub = {}
    for kind in ("plain", "tls"):
        xs = [(r["loop_cpu"] - c * r["bytes"] / 1e9) / r["wall"] for r in res[kind]]
        sub[kind] = B.median(xs)
        print("loop thread serving %d subscribers, %-5s: %s cores; median %.3f; a whole core "
              "would ingest %.0f MB/s" % (a.subs, kind, " ".join("%.3f" % x for x in xs),
                                          sub[kind], (1 - sub[kind]) / c * 1e3))
        ys = [(r["cpu_d"] - r["loop_cpu"]) / r["wall"] for r in res[kind]]
        print("other threads (serving: writes, TLS encryption), %-5s: %s cores; median %.3f"
              % (kind, " ".join("%.3f" % y for y in ys), B.median(ys)))
    cr = (1 - sub["tls"]) / (1 - sub["plain"])
    print("ingest capacity ratio TLS/plain of the loop thread, (1 - s_tls) / (1 - s_plain): "
          "%.3fx (target >= 0.9x: %s)" % (cr, "MET" if cr >= 0.9 else "NOT MET"))


if __name__ == "__main__":
    try:
        main()
    except B.BenchError as e:
        sys.exit("bench_tls: %s" % e)
