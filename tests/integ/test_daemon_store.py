#!/usr/bin/python3
"""tlcapd with storage and the subscriber server on, end to end (SPEC 1, 3, 5; RELIABILITY R1,
R8, T12, T15a, T34): what reaches the disk is exactly what was sent, every segment's main
export agrees with a replay of the segment, live statistics agree with a replay of the same
bytes, rotation on SIGHUP / `tlcap rotate` / reconnect loses and duplicates nothing, a
SIGHUP with tighter retention applies, a half-closed target is answered only once its bytes
are written, and a slow recovery keeps extending systemd's start timeout.

Usage: test_daemon_store.py TLCAPD TLCAP"""
import json
import os
import xml.etree.ElementTree as ET
import random
import re
import signal
import socket
import struct
import sys

import daemonlib as D
import tlctest as T

TLCAPD = sys.argv[1]
TLCAP = sys.argv[2]

SEG_RE = re.compile(r"^(\d{8}T\d{6}Z)-(\d+)\.(txt\.BIN|xml\.BIN|log)$")
XSD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "formats",
                   "ProfilerExport.xsd")


# ---- stream generators (from SPEC 1, not from the C code) ----

def gen_bin11(n, seed, cores=3):
    """A random, valid bin11 stream: nested calls with S/R on several cores, data and state
    writes, non-decreasing times."""
    rnd = random.Random(seed)
    t = 1000
    stacks = {c: [] for c in range(cores)}
    out = []
    for _ in range(n):
        t += rnd.randint(0, 400)
        c = rnd.randrange(cores)
        st = stacks[c]
        r = rnd.random()
        if r < 0.08:
            out.append(T.bin11(0x20000000 + rnd.randrange(3), 4, c, rnd.getrandbits(64), t))
        elif r < 0.13:
            out.append(T.bin11(0x30000000, 4, c, rnd.randrange(4), t))
        elif r < 0.45 or not st:
            if len(st) >= 6:
                h, _ = st.pop()
                out.append(T.bin11(h, 0, c, 0, t))
            else:
                h = rnd.randrange(5) | (0x10000000 if rnd.random() < 0.2 else 0)
                st.append([h, True])
                out.append(T.bin11(h, 3, c, 0, t))
        elif r < 0.6:
            top = st[-1]
            out.append(T.bin11(top[0], 1 if top[1] else 2, c, 0, t))
            top[1] = not top[1]
        else:
            h, _ = st.pop()
            out.append(T.bin11(h, 0, c, 0, t))
    return b"".join(out)


def gen_bin10(n, seed):
    rnd = random.Random(seed)
    t, out, depth = 500, [], 0
    for _ in range(n):
        t += rnd.randint(1, 300)
        if depth == 0 or (depth < 4 and rnd.random() < 0.5):
            out.append(T.bin10(rnd.randrange(3), 3, 0, t))
            depth += 1
        else:
            out.append(T.bin10(0, 0, 0, t))
            depth -= 1
    return b"".join(out)


def gen_evlog(nblocks, seed, threads=3):
    """Blocks of +name/-name pairs (per thread, nested), >state/<state and !data items; each
    thread's times increase, threads interleave."""
    rnd = random.Random(seed)
    t = {k: 1.0 + k * 0.001 for k in range(threads)}
    stacks = {k: [] for k in range(threads)}
    blocks = []
    for _ in range(nblocks):
        items = []
        for _ in range(rnd.randint(1, 12)):
            k = rnd.randrange(threads)
            t[k] += rnd.randint(1, 50000) * 1e-9
            st = stacks[k]
            r = rnd.random()
            if r < 0.1:
                items.append(T.evlog_item(t[k], 0x100 + k, "!data%d" % rnd.randrange(2)))
            elif r < 0.15:
                items.append(T.evlog_item(t[k], 0x100 + k, ">busy"))
            elif r < 0.2:
                items.append(T.evlog_item(t[k], 0x100 + k, "<busy"))
            elif r < 0.6 or not st:
                if len(st) < 5:
                    nm = "f%d" % rnd.randrange(4)
                    st.append(nm)
                    items.append(T.evlog_item(t[k], 0x100 + k, "+" + nm))
            else:
                items.append(T.evlog_item(t[k], 0x100 + k, "-" + st.pop()))
        if items:
            blocks.append(T.evlog_block(items))
    return blocks


# ---- state directory helpers ----

def segments(tdir):
    """[(seq, data file name)] of the sealed data files, by sequence."""
    out = []
    for f in os.listdir(tdir):
        m = SEG_RE.match(f)
        if m:
            out.append((int(m.group(2)), f))
    return sorted(out)


