#!/usr/bin/python3
"""The shipped systemd units (RELIABILITY T37, CI part): `systemd-analyze verify` on both units
and the hardening gate `systemd-analyze security --offline=yes --threshold=20` (exposure <= 2.0).
Skips (exit 77, printing SKIP) when systemd-analyze is not installed.

Usage: test_systemd_units.py SYSTEMD_DIR TLCAPD MAN_DIR...
(MAN_DIR: folders of the man pages as installed: dist/man in the source for tlcap.1, the build's
dist/man for the pages generated from the settings table)"""
import os
import shutil
import subprocess
import sys
import tempfile

UNITS, TLCAPD, MANDIRS = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:]
SA = shutil.which("systemd-analyze")
if SA is None:
    print("SKIP: systemd-analyze not installed (apt-get install systemd)")
    sys.exit(77)

failed = 0
with tempfile.TemporaryDirectory() as d:
    # verify checks that ExecStart= exists: point it at the binary under test.
    with open(os.path.join(UNITS, "tlcapd.service")) as f:
        svc = f.read().replace("/usr/bin/tlcapd", TLCAPD)
    with open(os.path.join(d, "tlcapd.service"), "w") as f:
        f.write(svc)
    shutil.copy(os.path.join(UNITS, "tlcapd.socket"), d)
    # verify runs `man` for each Documentation=man:...: the pages of dist/man, in a man tree
    for man in MANDIRS:
        for page in os.listdir(man):
            if page.endswith(".in"):
                continue  # a template: its page is in the build's folder
            sec = os.path.join(d, "man", "man" + page.rsplit(".", 1)[1])
            os.makedirs(sec, exist_ok=True)
            shutil.copy(os.path.join(man, page), sec)
    p = subprocess.run([SA, "verify", "tlcapd.service", "tlcapd.socket"], cwd=d,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                       env=dict(os.environ, MANPATH=os.path.join(d, "man")))
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0 or out.strip():
        print("FAIL systemd-analyze verify (status %d):\n%s" % (p.returncode, out))
        failed += 1
    else:
        print("PASS systemd-analyze verify")
p = subprocess.run([SA, "security", "--offline=yes", "--threshold=20",
                    os.path.join(UNITS, "tlcapd.service")],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
out = p.stdout.decode(errors="replace")
last = [l for l in out.splitlines() if "Overall exposure" in l]
if p.returncode != 0:
    print("FAIL systemd-analyze security gate (status %d): %s\n%s"
          % (p.returncode, last, out[-3000:]))
    failed += 1
else:
    print("PASS security gate:", last[0].strip() if last else "")
print("%d failed" % failed)
sys.exit(1 if failed else 0)
