#!/usr/bin/python3
"""The daemon-wide memory budget, statistics in parts, and the stats dump off the loop.

rss_within_budget: three targets flooded past --memory-limit 32M with checkpoints every second,
    a subscriber's GetStats and /metrics scrapes running: the process's peak RSS (VmHWM, and the
    reaped child's maxrss after the shutdown's checkpoints) stays within the limit, its growth
    headroom and RSS_SLACK; the other targets' areas are all refused and counted.
budget: a hostile stream of 150,000 distinct handles against --memory-limit 24M: new areas are
    refused and counted in dropped_area_limit (two events per refused area: its E and X), an area
    that existed before keeps counting, RSS grows by about the budget and no more, the warning
    names the target, `tlcap targets` shows the drops, `tlcap stats` (in parts) returns exactly
    the areas that were kept (derived from the input: handles sent less refused), and an old
    client's whole GetStats is still answered.
parts: 60,000 areas without a limit: `tlcap stats` (GetStats in parts) returns every area with
    the counts sent; a raw GetStats with max_rows gets several parts, numbered, chained by
    base_seq, the last without `more`.
subscribe_large: a subscription to 30,000 areas (its feed takes the engine snapshot in parts):
    the full snapshot holds every area, the deltas the changed areas with their counts.
mapping: a mapping above --mapping-limit is refused with a message naming the limit; a small one
    is accepted and counted in the target's memory.
dump: while SIGUSR1 writes the stats dump of 100,000 areas, the loop keeps answering subscriber
    Pings (worst round trip well under the time the dump takes); the dump holds every area.

Usage: test_memory_budget.py TLCAPD TLCAP"""
import os
import resource
import signal
import socket
import struct
import sys
import threading
import time
import urllib.request

import daemonlib as D
import tlctest as T

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]
TARGET = "lab@127.0.0.1"
with open(TLCAPD, "rb") as _f:
    _bin = _f.read()
    SANITIZED = b"AddressSanitizer" in _bin or b"ThreadSanitizer" in _bin
# the sanitizer builds are several times slower and their allocations carry redzones and a
# quarantine (ASan) or shadow memory (TSan): smaller floods there, and no RSS bound (the budget's own accounting is checked)
SCALE = 3 if SANITIZED else 1