def parts(state):
    return [os.path.join(r, f) for r, _, fs in os.walk(state) for f in fs if f.endswith(".part")]


def concat(tdir):
    b = b""
    for _, f in segments(tdir):
        with open(os.path.join(tdir, f), "rb") as fh:
            b += fh.read()
    return b


def manifest(tdir, data):
    base = data[:-len(".txt.BIN")] if data.endswith(".BIN") else data[:-len(".log")]
    m = {}
    with open(os.path.join(tdir, base + ".manifest")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition(" ")
            m.setdefault(k, v)
    return m


def send_named(port, name, fmt, data, chunk=7000):
    """Connects, names the target with a preamble, sends data in chunks, half-closes and waits
    for the daemon to close (it does once every byte is written: SPEC 1)."""
    s = D.connect(port)
    s.sendall(b"TLCAP/1 target=%s format=%s\n" % (name.encode(), fmt.encode()))
    for i in range(0, len(data), chunk):
        s.sendall(data[i:i + chunk])
    s.shutdown(socket.SHUT_WR)
    D.wait_eof(s)
    s.close()


def write_conf(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def replay_json(path, fmt):
    return D.replay_json(TLCAPD, path, fmt)


def live_json(sport, target):
    return D.live_json(TLCAP, sport, target)


compare_stats = D.compare_stats


# ---- tests ----

def test_bytes_on_disk(d):
    """Several targets at once with tiny rotation sizes: after SIGTERM every segment is sealed,
    each target's segments concatenate to exactly the bytes sent, every bin1x segment has its
    main export, and each export equals a replay of its segment (Text1 without TIMELINE)."""
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port,
                              "--rotate-bytes", "2k", "--index-interval", "16"], store=True)
    sent = {
        "t11": ("bin11", gen_bin11(3000, 1)),
        "t10": ("bin10", gen_bin10(2000, 2)),
        "tev": ("evlog", b"".join(gen_evlog(300, 3))),
    }
    socks = {}
    try:
        # interleaved: the three targets stream at the same time
        for name, (fmt, _) in sent.items():
            s = D.connect(port)
            s.sendall(b"TLCAP/1 target=%s format=%s\n" % (name.encode(), fmt.encode()))
            socks[name] = s
        pos = {n: 0 for n in sent}
        while any(pos[n] < len(sent[n][1]) for n in sent):
            for n, (_, data) in sent.items():
                if pos[n] < len(data):
                    socks[n].sendall(data[pos[n]:pos[n] + 1500])
                    pos[n] += 1500
        for s in socks.values():
            s.shutdown(socket.SHUT_WR)
        for s in socks.values():
            D.wait_eof(s)
            s.close()
    finally:
        rc, st = dm.stop()
    T.eq(rc, 0, "exit status; log:\n" + dm.log()[-2000:])
    T.eq(parts(dm.state), [], "no .part left after SIGTERM")
    for name, (fmt, data) in sent.items():
        tdir = os.path.join(dm.state, name)
        segs = segments(tdir)
        T.check(len(segs) >= 5, "%s: several segments (%d)" % (name, len(segs)))
        got = concat(tdir)
        T.eq(len(got), len(data), name + " bytes on disk")
        T.check(got == data, name + ": segments concatenate to the bytes sent")
        T.eq(D.by_name(st, name)["records"] if fmt != "evlog" else 0,
             len(data) // 24 if fmt != "evlog" else 0, name + " records")
        for seq, f in segs:
            size = os.path.getsize(os.path.join(tdir, f))
            m = manifest(tdir, f)
            T.eq(int(m["bytes"]), size, "%s/%s manifest bytes" % (name, f))
            if fmt == "evlog":
                T.check(f.endswith(".log"), "evlog segment name " + f)
                continue
            T.check(size <= 2048, "%s/%s within rotate_bytes (%d)" % (name, f, size))
            txt = os.path.join(tdir, f[:-len(".BIN")])
            T.check(os.path.exists(txt), "%s: main export %s beside %s" % (name, txt, f))
            rc, out, err = T.run([TLCAPD, "replay", os.path.join(tdir, f), "--format", fmt,
                                  "--export", "text1"])
            T.eq(rc, 0, "replay " + f + ": " + err)
            with open(txt, "rb") as fh:
                exp = fh.read().decode()
            rep = out.decode().split("* TIMELINE")[0]
            T.check("* STATISTICS(" in exp, "export has STATISTICS sections")
            T.eq(exp.rstrip("\n"), rep.rstrip("\n"),
                 "%s: export of segment %d equals its replay (INFO .. STATISTICS)" % (name, seq))


def test_live_equals_replay(d):
    """`tlcap stats` of a live capture equals `tlcapd replay` of the same bytes in
    every row, for a random bin11 stream (nested calls, S/R, several cores, writes) and an
    evlog stream."""
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port], store=True,
                  serve="127.0.0.1:%d" % sport)
    try:
        for name, fmt, data in (("live11", "bin11", gen_bin11(20000, 11)),
                                ("liveev", "evlog", b"".join(gen_evlog(400, 12)))):
            path = os.path.join(d, name + ".bin")
            with open(path, "wb") as f:
                f.write(data)
            rep = replay_json(path, fmt)
            s = D.connect(port)
            s.sendall(b"TLCAP/1 target=%s format=%s\n" % (name.encode(), fmt.encode()))
            s.sendall(data)
            # compared while still connected: a disconnect would add an engine gap
            dm.wait_stats(lambda st: any(t["name"] == name and t["events"] ==
                                         rep["counters"]["events"] for t in st["targets"]),
                          what=name + " events processed")
            live = live_json(sport, name)
            compare_stats(live, rep, name)
            s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_rotation(d):
    """SIGHUP, `tlcap rotate` and a reconnect each seal the open segment; the next record
    opens a new one; nothing is lost or duplicated across the cuts (SPEC 3, T12)."""
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port], store=True,
                  serve="127.0.0.1:%d" % sport)
    name = "rot"
    tdir = os.path.join(dm.state, name)
    batches = [D.calls(10 + 5 * k, t0=10 ** 6 * (k + 1)) for k in range(4)]
    sent_records = 0

    def sealed(n):
        return lambda: len(segments(tdir)) >= n if os.path.isdir(tdir) else False
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=%s format=bin11\n" % name.encode())

        def push(sock, b):
            nonlocal sent_records
            sock.sendall(b)
            sent_records += len(b) // 24
            dm.wait_stats(lambda st: D.by_name(st, name)["records"] == sent_records,
                          what="records processed")
        push(s, batches[0])
        n0 = len(dm.notify.msgs)
        dm.p.send_signal(signal.SIGHUP)
        i = dm.notify.wait_for("RELOADING=1", after=n0)
        dm.notify.wait_for("READY=1", after=i)
        D.wait_until(sealed(1), 10, "segment sealed by SIGHUP")
        push(s, batches[1])
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "rotate", name],
                             timeout=30)
        T.eq(rc, 0, "tlcap rotate: " + err)
        D.wait_until(sealed(2), 10, "segment sealed by tlcap rotate")
        push(s, batches[2])
        s.shutdown(socket.SHUT_WR)
        D.wait_eof(s)
        s.close()
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=%s format=bin11\n" % name.encode())
        push(s, batches[3])
        D.wait_until(sealed(3), 10, "segment sealed by the reconnect")
        s.close()
    finally:
        rc, st = dm.stop()
    T.eq(rc, 0, "exit status")
    T.eq(D.by_name(st, name)["connections"], 2, "one reconnect")
    segs = segments(tdir)
    T.eq(len(segs), 4, "four segments: %r" % segs)
    reasons = [manifest(tdir, f)["reason"] for _, f in segs]
    T.eq(reasons, ["sighup", "command", "reconnect", "shutdown"], "seal reasons")
    for (_, f), b in zip(segs, batches):
        with open(os.path.join(tdir, f), "rb") as fh:
            T.check(fh.read() == b, "segment %s holds exactly its batch" % f)
    T.check(concat(tdir) == b"".join(batches), "nothing lost or duplicated across the cuts")
    m3 = open(os.path.join(tdir, segs[2][1][:-8] + ".manifest")).read()
    T.check("gap disconnect 1 " in m3, "one disconnect gap, counted once: %r" % m3)
    # The second disconnect (at shutdown) is again 1, not the cumulative 2.
    m4 = open(os.path.join(tdir, segs[3][1][:-8] + ".manifest")).read()
    T.check("gap disconnect 1 " in m4, "the second disconnect counts 1: %r" % m4)


