#!/usr/bin/python3
"""tlcapd at the edges of its connections, target names and limits (the real daemon):

- a peer that resets before the accept makes no target (no "<listener>@unknown"), a reset is
  counted;
- partial_timeout bounds the time a connection stays inside one record, not its silence: one
  byte every 300 ms does not hold a record open; a steady stream whose reads end inside
  records is not closed;
- names: a preamble cannot take another address's automatic name, a configured dial target's
  name, or one cut at a NUL; a protobuf "t1\\0x" does not act on t1; listeners' allow /
  targets lists;
- the fd reserve counts each connected target's segment fd (RLIMIT_NOFILE 64);
- a kill leaves no 0-record segment; "serving subscribers" is logged once; `tlcap targets
  --json`;
- a SIGTERM as soon as a peer could connect is a clean shutdown (exit 0, no .part);
- --config /dev/zero --check-config ends with an error; --check-config refuses a
  non-loopback --serve as start does.

Usage: test_daemon_edges.py TLCAPD TLCAP [TEST...]"""
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import time

import daemonlib as D
import tlctest as T

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]


def test_reset_before_accept(d):
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "b10=bin10@127.0.0.1:%d" % port])
    try:
        # Stopped, the daemon cannot accept: the connections wait in the backlog, and their
        # resets arrive before the accept.
        dm.p.send_signal(19)  # SIGSTOP
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(T.bin10(0, 3, 0, 100))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        dm.p.send_signal(18)  # SIGCONT
        ok = D.connect(port)
        ok.sendall(T.bin10(0, 3, 0, 100) + T.bin10(0, 0, 0, 200))
        st = dm.wait_stats(lambda s: any(t["records"] == 2 for t in s["targets"]),
                           what="the good connection's records")
        names = [t["name"] for t in st["targets"]]
        T.eq(names, ["b10@127.0.0.1"], "targets (no b10@unknown)")
        T.check(st["daemon"]["closed_reset"] >= 5, "resets counted: %r" % st["daemon"])
        ok.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_partial_timeout_inside_record(d):
    port, pev = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % port,
                              "--listen", "ev=evlog@127.0.0.1:%d" % pev,
                              "--partial-timeout", "1s"])
    try:
        # A steady stream whose every read ends inside a record (30-byte writes of 24-byte
        # records) for 2.5 s: never inside one record for 1 s, so never closed.
        rec = D.calls(40)
        good = D.connect(port)
        good.sendall(b"TLCAP/1 target=steady\n")
        # A trickle: one byte of a record every 300 ms, never silent for 1 s.
        slow = D.connect(port)
        slow.sendall(b"TLCAP/1 target=trickle\n" + D.calls(1))
        # evlog: one block whose items come one every 300 ms: inside one block for 1 s
        items = [T.evlog_item(0.001 * k, 1, "+f" if k % 2 == 0 else "-f") for k in range(12)]
        block = T.evlog_block(items)
        ev = D.connect(pev)
        ev.sendall(block[:12 + len(items[0])])
        ev.setblocking(False)
        ev_pos, ev_closed = 12 + len(items[0]), None
        t0 = time.monotonic()
        closed_at = None
        pos = 0
        slow.setblocking(False)
        for i in range(9):  # 2.7 s
            good.sendall(rec[pos:pos + 30])
            pos += 30
            if ev_closed is None:
                try:
                    ev.send(block[ev_pos:ev_pos + len(items[1])])
                    ev_pos += len(items[1])
                except OSError:
                    ev_closed = time.monotonic() - t0
            if closed_at is None:
                try:
                    slow.send(b"\x00")
                except OSError:
                    closed_at = time.monotonic() - t0
                try:
                    if slow.recv(1) == b"":
                        closed_at = time.monotonic() - t0
                except BlockingIOError:
                    pass
                except OSError:
                    closed_at = time.monotonic() - t0
            time.sleep(0.3)  # pacing the peer's writes, not synchronisation
        slow.setblocking(True)
        if closed_at is None:
            D.wait_eof(slow, 5)
            closed_at = time.monotonic() - t0
        T.check(closed_at < 2.5, "the trickling peer is closed about 1 s into its record "
                "(after %.2f s)" % closed_at)
        ev.setblocking(True)
        D.wait_eof(ev, 5)
        st = dm.wait_stats(lambda s: s["daemon"]["closed_deadline"] >= 2, what="deadline")
        T.eq(st["daemon"]["closed_deadline"], 2,
             "the two trickles (bin11 record, evlog block) closed by the deadline")
        T.eq(D.by_name(st, "steady")["connected"], 1, "the steady stream is still connected")
        T.eq(D.by_name(st, "steady")["records"], 270 // 24, "steady records")
        good.close()
        slow.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_no_empty_recovered_segment(d):
    """A kill can leave a .part without one whole record (empty, or inside its first record):
    recovery removes it instead of sealing a 0-record segment (a 13-byte .zst, no export)."""
    port = D.free_port()
    tdir = os.path.join(d, "state", "lab")
    os.makedirs(tdir)
    for name, data in (("20261126T100000Z-00000001.txt.BIN.part", b""),
                       ("20261126T100001Z-00000002.txt.BIN.part", T.bin11(0, 3, 0, 0, 5)[:10]),
                       ("20261126T100002Z-00000003.txt.BIN.part",
                        T.bin11(0, 3, 0, 0, 5) + T.bin11(0, 0, 0, 0, 9)[:7])):
        with open(os.path.join(tdir, name), "wb") as f:
            f.write(data)
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port, "--compress", "yes"],
                  store=True)
    rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    left = sorted(os.listdir(tdir))
    T.check(not any(f.startswith("20261126T100000Z") or f.startswith("20261126T100001Z")
                    for f in left), "no segment without records: %r" % left)
    kept = [f for f in left if f.startswith("20261126T100002Z")]
    T.check(any(f.endswith(".manifest") for f in kept) and
            any(f.endswith(".txt") for f in kept), "the 1-record segment kept, with its export: "
            "%r" % left)
    T.check("held no whole record" in dm.log(), "the removal is logged")