def wait_events(dm, n, timeout=120):
    """The stats dump once the only target counted n events (dumps of 10^5 areas take seconds
    under the sanitizers: each is waited for with a long deadline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = dm.stats(timeout=timeout)
        if st["targets"] and st["targets"][0]["events"] == n:
            return st
        time.sleep(0.05)
    raise T.Failure("timed out waiting for %d events" % n)


def flood(first, n, t0, handle0=0):
    """n distinct function areas (handles handle0..), one call each, times from t0."""
    out = bytearray()
    t = t0
    pack = struct.Struct("<IIQq").pack
    for i in range(n):
        h = (handle0 + i) & 0x0FFFFFFF
        out += pack(h, 3, 0, t)
        out += pack(h, 0, 0, t + 5)
        t += 10
    return bytes(first) + bytes(out), t


def send_all(port, data, timeout=60):
    """data on a new connection, half-closed; returns once the daemon closed it (read all)."""
    s = D.connect(port)
    s.settimeout(timeout)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    D.wait_eof(s, timeout=timeout)
    s.close()


# ---- a minimal protobuf client (wire format by hand: tags, varints, length-delimited) ----

def fld(num, wt, payload):
    return T.varint(num << 3 | wt) + payload


def ldelim(num, body):
    return fld(num, 2, T.varint(len(body)) + body)


def request(req, member, body):
    msg = fld(1, 0, T.varint(req)) + ldelim(member, body)
    return T.varint(len(msg)) + msg


HELLO = request(1, 10, fld(1, 0, T.varint(1)) + ldelim(3, b"test_memory_budget"))


def fields(b):
    """Top-level fields of a message: list of (number, value) (bytes for length-delimited)."""
    i, out = 0, []
    while i < len(b):
        key, i = T.read_varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = T.read_varint(b, i)
        elif wt == 2:
            ln, i = T.read_varint(b, i)
            v, i = b[i:i + ln], i + ln
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise T.Failure("wire type %d" % wt)
        out.append((num, v))
    return out


class Sub:
    def __init__(self, port):
        self.s = D.connect(port)
        self.s.settimeout(30)
        self.buf = b""
        self.s.sendall(HELLO)
        self.recv()  # Welcome

    def recv(self):
        while True:
            try:
                ln, i = T.read_varint(self.buf, 0)
                if len(self.buf) >= i + ln:
                    m, self.buf = self.buf[i:i + ln], self.buf[i + ln:]
                    return dict_of(fields(m))
            except IndexError:
                pass
            c = self.s.recv(1 << 20)
            if not c:
                raise T.Failure("daemon closed the subscriber connection")
            self.buf += c

    def close(self):
        self.s.close()


def dict_of(fl):
    d = {}
    for k, v in fl:
        d.setdefault(k, []).append(v)
    return d


def get_stats(sub, req, target, max_rows=0):
    body = ldelim(1, target.encode()) + fld(2, 0, T.varint(1)) + fld(4, 0, T.varint(1))
    if max_rows:
        body += fld(6, 0, T.varint(max_rows))
    sub.s.sendall(request(req, 14, body))


def snapshot_of(m, raw=None):
    """(rows, seq, base_seq, part, more, full) of a ServerMessage holding Stats; the rows' bytes
    are appended to `raw` when given."""
    st = dict_of(fields(m[17][0]))
    sn = dict_of(fields(st[1][0]))
    one = lambda k: sn[k][0] if k in sn else 0  # noqa: E731
    if raw is not None:
        raw.extend(sn.get(15, []))
    return len(sn.get(15, [])), one(4), one(5), one(21), one(22), one(6)


def tlcap(sport, *args):
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport] + list(args), timeout=60)
    return rc, out.decode(errors="replace"), err


# ---- tests ----

def test_budget(d):
    port, sport = D.free_port(), D.free_port()
    limit = 24 << 20
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port, "--memory-limit",
                              "24M"], serve="127.0.0.1:%d" % sport)
    try:
        base = D.proc_status_kib(dm.p.pid, "VmRSS")
        pilot = D.calls(10, t0=1000, step=100, handle=0x10000001)
        n = 150000
        data, t = flood(pilot, n, 10000)
        data += D.calls(5, t0=t, step=100, handle=0x10000001)
        send_all(port, data)
        st = wait_events(dm, 2 * (n + 15))
        tg = D.by_name(st, TARGET)
        dropped = tg["dropped_area_limit"]
        T.check(dropped > 0, "areas refused past the budget (dropped_area_limit %d)" % dropped)
        T.eq(dropped % 2, 0, "a refused area drops its E and its X")
        kept = n - dropped // 2
        T.check(kept > 1000, "areas kept within 24M: %d" % kept)
        dd = st["daemon"]
        T.eq(dd["memory_limit"], limit, "memory_limit in the dump")
        T.check(dd["memory_used"] <= limit + limit // 8 + (1 << 20),
                "memory in use %d within the limit and its growth headroom" % dd["memory_used"])
        T.check(dd["memory_refused"] > 0 and tg["memory_refused"] > 0, "refusals counted")
        T.eq(tg["memory_bytes"], dd["memory_used"], "the only target holds all the memory")
        grown = D.proc_status_kib(dm.p.pid, "VmRSS") - base
        if SANITIZED:
            print("SKIP part: RSS bound (sanitizer build: redzones and quarantine; grew %d KiB)"
                  % grown)
        else:
            T.check(grown * 1024 <= limit * 2, "RSS grew by %d KiB for a 24M budget" % grown)
        T.check("target %s: memory limit" % TARGET in dm.log(), "the warning names the target")
        # the area that existed before the flood kept counting past the limit
        rows = {r["handle"]: r for r in st["targets"][0]["stats"]["rows"]}
        T.eq(rows["10000001"]["count"], 15, "pilot area's COUNT (10 before, 5 after the flood)")
        T.eq(len(rows), kept + 1, "areas in the dump (kept flood areas + pilot)")
        # tlcap targets: the drops
        rc, out, err = tlcap(sport, "targets")
        T.eq(rc, 0, "tlcap targets: %s" % err)
        line = [x for x in out.splitlines() if x.startswith(TARGET)]
        T.check(line and str(dropped) in line[0].split(), "tlcap targets shows DROPPED: %r" % out)
        T.check("memory:" in out and "charges refused" in out, "tlcap targets shows the budget")
        # tlcap stats (in parts) answers with every kept area
        live = D.live_json(TLCAP, sport, TARGET)
        T.eq(len(live["rows"]), kept + 1, "rows of tlcap stats")
        T.eq(live["counters"]["dropped_area_limit"], dropped, "dropped_area_limit in tlcap stats")
        # an old client (no max_rows) is still answered in one message
        sub = Sub(sport)
        get_stats(sub, 5, TARGET)
        m = sub.recv()
        T.check(17 in m, "whole GetStats answered with Stats (got fields %r)" % sorted(m))
        T.eq(snapshot_of(m)[0], kept + 1, "rows of the whole reply")
        sub.close()
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    finally:
        dm.kill()


def test_parts(d):
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port],
                  serve="127.0.0.1:%d" % sport)
    try:
        n = 60000 // SCALE
        data, _ = flood(b"", n, 1000)
        send_all(port, data)
        wait_events(dm, 2 * n)
        live = D.live_json(TLCAP, sport, TARGET)
        T.eq(len(live["rows"]), n, "rows of tlcap stats")
        T.eq(sorted(int(r["handle"], 16) for r in live["rows"]), list(range(n)), "handles")
        T.check(all(r["count"] == 1 for r in live["rows"]), "one call per area")
        sub = Sub(sport)
        get_stats(sub, 9, TARGET, max_rows=5000)
        parts, total, prev_seq, raw_parts = 0, 0, None, []
        while True:
            m = sub.recv()
            T.eq(m.get(1, [0])[0], 9, "request id of every part")
            rows, seq, base, part, more, full = snapshot_of(m, raw_parts)
            T.eq(part, parts, "part number")
            T.eq(bool(full), parts == 0, "only part 0 is full")
            if prev_seq is not None:
                T.eq(base, prev_seq, "a part's base_seq is the previous part's seq")
            T.check(rows <= 5000, "part of %d rows within max_rows" % rows)
            prev_seq, total, parts = seq, total + rows, parts + 1
            if not more:
                break
        T.eq(total, n, "rows over every part")
        T.check(parts >= n // 5000 >= 4, "in %d parts" % parts)
        # an older client's whole reply (built from engine parts too, into one message) holds
        # exactly the same rows, byte for byte (nothing was ingested meanwhile)
        get_stats(sub, 10, TARGET)
        raw_whole = []
        m = sub.recv()
        T.eq(m.get(1, [0])[0], 10, "request id of the whole reply")
        rows, _, _, _, more, full = snapshot_of(m, raw_whole)
        T.eq((rows, bool(more), bool(full)), (n, False, True), "whole reply: rows, more, full")
        T.check(sorted(raw_whole) == sorted(raw_parts), "whole reply's rows == the parts' rows")
        sub.close()
    finally:
        dm.kill()


def snapshot_rows(m):
    """(fields of the Snapshot, {handle: count}) of a ServerMessage holding a Snapshot."""
    sn = dict_of(fields(m[12][0]))
    rows = {}
    for rb in sn.get(15, []):
        r = dict_of(fields(rb))
        rows[r.get(1, [0])[0]] = r.get(6, [0])[0]
    return sn, rows


def test_subscribe_large(d):
    """A subscription to a target larger than a feed's part (8,192 rows): the full snapshot
    holds every area, the deltas after more calls carry the changed areas with their counts,
    and chain on the full snapshot's seq."""
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port],
                  serve="127.0.0.1:%d" % sport)
    try:
        n = 30000 // SCALE
        data, t = flood(b"", n, 1000)
        s = D.connect(port)
        s.sendall(data)
        wait_events(dm, 2 * n)
        sub = Sub(sport)
        sub.s.sendall(request(3, 11, fld(1, 0, T.varint(1)) + fld(5, 0, T.varint(200))))
        full = None
        while full is None:
            m = sub.recv()
            if 12 in m:
                full = m
        sn, rows = snapshot_rows(full)
        T.eq(sn.get(6, [0])[0], 1, "first snapshot is full")
        T.eq(len(rows), n, "areas in the full snapshot")
        T.check(all(c == 1 for c in rows.values()), "one call per area")
        seq = sn[4][0]
        # more calls of three areas, and one new area
        more = D.calls(4, t0=t, step=100, handle=7) + D.calls(2, t0=t + 1000, step=100,
                                                              handle=n - 2)
        more += D.calls(1, t0=t + 2000, step=100, handle=n + 5)
        s.sendall(more)
        delta = {}
        while not (delta.get(7) == 5 and delta.get(n - 2) == 3 and n + 5 in delta):
            m = sub.recv()
            if 12 not in m:
                continue
            sd, rd = snapshot_rows(m)
            T.eq(sd.get(5, [0])[0], seq, "a delta's base_seq is the previous snapshot's seq")
            seq = sd[4][0]
            delta.update(rd)
        # (every area whose OUTSIDE stretch grew with the latest time is in a delta too)
        T.eq((delta[7], delta[n - 2], delta[n + 5]), (5, 3, 1), "counts of the changed areas")
        T.check(set(delta) <= set(range(n)) | {n + 5}, "only known areas in the deltas")
        sub.close()
        s.close()
    finally:
        dm.kill()


