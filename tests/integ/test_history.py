#!/usr/bin/env python3
"""History from a running daemon (SPEC 10): range statistics computed off its loop
from the target's stored segments, through `tlcap stats --since/--until` (protobuf GetStats
with a range), Google's protobuf runtime (GetStats.range: Snapshot.range, ERR_BUSY),
HTTP /api/v1/targets/NAME/stats?since=&until= and a mid-stream join (`tlcap watch --since`,
Subscribe.history), each against the brute-force oracle (tests/oracle through oracle_segments)
over the records of the range: inside one segment, across segments, across a reconnect gap,
an empty range, a wall-clock range over everything and one before everything.

The stream generator, the oracle runner and the comparison are test_continuity.py's (imported:
it reads the same arguments).

Usage: test_history.py TLCAPD ORACLE_SEGMENTS TLCAP"""
import json
import os
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import test_continuity as C  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = C.TLCAPD, C.TLCAP
NAME = C.NAME
PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")


class Setup:
    """One daemon (storage, subscribers, HTTP) with two connections' worth of a bin11 target
    stored in small segments; kept running: the queries are asked of the live daemon."""

    def __init__(self, d):
        g = C.Gen(C.SEED + 11)
        self.port, self.sport, self.hport = D.free_port(), D.free_port(), D.free_port()
        self.dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % self.port,
                                       "--rotate-bytes", "20000"], store=True,
                           serve="127.0.0.1:%d" % self.sport, http="127.0.0.1:%d" % self.hport)
        self.a, self.b = g.chunk(2000), g.chunk(2000)
        C.send_and_close(self.dm, self.port, self.a)
        C.send_and_close(self.dm, self.port, self.b)
        self.dm.wait_sealed()  # the answer came once the bytes were written; then the seals
        self.ta = [struct.unpack_from("<q", self.a, 24 * i + 16)[0] for i in range(2000)]
        self.tb = [struct.unpack_from("<q", self.b, 24 * i + 16)[0] for i in range(2000)]
        self.segs = C.segments(self.dm.state)
        T.check(len(self.segs) >= 5, "several segments (%d)" % len(self.segs))

    def cli(self, *args):
        return T.run([TLCAP, "--connect", "127.0.0.1:%d" % self.sport] + list(args), timeout=60)

    def stats(self, *rng):
        rc, out, err = self.cli("stats", NAME, "--export", "json", *rng)
        return rc, (json.loads(out) if rc == 0 else None), err

    def http(self, query, name=NAME):
        url = "http://127.0.0.1:%d/api/v1/targets/%s/stats?%s" % (self.hport, name, query)
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


def ranges(s):
    return (("inside one segment", s.ta[100], s.ta[300]),
            ("across segments", s.ta[500], s.ta[1500]),
            ("across the reconnect gap", s.ta[1800], s.tb[300]))


