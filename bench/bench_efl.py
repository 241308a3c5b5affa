#!/usr/bin/python3
"""bench_efl.py - what the efl source costs tlcapd per MiB of evlog, against the same evlog
blocks sent to a plain TCP evlog listener, measured in the same run (issue 23).

    bench/bench_efl.py BUILD_DIR [--mib M] [--pairs N] [--poll-ms P]

BUILD_DIR holds daemon/tlcapd (bench/run passes build/bench).

Design. One data set is generated once: M MiB (default 256) of evlog items (nested +f/-f
calls on 200 function names, 4 threads, times rising), cut into 4 MiB answers as eina's evlog
buffer would hand them out. Two ways into the same `tlcapd --no-store` build (statistics on,
defaults):
 - efl: tlcapd's [efl bench] source talks to a stand-in efl_debugd (this script, on a free
   loopback port: docs/efl.md's protocol), which announces one application and answers each
   EvLog/get with the next 4 MiB answer (poll_ms P, default 10, so tlcapd waits on the
   stand-in rather than on its timer), then with empty answers;
 - tcp: a TCP evlog listener gets the very same blocks (efl_debug's framing: magic, size,
   overflow, items) on one connection, half-closed; tlcapd closes once all is processed.
For each, tlcapd's CPU seconds (utime + stime from /proc) from the first answer to tlcapd's
next EvLog/get after the last one (efl; it asks again only once an answer is processed) or to
its close after the half-close (tcp); the figure is CPU per MiB, and the ratio
efl / tcp. N pairs (default 3), alternating, a fresh daemon per run. Each run is checked:
records == items sent, no decode error.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ANSWER = 4 * 1024 * 1024  # eina's EVLOG_BUF_SIZE


def item(tim, thread, event):
    e = event + b"\0"
    nxt = (40 + len(e) + 7) // 8 * 8
    return struct.pack("<ddQQHHH", tim, 0.0, thread, 0, 40, 0, nxt) + b"\0\0" + e + \
        b"\0" * (nxt - 40 - len(e))


def dataset(mib):
    """[answer payload items bytes], total items."""
    answers, cur, n, t = [], [], 0, 1000.0
    size = 0
    names = [b"f%03d" % k for k in range(200)]
    while sum(len(a) for a in answers) + size < mib * 1024 * 1024:
        for th in range(4):
            nm = names[n % 200]
            for ev in (b"+" + nm, b"-" + nm):
                it = item(t, 0x7f0000 + th, ev)
                if size + len(it) > ANSWER:
                    answers.append(b"".join(cur))
                    cur, size = [], 0
                cur.append(it)
                size += len(it)
                n += 1
                t += 1e-6
    if cur:
        answers.append(b"".join(cur))
    return answers, n


def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Daemon:
    def __init__(self, tlcapd, d, args):
        self.dump = os.path.join(d, "dump.json")
        self.log = open(os.path.join(d, "tlcapd.log"), "wb")
        self.p = subprocess.Popen([tlcapd, "--no-store", "--serve", "", "--state-dir",
                                   os.path.join(d, "st"), "--dump-stats-on-exit", self.dump] +
                                  args, stdout=subprocess.DEVNULL, stderr=self.log)

    def target(self, name):
        if os.path.exists(self.dump):
            os.unlink(self.dump)
        self.p.send_signal(signal.SIGUSR1)
        for _ in range(500):
            if os.path.exists(self.dump):
                try:
                    with open(self.dump) as f:
                        st = json.load(f)
                except ValueError:
                    time.sleep(0.01)
                    continue
                for t in st["targets"]:
                    if t["name"] == name:
                        return t
                return None
            time.sleep(0.01)
        raise RuntimeError("no stats dump")

    def wait_records(self, name, want, timeout=300):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            t = self.target(name)
            if t is not None and t["records"] >= want:
                if t["records"] != want or t["decode_errors"]:
                    raise RuntimeError("records %d != %d or decode errors %d"
                                       % (t["records"], want, t["decode_errors"]))
                return
            time.sleep(0.05)
        raise RuntimeError("timeout waiting for %d records" % want)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(30)
        self.log.close()


def recv_exact(c, n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b


def fake_debugd(ls, answers, started, finished):
    """Serves one tlcapd connection: registration, one application, the answers. The get that
    follows the last answer marks the end: tlcapd asks again only once an answer is in."""
    c, _ = ls.accept()
    ids, k = {}, 0
    try:
        while True:
            size, cid, op = struct.unpack("<Iii", recv_exact(c, 12))
            p = recv_exact(c, size - 12)
            if op == 0:
                names = p[8:].split(b"\0")[:-1]
                ids = {n.decode(): 20 + i for i, n in enumerate(names)}
                c.sendall(struct.pack("<Iii", 12 + 8 + 4 * len(names), 0, 0) + p[:8] +
                          b"".join(struct.pack("<i", 20 + i) for i in range(len(names))))
            elif op == ids.get("Daemon/Client/register_observer"):
                pl = struct.pack("<ii", 1, 4242) + b"benchapp\0"
                c.sendall(struct.pack("<Iii", 12 + len(pl), 0, ids["Daemon/Client/added"]) + pl)
            elif op == ids.get("EvLog/get"):
                pl = struct.pack("<I", 0) + (answers[k] if k < len(answers) else b"")
                if k == 0:
                    started.append(time.monotonic())
                if k == len(answers):
                    finished.append(time.monotonic())
                k += 1
                c.sendall(struct.pack("<Iii", 12 + len(pl), 1, op) + pl)
    except (EOFError, OSError):
        pass
    finally:
        c.close()


def run_efl(tlcapd, answers, nitems, poll_ms):
    with tempfile.TemporaryDirectory() as d:
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        port = ls.getsockname()[1]
        conf = os.path.join(d, "t.ini")
        with open(conf, "w") as f:
            f.write("[efl bench]\npattern = benchapp\npoll_ms = %d\ndebugd = 127.0.0.1:%d\n"
                    % (poll_ms, port))
        dm = Daemon(tlcapd, d, ["--config", conf])
        started, finished = [], []
        th = threading.Thread(target=fake_debugd, args=(ls, answers, started, finished),
                              daemon=True)
        th.start()
        while not started:
            time.sleep(0.001)
        c0 = cpu(dm.p.pid)
        t0 = time.monotonic()
        while not finished:
            time.sleep(0.001)
        c1, t1 = cpu(dm.p.pid), time.monotonic()
        dm.wait_records("bench/benchapp-4242", nitems)  # checked after the measurement
        dm.stop()
        ls.close()
        return c1 - c0, t1 - t0


def run_tcp(tlcapd, answers, nitems):
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        dm = Daemon(tlcapd, d, ["--listen", "in=evlog@127.0.0.1:%d" % port])
        for _ in range(500):
            try:
                s = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.01)
        c0 = cpu(dm.p.pid)
        t0 = time.monotonic()
        s.sendall(b"TLCAP/1 target=benchtcp format=evlog\n")
        for a in answers:
            s.sendall(struct.pack("<III", 0x0FFEE211, len(a), 0) + a)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass
        c1, t1 = cpu(dm.p.pid), time.monotonic()
        t = dm.target("benchtcp")
        if t["records"] != nitems or t["decode_errors"]:
            raise RuntimeError("tcp: records %d != %d" % (t["records"], nitems))
        s.close()
        dm.stop()
        return c1 - c0, t1 - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--poll-ms", type=int, default=10)
    a = ap.parse_args()
    tlcapd = os.path.join(a.build, "daemon", "tlcapd")
    answers, nitems = dataset(a.mib)
    mib = sum(len(x) for x in answers) / 1048576
    print("data: %.1f MiB of evlog items (%d items) in %d answers of <= 4 MiB"
          % (mib, nitems, len(answers)))
    efl, tcp = [], []
    for i in range(a.pairs):
        ce, we = run_efl(tlcapd, answers, nitems, a.poll_ms)
        ct, wt = run_tcp(tlcapd, answers, nitems)
        efl.append(ce / mib)
        tcp.append(ct / mib)
        print("pair %d: efl %.2f ms CPU/MiB (%.1f MiB/s wall)  tcp %.2f ms CPU/MiB (%.1f MiB/s "
              "wall)  ratio %.2f" % (i + 1, 1000 * ce / mib, mib / we, 1000 * ct / mib, mib / wt,
                                     ce / ct if ct > 0 else float("nan")))
    me, mt = statistics.median(efl), statistics.median(tcp)
    print("median: efl %.2f ms CPU/MiB, tcp %.2f ms CPU/MiB, efl/tcp %.2f"
          % (1000 * me, 1000 * mt, me / mt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
