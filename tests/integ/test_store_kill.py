#!/usr/bin/env python3
"""T01 (short): random SIGKILL of the real tlcapd during a steady bin11 capture.

Each iteration starts tlcapd on a fresh port with the same state directory, streams records
whose data field is a global running index, kills the daemon with SIGKILL at a random moment
(seeded), and restarts. At the end a clean SIGTERM. Must hold: startup never fails, no .part is
left after the final stop, every sealed segment verifies against its manifest (store_driver
verify), records are in order with no duplicates (a prefix of what was sent, losses only
in flight at a kill).

Usage: test_store_kill.py TLCAPD STORE_DRIVER [ITERATIONS]"""
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time


from tlctest import free_port


def start(tlcapd, state, port, log):
    p = subprocess.Popen([tlcapd, "--state-dir", state, "--listen", f"k=bin11@127.0.0.1:{port}",
                          "--serve", f"127.0.0.1:{free_port()}"], stderr=log, stdout=log)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise SystemExit(f"tlcapd exited at start with {p.returncode}")
        try:
            return p, socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.02)  # waiting for the listener: bounded by the deadline
    raise SystemExit("tlcapd did not accept within 10 s")


def rec(i):
    return struct.pack("<IIQq", 0x10, 3 if i % 2 == 0 else 0, i, i * 1000)


def main():
    tlcapd, drv = sys.argv[1], sys.argv[2]
    iters = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    rnd = random.Random(1234)
    base = tempfile.mkdtemp(prefix="tlckill.")
    state = os.path.join(base, "state")
    log = open(os.path.join(base, "log"), "w")
    sent = 0
    try:
        for it in range(iters):
            p, s = start(tlcapd, state, free_port(), log)
            n = rnd.randint(200, 20000)
            try:
                s.sendall(b"".join(rec(sent + k) for k in range(n)))
                sent += n
            except OSError:
                raise SystemExit("send failed before the kill")
            # the kill lands at a random instant of the capture (not a synchronisation)
            time.sleep(rnd.uniform(0, 0.03))
            p.send_signal(signal.SIGKILL)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
            s.close()
        p, s = start(tlcapd, state, free_port(), log)
        s.close()
        p.send_signal(signal.SIGTERM)
        if p.wait(timeout=10) != 0:
            raise SystemExit(f"tlcapd exit {p.returncode} after SIGTERM")
        tdir = os.path.join(state, "k@127.0.0.1")
        out = subprocess.run([drv, state, "verify", "k@127.0.0.1"], capture_output=True,
                             text=True, timeout=60)
        if out.returncode != 0:
            raise SystemExit("verify failed:\n" + out.stdout)
        segs = []
        for line in out.stdout.splitlines():
            w = line.split()
            if w[0] == "seg":
                segs.append(tuple(int(x) for x in w[1:]))
            elif w[0] == "parts" and w[1] != "0":
                raise SystemExit(".part left after a clean stop")
        segs.sort()
        last = -1
        total = 0
        for seq, cnt, first, lst, contiguous in segs:
            if cnt == 0:
                continue
            if not contiguous or first <= last:
                raise SystemExit(f"segment {seq}: records out of order or duplicated")
            last = lst
            total += cnt
        if total > sent:
            raise SystemExit(f"{total} records stored, only {sent} sent")
        print(f"ok: {iters} kills, {sent} records sent, {total} stored in {len(segs)} segments "
              f"({os.path.isdir(tdir)})")
    finally:
        log.close()
        if not os.environ.get("TLC_TEST_KEEP"):
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