def test_cli_http(d):
    """tlcap stats --since/--until and HTTP ?since=&until= against the oracle."""
    s = Setup(d)
    try:
        for what, lo, hi in ranges(s):
            model = C.oracle(["--range", str(lo), str(hi)] + s.segs)
            rc, live, err = s.stats("--since", "ns:%d" % lo, "--until", "ns:%d" % hi)
            T.eq(rc, 0, what + ": tlcap stats: " + err)
            C.compare(live, model, "tlcap stats " + what)
            st, doc = s.http("since=ns:%d&until=ns:%d" % (lo, hi))
            T.eq(st, 200, what + ": HTTP status %r" % doc)
            C.compare(doc, model, "HTTP " + what)
            if what.startswith("across the reconnect"):
                T.eq(live["counters"]["gaps"], 1, what + ": the disconnect is a gap")
        # an empty range
        rc, live, err = s.stats("--since", "ns:%d" % s.ta[100], "--until", "ns:%d" % s.ta[100])
        T.eq(rc, 0, "empty range: " + err)
        T.eq(live["counters"]["events"], 0, "empty range: events")
        st, doc = s.http("since=ns:%d&until=ns:%d" % (s.ta[100], s.ta[100]))
        T.eq((st, doc["counters"]["events"]), (200, 0), "HTTP empty range")
        # --since after --until: a usage error (exit 2), a 400
        rc, _, err = s.stats("--since", "ns:%d" % s.ta[300], "--until", "ns:%d" % s.ta[100])
        T.eq(rc, 2, "--since after --until: " + err)
        st, doc = s.http("since=ns:%d&until=ns:%d" % (s.ta[300], s.ta[100]))
        T.eq(st, 400, "HTTP since after until")
        T.eq(doc["error"]["status"], 400, "HTTP error document")
        rc, _, err = s.stats("--since", "yesterday")
        T.eq(rc, 2, "bad T: " + err)
        st, doc = s.http("since=yesterday")
        T.eq(st, 400, "HTTP bad T")
        st, doc = s.http("from=ns:1")
        T.eq(st, 400, "HTTP unknown parameter")
        # wall clock: everything (the open segment included), and before everything
        model = C.oracle(["--range", str(-2**63), str(2**63 - 1)] + s.segs)
        rc, live, err = s.stats("--since", "2000-01-01T00:00:00Z", "--until", "-0s")
        T.eq(rc, 0, "wall-clock range: " + err)
        C.compare(live, model, "tlcap stats wall-clock range over everything")
        st, doc = s.http("since=-1d")
        T.eq(st, 200, "HTTP wall-clock range %r" % doc)
        C.compare(doc, model, "HTTP wall-clock range over everything")
        rc, _, err = s.stats("--until", "2000-01-01T00:00:00Z")
        T.eq(rc, 1, "wall-clock range before every segment: " + err)
        T.check("no segment in the range" in err, "says why: " + err)
        st, doc = s.http("until=2000-01-01T00:00:00Z")
        T.eq(st, 404, "HTTP range before every segment")
        # a target with no segments
        rc, _, err = s.cli("stats", "nosuch", "--since", "-1h")
        T.eq(rc, 1, "no such target: " + err)
        st, doc = s.http("since=-1h", name="nosuch")
        T.eq(st, 404, "HTTP no such target")
    finally:
        s.dm.stop()


def frame(m):
    """protobuf's delimited framing: a varint length, then the message."""
    b = m.SerializeToString()
    n, out = len(b), bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + b


def send(sock, pb, **kw):
    sock.sendall(frame(pb.ClientMessage(**kw)))


def recv(sock, pb, buf, timeout=60.0):
    from google.protobuf.internal.decoder import _DecodeVarint32
    deadline = time.monotonic() + timeout
    while True:
        if buf[0]:
            try:
                n, pos = _DecodeVarint32(buf[0], 0)
            except IndexError:
                n = None
            if n is not None and len(buf[0]) >= pos + n:
                m = pb.ServerMessage()
                m.ParseFromString(buf[0][pos:pos + n])
                buf[0] = buf[0][pos + n:]
                return m
        left = deadline - time.monotonic()
        T.check(left > 0, "no message within %.0f s" % timeout)
        sock.settimeout(left)
        b = sock.recv(1 << 20)
        T.check(b, "the daemon closed the connection")
        buf[0] += b


