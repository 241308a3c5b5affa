#!/usr/bin/python3
"""bench_http.py - what the HTTP port costs tlcapd's loop (docs/http.md, issue 19).

    bench/bench_http.py BUILD_DIR [--targets N] [--areas A] [--scrapes S]
                        [--pairs P] [--mib M] [--passes K] [--dashboards D]

BUILD_DIR holds daemon/tlcapd and bench/benchd_io (bench/run passes build/bench).

1. scrape: one `tlcapd --no-store --serve ""` with N targets (default 100), each with A
   function areas (default 50) called on 2 cores (so /metrics exports Neutral rows, histograms
   included; --metrics-areas, default 20, per target). S scrapes of /metrics (default 50) on one kept-alive
   connection, then S requests of a 404 path (the HTTP overhead alone) as the baseline. The
   figure is the daemon's CPU time per request (the daemon does nothing else meanwhile, and
   its loop is its only busy thread), with the client's wall time per request beside it.
   Then S scrapes each after a call on --changed-areas areas (default 1) of every target,
   against S 404 requests after the same calls. Target: a scrape costs the loop < 5 ms.
2. dashboards: ingest throughput of a bin11 stream from benchd_io (1,000 function areas on 4
   cores, the same generator as bench_ingest) with no dashboard and with D (default 10) live
   WebSockets, each on the page of the very target being loaded (areas of 4,000 rows changing
   every second: the worst case for the live messages), alternating, P pairs (default 5).
   Target: the median ratio with/without >= 0.97 (dashboards change ingest by < 3 %).
"""
import argparse
import http.client
import os
import socket
import struct
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integ"))
import benchd as B  # noqa: E402
import cdp  # noqa: E402 - the WebSocket framing of the tests

TARGET = "bench@127.0.0.1"


def rec(h, ty, core, t):
    return struct.pack("<IIQq", h, ((core & 0xFF) << 4) | ty, 0, t)


def fill_targets(port, n, areas, keep=None):
    """n targets, each with `areas` functions called on 2 cores (NET samples of many sizes);
    with a list `keep`, each target's connection stays open and is appended to it."""
    for k in range(n):
        out, t = [], 1000
        for i in range(areas * 8):
            h, core = i % areas, (i // areas) % 2
            out.append(rec(h, 3, core, t))
            t += 100 + (i * 7919) % 50000
            out.append(rec(h, 0, core, t))
            t += 50
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"TLCAP/1 target=t%03d format=bin11\n" % k + b"".join(out))
        if keep is None:
            s.close()
        else:
            keep.append([s, t])
    return areas * 16


def ws_cpu_s(hport):
    """tlcap_http_ws_cpu_seconds_total of the daemon."""
    c = http.client.HTTPConnection("127.0.0.1", hport, timeout=30)
    c.request("GET", "/metrics")
    body = c.getresponse().read()
    c.close()
    for ln in body.split(b"\n"):
        if ln.startswith(b"tlcap_http_ws_cpu_seconds_total "):
            return float(ln.split()[1])
    raise B.BenchError("no tlcap_http_ws_cpu_seconds_total in /metrics")


def changed_requests(pid, hport, path, count, conns, check, areas=1):
    """`count` requests of `path`, each after one call (2 records) on each of the first `areas`
    areas of every target, so that every target's statistics changed since the previous request. Loop-thread CPU per request
    (ms), with the calls' own cost in it (the caller subtracts a baseline with the same
    calls). `check(body)` sees every answer."""
    c = http.client.HTTPConnection("127.0.0.1", hport, timeout=30)
    c.request("GET", path)
    c.getresponse().read()
    cpu0 = B.loop_cpu_s(pid)
    for _ in range(count):
        for x in conns:
            out = []
            for h in range(areas):
                x[1] += 1000
                out.append(rec(h, 3, 0, x[1]) + rec(h, 0, 0, x[1] + 500))
            x[0].sendall(b"".join(out))
        c.request("GET", path)
        check(c.getresponse().read())
    cpu1 = B.loop_cpu_s(pid)
    c.close()
    return (cpu1 - cpu0) / count * 1e3


def timed_requests(pid, hport, path, count):
    c = http.client.HTTPConnection("127.0.0.1", hport, timeout=30)
    c.request("GET", path)
    body = c.getresponse().read()  # warm: the first answer allocates
    cpu0, w0 = B.proc_cpu_s(pid), time.monotonic()
    for _ in range(count):
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
    cpu1, w1 = B.proc_cpu_s(pid), time.monotonic()
    c.close()
    return (cpu1 - cpu0) / count * 1e3, (w1 - w0) / count * 1e3, len(body)


