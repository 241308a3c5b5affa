#!/usr/bin/env python3
"""T02: deterministic crash points in seal, rotate, retention and recovery.

For each named point, a driver run (tests/integ/store_driver.c) writes bin11 records through
the storage module with tiny rotation sizes and count retention, and kills itself (SIGKILL) at
the point (first hit, then the second hit). The next start must recover: no .part left, every
sealed segment verifies against its manifest, records in segments are contiguous and never
duplicated, and a second recovery changes nothing (idempotent). A crash in the middle of
recovery (startup.recovery_mid_truncate) is recovered the same way again.

Usage: test_store_crash.py STORE_DRIVER"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

POINTS = [
    "seal.before_trailer", "seal.after_manifest_write", "seal.after_fdatasync",
    "rotate.after_rename", "rotate.before_dir_fsync", "rotate.after_open_new",
    "retention.after_unlink_before_manifest",
]


def run(drv, args, point=None, expect_kill=False):
    env = dict(os.environ)
    env.pop("TLCAP_CRASHPOINT", None)
    if point:
        env["TLCAP_CRASHPOINT"] = point
    p = subprocess.run([drv] + args, env=env, capture_output=True, text=True, timeout=60)
    if expect_kill:
        if p.returncode != -signal.SIGKILL:
            raise SystemExit(f"{point}: expected SIGKILL, got {p.returncode}\n{p.stderr}")
    elif p.returncode != 0:
        raise SystemExit(f"{args} ({point}): exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def listing(d):
    out = []
    for root, _, files in os.walk(d):
        for f in files:
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                out.append((os.path.relpath(path, d), fh.read()))
    return sorted(out)


def check(drv, d, target, label):
    out = run(drv, [d, "verify", target])
    segs = []
    for line in out.splitlines():
        w = line.split()
        if w[0] == "seg":
            segs.append(tuple(int(x) for x in w[1:]))
        elif w[0] == "parts" and w[1] != "0":
            raise SystemExit(f"{label}: .part files left after recovery")
        elif w[0] == "bad":
            raise SystemExit(f"{label}: {line}")
    segs.sort()
    seen = set()
    prev_last = -1
    for seq, n, first, last, contiguous in segs:
        if n and not contiguous:
            raise SystemExit(f"{label}: segment {seq} not contiguous")
        if n:
            if first <= prev_last:
                raise SystemExit(f"{label}: records duplicated or out of order at seq {seq}")
            prev_last = last
        if seq in seen:
            raise SystemExit(f"{label}: sequence {seq} reused")
        seen.add(seq)
    return segs


def main():
    drv = sys.argv[1]
    base = tempfile.mkdtemp(prefix="tlcrash.")
    try:
        for point in POINTS:
            for nth in (1, 2):
                d = os.path.join(base, f"{point}.{nth}")
                spec = f"{point}:{nth}"
                run(drv, [d, "write", "t", "400", str(24 * 30), "3"], spec, expect_kill=True)
                run(drv, [d, "recover"])
                check(drv, d, "t", spec)
                before = listing(d)
                run(drv, [d, "recover"])
                if listing(d) != before:
                    raise SystemExit(f"{spec}: second recovery changed the state directory")
                # capture goes on after the restart, with new sequences
                run(drv, [d, "write", "t", "50", str(24 * 30), "0", "1000000"])
                check(drv, d, "t", spec + " (after)")
        # crash in the middle of recovery, then recover again
        for nth in (1, 2):
            d = os.path.join(base, f"recovery.{nth}")
            run(drv, [d, "tear", "t", "20", str(24 * 17 + 5)])
            run(drv, [d, "recover"], f"startup.recovery_mid_truncate:{nth}",
                expect_kill=(nth == 1))
            run(drv, [d, "recover"])
            segs = check(drv, d, "t", "recovery")
            if [s[1] for s in segs] != [17]:
                raise SystemExit(f"recovery: expected one segment of 17 records, got {segs}")
            torn = os.path.join(d, "t", "20260101T000000Z-00000001.txt.BIN.torn")
            if os.path.getsize(torn) != 5:
                raise SystemExit("recovery: torn tail not kept aside")
        print(f"ok: {len(POINTS)} crash points x 2 hits, recovery crash")
    finally:
        if not os.environ.get("TLC_TEST_KEEP"):
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