def test_protobuf(d):
    """GetStats with a range through Google's runtime: Stats{Snapshot with range, segments},
    events equal to the oracle's; a second range query on the same connection while one runs
    gets ERR_BUSY (not fatal), a live GetStats meanwhile is answered; since > until is
    ERR_BAD_REQUEST."""
    with tempfile.TemporaryDirectory() as tmp:
        pb = T.gen_pb2(tmp, PROTO_DIR)
        s = Setup(d)
        try:
            sock = D.connect(s.sport)
            buf = [b""]
            send(sock, pb, request_id=1, hello=pb.Hello(protocol_version=1, client_name="hist"))
            T.eq(recv(sock, pb, buf).WhichOneof("msg"), "welcome", "Welcome")
            what, lo, hi = ranges(s)[1]
            rng = pb.TimeRange(clock=pb.TimeRange.TARGET, has_since=True, since=lo,
                               has_until=True, until=hi)
            # three requests in one write: the range query, a second one, a live GetStats
            msgs = []
            for rid, kw in ((2, dict(get_stats=pb.GetStats(target=NAME, names=True,
                                                             neutral=True, range=rng))),
                            (3, dict(get_stats=pb.GetStats(target=NAME, range=rng))),
                            (4, dict(get_stats=pb.GetStats(target=NAME)))):
                msgs.append(pb.ClientMessage(request_id=rid, **kw))
            sock.sendall(b"".join(frame(m) for m in msgs))
            got = {}
            while len(got) < 3:
                m = recv(sock, pb, buf)
                got[m.request_id] = m
            T.eq(got[3].WhichOneof("msg"), "error", "second range query: %r" % got[3])
            T.eq(got[3].error.code, pb.ERR_BUSY, "second range query: ERR_BUSY")
            T.check(not got[3].error.fatal, "ERR_BUSY is not fatal")
            T.eq(got[4].WhichOneof("msg"), "stats", "live GetStats answered meanwhile")
            T.check(not got[4].stats.snapshot.HasField("range"), "live stats carry no range")
            T.eq(got[4].stats.snapshot.counters.events, 4000, "live events")
            T.eq(got[2].WhichOneof("msg"), "stats", "range GetStats: %r" % got[2])
            snap = got[2].stats.snapshot
            T.check(snap.HasField("range"), "Snapshot.range set")
            T.eq((snap.range.since, snap.range.until), (lo, hi), "the range echoed")
            T.check(snap.segments >= 2, "segments read (%d)" % snap.segments)
            model = C.oracle(["--range", str(lo), str(hi)] + s.segs)
            T.eq(snap.counters.events, model["counters"]["events"], "events of the range")
            T.eq((snap.first_time, snap.last_time), (model["first_time"], model["last_time"]),
                 "times of the range")
            # the connection takes another query once the first is done
            send(sock, pb, request_id=5, get_stats=pb.GetStats(target=NAME, range=rng))
            m = recv(sock, pb, buf)
            T.eq((m.request_id, m.WhichOneof("msg")), (5, "stats"), "next query answered")
            bad = pb.TimeRange(clock=pb.TimeRange.TARGET, has_since=True, since=hi,
                               has_until=True, until=lo)
            send(sock, pb, request_id=6, get_stats=pb.GetStats(target=NAME, range=bad))
            m = recv(sock, pb, buf)
            T.eq((m.request_id, m.error.code), (6, pb.ERR_BAD_REQUEST), "since after until")
            # a query cancelled by a closing subscriber does not disturb the daemon
            send(sock, pb, request_id=7, get_stats=pb.GetStats(target=NAME, range=rng))
            sock.close()
            st, doc = s.http("since=ns:%d&until=ns:%d" % (lo, hi))
            T.eq(st, 200, "a query after a cancelled one")
        finally:
            rc, _ = s.dm.stop()
            T.eq(rc, 0, "exit status")


def test_join(d):
    """tlcap watch --since T: first the history since T (the oracle over the stored records
    from T), then the live statistics (every event)."""
    s = Setup(d)
    try:
        lo = s.ta[1500]
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % s.sport, "watch", NAME,
                              "--since", "ns:%d" % lo, "--count", "2"], timeout=60)
        T.eq(rc, 0, "watch: " + err)
        lines = [json.loads(x) for x in out.decode().splitlines() if x.startswith("{")]
        snaps = [x for x in lines if x.get("type") in (None, "history")]
        T.eq(len(snaps), 2, "two snapshots: %r" % [x.get("type") for x in lines])
        h, live = snaps
        T.eq(h.get("type"), "history", "the history comes first")
        T.eq(h["since"], lo, "history since")
        T.eq(h["clock"], "target", "history clock")
        C.compare(h["stats"], C.oracle(["--range", str(lo), str(2**63 - 1)] + s.segs),
                  "history since T")
        T.eq(live.get("type"), None, "then the live statistics")
        T.eq(live["counters"]["events"], 4000, "live: every event")
        rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % s.sport, "watch", NAME,
                            "--since", "soon"], timeout=30)
        T.eq(rc, 2, "watch --since with a bad T: " + err)
    finally:
        s.dm.stop()


def test_nostore(d):
    """Without storage there is no history: an error naming why, exit 1; HTTP 501."""
    sport, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, [], serve="127.0.0.1:%d" % sport, http="127.0.0.1:%d" % hport)
    try:
        rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "stats", "x", "--since",
                            "-1h"], timeout=30)
        T.eq(rc, 1, "no storage: " + err)
        T.check("store" in err, "says why: " + err)
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api/v1/targets/x/stats?since=-1h"
                                   % hport, timeout=30)
            T.check(False, "HTTP without storage answered 200")
        except urllib.error.HTTPError as e:
            T.eq(e.code, 501, "HTTP without storage")
    finally:
        dm.stop()


if __name__ == "__main__":
    T.main([test_cli_http, test_protobuf, test_join, test_nostore])
