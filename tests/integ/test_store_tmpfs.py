#!/usr/bin/env python3
"""T07 on a real file system: a 2 MiB tmpfs (needs root and `mount -t tmpfs`; SKIP otherwise).

store_driver writes until the store reports ENOSPC, removes a filler file, and must see
writing resume by itself; sent == written + dropped{disk_full}. Then every sealed segment on
the tmpfs verifies (whole records, checksums) and no .part is left.

Usage: test_store_tmpfs.py STORE_DRIVER"""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def main():
    drv = sys.argv[1]
    if os.geteuid() != 0:
        print("SKIP: not root (mount -t tmpfs needs it)")
        sys.exit(SKIP)
    mnt = tempfile.mkdtemp(prefix="tlctmpfs.")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"SKIP: mount -t tmpfs failed: {r.stderr.strip()}")
        os.rmdir(mnt)
        sys.exit(SKIP)
    try:
        filler = os.path.join(mnt, "filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * (1024 * 1024))
        state = os.path.join(mnt, "state")
        p = subprocess.run([drv, state, "diskfull", filler], capture_output=True, text=True,
                           timeout=120)
        print(p.stdout.strip())
        if p.returncode != 0:
            raise SystemExit("diskfull run failed:\n" + p.stderr[-3000:])
        v = subprocess.run([drv, state, "verify", "df"], capture_output=True, text=True,
                           timeout=60)
        if v.returncode != 0 or "parts 0" not in v.stdout:
            raise SystemExit("verify after disk full failed:\n" + v.stdout)
        lines = [l for l in p.stderr.splitlines() if "DISK FULL" in l]
        if not 1 <= len(lines) <= 3:
            raise SystemExit(f"expected one rate-limited DISK FULL line, got {len(lines)}")
        print("ok")
    finally:
        subprocess.run(["umount", mnt])
        shutil.rmtree(mnt, ignore_errors=True)


if __name__ == "__main__":
    main()