def test_sigterm_at_first_connection(d):
    """A SIGTERM sent as soon as a peer's connection is accepted by the kernel (the listener
    exists) is a clean shutdown: exit 0, the records sent before it kept, no .part left. The
    signals are handled from before the listeners bind; before that, a peer could connect in a
    window where SIGTERM still had its default action (CI saw exit -15)."""
    for i in range(20):
        sub = os.path.join(d, "r%d" % i)
        state = os.path.join(sub, "state")
        os.makedirs(sub)
        port = D.free_port()
        log = open(os.path.join(sub, "log"), "wb")
        p = subprocess.Popen([TLCAPD, "--state-dir", state, "--serve", "",
                              "--listen", "lab=bin11@127.0.0.1:%d" % port],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 20
        s = None
        while s is None:  # connect as early as the listener exists: no wait for READY
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                if time.monotonic() > deadline or p.poll() is not None:
                    p.kill()
                    raise T.Failure("round %d: no listener (tlcapd status %s)" % (i, p.poll()))
        s.sendall(T.bin11(0, 3, 0, 0, 5) + T.bin11(0, 0, 0, 0, 9))
        p.send_signal(signal.SIGTERM)
        rc = p.wait(30)
        s.close()
        log.close()
        with open(os.path.join(sub, "log"), "rb") as f:
            tail = f.read()[-1500:].decode(errors="replace")
        T.eq(rc, 0, "round %d: exit status of a SIGTERM at the first connection; log:\n%s"
             % (i, tail))
        parts = [f for _, _, fs in os.walk(state) for f in fs if f.endswith(".part")]
        T.eq(parts, [], "round %d: no .part left" % i)


def test_serial_burst_end_counted(d):
    """Serial (resync mode): a clean stream from the port's opening loses nothing, and a
    burst's last record is counted after a short silence (resync_idle, 50 ms), not when the
    next burst comes (7,999 of 8,000 were counted)."""
    link = os.path.join(d, "ttyLAB0")
    m = D.make_pty(link)
    dm = D.Daemon(TLCAPD, d, ["--serial", "lab=bin11@%s:115200" % link])
    try:
        dm.wait_stats(lambda s: D.by_name(s, "lab")["connected"] == 1, what="serial open")
        D.pty_write_all(m, D.calls(4000))  # 8,000 records
        st = dm.wait_stats(lambda s: D.by_name(s, "lab")["records"] == 8000,
                           what="all 8,000 records, the last one without a successor")
        t = D.by_name(st, "lab")
        T.eq((t["bytes_skipped"], t["resyncs"], t["records_invalid"]), (0, 0, 0), "clean")
        D.pty_write_all(m, D.calls(1, t0=10 ** 6) + T.bin11(0x20000000, 4, 0, 5, 10 ** 6 + 500))
        dm.wait_stats(lambda s: D.by_name(s, "lab")["records"] == 8003,
                      what="a short burst's 3 records")
    finally:
        rc, _ = dm.stop()
        os.close(m)
    T.eq(rc, 0, "exit status")


def test_full_table_evicts_longest_disconnected(d):
    """With the target table full, throw-away names do not lock every new target out until a
    restart: the longest-disconnected listener target makes room (logged with its
    statistics); connected targets and configured dial targets are never evicted."""
    port, probe, sport = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port,
                              "--dial", "probe=bin11@127.0.0.1:%d" % probe,
                              "--max-targets", "4"], serve="127.0.0.1:%d" % sport)
    try:
        def feed(name, n):
            s = D.connect(port)
            s.sendall(b"TLCAP/1 target=%s\n" % name.encode() + D.calls(n))
            dm.wait_stats(lambda st: any(t["name"] == name and t["records"] == 2 * n
                                         for t in st["targets"]), what=name)
            return s

        for name, n in (("t1", 1), ("t2", 2)):  # connect, then disconnect: t1 first
            s = feed(name, n)
            s.close()
            dm.wait_stats(lambda st: D.by_name(st, name)["connected"] == 0, what=name + " gone")
        t3 = feed("t3", 3)  # stays connected; the table (probe, t1, t2, t3) is full
        t4 = feed("t4", 4)  # evicts t1
        st = dm.stats()
        T.eq(sorted(t["name"] for t in st["targets"]), ["probe", "t2", "t3", "t4"],
             "t1 (disconnected longest) evicted")
        T.check("target t1: evicted for t4" in dm.log() and "events 2" in dm.log(),
                "the eviction is logged with t1's statistics")
        T.eq(st["daemon"]["targets_evicted"], 1, "targets_evicted")
        t5 = feed("t5", 5)  # evicts t2 (the only disconnected listener target left)
        T.eq(sorted(t["name"] for t in dm.stats()["targets"]), ["probe", "t3", "t4", "t5"],
             "t2 evicted next")
        # every target connected (probe is a dial target): a new name is refused, as before
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=t6\n" + D.calls(1))
        D.wait_eof(s, 5)
        st = dm.stats()
        T.check(st["daemon"]["targets_refused_limit"] >= 1, "refused when none is evictable")
        T.eq(sorted(t["name"] for t in st["targets"]), ["probe", "t3", "t4", "t5"], "unchanged")
        # the newcomer's statistics are its own (not t1's or t2's)
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "stats", "t5",
                              "--export", "json"])
        T.eq(rc, 0, "tlcap stats t5: %s" % err)
        T.eq(json.loads(out)["counters"]["events"], 10, "t5's events")
        for s in (t3, t4, t5):
            s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_check_config(d):
    rc, _, err = T.run([TLCAPD, "--config", "/dev/zero", "--check-config"], timeout=10)
    T.eq(rc, 2, "/dev/zero as a config: exit status")
    T.check("/dev/zero" in err and "NUL" in err, "message: %r" % err)
    big = os.path.join(d, "big.ini")
    with open(big, "w") as f:
        f.write("[daemon]\n" + "#" * 79 + "\n" * 1)
        f.write(("#" * 79 + "\n") * 14000)
    rc, _, err = T.run([TLCAPD, "--config", big, "--check-config"], timeout=10)
    T.eq(rc, 2, "a 1.1 MB config: exit status")
    T.check("larger than" in err, "message: %r" % err)
    rc, _, err = T.run([TLCAPD, "--serve", "0.0.0.0:0", "--check-config"], timeout=10)
    T.eq(rc, 2, "--check-config with a non-loopback --serve: exit status (%s)" % err)
    T.check("beyond loopback" in err, "message: %r" % err)
    rc, out, err = T.run([TLCAPD, "--serve", "127.0.0.1:0", "--check-config"], timeout=10)
    T.eq(rc, 0, "--check-config with a loopback --serve: %s" % err)
    for opt, val in (("--max-block", "0"), ("--max-areas", "0"), ("--windows", ",,,")):
        rc, _, err = T.run([TLCAPD, opt, val, "--check-config"], timeout=10)
        T.eq(rc, 2, "%s %s refused (%s)" % (opt, val, err))


