#!/usr/bin/python3
"""bench_stalled.py - ingest throughput with 100 event subscribers that never read, against
none, in the same run (issue 16, defect 7: a subscriber never slows ingest).

    bench/bench_stalled.py BUILD_DIR [--pairs N] [--mib M] [--passes P] [--subs N]

BUILD_DIR holds daemon/tlcapd and bench/benchd_io (bench/run passes build/bench).

Design. One `tlcapd --no-store --serve` for the whole run and one bulk target (the stream of
bench_ingest: nested calls on 1,000 areas, 4 cores; a warm-up pass creates its rows). Then N
pairs, in alternation:
  A (baseline): no subscriber; benchd_io sends M MiB x P passes at full speed on one
    connection (half-close, wait for the close);
  B: the same with S subscribers connected, each with Hello and Subscribe{events: true,
    no_snapshots: true} for every target, SO_RCVBUF 4 KiB, and then never reading. One pass
    (shown as "filling", not in the ratio) fills their sockets and batch queues; from then on
    every batch is dropped for them (and counted), and the measured passes run.
Ratio = B's ingest MB/s / A's, per pair; the median is reported. Target >= 0.9x. Also tlcapd's
CPU time per byte, A's / B's (1.0: the stalled subscribers cost nothing), which a busy shared
host disturbs less than wall-clock rates. The run
also checks that the daemon counted every record, and that the subscribers' drops were
counted (the daemon's stats dump does not carry them; the check is that the subscribers are
still connected and the daemon answered).
"""
import argparse
import os
import shutil
import socket
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchd as B  # noqa: E402
import bench_ingest as I  # noqa: E402


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wt, payload):
    return varint(num << 3 | wt) + payload


def ldelim(num, body):
    return field(num, 2, varint(len(body)) + body)


def frame(msg):
    return varint(len(msg)) + msg


def client_msg(req, member, body):
    return frame(field(1, 0, varint(req)) + ldelim(member, body))


HELLO = client_msg(1, 10, field(1, 0, varint(1)) + ldelim(3, b"stalled"))
# Subscribe{subscription_id 1, interval 1000, events, no_snapshots}
SUBSCRIBE = client_msg(2, 11, field(1, 0, varint(1)) + field(5, 0, varint(1000)) +
                       field(9, 0, varint(1)) + field(11, 0, varint(1)))


def read_frames(s, n, timeout=10.0):
    """Reads n ServerMessage frames (the Welcome and the Ack); returns nothing."""
    s.settimeout(timeout)
    buf = b""
    got = 0
    while got < n:
        chunk = s.recv(65536)
        if not chunk:
            raise B.BenchError("subscriber closed before its Ack")
        buf += chunk
        while True:
            ln, shift, i = 0, 0, 0
            while i < len(buf):
                b = buf[i]
                ln |= (b & 0x7F) << shift
                shift += 7
                i += 1
                if not b & 0x80:
                    break
            else:
                break
            if len(buf) < i + ln:
                break
            buf = buf[i + ln:]
            got += 1


def stalled_subscribers(port, n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(HELLO + SUBSCRIBE)
        read_frames(s, 2)
        socks.append(s)
    return socks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--subs", type=int, default=100)
    a = ap.parse_args()
    io = os.path.join(a.build, "bench", "benchd_io")
    print("machine: %s" % B.machine_line())
    d = B.tempdir("tlcbench-stalled.")
    port, sport = B.free_port(), B.free_port()
    dm = B.Daemon(a.build, d, ["--listen", "bench=bin11@127.0.0.1:%d" % port, "--no-store",
                               "--serve", "127.0.0.1:%d" % sport,
                               "--state-dir", os.path.join(d, "state"),
                               # every subscriber comes from 127.0.0.1
                               "--max-per-address", "0"])
    base, stalled, ratios, fill = [], [], [], []
    try:
        I.daemon_run(io, a, dm, port, 1)  # warm-up: creates the target and its rows
        for i in range(a.pairs):
            r = I.daemon_run(io, a, dm, port, a.passes)
            base.append(r)
            print("pair %d none   : %s" % (i, I.fmt(r)))
            socks = stalled_subscribers(sport, a.subs)
            try:
                # the subscribers take batches until their sockets and queues are full: that
                # fill is measured and shown, not part of the ratio
                rf = I.daemon_run(io, a, dm, port, 1)
                fill.append(rf["mbps"] / r["mbps"])
                print("pair %d filling: %s" % (i, I.fmt(rf)))
                r2 = I.daemon_run(io, a, dm, port, a.passes)
            finally:
                alive = 0
                for s in socks:
                    s.setblocking(False)
                    try:
                        alive += 1 if s.recv(1, socket.MSG_PEEK) else 0
                    except BlockingIOError:
                        alive += 1
                    except OSError:
                        pass
                    s.close()
            stalled.append(r2)
            ratios.append(r2["mbps"] / r["mbps"])
            print("pair %d %3d stalled: %s (%d still connected)" % (i, a.subs, I.fmt(r2), alive))
            sys.stdout.flush()
            time.sleep(0.5)  # the daemon closes the subscribers before the next baseline
        dm.stop()
    finally:
        dm.kill()
        shutil.rmtree(d, ignore_errors=True)
    mr = B.median(ratios)
    print("stalled: median none %.1f MB/s, %d stalled event subscribers %.1f MB/s; ratio per pair "
          "%s; median ratio %.3fx (target >= 0.90x: %s)"
          % (B.median([r["mbps"] for r in base]), a.subs, B.median([r["mbps"] for r in stalled]),
             " ".join("%.3f" % x for x in ratios), mr, "MET" if mr >= 0.9 else "NOT MET"))
    cpu = [(r["cpu_recv"] / r["bytes"]) / (r2["cpu_recv"] / r2["bytes"])
           for r, r2 in zip(base, stalled)]
    print("stalled: tlcapd CPU per byte, none/stalled (1.0 = the stalled subscribers cost "
          "nothing; steadier than wall clock on a busy host): per pair %s, median %.3fx"
          % (" ".join("%.3f" % x for x in cpu), B.median(cpu)))
    print("stalled: while the fresh subscribers filled their queues (one pass): ratio per pair %s"
          % " ".join("%.3f" % x for x in fill))


if __name__ == "__main__":
    main()