def test_reload_retention(d):
    """T15a: SIGHUP with a tighter retention (segment count) deletes old sealed segments down
    to the budget, RELOADING=1 then READY=1, and capture goes on."""
    port = D.free_port()
    conf = os.path.join(d, "tlcapd.ini")
    base = "[daemon]\nrotate_bytes = 240\n%s\n[listen in]\nformat = bin11\naddress = 127.0.0.1:%d\n"
    write_conf(conf, base % ("", port))
    dm = D.Daemon(TLCAPD, d, ["--config", conf], store=True)
    name = "ret"
    tdir = os.path.join(dm.state, name)
    data1 = D.calls(50)              # 100 records = 10 segments of 10
    data2 = D.calls(25, t0=10 ** 7)  # 50 more
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=ret format=bin11\n" + data1)
        D.wait_until(lambda: os.path.isdir(tdir) and len(segments(tdir)) >= 9, 10,
                     "9 sealed segments")
        write_conf(conf, base % ("retain_segments = 3", port))
        n0 = len(dm.notify.msgs)
        dm.p.send_signal(signal.SIGHUP)
        i = dm.notify.wait_for("RELOADING=1", after=n0)
        dm.notify.wait_for("READY=1", after=i)
        # the reload's retention pass and the SIGHUP seal of segment 10 (then retention again)
        D.wait_until(lambda: [q for q, _ in segments(tdir)] == [8, 9, 10], 10,
                     "retention down to the newest 3 segments")
        s.sendall(data2)
        dm.wait_stats(lambda st: D.by_name(st, name)["records"] == 150, what="capture goes on")
        # (between a seal and the retention pass right after it there may be 4 for a moment)
        D.wait_until(lambda: segments(tdir)[-1][0] >= 14 and len(segments(tdir)) == 3, 10,
                     "new segments after the reload, within the budget")
        s.shutdown(socket.SHUT_WR)
        D.wait_eof(s)
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    segs = segments(tdir)
    T.eq(len(segs), 3, "3 segments after shutdown")
    allb = data1 + data2
    got = concat(tdir)
    T.check(allb.endswith(got), "the kept segments are the tail of the stream")
    T.check("retention: deleted" in dm.log(), "deletions logged")