def text1_mapping(nareas):
    """A Text1 mapping section (HANDLE(Functions), as winIDEA writes it) naming nareas areas."""
    return ("* HANDLE(Functions) %%HANDLE%%,%%NAME%%,%%VALUE%%\n%s\n"
            % "\n".join("%08X,function_with_a_long_name_%d," % (i, i) for i in range(nareas)))


def test_mapping(d):
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port, "--mapping-limit",
                              "64K"], serve="127.0.0.1:%d" % sport)
    try:
        send_all(port, D.calls(3))
        before = dm.target(TARGET)["memory_bytes"]
        big, small = os.path.join(d, "big.txt"), os.path.join(d, "small.txt")
        with open(big, "w") as f:
            f.write(text1_mapping(5000))
        with open(small, "w") as f:
            f.write(text1_mapping(20))
        rc, out, err = tlcap(sport, "mapping", TARGET, big)
        T.check(rc != 0 and "mapping_limit" in (out + err),
                "a mapping above the limit is refused naming it (rc %d: %s%s)" % (rc, out, err))
        rc, out, err = tlcap(sport, "mapping", TARGET, small)
        T.eq(rc, 0, "a small mapping is accepted: %s%s" % (out, err))
        tg = dm.target(TARGET)
        T.eq(tg["has_mapping"], 1, "has_mapping")
        T.check(tg["memory_bytes"] > before, "the mapping is counted in the target's memory")
    finally:
        dm.kill()


