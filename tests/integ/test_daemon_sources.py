#!/usr/bin/python3
"""tlcapd dial and serial sources end to end (RELIABILITY T23, T24, T25): a probe that goes away
and comes back; a pty as a serial line: byte transparency, noise and resync, unplug and replug.

Usage: test_daemon_sources.py TLCAPD"""
import os
import random
import socket
import sys
import termios
import time

import daemonlib as D
import tlctest as T

TLCAPD = sys.argv[1]


def listen_probe(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(4)
    s.settimeout(10)
    return s


def test_dial_reconnects(d):
    port = D.free_port()
    probe = listen_probe(port)
    dm = D.Daemon(TLCAPD, d, ["--dial", "probe=bin11@127.0.0.1:%d" % port,
                              "--backoff-min", "50ms", "--backoff-max", "400ms"])
    try:
        t = dm.target("probe")  # exists before any connection
        c, _ = probe.accept()
        c.sendall(D.calls(50))
        dm.wait_stats(lambda s: D.by_name(s, "probe")["records"] == 100, what="first stream")
        c.close()  # the probe drops the connection
        c, _ = probe.accept()  # the daemon dials again
        c.sendall(D.calls(25, t0=10 ** 7))
        dm.wait_stats(lambda s: D.by_name(s, "probe")["records"] == 150, what="second stream")
        # The probe disappears completely (port closed), then comes back.
        c.close()
        probe.close()
        dm.wait_stats(lambda s: D.by_name(s, "probe")["connected"] == 0 and
                      s["daemon"]["dial_failures"] >= 2, what="dial failures while absent")
        probe = listen_probe(port)
        c, _ = probe.accept()
        c.sendall(D.calls(5, t0=10 ** 8))
        st = dm.wait_stats(lambda s: D.by_name(s, "probe")["records"] == 160, what="third")
        t = D.by_name(st, "probe")
        T.eq((t["connections"], t["reconnects"], t["gaps"]), (3, 2, 2), "dial counters")
        T.check(t["last_disconnect_unix_ms"] <= t["last_connect_unix_ms"], "gap times")
        T.eq(len(t["gap_log"]), 2, "gap log entries")
        T.check(all(0 < a <= b for a, b in t["gap_log"]), "each gap closed: %r" % t["gap_log"])
        T.eq(t["engine_gaps"], 2, "engine gaps")
        c.close()
    finally:
        probe.close()
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_dial_reload(d):
    """SIGHUP re-points a dial source (same target, statistics kept) and then removes it."""
    import signal
    pa, pb = D.free_port(), D.free_port()
    a, b = listen_probe(pa), listen_probe(pb)
    conf = os.path.join(d, "t.ini")

    def write(text):
        with open(conf + ".tmp", "w") as f:
            f.write(text)
        os.replace(conf + ".tmp", conf)
    write("[daemon]\nbackoff_min = 50ms\nbackoff_max = 200ms\n"
          "[dial p]\nformat = bin11\naddress = 127.0.0.1:%d\n" % pa)
    dm = D.Daemon(TLCAPD, d, ["--config", conf])
    try:
        ca, _ = a.accept()
        ca.sendall(D.calls(5))
        dm.wait_stats(lambda s: D.by_name(s, "p")["records"] == 10, what="from a")
        write("[daemon]\nbackoff_min = 50ms\nbackoff_max = 200ms\n"
              "[dial p]\nformat = bin11\naddress = 127.0.0.1:%d\n" % pb)
        n0 = len(dm.notify.msgs)
        dm.p.send_signal(signal.SIGHUP)
        dm.notify.wait_for("READY=1", after=n0)
        D.wait_eof(ca)  # the old connection is closed ...
        cb, _ = b.accept()  # ... and the new address dialled
        cb.sendall(D.calls(5, t0=10 ** 6))
        st = dm.wait_stats(lambda s: D.by_name(s, "p")["records"] == 20, what="from b")
        T.eq(D.by_name(st, "p")["connections"], 2, "same target")
        write("[daemon]\n")
        n0 = len(dm.notify.msgs)
        dm.p.send_signal(signal.SIGHUP)
        dm.notify.wait_for("READY=1", after=n0)
        D.wait_eof(cb)
        st = dm.wait_stats(lambda s: D.by_name(s, "p")["connected"] == 0, what="removed")
        T.eq(D.by_name(st, "p")["records"], 20, "statistics kept after removal")
        ca.close()
        cb.close()
    finally:
        a.close()
        b.close()
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_serial_transparency_noise_unplug(d):
    link = os.path.join(d, "ttyLAB0")
    m = D.make_pty(link)
    dm = D.Daemon(TLCAPD, d, ["--serial", "lab=bin11@%s:115200" % link,
                              "--backoff-min", "50ms", "--backoff-max", "300ms"])
    try:
        dm.wait_stats(lambda s: D.by_name(s, "lab")["connected"] == 1, what="serial open")
        # All 256 byte values, in random order, in the data fields of W records on 32 data
        # areas: the last VALUE of each area must come back bit for bit.
        vals = list(range(256))
        random.Random(7).shuffle(vals)
        recs, want = [], {}
        for i in range(32):
            v = int.from_bytes(bytes(vals[8 * i:8 * i + 8]), "little")
            h = 0x20000000 + i
            recs.append(T.bin11(h, 4, 0, v, 1000 + i))
            want["%08X" % h] = v
        # Resync mode delivers records once what follows confirms them (at a stream start the
        # decoder may look up to a 64-record window ahead): plenty more follow.
        lead, tail = D.calls(30, t0=0), D.calls(60, t0=2000)
        D.pty_write_all(m, lead + b"".join(recs) + tail)
        st = dm.wait_stats(lambda s: D.by_name(s, "lab")["records"] >= 92, what="32 records")
        t = D.by_name(st, "lab")
        T.eq((t["bytes_skipped"], t["resyncs"], t["bytes"]), (0, 0, 212 * 24), "no mangling")
        got = {r["handle"]: r.get("value") for r in t["stats"]["rows"]}
        for h, v in want.items():
            T.eq(int(str(got.get(h)), 0) if isinstance(got.get(h), str) else got.get(h), v,
                 "value of data area %s" % h)
        # Noise between valid frames: skipped, counted, resynchronised.
        rng = random.Random(11)
        noise = bytes(rng.randrange(256) for _ in range(101)) + b"\xff" * 40 + b"\x00" * 37
        before = D.by_name(dm.stats(), "lab")["records"]
        good = D.calls(100, t0=10 ** 6)  # 200 records
        D.pty_write_all(m, noise + good)
        st = dm.wait_stats(lambda s: D.by_name(s, "lab")["records"] >= before + 100,
                           what="records after noise")
        t = D.by_name(st, "lab")
        T.check(t["resyncs"] >= 1 and t["bytes_skipped"] >= 100,
                "noise counted: resyncs=%d skipped=%d" % (t["resyncs"], t["bytes_skipped"]))
        # Unplug: close the master. Replug: a new pty behind the same symlink.
        os.close(m)
        dm.wait_stats(lambda s: D.by_name(s, "lab")["connected"] == 0, what="unplug seen")
        cpu0, t0 = dm.cpu_seconds(), time.monotonic()
        time.sleep(1.0)  # measuring CPU while the device is absent (not synchronisation)
        cpu = (dm.cpu_seconds() - cpu0) / (time.monotonic() - t0)
        T.check(cpu < 0.05, "CPU while the device is absent: %.1f%%" % (100 * cpu))
        m = D.make_pty(link)
        dm.wait_stats(lambda s: D.by_name(s, "lab")["connected"] == 1, what="replug")
        before = D.by_name(dm.stats(), "lab")["records"]
        D.pty_write_all(m, D.calls(100, t0=10 ** 9))
        st = dm.wait_stats(lambda s: D.by_name(s, "lab")["records"] >= before + 100,
                           what="records after replug")
        t = D.by_name(st, "lab")
        T.eq((t["reconnects"], t["gaps"]), (1, 1), "reconnect counters")
        T.check(st["daemon"]["serial_unplugs"] == 1, "unplug counted")
    finally:
        rc, _ = dm.stop()
        try:
            os.close(m)
        except OSError:
            pass
    T.eq(rc, 0, "exit status")


def test_serial_exclusive(d):
    """Another process holds the tty (flock): reported, retried, taken once released."""
    import fcntl
    link = os.path.join(d, "ttyLAB1")
    m = D.make_pty(link)
    holder = os.open(link, os.O_RDWR | os.O_NOCTTY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--serial", "lab=bin11@%s" % link, "--listen",
                              "x=bin11@127.0.0.1:%d" % port, "--backoff-min", "50ms",
                              "--backoff-max", "200ms"])
    try:
        dm.wait_stats(lambda s: s["daemon"]["serial_failures"] >= 2, what="open refused")
        T.check("locked by another process" in dm.log(), "reported")
        T.eq(dm.log().count("locked by another process"), 1, "reported once, retried quietly")
        c = D.connect(port)  # the other sources are unaffected
        c.sendall(D.calls(2))
        dm.wait_stats(lambda s: D.by_name(s, "x@127.0.0.1")["records"] == 4, what="tcp ok")
        c.close()
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
        dm.wait_stats(lambda s: D.by_name(s, "lab")["connected"] == 1, what="opened after release")
    finally:
        rc, _ = dm.stop()
        os.close(m)
    T.eq(rc, 0, "exit status")


T.main([test_dial_reconnects, test_dial_reload, test_serial_transparency_noise_unplug, test_serial_exclusive])