def part_scrape(a, build):
    conns = []
    d = B.tempdir("tlcbench-http.")
    port, hport = B.free_port(), B.free_port()
    dm = B.Daemon(build, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--no-store",
                             "--serve", "", "--http", "127.0.0.1:%d" % hport,
                             "--metrics-areas", str(a.metrics_areas),
                             "--state-dir", os.path.join(d, "state")])
    try:
        per = fill_targets(port, a.targets, a.areas, conns)
        B.wait_until(lambda: sum(t["events"] for t in dm.stats()["targets"]) ==
                     a.targets * per, 60, "every target's events")
        cpu_m, wall_m, size = timed_requests(dm.pid, hport, "/metrics", a.scrapes)
        cpu_b, wall_b, _ = timed_requests(dm.pid, hport, "/nowhere", a.scrapes)
        print("scrape: %d targets x %d areas (2 cores; %d area series each), body %d bytes"
              % (a.targets, a.areas, min(a.areas, a.metrics_areas), size))
        print("scrape, no target changed since the previous scrape: daemon CPU per /metrics "
              "%.2f ms (wall %.2f ms); per 404 request %.3f ms (wall %.3f ms); target < 5 ms: %s"
              % (cpu_m, wall_m, cpu_b, wall_b, "MET" if cpu_m < 5 else "NOT MET"))
        # every target changed before every scrape: nothing of the previous one is reused
        seen = [0]

        def check(body):
            ev = [ln for ln in body.split(b"\n") if ln.startswith(b"tlcap_target_events_total{")]
            if len(ev) != a.targets or any(int(ln.split()[-1]) != per + seen[0] for ln in ev):
                raise B.BenchError("a scrape did not see every target's new events")

        def check_scrape(body):
            seen[0] += 2 * a.changed_areas
            check(body)

        def check_404(body):
            seen[0] += 2 * a.changed_areas

        cm = changed_requests(dm.pid, hport, "/metrics", a.scrapes, conns, check_scrape,
                              a.changed_areas)
        cb = changed_requests(dm.pid, hport, "/nowhere", a.scrapes, conns, check_404,
                              a.changed_areas)
        print("scrape, every target changed since the previous scrape: loop CPU per /metrics "
              "%.2f ms, per 404 request %.2f ms (both with one call sent to each target before "
              "it); the scrape alone %.2f ms; target < 5 ms: %s"
              % (cm, cb, cm - cb, "MET" if cm - cb < 5 else "NOT MET"))
        dm.stop()
    finally:
        for x in conns:
            x[0].close()
        dm.kill()


class Dashboard(threading.Thread):
    """A live WebSocket on the loaded target's page, reading (and dropping) every message."""

    def __init__(self, hport):
        super().__init__(daemon=True)
        self.s = cdp.ws_connect("127.0.0.1", hport, "/api/v1/live", "tlcap-live")
        self.s.sendall(cdp.frame(b"target " + TARGET.encode()))
        self.s.settimeout(None)
        self.msgs = 0
        self.bytes = 0

    def run(self):
        try:
            while True:
                op, m = cdp.recv_message(self.s)
                if op == 8:
                    return
                self.msgs += 1
                self.bytes += len(m)
        except (OSError, EOFError):
            return


def ingest_run(io, a, port, dm, loop=None):
    """(MB/s, daemon CPU seconds per GiB ingested) of one run; with a list `loop`, the loop
    thread's CPU seconds per GiB is appended to it."""
    c0, l0 = dm.cpu(), B.loop_cpu_s(dm.pid)
    out, _ = B.run_child([io, "send", "127.0.0.1:%d" % port, "--mib", str(a.mib), "--passes",
                          str(a.passes)], 900)
    r = B.json_lines(out)[0]
    gib = r["bytes"] / 2 ** 30
    if loop is not None:
        loop.append((B.loop_cpu_s(dm.pid) - l0) / gib)
    return r["mbps"], (dm.cpu() - c0) / gib