def test_reload_invalid_storage_key(d):
    """T15b for the storage keys: a bad value is refused with FILE:LINE, the old limits stay."""
    port = D.free_port()
    conf = os.path.join(d, "tlcapd.ini")
    write_conf(conf, "[daemon]\nrotate_bytes = 1k\n[listen in]\nformat = bin11\n"
               "address = 127.0.0.1:%d\n" % port)
    dm = D.Daemon(TLCAPD, d, ["--config", conf], store=True)
    try:
        write_conf(conf, "[daemon]\nrotate_bytes = -5\n[listen in]\nformat = bin11\n"
                   "address = 127.0.0.1:%d\n" % port)
        n0 = len(dm.notify.msgs)
        dm.p.send_signal(signal.SIGHUP)
        dm.notify.wait_for("READY=1", after=n0)
        D.wait_until(lambda: "reload rejected" in dm.log(), 5, "rejection logged")
        T.check("tlcapd.ini:2: [daemon] rotate_bytes" in dm.log(), "names file:line and key")
        send_named(port, "inv", "bin11", D.calls(100))  # 4800 bytes: rotated at 1k still
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    T.check(len(segments(os.path.join(dm.state, "inv"))) >= 4, "old rotate_bytes still applies")


def test_half_close_answered_after_write(d):
    """SPEC 1: the daemon closes a half-closed target's connection only once every byte it
    sent is written: at EOF the open segment already holds all of it."""
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port], store=True)
    try:
        for k in range(3):
            name = "hc%d" % k
            data = D.calls(40000, t0=1000)  # 80000 records, 1.92 MB
            send_named(port, name, "bin11", data, chunk=65536)
            tdir = os.path.join(dm.state, name)
            on_disk = sum(os.path.getsize(os.path.join(tdir, f)) for f in os.listdir(tdir)
                          if f.endswith(".part") or SEG_RE.match(f))
            T.eq(on_disk, len(data), "bytes written when the daemon answered the half-close")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_half_close_answered_before_seals(d):
    """docs/storage.md: the half-close answer waits for the bytes to be written, not for the
    seals of the segments they filled (the sealer seals them in the background): with every
    seal slowed by 1.5 s (test hook TLCAP_TEST_SEAL_DELAY_MS), the answer comes while both
    filled segments still wait for their seal, with every byte in the segment files, and
    `tlcap segments` says `sealing` for them; then both are sealed, each with its main
    export."""
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--rotate-bytes",
                              "800000"], store=True, serve="127.0.0.1:%d" % sport,
                  env={"TLCAP_TEST_SEAL_DELAY_MS": "1500"})
    try:
        data = D.calls(40000, t0=1000)  # 80000 records, 1.92 MB: 2 segments filled, 1 open
        send_named(port, "hc", "bin11", data, chunk=65536)
        tdir = os.path.join(dm.state, "hc")
        on_disk = sum(os.path.getsize(os.path.join(tdir, f)) for f in os.listdir(tdir)
                      if f.endswith(".part") or SEG_RE.match(f))
        T.eq(on_disk, len(data), "bytes written when the daemon answered the half-close")
        st = dm.stats()["store"]
        T.check(st["seal_queue"] >= 1, "answered before the seals (store %r)" % st)
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "segments", "hc",
                              "--json"])
        T.eq(rc, 0, "tlcap segments: " + err)
        states = [x["state"] for x in json.loads(out)]
        T.check(states[-1] == "open" and "sealing" in states
                and all(s in ("sealing", "sealed") for s in states[:-1]),
                "states while sealing: %r" % states)
        dm.wait_sealed(timeout=30)
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "segments", "hc",
                              "--json"])
        T.eq([x["state"] for x in json.loads(out)], ["sealed", "sealed", "open"],
             "states once sealed")
        sealed = sorted(f for f in os.listdir(tdir) if SEG_RE.match(f))
        T.eq(len(sealed), 2, "both filled segments sealed: %r" % os.listdir(tdir))
        for f in sealed:
            T.check(os.path.exists(os.path.join(tdir, f[:-len(".txt.BIN")] + ".txt")),
                    "main export beside " + f)
    finally:
        rc, _ = dm.stop(timeout=30)
    T.eq(rc, 0, "exit status")


