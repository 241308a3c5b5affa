#!/usr/bin/python3
"""bench_metrics.py - what a large /metrics scrape costs tlcapd's loop (docs/http.md, "The
scrape's cost").

    bench/bench_metrics.py BUILD_DIR [--other BUILD_DIR2] [--targets N] [--areas A]
                           [--calls C]
                           [--pairs P] [--seconds S] [--scrapes K]

BUILD_DIR (and BUILD_DIR2, e.g. a build of the previous commit) holds daemon/tlcapd and
bench/benchd_io (bench/run passes build/bench). Each build runs its own `tlcapd --no-store
--serve ""` with N targets (default 1,000), each with A function areas (default 20) called on
2 cores, so that /metrics exports A area series per target (--metrics-areas A), histograms
included: about 50 MiB a scrape at the defaults.

The loop's stall is seen from outside: a probe connection asks for a 404 path over and over
(one request in flight, kept alive) and records each answer's wait; a request that arrives
while the loop is busy waits until the loop is free, so the longest wait during a scrape is
the loop's longest stall during it (plus the probe's own latency, measured without scraping
as the baseline). The daemon's debug log gives its own figures per scrape (slices, the longest
slice, the longest write), where the build has them.

1. stall: K scrapes (default 5) of the unchanged targets (each target's text from the cache),
   then K scrapes each after a call on every target (every target rendered), with the probe
   running; the probe alone for as long as the baseline. Also the loop thread's CPU time over
   each scrape (schedstat): what a scrape costs the loop, a bound of what scraping once a
   second can take from ingest that the machine's load hardly moves.
2. ingest: benchd_io sends a bin11 stream (1,000 areas on 4 cores) to one more target for S
   seconds (default 8) with no scraping, and again with a client scraping /metrics (reading
   every byte) every second, alternating which comes first, P pairs (default 3); the probe
   runs throughout. Figure: MB/s with scraping / without, per pair and its median.
   Goals: no stall over 5 ms; ingest with scraping >= 0.9x.
With --other, the two builds alternate (pair by pair, the order swapped each pair), so that
both see the same machine load."""
import argparse
import http.client
import json
import os
import re
import socket
import struct
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchd as B  # noqa: E402


def rec(h, ty, core, t):
    return struct.pack("<IIQq", h, ((core & 0xFF) << 4) | ty, 0, t)


def fill_targets(port, n, areas, calls=8):
    """n targets t000.., each with `areas` functions called `calls` times on 2 cores; their
    connections (kept open, with the last time sent) returned. From 1,000 calls an area's
    histogram series has its band of fine edges (docs/http.md, "Histogram edges")."""
    keep = []
    for k in range(n):
        out, t = [], 1000
        for i in range(areas * calls):
            h, core = i % areas, (i // areas) % 2
            out.append(rec(h, 3, core, t))
            t += 100 + (i * 7919 + k) % 50000
            out.append(rec(h, 0, core, t))
            t += 50
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"TLCAP/1 target=t%03d format=bin11\n" % k + b"".join(out))
        keep.append([s, t])
    return keep, areas * calls * 2


def read_answer(s, buf):
    """Reads one answer on s (Content-Length) into the scratch buffer; its body's length."""
    got = b""
    while b"\r\n\r\n" not in got:
        b = s.recv(65536)
        if not b:
            raise B.BenchError("connection closed before the headers")
        got += b
    head, body = got.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 "):
        raise B.BenchError("bad answer %r" % head[:40])
    n = [int(ln.split(b":", 1)[1]) for ln in head.split(b"\r\n")
         if ln.lower().startswith(b"content-length:")][0]
    left = n - len(body)
    mv = memoryview(buf)
    while left > 0:
        k = s.recv_into(mv, min(left, len(buf)))
        if k == 0:
            raise B.BenchError("connection closed in a body")
        left -= k
    return n


class Probe(threading.Thread):
    """A 404 request at a time, kept alive, one every `gap` seconds at most (a busier probe
    would load the loop it measures); (start, wait) of each answer."""

    def __init__(self, hport, gap=0.002):
        super().__init__(daemon=True)
        self.gap = gap
        self.s = socket.create_connection(("127.0.0.1", hport), timeout=60)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stop = threading.Event()
        self.samples = []
        self.buf = bytearray(65536)

    def run(self):
        req = b"GET /probe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        while not self.stop.is_set():
            t0 = time.monotonic()
            self.s.sendall(req)
            read_answer(self.s, self.buf)
            t1 = time.monotonic()
            self.samples.append((t0, t1 - t0))
            if t1 - t0 < self.gap:
                time.sleep(self.gap - (t1 - t0))
        self.s.close()

    def longest(self, t0, t1):
        """The longest wait of a request in flight during [t0, t1] (ms)."""
        w = [d for a, d in self.samples if a + d >= t0 and a <= t1]
        return max(w) * 1000 if w else float("nan")

    def done(self):
        self.stop.set()
        self.join(60)