def part_dashboards(a, build):
    io = os.path.join(build, "bench", "benchd_io")
    d = B.tempdir("tlcbench-http.")
    port, hport = B.free_port(), B.free_port()
    dm = B.Daemon(build, d, ["--listen", "bench=bin11@127.0.0.1:%d" % port, "--no-store",
                             "--serve", "", "--http", "127.0.0.1:%d" % hport,
                             "--state-dir", os.path.join(d, "state")])
    try:
        ingest_run(io, a, port, dm)  # warm-up: the target and its 4,000 rows exist from here on
        without, with_, msgs, cwo, cw, lwo, lw, live = [], [], [], [], [], [], [], []
        for _ in range(a.pairs):
            mbps, cpu = ingest_run(io, a, port, dm, lwo)
            without.append(mbps)
            cwo.append(cpu)
            dash = [Dashboard(hport) for _ in range(a.dashboards)]
            for x in dash:
                x.start()
            time.sleep(1.5)  # every dashboard has had its first (full) message
            m0 = sum(x.msgs for x in dash)
            w0, l0, t0 = ws_cpu_s(hport), B.loop_cpu_s(dm.pid), time.monotonic()
            mbps, cpu = ingest_run(io, a, port, dm, lw)
            w1, l1, t1 = ws_cpu_s(hport), B.loop_cpu_s(dm.pid), time.monotonic()
            live.append((w1 - w0, l1 - l0, t1 - t0))
            with_.append(mbps)
            cw.append(cpu)
            msgs.append(sum(x.msgs for x in dash) - m0)
            mb = sum(x.bytes for x in dash)
            for x in dash:
                x.s.close()
            for x in dash:
                x.join(5)
        ratios = [w / o for w, o in zip(with_, without)]
        print("dashboards: ingest MB/s without %s" % " ".join("%.1f" % x for x in without))
        print("dashboards: ingest MB/s with %d %s (live messages during each run: %s; last "
              "pair %.1f MB of messages)" % (a.dashboards, " ".join("%.1f" % x for x in with_),
                                             " ".join(str(m) for m in msgs), mb / 1e6))
        print("dashboards: ratio per pair %s; median %.3f (target >= 0.97: %s)"
              % (" ".join("%.3f" % r for r in ratios), B.median(ratios),
                 "MET" if B.median(ratios) >= 0.97 else "NOT MET"))
        cr = [o / w for o, w in zip(cwo, cw)]
        print("dashboards: daemon CPU s per GiB without %s, with %s; ratio without/with per "
              "pair %s, median %.3f (1.0 = dashboards cost the loop nothing per byte)"
              % (" ".join("%.2f" % x for x in cwo), " ".join("%.2f" % x for x in cw),
                 " ".join("%.3f" % x for x in cr), B.median(cr)))
        ticks = [m / a.dashboards for m in msgs]
        print("dashboards: loop CPU building and writing live messages (tlcap_http_ws_cpu_"
              "seconds_total) per run %s s, of the loop's %s s (%s); per tick of %d messages "
              "%s ms; median %.1f ms per tick = %.2f %% of a loop that ingest keeps busy (one "
              "tick per second): target < 3 %%: %s"
              % (" ".join("%.3f" % x[0] for x in live), " ".join("%.2f" % x[1] for x in live),
                 " ".join("%.1f %%" % (100 * x[0] / x[1]) for x in live), a.dashboards,
                 " ".join("%.1f" % (1e3 * x[0] / t) for x, t in zip(live, ticks)),
                 B.median([1e3 * x[0] / t for x, t in zip(live, ticks)]),
                 B.median([100 * x[0] / t for x, t in zip(live, ticks)]),
                 "MET" if B.median([x[0] / t for x, t in zip(live, ticks)]) < 0.03 else
                 "NOT MET"))
        lr = [w / o for o, w in zip(lwo, lw)]
        print("dashboards: loop thread CPU s per GiB without %s, with %s; with/without per "
              "pair %s, median %.3f (when ingest is bound by the loop, throughput changes by "
              "about 1 - 1/ratio: target < 3 %%: %s)"
              % (" ".join("%.2f" % x for x in lwo), " ".join("%.2f" % x for x in lw),
                 " ".join("%.3f" % x for x in lr), B.median(lr),
                 "MET" if B.median(lr) < 1 / 0.97 else "NOT MET"))
        dm.stop()
    finally:
        dm.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--areas", type=int, default=50)
    ap.add_argument("--scrapes", type=int, default=50)
    ap.add_argument("--metrics-areas", type=int, default=20)
    ap.add_argument("--changed-areas", type=int, default=1,
                    help="areas of each target called before each 'changed' scrape")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--dashboards", type=int, default=10)
    ap.add_argument("--parts", default="scrape,dashboards")
    a = ap.parse_args()
    print(B.machine_line())
    if "scrape" in a.parts:
        part_scrape(a, a.build)
    if "dashboards" in a.parts:
        part_dashboards(a, a.build)


if __name__ == "__main__":
    main()
