#!/usr/bin/python3
"""Storage backpressure: a TCP target whose share of the storage queue is full is no
longer read until the writer drains it, so that the kernel's TCP window holds the sender back
instead of the daemon dropping records; other targets go on.

tlcapd runs with a slow disk (test hook TLCAP_TEST_DISK_BPS, tlcapd-test, the TLCAP_TESTING build: every write
of the storage threads takes len / BPS seconds) and a small storage queue (1 MiB). A sender at
full loopback speed pushes a stream many times the queue; meanwhile a second target sends a
small stream. Must hold: every record sent is in the segments (their concatenation is the
bytes sent, byte for byte), no manifest has a `buffer_full` gap, the store dropped nothing,
the fast target was held at least once, and the small target was answered and stored too.

Usage: test_store_backpressure.py TLCAPD"""
import os
import re
import socket
import sys
import threading

import daemonlib as D
import tlctest as T

TLCAPD = sys.argv[1]
SEG_RE = re.compile(r"^(\d{8}T\d{6}Z)-(\d+)\.txt\.BIN$")


def concat(tdir):
    segs = sorted((int(m.group(2)), f) for f in os.listdir(tdir) for m in [SEG_RE.match(f)] if m)
    b = b""
    for _, f in segs:
        with open(os.path.join(tdir, f), "rb") as fh:
            b += fh.read()
    return b, [f for _, f in segs]


def gaps(tdir, names):
    out = []
    for f in names:
        with open(os.path.join(tdir, f[:-len(".txt.BIN")] + ".manifest")) as fh:
            out += [line.split()[1] for line in fh if line.startswith("gap ")]
    return out


def send(port, name, data, chunk, result):
    s = D.connect(port)
    s.sendall(b"TLCAP/1 target=%s format=bin11\n" % name.encode())
    for i in range(0, len(data), chunk):
        s.sendall(data[i:i + chunk])
    s.shutdown(socket.SHUT_WR)
    result[name] = D.wait_eof(s, timeout=120)
    s.close()


def test_tcp_held_not_dropped(d):
    port = D.free_port()
    # The writer's disk, throttled well below what even a sanitizer build on a loaded machine
    # ingests (seen: 4.6 MB/s under ASan with other builds running), so that the queue fills
    # and the fast target is held: at 8 MiB/s such a run never filled it.
    disk_bps = 2 << 20  # 2 MiB/s: the 14.4 MB take about 7 s to write
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--store-queue", "1M",
                              "--max-block", "64k", "--rotate-bytes", "4M"], store=True,
                  env={"TLCAP_TEST_DISK_BPS": str(disk_bps)})
    big = D.calls(300000, t0=1000, step=100, handle=0x00000010)      # 600,000 records, 14.4 MB
    small = D.calls(2000, t0=5000, step=50, handle=0x00000020, core=1)  # 4,000 records
    res = {}
    try:
        tb = threading.Thread(target=send, args=(port, "fast", big, 1 << 16, res))
        tb.start()
        # the small target starts once the fast one is held (its share of the queue is full)
        dm.wait_stats(lambda st: any(t["name"] == "fast" and t["store_holds"] > 0
                                     for t in st["targets"]), timeout=60,
                      what="the fast target held")
        send(port, "slow", small, 7000, res)
        tb.join(120)
        T.check(not tb.is_alive(), "the fast sender finished")
        st = dm.stats()
        fast, slow = D.by_name(st, "fast"), D.by_name(st, "slow")
        T.eq(fast["records"], len(big) // 24, "fast: every record decoded")
        T.eq(slow["records"], len(small) // 24, "slow: every record decoded")
        T.check(fast["store_holds"] >= 1, "fast: held (%d times)" % fast["store_holds"])
        T.eq(fast["store_held"], 0, "fast: released once the writer drained")
    finally:
        rc, _ = dm.stop(timeout=120)
    T.eq(rc, 0, "exit status; log:\n" + dm.log()[-2000:])
    T.eq(res, {"fast": True, "slow": True}, "both half-closes answered")
    for name, data in (("fast", big), ("slow", small)):
        tdir = os.path.join(dm.state, name)
        got, names = concat(tdir)
        T.eq(len(got), len(data), name + ": bytes stored == bytes sent")
        T.check(got == data, name + ": the segments hold exactly the stream sent")
        T.eq([g for g in gaps(tdir, names) if g in ("buffer_full", "disk_full", "io_error")], [],
             name + ": no drop recorded in the manifests")


T.main([test_tcp_held_not_dropped])
