#!/usr/bin/python3
"""icount_fleet.py - where a NATS publishing tick's instructions go, by stage, counted by
valgrind's callgrind (not disturbed by other load on the machine).

    bench/icount_fleet.py BUILD_DIR [BUILD_DIR2 ...] [--mib M] [--interval MS] [--keep DIR]

BUILD_DIR holds daemon/tlcapd and bench/benchd_io. For each build: a real `nats-server -js`
on loopback, tlcapd under callgrind with `--no-store --nats ... --nats-interval MS` (default
200), 100 idle targets of 200 areas and one streamed target (benchd_io: 1,000 areas on 4 cores,
as bench_fleet.py), a 8 MiB warm-up stream, then the counters are zeroed (callgrind_control -z),
M MiB (default 16) are streamed and the counters dumped (callgrind_control -d). Under valgrind
the loop runs some 50 times slower, so a tick sees fewer changed rows than natively (where all
4,000 rows of the streamed target change every 200 ms) and ticks fall differently; the figures
are therefore given per published row (the rows of the hot target's deltas, counted by calls
of tlc_table_add, one per row the engine copies into a snapshot table): every stage of
publish_target is proportional to them. Inclusive instructions of: publish_target (everything),
the engine's split and part snapshot (its row sort, when it sorts), the protobuf message build,
protobuf-c's sizing and packing, and natsConnection_Publish. (First written on branch nats3.)
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchd as B  # noqa: E402
import bench_fleet as F  # noqa: E402

STAGES = ["publish_target", "pv_split", "pv_snapshot_part", "tlc_engine_snapshot_part",
          "tlc_engine_handle_split_since", "sort_rows", "tlc_pb_snapshot_build", "publish",
          "protobuf_c_message_get_packed_size", "protobuf_c_message_pack",
          "natsConnection_Publish"]


def run(build, a, d, out):
    ns, nport = B.start_nats(d)
    p = None
    try:
        port, serve = B.free_port(), B.free_port()
        logp = os.path.join(d, "log")
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                os.path.join(build, "daemon", "tlcapd"), "--listen",
                "bench=bin11@127.0.0.1:%d" % port, "--no-store", "--serve",
                "127.0.0.1:%d" % serve, "--state-dir", os.path.join(d, "state"), "--nats",
                "nats://127.0.0.1:%d" % nport, "--nats-subject", "tlcap.icount",
                "--nats-interval", str(a.interval)]
        with open(logp, "wb") as log:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

        def connected():
            with open(logp, "rb") as f:
                return b"publishing under" in f.read()
        B.wait_until(connected, 120, "tlcapd under callgrind connected to nats-server", 0.2)
        F.make_targets(port, 100)
        io = os.path.join(build, "bench", "benchd_io")
        subprocess.run([io, "send", "127.0.0.1:%d" % port, "--mib", "8", "--passes", "1"],
                       stdout=subprocess.DEVNULL, check=True)
        subprocess.run(["callgrind_control", "-z", str(p.pid)], stdout=subprocess.DEVNULL,
                       check=True)
        subprocess.run([io, "send", "127.0.0.1:%d" % port, "--mib", str(a.mib), "--passes", "1"],
                       stdout=subprocess.DEVNULL, check=True)
        time.sleep(2 * a.interval / 1000.0)  # the last rows' tick
        subprocess.run(["callgrind_control", "-d", str(p.pid)], stdout=subprocess.DEVNULL,
                       check=True)
        p.send_signal(signal.SIGTERM)
        p.wait(300)
    finally:
        if p is not None and p.poll() is None:
            p.kill()
        ns.kill()


def stages(path):
    txt = subprocess.run(["callgrind_annotate", "--tree=both", "--inclusive=yes", path],
                         capture_output=True, text=True).stdout

    def incl(fn):
        m = re.search(r"^\s*([0-9,]+) \([^)]*\)\s+\*\s+\S*?:%s \[" % re.escape(fn), txt, re.M)
        return int(m.group(1).replace(",", "")) if m else 0

    def calls(fn):
        return sum(int(m.group(1).replace(",", "")) for m in re.finditer(
            r"^\s*[0-9,]+ \([^)]*\)\s+>\s+\S*?:%s \(([0-9,]+)x\)" % re.escape(fn), txt, re.M))
    return dict((s, incl(s)) for s in STAGES), calls("tlc_table_add"), calls("tick_cb"), \
        calls("publish")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("builds", nargs="+")
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--interval", type=int, default=200)
    ap.add_argument("--keep", default=None, help="keep the callgrind files in this directory")
    a = ap.parse_args()
    if shutil.which("valgrind") is None or shutil.which("nats-server") is None:
        print("icount_fleet: valgrind or nats-server not installed; skipped")
        return 0
    res = []
    for i, build in enumerate(a.builds):
        d = B.tempdir("tlcicount-fleet.")
        try:
            out = os.path.join(a.keep or d, "fleet%d.cg" % i)
            run(build, a, d, out)
            res.append(stages(out + ".1"))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    for build, (st, rows, ticks, msgs) in zip(a.builds, res):
        print("%s: %d ticks, %d statistics messages, %d rows published" % (build, ticks, msgs,
                                                                            rows))
        for s in STAGES:
            if st[s]:
                print("  %-36s %14d instructions  %7.0f per row" % (s, st[s], st[s] / max(rows, 1)))
    if len(res) > 1:
        b0 = res[0][0]["publish_target"] / max(res[0][1], 1)
        for build, (st, rows, _, _) in zip(a.builds[1:], res[1:]):
            print("publish_target per row, %s / %s: %.3f" % (a.builds[0], build,
                                                              b0 / (st["publish_target"] /
                                                                    max(rows, 1))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