def test_slow_recovery_extends_timeout(d):
    """T34: while start-up recovery runs, EXTEND_TIMEOUT_USEC is sent every second; READY=1
    comes after it (test hook TLCAP_TEST_RECOVERY_DELAY_MS, TLCAP_TESTING builds)."""
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port], store=True,
                  env={"TLCAP_TEST_RECOVERY_DELAY_MS": "3500"}, wait_ready=False)
    try:
        i = dm.notify.wait_for("EXTEND_TIMEOUT_USEC=", timeout=15)
        j = dm.notify.wait_for("EXTEND_TIMEOUT_USEC=", timeout=15, after=i + 1)
        k = dm.notify.wait_for("READY=1", timeout=15, after=j)
        T.check(k > j > i, "extensions before READY=1")
        send_named(port, "after", "bin11", D.calls(3))
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_writer_stall_withholds_watchdog(d):
    """T35, writer-only stall (R15): while the storage writer is stuck in a write (test hook
    TLCAP_TEST_WRITER_STALL_MS) with data queued, the loop keeps running but the watchdog
    pings stop; they resume when the writer does, and nothing is lost."""
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port], store=True,
                  env={"WATCHDOG_USEC": "1000000", "TLCAP_TEST_WRITER_STALL_MS": "7000"})
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=stall format=bin11\n" + D.calls(10))
        dm.wait_stats(lambda st: D.by_name(st, "stall")["records"] == 20, what="first batch")
        s.sendall(D.calls(10, t0=10 ** 6))  # queued behind the stuck write
        dm.wait_stats(lambda st: D.by_name(st, "stall")["records"] == 40, what="loop runs on")
        D.wait_until(lambda: "storage writer stalled" in dm.log(), 15, "stall detected")
        st = dm.stats()
        T.check(st["daemon"]["watchdog_withheld"] > 0, "pings withheld: %r" % st["daemon"])
        dm.notify.pump()
        n0 = len(dm.notify.msgs)
        dm.notify.wait_for("WATCHDOG=1", timeout=15, after=n0)  # pings come back
        s.shutdown(socket.SHUT_WR)
        D.wait_eof(s, timeout=15)
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    T.eq(len(concat(os.path.join(dm.state, "stall"))), 40 * 24, "every record written")


def test_sigterm_while_answer_pending(d):
    """A target half-closes and SIGTERM follows at once: the connection waiting for its storage
    barrier is closed by the shutdown, the barrier's answer comes later and frees it (no
    use-after-free, no leak under ASan), and every byte is on disk."""
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port], store=True)
    data = D.calls(40000)
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=late format=bin11\n" + data)
        s.shutdown(socket.SHUT_WR)
        dm.wait_stats(lambda st: D.by_name(st, "late")["records"] == len(data) // 24,
                      what="all records processed")
    finally:
        rc, _ = dm.stop()
        s.close()
    T.eq(rc, 0, "exit status; log:\n" + dm.log()[-1500:])
    T.eq(parts(dm.state), [], "sealed")
    T.check(concat(os.path.join(dm.state, "late")) == data, "every byte on disk")