def test_dump_off_loop(d):
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port],
                  serve="127.0.0.1:%d" % sport)
    try:
        n = 100000 // SCALE
        data, _ = flood(b"", n, 1000)
        send_all(port, data)
        wait_events(dm, 2 * n)
        sub = Sub(sport)
        cookie = 1

        def ping():
            nonlocal cookie
            p0 = time.monotonic()
            cookie += 1
            sub.s.sendall(request(100 + cookie, 17, fld(1, 0, T.varint(cookie))))
            m = sub.recv()
            T.check(19 in m, "Pong (got fields %r)" % sorted(m))
            return time.monotonic() - p0
        # the same pings without a dump first: what this machine's load makes of a round trip
        base = max(ping() for _ in range(20))
        os.unlink(dm.dump)
        t0 = time.monotonic()
        dm.p.send_signal(signal.SIGUSR1)
        worst, pings = 0.0, 0
        while not os.path.exists(dm.dump) and time.monotonic() - t0 < 60:
            worst = max(worst, ping())
            pings += 1
            time.sleep(0.01)
        took = time.monotonic() - t0
        print("dump of %d areas took %.2fs: %d pings, worst round trip %.3fs (%.3fs without)"
              % (n, took, pings, worst, base))
        T.check(os.path.exists(dm.dump), "dump written")
        T.check(pings >= 3, "pings answered during the dump: %d in %.2fs" % (pings, took))
        # a dump on the loop would hold one Ping for about the whole dump; off the loop the
        # worst round trip stays near the machine's own (under foreign load that is more)
        T.check(worst < max(0.25 * SCALE, 4 * base), "worst Ping round trip during the dump "
                "%.3fs (dump took %.2fs; without a dump %.3fs)" % (worst, took, base))
        st = D.by_name(dm.stats(timeout=120), TARGET)
        T.eq(len(st["stats"]["rows"]), n, "areas in the dump")
        sub.close()
    finally:
        dm.kill()


