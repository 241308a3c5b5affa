#!/usr/bin/env python3
"""bench_history.py - a one-hour range query over 10 GB of stored segments, asked of a running
tlcapd (GetStats.range through `tlcap stats --since -1h`), and whether ingest on another target
goes on meanwhile.

   bench_history.py BUILD_DIR [--gib G] [--state DIR] [--keep]     (default 10 GiB)

1. Generates the segments with tlcapd's own ingest and store: benchd_io streams a realistic
   bin11 capture (nested calls on 1,000 areas, 4 cores) to target `big` at full speed until G
   GiB are stored (256 MiB segments, their manifests and indexes, as in production). Not timed.
2. Queries, each with a stream of Pings on a second connection measuring the event loop's
   responsiveness (round-trip times of Ping/Pong every 5 ms) and, on a third, benchd_io
   streaming to target `live` at full speed:
   - `--since -1h` (wall clock: every segment, all G GiB), cold (the segment files' pages
     dropped from the page cache with posix_fadvise DONTNEED first) and warm;
   - a target-time range of a tenth of the data (`ns:A`..`ns:B`): the index skips the rest.
   Baselines in the same run, alternating: the same ingest and Pings without a query, and
   `tlcapd replay --state-dir` of the same range right after each query, with the same ingest
   and Pings beside it (the same pipeline offline, in one process: the query's cost without
   the daemon).
3. Deletes the state directory (unless --keep).

Prints one JSON line per measurement and a summary. The numbers go to bench/RESULTS.md
"History"."""
import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integ"))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("--gib", type=float, default=10.0)
ap.add_argument("--state", default=None, help="parent directory of the state (default: /tmp)")
ap.add_argument("--keep", action="store_true")
ap.add_argument("--ingest-seconds", type=float, default=0, help="live ingest per run (default: "
                "as long as the query)")
a = ap.parse_args()
build = os.path.abspath(a.build)
TLCAPD = os.path.join(build, "daemon", "tlcapd")
TLCAP = os.path.join(build, "client", "tlcap")
IO = os.path.join(build, "bench", "benchd_io")
PROTO = os.path.join(HERE, "..", "proto")


def varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class Pinger(threading.Thread):
    """Ping every 5 ms on its own connection; round-trip times in ms."""

    def __init__(self, pb, port):
        super().__init__(daemon=True)
        self.pb, self.port = pb, port
        self.rtt = []
        self.stop = threading.Event()
        self.s = D.connect(port)
        self.buf = b""
        self.send(1, hello=pb.Hello(protocol_version=1, client_name="bench"))
        self.recv()

    def send(self, rid, **kw):
        b = self.pb.ClientMessage(request_id=rid, **kw).SerializeToString()
        self.s.sendall(varint(len(b)) + b)

    def recv(self):
        from google.protobuf.internal.decoder import _DecodeVarint32
        while True:
            if self.buf:
                try:
                    n, pos = _DecodeVarint32(self.buf, 0)
                except IndexError:
                    n = None
                if n is not None and len(self.buf) >= pos + n:
                    m = self.pb.ServerMessage()
                    m.ParseFromString(self.buf[pos:pos + n])
                    self.buf = self.buf[pos + n:]
                    return m
            b = self.s.recv(65536)
            if not b:
                raise RuntimeError("daemon closed the ping connection")
            self.buf += b

    def run(self):
        rid = 2
        while not self.stop.is_set():
            t0 = time.monotonic()
            self.send(rid, ping=self.pb.Ping(cookie=rid))
            while self.recv().request_id != rid:
                pass
            self.rtt.append((time.monotonic() - t0) * 1e3)
            rid += 1
            time.sleep(0.005)


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def ingest(port, seconds):
    """benchd_io to target `live` for `seconds`: MB/s."""
    p = subprocess.run([IO, "send", "127.0.0.1:%d" % port, "--mib", "64", "--seconds",
                        "%.1f" % seconds, "--conns", "1", "--preamble", "live"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=seconds + 120)
    lines = [json.loads(x) for x in p.stdout.decode().splitlines() if x.startswith("{")]
    tot = [x for x in lines if x.get("total")] or lines[-1:]
    return tot[0].get("mbps") if tot else None


def run_one(kind, sport, lport, query, pb, seconds, state=None):
    """One measurement: Pings + live ingest, with the query (`query` args) or without."""
    pg = Pinger(pb, sport)
    pg.start()
    res = {}
    th = threading.Thread(target=lambda: res.setdefault("mbps", ingest(lport, seconds)))
    t0 = time.monotonic()
    th.start()
    if query is not None:
        if kind.startswith("replay"):  # the baseline: the same range offline, one process
            cmd = [TLCAPD, "replay", "--state-dir", state, "--target", "big", "--export",
                   "json"] + query
        else:
            cmd = [TLCAP, "--connect", "127.0.0.1:%d" % sport, "stats", "big", "--export",
                   "json"] + query
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=3600)
        res["query_s"] = time.monotonic() - t0
        if p.returncode != 0:
            raise RuntimeError("%s: %s" % (cmd[:2], p.stderr.decode()))
        doc = json.loads(p.stdout)
        res["events"] = doc["counters"]["events"]
        res["bytes"] = doc["counters"]["bytes"]
    th.join()
    pg.stop.set()
    pg.join(10)
    out = {"run": kind, "ingest_mbps": res.get("mbps"), "pings": len(pg.rtt),
           "rtt_p50_ms": round(pct(pg.rtt, 0.5), 3), "rtt_p99_ms": round(pct(pg.rtt, 0.99), 3),
           "rtt_max_ms": round(max(pg.rtt), 3)}
    for k in ("query_s", "events", "bytes"):
        if k in res:
            out[k] = round(res[k], 2) if isinstance(res[k], float) else res[k]
    if "query_s" in res:
        out["query_mbps"] = round(res["bytes"] / res["query_s"] / 1e6, 1)
    print(json.dumps(out), flush=True)
    return out