def mapping_text(prefix):
    """A Text1 mapping: task names for the values 0..3 of context area 30000000 (gen_bin11's
    state writes), names for function areas 0..4 and data areas 20000000..2."""
    return ("* CONTEXTS %%NAME%%,%%HANDLE%%\n%s\n\n"
            "* HANDLE(Functions) %%HANDLE%%,%%NAME%%,%%VALUE%%\n%s\n\n"
            "* HANDLE(Data) %%HANDLE%%,%%NAME%%,%%VALUE%%\n%s\n" %
            ("\n".join("%stask%d,%d" % (prefix, v, v) for v in range(4)),
             "\n".join("%08X,%sfn%d," % (h, prefix, h) for h in range(5)),
             "\n".join("%08X,%svar%d," % (0x20000000 + h, prefix, h) for h in range(3))))


def test_segment_export_names(d):
    """SPEC 3: a bin1x segment's main export holds the target's mapping (names) and its
    contexts (context_area), as the live target has them: each export equals `tlcapd replay
    SEGMENT --mapping M --context-area H` (INFO .. STATISTICS), and a mapping loaded while
    capturing (`tlcap mapping`) names the segments closed after it."""
    port, sport = D.free_port(), D.free_port()
    maps = []
    for k, prefix in enumerate(("one_", "two_")):
        maps.append(os.path.join(d, "map%d.txt" % k))
        with open(maps[-1], "w") as f:
            f.write(mapping_text(prefix))
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--rotate-bytes",
                              "24k", "--mapping", "rt=" + maps[0], "--context-area",
                              "rt=30000000"], store=True, serve="127.0.0.1:%d" % sport)
    name = "rt"
    tdir = os.path.join(dm.state, name)
    try:
        send_named(port, name, "bin11", gen_bin11(4000, 21))  # answered once written
        rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "rotate", name],
                           timeout=30)
        T.eq(rc, 0, "tlcap rotate: " + err)
        D.wait_until(lambda: not parts(tdir) and len(segments(tdir)) == 4, 10,
                     "the first stream's 4 segments sealed")
        rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "mapping", name,
                            maps[1]], timeout=30)
        T.eq(rc, 0, "tlcap mapping: " + err)
        send_named(port, name, "bin11", gen_bin11(3000, 22))
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status; log:\n" + dm.log()[-2000:])
    segs = segments(tdir)
    T.eq(len(segs), 7, "segments: %r" % segs)  # 96000 + 72000 bytes, 24 KiB segments
    for i, (seq, f) in enumerate(segs):
        mp, prefix = (maps[0], "one_") if i < 4 else (maps[1], "two_")
        with open(os.path.join(tdir, f[:-len(".BIN")]), "rb") as fh:
            exp = fh.read().decode()
        T.check("\n00000000,%sfn0," % prefix in exp and "\n%stask1," % prefix in exp,
                "segment %d export has the names of %s:\n%s" % (seq, mp, exp[:600]))
        T.check("CONTEXT(%stask" % prefix in exp, "segment %d: statistics per task" % seq)
        rc, out, err = T.run([TLCAPD, "replay", os.path.join(tdir, f), "--format", "bin11",
                              "--export", "text1", "--mapping", mp, "--context-area",
                              "30000000"])
        T.eq(rc, 0, "replay " + f + ": " + err)
        T.eq(exp.rstrip("\n"), out.decode().split("* TIMELINE")[0].rstrip("\n"),
             "segment %d: export equals its replay with %s and context_area" % (seq, mp))


