#!/usr/bin/python3
"""`tlcap send`, the target simulator, against the real tlcapd:
- --loop=N continues the timeline: the daemon's statistics after N loops equal `tlcapd replay`
  of the file written N times with each loop's times moved on past the last one (bin11
  unpaced and paced, evlog), so a soak with --loop gives exact statistics;
- a refused stream (format clash at byte 0, while a large file is in flight, a decode error)
  exits 1 with the daemon's reason and never says "sent"; the daemon's refusal line on the
  ingest connection, as a raw socket reads it;
- a progress line on a terminal (a pty), none when stderr is a pipe.

Usage: test_send.py TLCAPD TLCAP"""
import os
import pty
import random
import select
import socket
import struct
import subprocess
import sys
import time

import daemonlib as D
import tlctest as T

TLCAPD = sys.argv[1]
TLCAP = sys.argv[2]


def gen_bin11(n, seed, cores=2):
    """Nested calls with S/R on several cores and data writes, non-decreasing times; calls stay
    open across the end of the file (a loop's first records close or nest in them)."""
    rnd = random.Random(seed)
    t = 10 ** 6
    stacks = {c: [] for c in range(cores)}
    out = []
    for _ in range(n):
        t += rnd.randint(0, 400)
        c = rnd.randrange(cores)
        st = stacks[c]
        r = rnd.random()
        if r < 0.08:
            out.append(T.bin11(0x20000000 + rnd.randrange(3), 4, c, rnd.getrandbits(32), t))
        elif r < 0.45 or not st:
            if len(st) >= 5:
                h, _ = st.pop()
                out.append(T.bin11(h, 0, c, 0, t))
            else:
                h = rnd.randrange(5)
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


def gen_evlog(nblocks, seed, threads=2):
    rnd = random.Random(seed)
    t = {k: 5.0 + k * 0.001 for k in range(threads)}
    stacks = {k: [] for k in range(threads)}
    blocks = []
    for _ in range(nblocks):
        items = []
        for _ in range(rnd.randint(1, 10)):
            k = rnd.randrange(threads)
            t[k] += rnd.randint(1, 50000) * 1e-9
            st = stacks[k]
            if rnd.random() < 0.55 or not st:
                if len(st) < 4:
                    nm = "f%d" % rnd.randrange(3)
                    st.append(nm)
                    items.append((t[k], 0x100 + k, "+" + nm))
            else:
                items.append((t[k], 0x100 + k, "-" + st.pop()))
        if items:
            blocks.append(items)
    return blocks


def evlog_bytes(blocks, shift_loops, d):
    """The blocks with every item's time moved on by d, shift_loops times (one float addition
    per loop, as a loop does it)."""
    out = []
    for items in blocks:
        its = []
        for tim, th, ev in items:
            for _ in range(shift_loops):
                tim = tim + d
            its.append(T.evlog_item(tim, th, ev))
        out.append(T.evlog_block(its))
    return b"".join(out)


def bin11_looped(data, loops):
    """The file `loops` times, loop k's times moved on by k x (span + mean spacing)."""
    n = len(data) // 24
    times = [struct.unpack_from("<q", data, i * 24 + 16)[0] for i in range(n)]
    lo, hi = min(times), max(times)
    shift = (hi - lo) + max(1, (hi - lo) // (n - 1))
    out = bytearray()
    for k in range(loops):
        for i in range(n):
            rec = bytearray(data[i * 24:(i + 1) * 24])
            struct.pack_into("<q", rec, 16, times[i] + k * shift)
            out += rec
    return bytes(out)


def send(args, timeout=120):
    return T.run([TLCAP, "send"] + args, timeout=timeout)


def start(d, extra=()):
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port] + list(extra),
                  serve="127.0.0.1:%d" % sport)
    return dm, port, sport