def pb_field(num, payload):
    """A length-delimited field (wire type 2); an int payload is a varint field."""
    if isinstance(payload, int):
        return T.varint(num << 3) + T.varint(payload)
    return T.varint(num << 3 | 2) + T.varint(len(payload)) + payload


def pb_fields(buf):
    """Top-level fields of a message: {number: value} (varints as ints, others as bytes)."""
    out, i = {}, 0
    while i < len(buf):
        key, i = T.read_varint(buf, i)
        wt = key & 7
        if wt == 0:
            v, i = T.read_varint(buf, i)
        elif wt == 2:
            n, i = T.read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        else:
            v, i = buf[i:i + 4], i + 4
        out[key >> 3] = v
    return out


class RawSub:
    """A subscriber speaking the wire format by hand (tlcap.proto field numbers)."""

    def __init__(self, port):
        self.s = D.connect(port)
        self.s.settimeout(10)
        self.buf = b""

    def send(self, req_id, field, payload):
        m = pb_field(1, req_id) + pb_field(field, payload)
        self.s.sendall(T.varint(len(m)) + m)

    def recv(self):
        while True:
            if self.buf:
                try:
                    n, i = T.read_varint(self.buf, 0)
                except IndexError:
                    n = None
                if n is not None and len(self.buf) >= i + n:
                    m, self.buf = self.buf[i:i + n], self.buf[i + n:]
                    return pb_fields(m)
            b = self.s.recv(65536)
            if not b:
                raise T.Failure("subscriber connection closed")
            self.buf += b

    def reply(self, req_id):
        """The direct reply to req_id (unsolicited messages skipped)."""
        for _ in range(100):
            f = pb_fields_reply = self.recv()
            if pb_fields_reply.get(1, 0) == req_id:
                return f
        raise T.Failure("no reply to request %d" % req_id)