def test_recovered_export_names(d):
    """A segment sealed by crash recovery is exported with its target's mapping and
    context_area. A SIGKILL leaves two .part files; after the restart, the one of the target
    that comes back (with --mapping and --context-area) gets its export once the target is
    created, equal to `tlcapd replay SEGMENT --mapping M --context-area H`; the one of a target
    that does not come back is exported at shutdown, without names (equal to a plain replay)."""
    port = D.free_port()
    mp = os.path.join(d, "map.txt")
    with open(mp, "w") as f:
        f.write(mapping_text("rec_"))
    args = ["--listen", "in=bin11@127.0.0.1:%d" % port, "--mapping", "rt=" + mp,
            "--context-area", "rt=30000000"]
    dm = D.Daemon(TLCAPD, d, args, store=True)
    try:
        send_named(port, "rt", "bin11", gen_bin11(500, 31))  # answered once written
        send_named(port, "gone", "bin11", gen_bin11(300, 32))
    finally:
        dm.kill()  # SIGKILL: both segments stay .part
    T.eq(len(parts(dm.state)), 2, ".part files left by the SIGKILL")
    rt, gone = os.path.join(dm.state, "rt"), os.path.join(dm.state, "gone")
    # Targets unknown at start (a checkpoint would restore them, configured, before READY:
    # docs/continuity.md): their statistics checkpoints are removed.
    for t in (rt, gone):
        try:
            os.unlink(os.path.join(t, "target.checkpoint"))
        except FileNotFoundError:
            pass
    dm = D.Daemon(TLCAPD, d, args, store=True)
    try:
        T.eq(parts(dm.state), [], "recovered before READY")
        T.eq([f for f in os.listdir(rt) if f.endswith(".txt")], [],
             "the recovered segment's export waits for its target")
        send_named(port, "rt", "bin11", gen_bin11(200, 33))  # the target is back
        rec = os.path.join(rt, segments(rt)[0][1][:-len(".BIN")])
        D.wait_until(lambda: os.path.exists(rec), 10, "the recovered segment's export")
        T.eq([f for f in os.listdir(gone) if f.endswith(".txt")], [],
             "no export without the target's settings before shutdown")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status; log:\n" + dm.log()[-2000:])
    segs = segments(rt)
    T.eq(len(segs), 2, "the recovered segment and the new one: %r" % segs)
    for seq, f in segs:
        with open(os.path.join(rt, f[:-len(".BIN")]), "rb") as fh:
            exp = fh.read().decode()
        T.check("\n00000000,rec_fn0," in exp and "CONTEXT(rec_task" in exp,
                "segment %d export has the mapping's names:\n%s" % (seq, exp[:600]))
        T.eq(manifest(rt, f)["export"], f[:-len(".BIN")], "manifest names the export")
        rc, out, err = T.run([TLCAPD, "replay", os.path.join(rt, f), "--format", "bin11",
                              "--export", "text1", "--mapping", mp, "--context-area",
                              "30000000"])
        T.eq(rc, 0, "replay " + f + ": " + err)
        T.eq(exp.rstrip("\n"), out.decode().split("* TIMELINE")[0].rstrip("\n"),
             "segment %d: export equals its replay with the mapping and context_area" % seq)
    T.eq(manifest(rt, segs[0][1])["reason"], "recovered", "the first was sealed by recovery")
    (seq, f), = segments(gone)
    with open(os.path.join(gone, f[:-len(".BIN")]), "rb") as fh:
        exp = fh.read().decode()
    T.check("rec_" not in exp, "no names for a target that did not come back")
    rc, out, err = T.run([TLCAPD, "replay", os.path.join(gone, f), "--format", "bin11",
                          "--export", "text1"])
    T.eq(rc, 0, "replay " + f + ": " + err)
    T.eq(exp.rstrip("\n"), out.decode().split("* TIMELINE")[0].rstrip("\n"),
         "the export written at shutdown equals a replay without settings")


def xml_canon(path, drop_replay_only):
    """The XML document as a comparable string; with drop_replay_only, without what a segment's
    main export does not carry (quantile attributes, rolling windows: docs/storage.md)."""
    root = ET.parse(path).getroot()
    if drop_replay_only:
        for el in root.iter():
            for q in ("p50", "p90", "p99", "p999"):
                el.attrib.pop(q, None)
            for w in [c for c in el if c.tag == "Window"]:
                el.remove(w)
    for el in root.iter():
        el.text = (el.text or "").strip()
        el.tail = (el.tail or "").strip()
    return ET.tostring(root, encoding="unicode")