class Scraper:
    """/metrics on a fresh connection each time (an idle kept-alive one is closed after 5 s)."""

    def __init__(self, hport):
        self.hport = hport
        self.buf = bytearray(1 << 20)

    def scrape(self):
        """(start, end, body bytes) of one /metrics."""
        s = socket.create_connection(("127.0.0.1", self.hport), timeout=120)
        t0 = time.monotonic()
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        n = read_answer(s, self.buf)
        t1 = time.monotonic()
        s.close()
        return t0, t1, n


SCRAPE_LOG = re.compile(r"http: /metrics: (\d+) bytes in ([\d.]+) ms, (\d+) targets \((\d+) "
                        r"rendered, \d+ bytes\); (\d+) slices, longest ([\d.]+) ms \(CPU "
                        r"([\d.]+) ms\); (\d+) writes, longest ([\d.]+) ms \(CPU ([\d.]+) ms\)")


def daemon_line(logs):
    """The daemon's own figures of the scrapes in `logs` (SCRAPE_LOG groups), or ""."""
    if not logs:
        return ""
    return ("slices per scrape %s; longest slice %s ms (CPU %s); longest write %s ms (CPU %s)"
            % tuple(" ".join(g[k] for g in logs) for k in (4, 5, 6, 8, 9)))


class Side:
    """One build's daemon with its targets."""

    def __init__(self, name, build, a):
        self.name, self.build, self.a = name, build, a
        self.d = B.tempdir("tlcbench-metrics.")
        self.port, self.hport = B.free_port(), B.free_port()
        self.dm = B.Daemon(build, self.d, [
            "--listen", "in=bin11@127.0.0.1:%d" % self.port, "--no-store", "--serve", "",
            "--http", "127.0.0.1:%d" % self.hport, "--metrics-areas", str(a.areas),
            "--log-level", "debug", "--state-dir", os.path.join(self.d, "state")])
        self.keep, per = fill_targets(self.port, a.targets, a.areas, a.calls)
        self.records = a.targets * per
        self.wait_records()
        self.ratio, self.stall_with, self.stall_without, self.cpu = [], [], [], []

    def records_now(self):
        c = http.client.HTTPConnection("127.0.0.1", self.hport, timeout=60)
        c.request("GET", "/api/v1/targets")
        doc = json.loads(c.getresponse().read())
        c.close()
        return sum(t["counters"]["records"] for t in doc if t["name"].startswith("t"))

    def wait_records(self):
        B.wait_until(lambda: self.records_now() >= self.records, 120,
                     "%s: records processed" % self.name, step=0.1)

    def change_all(self):
        for c in self.keep:
            c[0].sendall(rec(0, 3, 0, c[1] + 10) + rec(0, 0, 0, c[1] + 500))
            c[1] += 600
        self.records += 2 * len(self.keep)
        self.wait_records()

    def log_figures(self, mark):
        return [m.groups() for m in SCRAPE_LOG.finditer(self.dm.log()[mark:])]

    def part_stall(self):
        a = self.a
        sc = Scraper(self.hport)
        sizes = [sc.scrape()[2]]  # the cache is filled from here on
        pr = Probe(self.hport)
        pr.start()
        time.sleep(0.2)
        res = {}
        for what in ("unchanged", "changed"):
            mark = len(self.dm.log())
            stalls, walls, cpus = [], [], []
            for _ in range(a.scrapes):
                if what == "changed":
                    self.change_all()
                c0 = B.loop_cpu_s(self.dm.pid)
                t0, t1, n = sc.scrape()
                cpus.append((B.loop_cpu_s(self.dm.pid) - c0) * 1000)
                sizes.append(n)
                stalls.append(pr.longest(t0, t1))
                walls.append((t1 - t0) * 1000)
                time.sleep(1.1)  # at most 10 log lines in 10 s (log.h TLC_LOG_BURST)
            res[what] = (stalls, walls, cpus, self.log_figures(mark))
        t0 = time.monotonic()
        time.sleep(2.0)
        base = pr.longest(t0, time.monotonic())
        pr.done()
        print("%s: scrape %.1f MiB; probe alone: longest wait %.2f ms over %d requests"
              % (self.name, B.median(sizes) / 2 ** 20, base,
                 sum(1 for x, _ in pr.samples if x >= t0)))
        for what, (stalls, walls, cpus, logs) in res.items():
            print("  %s targets: probe's longest wait during a scrape %s ms (median %.1f); "
                  "scrape wall %s ms" % (what, " ".join("%.1f" % x for x in stalls),
                                         B.median(stalls), " ".join("%.0f" % x for x in walls)))
            print("    loop CPU per scrape (the probe's requests included) %s ms (median %.1f)"
                  % (" ".join("%.1f" % x for x in cpus), B.median(cpus)))
            if logs:
                print("    daemon: " + daemon_line(logs))

    def ingest(self, scraping):
        """(MB/s, the probe's longest wait during the run in ms, scrapes done, the daemon's
        figures of them)."""
        a = self.a
        mark = len(self.dm.log())
        io = os.path.join(self.build, "bench", "benchd_io")
        pr = Probe(self.hport)
        pr.start()
        stop = threading.Event()
        n = [0]

        def scrape_loop():
            sc = Scraper(self.hport)
            while not stop.is_set():
                t0, t1, _ = sc.scrape()
                n[0] += 1
                stop.wait(max(0.0, 1.0 - (t1 - t0)))
        th = threading.Thread(target=scrape_loop, daemon=True) if scraping else None
        if th:
            th.start()
        t0 = time.monotonic()
        m0, r0, d0 = B.machine_busy_s(), os.times(), self.dm.cpu()
        out, _ = B.run_child([io, "send", "127.0.0.1:%d" % self.port, "--mib", "16",
                              "--seconds", str(a.seconds), "--conns", "1", "--preamble",
                              "bench"], 600)
        t1 = time.monotonic()
        m1, r1, d1 = B.machine_busy_s(), os.times(), self.dm.cpu()
        self.cpu.append((scraping, m1 - m0, (r1.user + r1.system) - (r0.user + r0.system), d1 - d0,
                         t1 - t0))
        stop.set()
        if th:
            th.join(120)
        pr.done()
        r = B.json_lines(out)[0]
        return r["mbps"], pr.longest(t0, t1), n[0], self.log_figures(mark)

    def pair(self, k):
        order = (False, True) if k % 2 == 0 else (True, False)
        got = {}
        for scraping in order:
            got[scraping] = self.ingest(scraping)
        (mw, sw, ns, logs), (mo, so, _, _) = got[True], got[False]
        self.ratio.append(mw / mo)
        self.stall_with.append(sw)
        self.stall_without.append(so)
        print("  %s pair %d: %.1f MB/s without scraping, %.1f with (%d scrapes): %.3fx; probe's "
              "longest wait %.1f ms without, %.1f ms with" % (self.name, k + 1, mo, mw, ns,
                                                               mw / mo, so, sw))
        if logs:
            print("    daemon: " + daemon_line(logs))

    def cpu_line(self, scraping):
        """Per second of the runs with (or without) scraping: CPU seconds of the machine, of
        this bench process (probe and scraper), of tlcapd."""
        r = [c for c in self.cpu if c[0] == scraping]
        w = sum(c[4] for c in r)
        return "machine %.2f, bench client %.2f, tlcapd %.2f" % tuple(
            sum(c[k] for c in r) / w for k in (1, 2, 3))

    def summary(self):
        print("%s: ingest with/without scraping every second, median %.3fx (%s); probe's longest "
              "wait per run, median %.1f ms with scraping, %.1f ms without"
              % (self.name, B.median(self.ratio), " ".join("%.3f" % x for x in self.ratio),
                 B.median(self.stall_with), B.median(self.stall_without)))
        print("  CPU s per s, without scraping: %s; with: %s (2 cores: 2.00 is all of them)"
              % (self.cpu_line(False), self.cpu_line(True)))

    def close(self):
        for c in self.keep:
            c[0].close()
        self.dm.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--other")
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--areas", type=int, default=20)
    ap.add_argument("--calls", type=int, default=8,
                    help="calls per area (1,000 or more: the histograms have their fine bands)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--scrapes", type=int, default=5)
    a = ap.parse_args()
    print("bench_metrics: %s; %s" % (B.machine_line(), time.strftime("%Y-%m-%d %H:%M UTC",
                                                                      time.gmtime())))
    print("load average at start: %s" % open("/proc/loadavg").read().split()[:3])
    builds = [("this", a.build)] + ([("other", a.other)] if a.other else [])
    sides = []
    try:
        for name, b in builds:
            sides.append(Side(name, b, a))
        for s in sides:
            s.part_stall()
        for k in range(a.pairs):
            for s in (sides if k % 2 == 0 else sides[::-1]):
                s.pair(k)
        for s in sides:
            s.summary()
        print("load average at end: %s" % open("/proc/loadavg").read().split()[:3])
    finally:
        for s in sides:
            s.close()


if __name__ == "__main__":
    main()