def test_loop_continues_the_timeline(d):
    """--loop=N: live statistics equal a replay of the N shifted copies, row by row."""
    dm, port, sport = start(d)
    try:
        data = gen_bin11(3000, 7)
        path = os.path.join(d, "cap.bin")
        with open(path, "wb") as f:
            f.write(data)
        for name, loops, extra in (("loop11", 6, []), ("paced11", 3, ["--rate", "60000"])):
            rc, out, err = send([path, "--target", name, "--format", "bin11", "--loop=%d" % loops,
                                 "--to", "127.0.0.1:%d" % port] + extra)
            T.check(rc == 0, "%s: send: %d %s" % (name, rc, err))
            T.check("%d bytes (%d records) sent" % (len(data) * loops, 3000 * loops) in err,
                    "%s: the closing line: %r" % (name, err))
            T.check("\r" not in err and "records/s" not in err,
                    "%s: no progress line into a pipe: %r" % (name, err))
            want = os.path.join(d, name + ".want")
            with open(want, "wb") as f:
                f.write(bin11_looped(data, loops))
            rep = D.replay_json(TLCAPD, want, "bin11")
            T.eq(rep["counters"]["events"], 3000 * loops, name + ": replay events")
            dm.wait_stats(lambda st: any(t["name"] == name and t["events"] == 3000 * loops
                                         for t in st["targets"]), what=name + " processed")
            live = D.live_json(TLCAP, sport, name)
            D.compare_stats(live, rep, name)
            # and the same times never come twice: the last time is loop N's
            T.eq(live["last_time"], struct.unpack_from("<q", bin11_looped(data, loops),
                                                       len(data) * loops - 8)[0],
                 name + ": last time")

        # nothing whole to loop over: said, not an endless loop of nothing
        tiny = os.path.join(d, "tiny.bin")
        with open(tiny, "wb") as f:
            f.write(data[:20])
        rc, _, err = send([tiny, "--target", "tiny", "--format", "bin11", "--loop",
                           "--to", "127.0.0.1:%d" % port], timeout=30)
        T.check(rc == 1 and "no whole record to loop over" in err, "tiny --loop: %d %s" % (rc, err))

        blocks = gen_evlog(150, 8)
        items = [it for b in blocks for it in b]
        tims = [it[0] for it in items]
        lo, hi = min(tims), max(tims)
        dshift = (hi - lo) + (hi - lo) / (len(items) - 1)
        epath = os.path.join(d, "cap.evlog")
        with open(epath, "wb") as f:
            f.write(evlog_bytes(blocks, 0, 0.0))
        loops = 4
        rc, out, err = send([epath, "--target", "loopev", "--format", "evlog",
                             "--loop=%d" % loops, "--to", "127.0.0.1:%d" % port])
        T.check(rc == 0, "evlog send: %d %s" % (rc, err))
        T.check("(%d records) sent" % (len(items) * loops) in err, "evlog closing line: " + err)
        want = os.path.join(d, "loopev.want")
        with open(want, "wb") as f:
            f.write(b"".join(evlog_bytes(blocks, k, dshift) for k in range(loops)))
        rep = D.replay_json(TLCAPD, want, "evlog")
        dm.wait_stats(lambda st: any(t["name"] == "loopev" and t["events"] ==
                                     rep["counters"]["events"] for t in st["targets"]),
                      what="loopev processed")
        D.compare_stats(D.live_json(TLCAP, sport, "loopev"), rep, "loopev", min_rows=3)
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_refused_stream_exits_1_with_the_reason(d):
    dm, port, sport = start(d)
    to = ["--to", "127.0.0.1:%d" % port]
    try:
        small = os.path.join(d, "small.bin")
        with open(small, "wb") as f:
            f.write(D.calls(50))
        rc, _, err = send([small, "--target", "clash", "--format", "bin11"] + to)
        T.check(rc == 0 and "sent" in err, "first send: %d %s" % (rc, err))
        # refused at byte 0: the target exists with another format
        rc, _, err = send([small, "--target", "clash", "--format", "bin10"] + to)
        T.eq(rc, 1, "refused send's exit status (%s)" % err)
        T.check("refused the stream: target clash exists with format bin11, the stream says "
                "bin10" in err, "the daemon's reason: %r" % err)
        T.check(" sent " not in err, "a refused stream is not 'sent': %r" % err)
        # the same with 16 MiB in flight when the refusal comes
        big = os.path.join(d, "big.bin")
        with open(big, "wb") as f:
            f.write(D.calls(350000))
        rc, _, err = send([big, "--target", "clash", "--format", "bin10"] + to)
        T.eq(rc, 1, "refused large send's exit status (%s)" % err)
        T.check("refused the stream: target clash exists with format bin11" in err,
                "the daemon's reason with data in flight: %r" % err)
        # a strict decode error after 100 good records
        bad = D.calls(50) + T.bin11(0, 7, 0, 0, 10 ** 7) + D.calls(50, t0=2 * 10 ** 7)
        badp = os.path.join(d, "bad.bin")
        with open(badp, "wb") as f:
            f.write(bad)
        rc, _, err = send([badp, "--target", "broken", "--format", "bin11"] + to)
        T.eq(rc, 1, "decode error send's exit status (%s)" % err)
        T.check("refused the stream: decode error at byte offset 2400" in err,
                "decode error reason: %r" % err)
        # the line itself, as any peer of the ingest port reads it, then the close
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=a@b format=bin11\n")
        s.settimeout(10)
        got = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        s.close()
        T.check(got.startswith(b"tlcapd: refused: bad preamble: ") and got.endswith(b"\n")
                and got.count(b"\n") == 1, "refusal line: %r" % got)
        st = dm.stats()
        T.eq(st["daemon"]["preamble_errors"], 1, "preamble error counted")
        # a peer that never reads is refused just the same and the daemon goes on
        q = D.connect(port)
        q.sendall(b"TLCAP/1 target=x@y format=bin11\n" + D.calls(1000))
        D.wait_eof(q)
        q.close()
        rc, _, err = send([small, "--target", "after", "--format", "bin11"] + to)
        T.check(rc == 0, "a send after the refusals: %d %s" % (rc, err))
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_progress_on_a_terminal(d):
    dm, port, sport = start(d)
    try:
        path = os.path.join(d, "cap.bin")
        with open(path, "wb") as f:
            f.write(D.calls(15000))
        m, s = pty.openpty()
        p = subprocess.Popen([TLCAP, "send", path, "--target", "tty", "--format", "bin11",
                              "--rate", "30000", "--to", "127.0.0.1:%d" % port],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=s)
        os.close(s)
        seen = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r, _, _ = select.select([m], [], [], 1.0)
            if not r:
                if p.poll() is not None:
                    break
                continue
            try:
                b = os.read(m, 4096)
            except OSError:  # EIO: the slave side is closed
                break
            if not b:
                break
            seen += b
        rc = p.wait(30)
        os.close(m)
        text = seen.decode(errors="replace")
        T.eq(rc, 0, "send on a terminal: %r" % text[-300:])
        lines = [x for x in text.split("\r") if "records/s" in x]
        T.check(len(lines) >= 3, "progress rewritten in place while sending: %r" % text[:400])
        T.check(all("s elapsed" in x and " records, " in x for x in lines),
                "progress: records, rate and elapsed: %r" % lines[:3])
        T.check("30000 records, " in lines[-1], "the last progress line: %r" % lines[-1])
        T.check("30000 records) sent" in text, "closing line on the terminal: %r" % text[-200:])
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


T.main([test_loop_continues_the_timeline, test_refused_stream_exits_1_with_the_reason,
        test_progress_on_a_terminal])