def test_xml_main_export(d):
    """main_export = xml: every bin1x segment is <base>.xml.BIN beside <base>.xml (winIDEA's
    TimelineBinary), the XML validates against ProfilerExport.xsd, equals `tlcapd replay SEGMENT
    --export xml --xml-timeline FORMAT` (less quantiles and windows, which a segment's export
    does not carry) and replay's sidecar equals the segment; the segments concatenate to the
    bytes sent."""
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--rotate-bytes",
                              "12k", "--main-export", "xml"], store=True)
    sent = {"x11": ("bin11", gen_bin11(1500, 41)), "x10": ("bin10", gen_bin10(1200, 42))}
    try:
        for name, (fmt, data) in sent.items():
            send_named(port, name, fmt, data)
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status; log:\n" + dm.log()[-2000:])
    out = os.path.join(d, "replay")
    os.mkdir(out)
    for name, (fmt, data) in sent.items():
        tdir = os.path.join(dm.state, name)
        segs = segments(tdir)
        T.check(len(segs) >= 3, "%s: several segments (%d)" % (name, len(segs)))
        T.check(concat(tdir) == data, name + ": segments concatenate to the bytes sent")
        for seq, f in segs:
            T.check(f.endswith(".xml.BIN"), "XML segment name " + f)
            x = os.path.join(tdir, f[:-len(".BIN")])
            T.check(os.path.exists(x), "main export %s beside %s" % (x, f))
            T.check(not os.path.exists(x[:-len(".xml")] + ".txt"), "no Text1 export for " + f)
            rc, _, err = T.run(["xmllint", "--noout", "--schema", XSD, x])
            T.eq(rc, 0, "%s validates against the XSD: %s" % (x, err[-1500:]))
            T.eq(manifest(tdir, f)["export"], os.path.basename(x), "manifest names the export")
            rx = os.path.join(out, os.path.basename(x))  # same name: same binary="..." attribute
            rc, _, err = T.run([TLCAPD, "replay", os.path.join(tdir, f), "--format", fmt,
                                "--export", "xml", "--xml-timeline", fmt, "--output", rx])
            T.eq(rc, 0, "replay " + f + ": " + err)
            T.eq(xml_canon(x, False), xml_canon(rx, True),
                 "%s: XML export of segment %d equals its replay" % (name, seq))
            with open(rx + ".BIN", "rb") as a, open(os.path.join(tdir, f), "rb") as b:
                T.check(a.read() == b.read(), "replay's TimelineBinary equals segment %d" % seq)


def test_keep_skipped_serial(d):
    """SPEC 3: with keep_skipped, the bytes a serial target's resync skipped and the cut-off
    tail of its stream (unplug) are kept in <data>.skipped beside the segment, byte for byte;
    the segment holds exactly the records."""
    link = os.path.join(d, "ttyNOISY")
    m = D.make_pty(link)
    dm = D.Daemon(TLCAPD, d, ["--serial", "noisy=bin11@%s:115200" % link, "--keep-skipped",
                              "64k", "--backoff-min", "50ms", "--backoff-max", "300ms"],
                  store=True)
    # Records with times near 1 s and small data resynchronise at once after noise whose type
    # and area nibbles are all 0xF (never plausible).
    noise1 = bytes(0xF0 + (i * 7) % 16 for i in range(101))
    noise2 = bytes(0xF0 + (i * 5) % 16 for i in range(77))
    recs = [D.calls(60, t0=10 ** 9 + k * 10 ** 7) for k in range(3)]
    tail = recs[0][:10]
    try:
        dm.wait_stats(lambda st: D.by_name(st, "noisy")["connected"] == 1, what="serial open")
        D.pty_write_all(m, recs[0] + noise1 + recs[1] + noise2 + recs[2] + tail)
        # resync mode holds the last records until the stream ends: the unplug ends it
        dm.wait_stats(lambda st: D.by_name(st, "noisy")["bytes"] == len(b"".join(recs)) +
                      len(noise1) + len(noise2) + len(tail), what="every byte read")
        os.close(m)
        st = dm.wait_stats(lambda st: D.by_name(st, "noisy")["connected"] == 0, what="unplug")
        t = D.by_name(st, "noisy")
        T.eq(t["bytes_skipped"], len(noise1) + len(noise2), "the decoder skipped the noise")
        T.eq(t["records"], 360, "every record decoded")
    finally:
        rc, _ = dm.stop()
        try:
            os.close(m)
        except OSError:
            pass
    T.eq(rc, 0, "exit status; log:\n" + dm.log()[-2000:])
    tdir = os.path.join(dm.state, "noisy")
    segs = segments(tdir)
    T.check(concat(tdir) == b"".join(recs), "the segments hold exactly the records")
    kept = b""
    for _, f in segs:
        p = os.path.join(tdir, f + ".skipped")
        if os.path.exists(p):
            with open(p, "rb") as fh:
                kept += fh.read()
    T.eq(kept, noise1 + noise2 + tail, "the .skipped files hold the noise and the cut-off tail")


T.main([test_bytes_on_disk, test_segment_export_names, test_recovered_export_names,
        test_xml_main_export,
        test_keep_skipped_serial, test_live_equals_replay, test_rotation, test_reload_retention,
        test_reload_invalid_storage_key, test_half_close_answered_after_write,
        test_half_close_answered_before_seals,
        test_slow_recovery_extends_timeout, test_writer_stall_withholds_watchdog,
        test_sigterm_while_answer_pending])