# What tlcapd may hold beyond its memory budget at peak, whatever the input (docs/configuration.md
# memory_limit): its code, libraries and threads' stacks, libuv's and the sockets' buffers, a
# checkpoint's chunk, a stats part, a subscriber's reply and an HTTP response.
RSS_SLACK = 48 << 20


def test_rss_within_budget(d):
    """Three targets flooded with distinct handles past --memory-limit 32M while checkpoints run
    every second, a subscriber asks for GetStats and /metrics is scraped: the process's peak RSS
    stays within the limit, its growth headroom and a fixed slack (the statistics a checkpoint
    encodes are written out in chunks, not held whole beside them)."""
    # the sanitizer builds flood a third as many areas: a third of the budget, so that the
    # first target still fills it
    limit = (32 << 20) // SCALE
    ports, sport, hport = [D.free_port() for _ in range(3)], D.free_port(), D.free_port()
    args = ["--memory-limit", str(limit), "--checkpoint-interval", "1"]
    for i, p in enumerate(ports):
        args += ["--listen", "t%d=bin11@127.0.0.1:%d" % (i, p)]
    dm = D.Daemon(TLCAPD, d, args, serve="127.0.0.1:%d" % sport, http="127.0.0.1:%d" % hport)
    stop, errors, rounds = threading.Event(), [], [0, 0]

    def watch():
        """GetStats of the first target and a /metrics scrape, over and over."""
        try:
            sub = Sub(sport)
            req = 1000
            while not stop.is_set():
                req += 1
                get_stats(sub, req, "t0@127.0.0.1", max_rows=4096)
                while True:
                    m = sub.recv()
                    if 17 in m and not snapshot_of(m)[4]:
                        break
                    if 15 in m:  # an Error: no such target yet
                        break
                rounds[0] += 1
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport,
                                            timeout=30) as r:
                    r.read()
                rounds[1] += 1
            sub.close()
        except Exception as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)
    try:
        n = 60000 // SCALE
        th = threading.Thread(target=watch, daemon=True)
        th.start()
        for i, p in enumerate(ports):
            data, _ = flood(b"", n, 1000, handle0=i * n)
            send_all(p, data, timeout=120)
        deadline = time.monotonic() + 120
        while True:
            st = dm.stats(timeout=120)
            if len(st["targets"]) == 3 and all(t["events"] == 2 * n for t in st["targets"]):
                break
            T.check(time.monotonic() < deadline, "every event counted: %r"
                    % [(t["name"], t["events"]) for t in st["targets"]])
            time.sleep(0.05)
        # a checkpoint of the full target after its last event, with the watchers running
        written = lambda: os.path.exists(os.path.join(dm.state, "t0@127.0.0.1",  # noqa: E731
                                                      "target.checkpoint"))
        D.wait_until(written, 60, "the first target's checkpoint")
        D.wait_until(lambda: rounds[0] > 0 and rounds[1] > 0, 60, "a GetStats and a scrape")
        stop.set()
        th.join(60)
        if errors:
            raise errors[0]
        tg = [D.by_name(st, "t%d@127.0.0.1" % i) for i in range(3)]
        dropped = [t["dropped_area_limit"] for t in tg]
        T.check(dropped[0] > 0, "the first target filled the budget (dropped %d)" % dropped[0])
        # The other two get what the first left: less than its next growth, which may still
        # hold a few of their first rows (how many depends on the row size). Past that every
        # area is refused, and each refused one is counted (its entry and its exit).
        for t in tg[1:]:
            k = len(t["stats"]["rows"])
            T.check(k < n // 100, "%s: the budget was full: %d areas kept" % (t["name"], k))
            T.eq(t["dropped_area_limit"], 2 * (n - k), "%s: every refused area counted"
                 % t["name"])
        kept = n - dropped[0] // 2
        T.eq(len(tg[0]["stats"]["rows"]), kept, "areas kept")
        T.check(all(r["count"] == 1 for r in tg[0]["stats"]["rows"]), "one call per kept area")
        used = st["daemon"]["memory_used"]
        T.check(used <= limit + limit // 8 + (1 << 20), "memory_used %d within the limit and "
                "its growth headroom" % used)
        before = D.proc_status_kib(dm.p.pid, "VmHWM")
        rc, _ = dm.stop(timeout=60)  # the shutdown's checkpoints too
        T.eq(rc, 0, "exit status")
        # the largest child reaped so far: this test runs first, tlcapd is its only child
        peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        bound = limit + limit // 8 + RSS_SLACK
        if SANITIZED:
            print("SKIP part: peak RSS bound (sanitizer build; peak %d KiB)" % peak)
        else:
            T.check(peak * 1024 <= bound, "peak RSS %d KiB within %d KiB (limit, headroom and "
                    "slack)" % (peak, bound >> 10))
        print("peak RSS %d KiB, memory_used %d, GetStats %d, scrapes %d"
              % (peak, used, rounds[0], rounds[1]))
    finally:
        stop.set()
        dm.kill()


def test_evlog_names_within_budget(d):
    """An evlog target sending 150,000 distinct names past --memory-limit 32M: the names the
    evlog mapping keeps (and the named copy served to subscribers) are in the budget, so
    memory_used stays within the limit and its headroom, the names past it are refused and
    counted, and the process's peak RSS stays within the limit, headroom and slack while a
    GetStats (with the names) and a scrape run."""
    limit = 32 << 20
    port, sport, hport = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--memory-limit", "32M", "--listen",
                              "ev=evlog@127.0.0.1:%d" % port],
                  serve="127.0.0.1:%d" % sport, http="127.0.0.1:%d" % hport)
    try:
        n = 150000 // SCALE
        blocks, tim = [], 1.0
        for b in range(0, n, 2000):
            items = []
            for i in range(b, min(n, b + 2000)):
                items.append(T.evlog_item(tim, 1, "+area_with_a_long_name_%07d" % i))
                items.append(T.evlog_item(tim + 1e-6, 1, "-area_with_a_long_name_%07d" % i))
                tim += 1e-5
            blocks.append(T.evlog_block(items))
        data = b"".join(blocks)
        send_all(port, data, timeout=120)
        deadline = time.monotonic() + 120
        while True:
            st = dm.stats(timeout=120)
            if st["targets"] and st["targets"][0]["bytes"] == len(data):
                break
            T.check(time.monotonic() < deadline, "every byte read")
            time.sleep(0.05)
        name = st["targets"][0]["name"]
        # the names served (a GetStats with names) and a scrape, then the same again
        for _ in range(2):
            sub = Sub(sport)
            get_stats(sub, 7, name, max_rows=4096)
            while True:
                m = sub.recv()
                if 15 in m or (17 in m and not snapshot_of(m)[4]):
                    break
            sub.close()
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=60) as r:
                r.read()
        st = dm.stats(timeout=120)
        tg = st["targets"][0]
        T.check(tg["dropped_area_limit"] > 0, "names past the budget refused and counted")
        kept = len(tg["stats"]["rows"])
        T.check(0 < kept < n, "some areas kept (%d of %d)" % (kept, n))
        T.check(all(r["count"] == 1 for r in tg["stats"]["rows"]), "one call per kept area")
        used = st["daemon"]["memory_used"]
        T.check(used <= limit + limit // 8 + (1 << 20), "memory_used %d within the limit and "
                "its growth headroom" % used)
        peak = D.proc_status_kib(dm.p.pid, "VmHWM")
        bound = limit + limit // 8 + RSS_SLACK
        if SANITIZED:
            print("SKIP part: peak RSS bound (sanitizer build; peak %d KiB)" % peak)
        else:
            T.check(peak * 1024 <= bound, "peak RSS %d KiB within %d KiB (limit, headroom and "
                    "slack)" % (peak, bound >> 10))
        print("evlog: %d of %d names kept, peak RSS %d KiB, memory_used %d" % (kept, n, peak,
                                                                              used))
        rc, _ = dm.stop(timeout=60)
        T.eq(rc, 0, "exit status")
    finally:
        dm.kill()


if __name__ == "__main__":
    T.main([test_rss_within_budget, test_evlog_names_within_budget, test_budget, test_parts, test_subscribe_large, test_mapping, test_dump_off_loop])
