#!/usr/bin/env python3
"""bench_history_loop.py - what range queries cost the event loop: four HTTP clients asking
for `?since=ns:0` (the whole store) at once, against none, in one run.

   bench_history_loop.py BUILD_DIR [--mib M] [--pairs N] [--clients C] [--seconds S]
                         [--tlcapd PATH]

1. Stores M MiB (default 72) on target `big` with tlcapd's own ingest and store (benchd_io: a
   bin11 capture, nested calls on 1,000 areas, 4 cores). Not timed.
2. N pairs (default 5), alternating A then B, each run S seconds long (default: one probe of B,
   at least 10 s) on a fresh connection each:
   - A: benchd_io streams to target `live` at full speed, and a client pings the daemon
     (protobuf Ping/Pong on the subscriber port, one every 2 ms, each waiting for its Pong);
   - B: the same, plus C clients (default 4) each asking GET
     /api/v1/targets/big/stats?since=ns:0 until they have their answer (a 503 - the daemon runs
     two range queries at once - is asked again after 50 ms), then again, until S is over.
   The loop's longest stall in a run is the longest Ping round trip (it is read and answered on
   the loop thread); ingest is benchd_io's MB/s over the run; the loop thread's CPU time over
   the run comes from its schedstat (benchd.loop_cpu_s).
3. Prints one JSON line per run and a summary: the medians over the pairs of each side's
   longest round trip and ingest, the ratio of ingest B/A per pair and its median, and the
   loop's CPU time in B beyond A's per MB ingested, per answer: the queries' share of the loop,
   which CPU time measures on a busy machine where a round trip mostly measures the scheduler.

--tlcapd runs another build of tlcapd (e.g. the previous commit's) with this build's
benchd_io: the same bench before and after a change. Figures go to bench/RESULTS.md
"History queries and the loop"."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchd as B  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("--mib", type=int, default=72)
ap.add_argument("--pairs", type=int, default=5)
ap.add_argument("--clients", type=int, default=4)
ap.add_argument("--seconds", type=float, default=0)
ap.add_argument("--tlcapd", default=None)
a = ap.parse_args()
build = os.path.abspath(a.build)
IO = os.path.join(build, "bench", "benchd_io")


def varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def client_msg(req, member, body):
    m = varint(1 << 3 | 0) + varint(req) + varint(member << 3 | 2) + varint(len(body)) + body
    return varint(len(m)) + m


HELLO = client_msg(1, 10, varint(1 << 3) + varint(1) + varint(3 << 3 | 2) + varint(5) + b"bench")


class Pinger(threading.Thread):
    """A Ping every 2 ms on its own connection, each after the previous Pong: round trips."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.rtt, self.stop, self.buf = [], threading.Event(), b""
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s.sendall(HELLO)
        self.frame()  # Welcome

    def frame(self):
        while True:
            n, shift, i = 0, 0, 0
            while i < len(self.buf):
                b = self.buf[i]
                n |= (b & 0x7F) << shift
                shift += 7
                i += 1
                if not b & 0x80:
                    if len(self.buf) >= i + n:
                        self.buf = self.buf[i + n:]
                        return
                    break
            b = self.s.recv(65536)
            if not b:
                raise B.BenchError("the daemon closed the ping connection")
            self.buf += b

    def run(self):
        rid = 2
        while not self.stop.is_set():
            t0 = time.monotonic()
            self.s.sendall(client_msg(rid, 17, varint(1 << 3) + varint(rid)))  # Ping{cookie}
            self.frame()  # its Pong (nothing else is sent on this connection)
            self.rtt.append((time.monotonic() - t0) * 1e3)
            rid += 1
            time.sleep(0.002)
        self.s.close()


def query(hport, until, out):
    """GET ?since=ns:0 until `until` (monotonic): the answers' sizes and times into out."""
    while time.monotonic() < until:
        t0 = time.monotonic()
        s = socket.create_connection(("127.0.0.1", hport), timeout=600)
        s.sendall(b"GET /api/v1/targets/big/stats?since=ns:0 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Connection: close\r\n\r\n")
        got = bytearray()
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            got += b
        s.close()
        if got.startswith(b"HTTP/1.1 200"):
            out.append((len(got), time.monotonic() - t0))
        elif got.startswith(b"HTTP/1.1 503"):
            out.append((0, 0.0))
            time.sleep(0.05)
        else:
            raise B.BenchError("query: %r" % bytes(got[:200]))