def drop_cache(seg_dir):
    for f in os.listdir(seg_dir):
        fd = os.open(os.path.join(seg_dir, f), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main():
    tmp = tempfile.mkdtemp(prefix="tlc-bench-hist-", dir=a.state)
    pbdir = tempfile.mkdtemp(prefix="tlc-bench-pb-")
    pb = T.gen_pb2(pbdir, PROTO)
    dm = None
    try:
        port, sport = D.free_port(), D.free_port()
        dm = D.Daemon(TLCAPD, tmp, ["--listen", "l=bin11@127.0.0.1:%d" % port,
                                    "--rotate-bytes", "256M", "--checkpoint-interval", "3600",
                                    "--idle-seal", "1"],
                      store=True, serve="127.0.0.1:%d" % sport)
        mib = int(a.gib * 1024)
        t0 = time.monotonic()
        p = subprocess.run([IO, "send", "127.0.0.1:%d" % port, "--mib", "256", "--passes",
                            str(max(1, mib // 256)), "--conns", "1", "--preamble", "big",
                            "--timeout", "3000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=3600)
        if p.returncode != 0:
            raise RuntimeError("benchd_io: " + p.stderr.decode())
        gen_s = time.monotonic() - t0
        seg_dir = os.path.join(dm.state, "big")
        # the last segment sealed (idle_seal 1 s: its seal and main export are not measured)
        D.wait_until(lambda: not any(f.endswith(".part") for f in os.listdir(seg_dir)), 300,
                     "the last segment sealed")
        data = [f for f in os.listdir(seg_dir) if ".BIN" in f]
        size = sum(os.path.getsize(os.path.join(seg_dir, f)) for f in data)
        print(json.dumps({"generated_bytes": size, "segments": len(data),
                          "generate_s": round(gen_s, 1)}), flush=True)
        # the target-time span, for a range of a tenth of it
        segs = json.loads(subprocess.run([TLCAP, "--connect", "127.0.0.1:%d" % sport,
                                          "segments", "big", "--json"],
                                         stdout=subprocess.PIPE, check=True).stdout)
        lo = min(s["first_time"] for s in segs if s["records"] > 0)
        hi = max(s["last_time"] for s in segs if s["records"] > 0)
        a0 = lo + (hi - lo) * 45 // 100
        a1 = lo + (hi - lo) * 55 // 100
        results = []
        # warm-up of both paths, then alternate: baseline, query (cold), baseline, query (warm),
        # baseline, tenth
        secs = a.ingest_seconds
        if secs <= 0:
            drop_cache(seg_dir)
            probe = run_one("probe-cold", sport, port, ["--since", "-1h"], pb, 5)
            secs = max(5.0, probe["query_s"])
        tenth = ["--since", "ns:%d" % a0, "--until", "ns:%d" % a1]
        for kind, q in (("baseline", None), ("hour-cold", ["--since", "-1h"]),
                        ("replay-hour-cold", ["--since", "-1h"]),
                        ("baseline", None), ("hour-warm", ["--since", "-1h"]),
                        ("replay-hour-warm", ["--since", "-1h"]),
                        ("baseline", None), ("tenth-cold", tenth), ("replay-tenth-cold", tenth)):
            if kind.endswith("cold"):
                drop_cache(seg_dir)
            results.append(run_one(kind, sport, port, q, pb, secs, dm.state))
        base = [r["ingest_mbps"] for r in results if r["run"] == "baseline" and r["ingest_mbps"]]
        summ = {"summary": True, "gib": a.gib, "segments": len(data), "ingest_seconds": secs,
                "baseline_ingest_mbps_median": statistics.median(base) if base else None}
        by = {r["run"]: r for r in results}
        for r in results:
            if r["run"] != "baseline" and base and r["ingest_mbps"]:
                summ[r["run"] + "_ingest_ratio"] = round(r["ingest_mbps"] /
                                                         statistics.median(base), 3)
            if ("replay-" + r["run"]) in by:
                summ[r["run"] + "_vs_replay"] = round(r["query_s"] /
                                                      by["replay-" + r["run"]]["query_s"], 3)
        print(json.dumps(summ), flush=True)
    finally:
        if dm is not None:
            dm.stop(timeout=120)
        shutil.rmtree(pbdir, ignore_errors=True)
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept", tmp)


main()