def test_names_not_squatted(d):
    port, sport, probe = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port,
                              "--dial", "probe=bin11@127.0.0.1:%d" % probe],
                  serve="127.0.0.1:%d" % sport)
    try:
        # another address's automatic name, a NUL-cut name, a configured dial target's name
        for pre in (b"TLCAP/1 target=lab@10.9.9.9\n", b"TLCAP/1 target=abc\0../../x\n",
                    b"TLCAP/1 target=probe\n"):
            s = D.connect(port)
            s.sendall(pre + D.calls(2))
            D.wait_eof(s, 5)
            s.close()
        good = D.connect(port)
        good.sendall(b"TLCAP/1 target=t1\n" + D.calls(3))
        st = dm.wait_stats(lambda s: any(t["name"] == "t1" and t["records"] == 6
                                         for t in s["targets"]), what="t1's records")
        names = sorted(t["name"] for t in st["targets"])
        T.eq(names, ["probe", "t1"], "targets (none squatted)")
        T.eq(D.by_name(st, "probe")["records"], 0, "nothing fed to the dial target")
        # protobuf: "t1\0x" must not act on t1
        sub = RawSub(sport)
        sub.send(1, 10, pb_field(1, 1))  # Hello{protocol_version: 1}
        T.check(10 in sub.reply(1), "Welcome")
        sub.send(2, 14, pb_field(1, b"t1\0x"))  # GetStats{target: "t1\0x"}
        r = sub.reply(2)
        T.check(15 in r and 17 not in r, "GetStats t1\\0x: an Error, not t1's Stats: %r" % r)
        T.check(b"NUL" in r[15], "the error says why: %r" % r[15])
        sub.send(3, 15, pb_field(1, b"t1\0x"))  # RotateTarget
        T.check(15 in sub.reply(3), "RotateTarget t1\\0x: an Error")
        sub.send(4, 14, pb_field(1, b"t1"))
        T.check(17 in sub.reply(4), "GetStats t1: Stats (the connection stays)")
        sub.s.close()
        # tlcap targets --json: an array with each target's state and counters
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "targets", "--json"])
        T.eq(rc, 0, "tlcap targets --json: %s" % err)
        arr = {t["name"]: t for t in json.loads(out)}
        T.eq(sorted(arr), ["probe", "t1"], "targets --json names")
        T.eq((arr["t1"]["state"], arr["t1"]["format"], arr["t1"]["counters"]["records"],
              arr["t1"]["counters"]["events"], arr["t1"]["counters"]["bytes"]),
             ("connected", "bin11", 6, 6, 6 * 24),
             "t1 in targets --json (bytes after the preamble)")
        T.eq(arr["probe"]["state"], "disconnected", "probe in targets --json")
        good.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    # the subscriber port is announced once, with the port bound
    T.eq(dm.log().count("subscribers on"), 1, "'serving subscribers' lines")
    T.check("serving subscribers on 127.0.0.1:%d" % sport in dm.log(), "the line names the port")


