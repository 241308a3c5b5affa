#!/usr/bin/env python3
"""bench_ckpt_ingest.py - does a large target's checkpoint hold up another target's ingest?

   bench_ckpt_ingest.py BUILD_DIR [AREAS] [ROUNDS] [SECONDS] [OTHER_TLCAPD]
                                                   (defaults 100000, 3, 8)

A tlcapd (no storage: the checkpoint files are the only writes) with two listeners: `big`
gets AREAS function areas (E/X pairs) and then a trickle over them, so that its state moves
and is checkpointed every second (A: --checkpoint-interval 1; B, the baseline:
--checkpoint-interval 0, checkpoints only at shutdown). `small` gets bin11 records as fast as
one Python sender pushes them for SECONDS: its rate (MB/s, bytes the daemon's socket accepted)
is the other target's ingest. A and B alternate, ROUNDS each, medians. For A the daemon's
debug log gives every checkpoint of `big`: its loop slices, the longest slice (wall clock and
the loop thread's CPU time) and how long big's input was held. OTHER_TLCAPD (e.g. a build of
an earlier commit, whose large checkpoints were taken by a forked child) runs A as a third
alternating mode. Run with `nice -n -5`."""
import os
import re
import statistics
import struct
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integ"))
import daemonlib as D  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release")
AREAS = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
SECS = float(sys.argv[4]) if len(sys.argv) > 4 else 8.0
tlcapd = os.path.join(build, "daemon", "tlcapd")
OTHER = sys.argv[5] if len(sys.argv) > 5 else None


def pairs(lo, hi, t):
    out = []
    for a in range(lo, hi):
        out.append(struct.pack("<IIQq", a, ((a & 3) << 4) | 3, 0, t))
        out.append(struct.pack("<IIQq", a, (a & 3) << 4, 0, t + 50 + a % 97))
        t += 200
    return b"".join(out), t


def run(interval, binary=tlcapd):
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", build)) as d:
        pb, ps = D.free_port(), D.free_port()
        dm = D.Daemon(binary, d, ["--listen", "big=bin11@127.0.0.1:%d" % pb,
                                  "--listen", "small=bin11@127.0.0.1:%d" % ps,
                                  "--checkpoint-interval", interval,
                                  "--log-level", "debug", "--debug", "target"])
        t = 1000
        sb = D.connect(pb)
        for lo in range(0, AREAS, 20000):
            b, t = pairs(lo, min(AREAS, lo + 20000), t)
            sb.sendall(b)
        stop = threading.Event()
        state = {"t": t}

        def trickle():
            k = 0
            while not stop.is_set():
                lo = (k * 200) % AREAS
                b, state["t"] = pairs(lo, min(AREAS, lo + 200), state["t"])
                sb.sendall(b)
                k += 1
                time.sleep(0.01)
        th = threading.Thread(target=trickle)
        time.sleep(2.0)  # the big target's first load is decoded (and a first checkpoint)
        th.start()
        ss = D.connect(ps)
        chunk, _ = pairs(0, 20000, 1000)  # 960 KB of records on 20,000 areas
        chunk = chunk[:len(chunk) - len(chunk) % 24]
        sent = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < SECS:
            ss.sendall(chunk)
            sent += len(chunk)
        rate = sent / (time.monotonic() - t0) / 1e6
        stop.set()
        th.join()
        ss.close()
        sb.close()
        dm.kill()
        ck = [ln for ln in dm.log().splitlines() if "target big@127.0.0.1: checkpoint written" in ln]
        return rate, ck


pat = re.compile(r"\((\d+) bytes, ([\d.]+) ms; (\d+) loop slices, longest ([\d.]+) ms "
                 r"\(CPU ([\d.]+) ms\), target held ([\d.]+) ms\)")
rates = {"sliced": [], "other": [], "none": []}
sl, cpu, held, nsl, size, wr = [], [], [], [], [], []
modes = [("sliced", "1", tlcapd), ("none", "0", tlcapd)] + ([("other", "1", OTHER)] if OTHER else [])
for r in range(ROUNDS):
    for mode, interval, binary in modes:
        rate, ck = run(interval, binary)
        rates[mode].append(rate)
        if mode == "sliced":
            for ln in ck:
                m = pat.search(ln)
                if m:
                    size.append(int(m.group(1)))
                    wr.append(float(m.group(2)))
                    nsl.append(int(m.group(3)))
                    sl.append(float(m.group(4)))
                    cpu.append(float(m.group(5)))
                    held.append(float(m.group(6)))
        print("round %d %s: small target %.1f MB/s, %d checkpoints of big"
              % (r, mode, rate, len(ck)), flush=True)
base = statistics.median(rates["none"])
for mode, _, _ in modes:
    print("small target ingest, %s: median %.1f MB/s, ratio to no checkpoints %.3f"
          % (mode, statistics.median(rates[mode]), statistics.median(rates[mode]) / base))
if sl:
    print("big's checkpoints: %d, %.1f MB each; slices per checkpoint median %d; longest slice: "
          "wall max %.2f ms (median of the per-checkpoint maxima %.2f), loop CPU max %.3f ms "
          "(median %.3f); input held median %.0f ms (max %.0f); write median %.0f ms"
          % (len(sl), statistics.median(size) / 1e6, statistics.median(nsl), max(sl),
             statistics.median(sl), max(cpu), statistics.median(cpu), statistics.median(held),
             max(held), statistics.median(wr)))
