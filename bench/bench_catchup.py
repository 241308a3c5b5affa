#!/usr/bin/env python3
"""bench_catchup.py - restart catch-up: how fast tlcapd brings a restored target forward over
its stored records, against `tlcapd replay` of the same segment files (same run, same bytes).

   bench_catchup.py BUILD_DIR [RECORDS]      (default 2,000,000 bin11 records, 48 MB)

Run 1 stores a few records and stops cleanly (a checkpoint at their end). Run 2 (checkpoints
every hour: none in between) stores RECORDS more and is killed with SIGKILL once they are on
disk. Run 3 restores the checkpoint and replays RECORDS stored records: its log line gives the
time. Baseline: `tlcapd replay` of run 2's segment files (decode + engine + a JSON export),
wall clock of the process. Ratio >= 0.9 is the issue's target."""
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integ"))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release")
nrec = int(sys.argv[2]) if len(sys.argv) > 2 else 2000000
tlcapd = os.path.join(build, "daemon", "tlcapd")
NAME = "l@127.0.0.1"


def records(n, t0):
    out = []
    t = t0
    for i in range(n // 2):
        h = i % 500
        out.append(T.bin11(h, 3, i & 3, 0, t))
        out.append(T.bin11(h, 0, i & 3, 0, t + 40))
        t += 100
    return b"".join(out)


with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", build)) as d:
    port = D.free_port()
    args = ["--listen", "l=bin11@127.0.0.1:%d" % port, "--checkpoint-interval", "3600",
            "--rotate-bytes", "16M"]
    dm = D.Daemon(tlcapd, d, args, store=True)
    s = D.connect(port)
    s.sendall(records(1000, 1000))
    s.shutdown(1)
    D.wait_eof(s)
    s.close()
    dm.stop()
    before = set(os.listdir(os.path.join(d, "state", NAME)))
    dm = D.Daemon(tlcapd, d, args, store=True)
    s = D.connect(port)
    chunk = records(200000, 10**9)
    for k in range(nrec // 200000):
        s.sendall(chunk)
    want = 1000 + (nrec // 200000) * 200000
    dm.wait_stats(lambda st: any(t["stats"]["counters"]["events"] == want
                                 for t in st["targets"]), timeout=120, what="ingest")
    time.sleep(1.0)  # the writer appends what is queued (the position is only what is on disk)
    dm.kill()
    s.close()
    import shutil
    state = os.path.join(d, "state")
    shutil.copytree(state, state + ".killed")
    cu, rp, starts = [], [], []
    replayed = 0
    for rnd in range(5):  # alternating rounds, medians (the host is shared and noisy)
        shutil.rmtree(state)
        shutil.copytree(state + ".killed", state)
        t0 = time.monotonic()
        dm = D.Daemon(tlcapd, d, args, store=True)
        starts.append(time.monotonic() - t0)
        m = re.search(r"(\d+) bytes of stored records replayed \(([\d.]+) ms\)", dm.log())
        dm.stop()
        if not m:
            sys.exit("no replay line in the log")
        replayed, ms = int(m.group(1)) // 24, float(m.group(2))
        cu.append(ms / 1e3)
        segs = sorted(os.path.join(state, NAME, f) for f in os.listdir(os.path.join(state, NAME))
                      if f.endswith(".txt.BIN") and f not in before)
        t0 = time.monotonic()
        subprocess.run([tlcapd, "replay"] + segs + ["--format", "bin11", "--export", "json",
                                                    "--output", os.devnull], check=True,
                       stderr=subprocess.DEVNULL)
        rp.append(time.monotonic() - t0)
    size = sum(os.path.getsize(p) for p in segs)
    med = lambda v: sorted(v)[len(v) // 2]
    rate = replayed * 24 / med(cu) / 1e6
    rrate = size / med(rp) / 1e6
    print("stored after the checkpoint: %d records, %.1f MB in %d segments" % (replayed,
                                                                             size / 1e6,
                                                                             len(segs)))
    print("restart catch-up (median of 5): %.0f ms (%.0f MB/s); start to READY %.2f s"
          % (med(cu) * 1e3, rate, med(starts)))
    print("tlcapd replay of the same files (median of 5): %.0f ms (%.0f MB/s)"
          % (med(rp) * 1e3, rrate))
    print("ratio catch-up / replay: %.2f (per round: %s)"
          % (rate / rrate, " ".join("%.2f" % (b / a) for a, b in zip(cu, rp))))