def test_listener_allow_and_targets(d):
    p1, p2 = D.free_port(), D.free_port()
    ini = os.path.join(d, "tlcapd.ini")
    with open(ini, "w") as f:
        f.write("[listen far]\nformat = bin11\naddress = 127.0.0.1:%d\nallow = 10.0.0.0/8\n\n"
                "[listen lab]\nformat = bin11\naddress = 127.0.0.1:%d\n"
                "allow = 192.168.0.0/16, 127.0.0.0/8\ntargets = lab-*, lab@*\n" % (p1, p2))
    dm = D.Daemon(TLCAPD, d, ["--config", ini])
    try:
        # 127.0.0.1 is not in 10.0.0.0/8: reset at once (one attempt: D.connect would retry when
        # the reset lands before Python's non-blocking connect has read SO_ERROR)
        s = socket.socket()
        try:
            s.settimeout(5)
            s.connect(("127.0.0.1", p1))
            s.sendall(b"TLCAP/1 target=lab-x\n" + D.calls(1))
            D.wait_eof(s, 5)
        except OSError:
            pass  # reset already
        s.close()
        s = D.connect(p2)  # allowed address, name not in targets
        s.sendall(b"TLCAP/1 target=other\n" + D.calls(1))
        D.wait_eof(s, 5)
        s.close()
        ok = D.connect(p2)
        ok.sendall(b"TLCAP/1 target=lab-1\n" + D.calls(2))
        auto = D.connect(p2)  # automatic name lab@127.0.0.1 matches lab@*
        auto.sendall(D.calls(3))
        st = dm.wait_stats(lambda s: sum(t["records"] for t in s["targets"]) == 10,
                           what="the allowed connections' records")
        T.eq(sorted(t["name"] for t in st["targets"]), ["lab-1", "lab@127.0.0.1"], "targets")
        T.eq(st["daemon"]["refused_allow"], 1, "refused_allow")
        T.check(st["daemon"]["refused_target"] >= 1, "name refused: %r" % st["daemon"])
        ok.close()
        auto.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_fd_reserve_counts_storage(d):
    """Under RLIMIT_NOFILE 64 with storage on, every accepted connection's records reach a
    segment: the cap on connections counts the segment fd each connected target needs."""
    port = D.free_port()

    def lim():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % port], preexec_fn=lim,
                  store=True)
    socks = []
    try:
        for i in range(40):
            s = D.connect(port)
            socks.append(s)
            try:
                s.sendall(b"TLCAP/1 target=t%d\n" % i + D.calls(25))
            except OSError:
                pass  # refused at the cap: reset at once
        # (a refused connect may be retried by D.connect: accepted can pass 40)
        st = dm.wait_stats(lambda s: s["daemon"]["accepted"] >= 40 and
                           s["daemon"]["connections"] + s["daemon"]["refused_limit"] ==
                           s["daemon"]["accepted"], what="all 40 settled")
        T.check(st["daemon"]["refused_limit"] > 0, "some connections refused at the fd cap")
        for s in socks:
            s.close()
        st = dm.wait_stats(lambda s: s["daemon"]["connections"] == 0, what="all closed")
        accepted = sum(t["records"] for t in st["targets"])
        T.eq(accepted, 50 * len(st["targets"]), "records of the accepted connections")
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
        log = dm.log()
        T.check("cannot open a segment" not in log and "Too many open files" not in log and
                "too many open files" not in log, "no fd exhaustion; log:\n" + log[-3000:])
        stored = 0
        for root, _, files in os.walk(dm.state):
            for f in files:
                if f.endswith(".BIN") or f.endswith(".BIN.part"):
                    stored += os.path.getsize(os.path.join(root, f)) // 24
        T.eq(stored, accepted, "records in segment files; files: %r" % [
            f for _, _, fs in os.walk(dm.state) for f in fs][:20])
    finally:
        for s in socks:
            s.close()
        dm.kill()


ONLY = sys.argv[3:]
T.main([t for t in [test_names_not_squatted, test_listener_allow_and_targets,
                    test_full_table_evicts_longest_disconnected,
                    test_fd_reserve_counts_storage, test_reset_before_accept,
                    test_partial_timeout_inside_record, test_no_empty_recovered_segment,
                    test_serial_burst_end_counted, test_check_config,
                    test_sigterm_at_first_connection]
        if not ONLY or t.__name__ in ONLY])