def ingest(port, seconds, res):
    p = subprocess.run([IO, "send", "127.0.0.1:%d" % port, "--mib", "16", "--seconds",
                        "%.1f" % seconds, "--conns", "1", "--preamble", "live"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=seconds + 300)
    tot = [x for x in B.json_lines(p.stdout.decode()) if x.get("total")]
    res["mbps"] = tot[0]["mbps"] if tot else None
    res["bytes"] = tot[0]["bytes"] if tot else 0


def run_one(kind, pid, port, sport, hport, seconds, clients):
    pg = Pinger(sport)
    res, answers = {}, []
    t0 = time.monotonic()
    cpu0 = B.loop_cpu_s(pid)
    pg.start()
    ing = threading.Thread(target=ingest, args=(port, seconds, res))
    ing.start()
    qs = [threading.Thread(target=query, args=(hport, t0 + seconds, answers))
          for _ in range(clients if kind == "B" else 0)]
    for q in qs:
        q.start()
    ing.join()
    for q in qs:
        q.join()
    pg.stop.set()
    pg.join(30)
    loop_s = B.loop_cpu_s(pid) - cpu0
    ok = [x for x in answers if x[0] > 0]
    out = {"run": kind, "seconds": round(time.monotonic() - t0, 1), "ingest_mbps": res["mbps"],
           "ingest_mb": round(res["bytes"] / 1e6, 1), "loop_cpu_s": round(loop_s, 3),
           "pings": len(pg.rtt), "rtt_p50_ms": round(B.median(pg.rtt), 3),
           "rtt_max_ms": round(max(pg.rtt), 2)}
    if kind == "B":
        out.update(answers=len(ok), busy=len(answers) - len(ok),
                   answer_bytes=ok[0][0] if ok else 0,
                   query_s_median=round(B.median([x[1] for x in ok]), 2) if ok else None)
    print(json.dumps(out), flush=True)
    return out


def main():
    d = B.tempdir("tlc-bench-histloop.")
    dm = None
    try:
        port, sport, hport = B.free_port(), B.free_port(), B.free_port()
        args = ["--listen", "l=bin11@127.0.0.1:%d" % port, "--state-dir", os.path.join(d, "s"),
                "--serve", "127.0.0.1:%d" % sport, "--http", "127.0.0.1:%d" % hport,
                "--checkpoint-interval", "3600", "--idle-seal", "1"]
        if a.tlcapd:  # another build's tlcapd, this build's benchd_io
            os.makedirs(os.path.join(d, "alt", "daemon"), exist_ok=True)
            os.symlink(os.path.abspath(a.tlcapd), os.path.join(d, "alt", "daemon", "tlcapd"))
            dm = B.Daemon(os.path.join(d, "alt"), d, args)
        else:
            dm = B.Daemon(build, d, args)
        p = subprocess.run([IO, "send", "127.0.0.1:%d" % port, "--mib", str(a.mib), "--conns",
                            "1", "--preamble", "big", "--timeout", "3000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=3600)
        if p.returncode != 0:
            raise B.BenchError("benchd_io: " + p.stderr.decode())
        seg = os.path.join(d, "s", "big")
        B.wait_until(lambda: not any(f.endswith(".part") for f in os.listdir(seg)), 300,
                     "the stored segments sealed")
        size = sum(os.path.getsize(os.path.join(seg, f)) for f in os.listdir(seg) if ".BIN" in f)
        print(json.dumps({"stored_bytes": size, "machine": B.machine_line(),
                          "tlcapd": a.tlcapd or os.path.join(build, "daemon", "tlcapd")}),
              flush=True)
        secs = a.seconds
        if secs <= 0:  # long enough for every client to have one answer
            probe = run_one("B", dm.pid, port, sport, hport, 1.0, a.clients)
            secs = max(10.0, probe["seconds"] * 1.2)
        runs = []
        for i in range(a.pairs):
            runs.append(run_one("A", dm.pid, port, sport, hport, secs, a.clients))
            runs.append(run_one("B", dm.pid, port, sport, hport, secs, a.clients))
        A = [r for r in runs if r["run"] == "A"]
        Bq = [r for r in runs if r["run"] == "B"]
        ratios = [round(b["ingest_mbps"] / x["ingest_mbps"], 3) for x, b in zip(A, Bq)]
        # the loop's CPU per MB ingested without queries (A), and what B's loop spent beyond
        # that per answer (the queries' share of the loop: handing out requests and answers,
        # the 503s of the clients that found both query slots taken, sending the documents)
        per_mb = B.median([x["loop_cpu_s"] / x["ingest_mb"] for x in A if x["ingest_mb"] > 0])
        extra = [round((b["loop_cpu_s"] - b["ingest_mb"] * per_mb) * 1e3 / b["answers"], 1)
                 for b in Bq if b["answers"] > 0]
        print(json.dumps({
            "summary": True, "pairs": a.pairs, "clients": a.clients, "seconds": secs,
            "stored_bytes": size,
            "A_rtt_max_ms_median": B.median([r["rtt_max_ms"] for r in A]),
            "B_rtt_max_ms_median": B.median([r["rtt_max_ms"] for r in Bq]),
            "B_rtt_max_ms_each": [r["rtt_max_ms"] for r in Bq],
            "A_ingest_mbps_median": B.median([r["ingest_mbps"] for r in A]),
            "B_ingest_mbps_median": B.median([r["ingest_mbps"] for r in Bq]),
            "ingest_ratio_each": ratios, "ingest_ratio_median": B.median(ratios),
            "answers_per_B_run": [r["answers"] for r in Bq],
            "A_loop_cpu_ms_per_mb": round(per_mb * 1e3, 3),
            "B_extra_loop_cpu_ms_per_answer_each": extra,
            "B_extra_loop_cpu_ms_per_answer_median": B.median(extra)}), flush=True)
    finally:
        if dm is not None:
            dm.stop(timeout=120)
        shutil.rmtree(d, ignore_errors=True)


main()
