#!/usr/bin/env python3
"""History ranges as the live statistics had them (SPEC 10, issue 37):

- test_wall_second: a wall-clock range is exact to the second whatever the segment size. Three
  bursts on one connection, over a second apart, in one large segment; the middle burst's
  arrival range gives exactly the brute-force oracle of that burst alone, through `tlcap stats`
  (protobuf GetStats.range), HTTP, a Python protobuf client and `tlcapd replay --state-dir`:
  while the segment is open (its arrival index beside it, `.widx`) and once sealed (in the
  manifest).
- test_crash_gap: send A, restart cleanly, send B on a connection held open, SIGKILL tlcapd,
  restart, send C on a new connection: the live statistics are the oracle of A, gap, B, gap, C,
  and so is every history path (tlcap stats --since -1h, a target-time range, HTTP, protobuf,
  tlcapd replay --state-dir); the end of the segment recovered after the crash is a gap.

Usage: test_history_ranges.py TLCAPD ORACLE_SEGMENTS TLCAP"""
import datetime
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
import test_history as H  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = C.TLCAPD, C.TLCAP
NAME = C.NAME


def wall(t):
    """RFC 3339 UTC with microseconds, for --since/--until."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def oracle_of(tmp, *parts):
    """The oracle over raw byte strings (each its own file), "GAP" between them as given."""
    items = []
    for i, p in enumerate(parts):
        if p == "GAP":
            items.append("GAP")
            continue
        path = os.path.join(tmp, "part%d.txt.BIN" % i)
        with open(path, "wb") as f:
            f.write(p)
        items.append(path)
    return C.oracle(items)


class Lab:
    def __init__(self, d, rotate="1000000000", extra=()):
        self.port, self.sport, self.hport = D.free_port(), D.free_port(), D.free_port()
        self.d = d
        self.rotate = rotate
        self.extra = list(extra)
        self.start()

    def start(self):
        self.dm = D.Daemon(TLCAPD, self.d, ["--listen", "l=bin11@127.0.0.1:%d" % self.port,
                                            "--rotate-bytes", self.rotate,
                                            "--checkpoint-interval", "0.3"] + self.extra,
                           store=True,
                           serve="127.0.0.1:%d" % self.sport, http="127.0.0.1:%d" % self.hport)

    def stats(self, *rng):
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % self.sport, "stats", NAME,
                              "--export", "json"] + list(rng), timeout=60)
        T.eq(rc, 0, "tlcap stats %r: %s" % (rng, err))
        return json.loads(out)

    def http(self, query):
        url = "http://127.0.0.1:%d/api/v1/targets/%s/stats?%s" % (self.hport, NAME, query)
        with urllib.request.urlopen(url, timeout=60) as r:
            return json.loads(r.read())

    def replay(self, *rng):
        rc, out, err = T.run([TLCAPD, "replay", "--state-dir", self.dm.state, "--target", NAME,
                              "--export", "json"] + list(rng), timeout=60)
        T.eq(rc, 0, "tlcapd replay %r: %s" % (rng, err))
        return json.loads(out)

    def proto(self, pb, rng):
        sock = D.connect(self.sport)
        buf = [b""]
        try:
            H.send(sock, pb, request_id=1, hello=pb.Hello(protocol_version=1, client_name="r"))
            T.eq(H.recv(sock, pb, buf).WhichOneof("msg"), "welcome", "Welcome")
            H.send(sock, pb, request_id=2, get_stats=pb.GetStats(target=NAME, neutral=True,
                                                                 range=rng))
            m = H.recv(sock, pb, buf)
            T.eq(m.WhichOneof("msg"), "stats", "GetStats with a range: %r" % m)
            return m.stats.snapshot
        finally:
            sock.close()

    def on_disk(self):
        """Bytes of the target's records in its segments (open and sealed)."""
        n = 0
        for p in C.segments(self.dm.state):
            try:
                n += os.path.getsize(p)
            except OSError:
                pass
        return n


def check_proto(snap, model, what):
    T.eq(snap.counters.events, model["counters"]["events"], what + ": events")
    T.eq(snap.counters.gaps, model["counters"]["gaps"], what + ": gaps")
    T.eq((snap.first_time, snap.last_time), (model["first_time"], model["last_time"]),
         what + ": first and last time")


def test_wall_second(d):
    g = C.Gen(C.SEED + 31)
    with tempfile.TemporaryDirectory() as tmp:
        pb = T.gen_pb2(tmp, H.PROTO_DIR)
        lab = Lab(d)
        try:
            s = D.connect(lab.port)
            bursts = [g.chunk(3000) for _ in range(3)]
            marks = []  # wall clock before each burst was sent, and after the last was stored
            stored = 0
            for i, b in enumerate(bursts):
                if i > 0:
                    # the next burst arrives over a second after the last stored record: a
                    # wall-clock gap needs real time to pass
                    time.sleep(1.2)
                marks.append(time.time())
                s.sendall(b)
                stored += len(b)
                D.wait_until(lambda: lab.on_disk() >= stored, 10, "burst %d stored" % i)
            time.sleep(1.2)
            marks.append(time.time())
            T.eq(len(C.segments(lab.dm.state)), 1, "one segment holds all three bursts")
            model = oracle_of(tmp, bursts[1])
            since, until = wall(marks[1]), wall(marks[2])

            def every_path(what):
                C.compare(lab.stats("--since", since, "--until", until), model,
                          "tlcap stats, " + what)
                C.compare(lab.http("since=%s&until=%s" % (since, until)), model, "HTTP, " + what)
                rng = pb.TimeRange(clock=pb.TimeRange.WALL, has_since=True,
                                   since=int(marks[1] * 1e9), has_until=True,
                                   until=int(marks[2] * 1e9))
                check_proto(lab.proto(pb, rng), model, "protobuf, " + what)
                C.compare(lab.replay("--since", since, "--until", until), model,
                          "tlcapd replay, " + what)
                # the first burst alone, and the last one from its start on
                C.compare(lab.stats("--since", wall(marks[0] - 0.5), "--until", since),
                          oracle_of(tmp, bursts[0]), "the first burst, " + what)
                C.compare(lab.stats("--since", wall(marks[2])), oracle_of(tmp, bursts[2]),
                          "the last burst, " + what)
                # the moment around an arrival time: the middle burst's events, and only them
                ref, span = wall(marks[1] + 0.6), "600ms"
                rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % lab.sport, "around",
                                      NAME, ref, "--span", span, "--export", "json"], timeout=60)
                T.eq(rc, 0, "tlcap around an arrival time: " + err)
                doc = json.loads(out)
                T.eq(doc["around"]["clock"], "wall", "the moment's clock")
                T.eq(doc["count"], len(bursts[1]) // 24, "tlcap around, " + what + ": events")
                C.compare(doc["stats"], model, "tlcap around an arrival time, " + what)
                rc, out, err = T.run([TLCAPD, "replay", "--state-dir", lab.dm.state, "--target",
                                      NAME, "--around", ref, "--span", span, "--export", "json"],
                                     timeout=60)
                T.eq(rc, 0, "tlcapd replay --around an arrival time: " + err)
                C.compare(json.loads(out)["stats"], model,
                          "tlcapd replay --around an arrival time, " + what)

            every_path("open segment")
            T.check(any(f.endswith(".widx") for f in os.listdir(os.path.join(lab.dm.state,
                                                                             NAME))),
                    "the open segment's arrival index is beside it")
            s.close()
            lab.dm.wait_stats(lambda st: not D.by_name(st, NAME)["connected"], 10,
                              what="disconnected")
            rc, _ = lab.dm.stop()
            T.eq(rc, 0, "exit status")
            names = os.listdir(os.path.join(lab.dm.state, NAME))
            T.check(not any(f.endswith(".widx") or f.endswith(".part") for f in names),
                    "sealed at shutdown, the arrival index in the manifest: %r" % names)
            mf = [f for f in names if f.endswith(".manifest")]
            with open(os.path.join(lab.dm.state, NAME, mf[0])) as f:
                walls = [x for x in f.read().splitlines() if x.startswith("wall ")]
            T.check(len(walls) >= 3, "arrival index entries in the manifest: %r" % walls)
            lab.start()
            every_path("sealed segment")
        finally:
            lab.dm.stop()


def test_crash_gap(d):
    g = C.Gen(C.SEED + 37)
    with tempfile.TemporaryDirectory() as tmp:
        pb = T.gen_pb2(tmp, H.PROTO_DIR)
        lab = Lab(d, rotate="20000")
        a, b, c = g.chunk(1500), g.chunk(1500), g.chunk(1500)
        C.send_and_close(lab.dm, lab.port, a)
        rc, _ = lab.dm.stop()
        T.eq(rc, 0, "clean stop")
        lab.start()
        s = D.connect(lab.port)
        s.sendall(b)
        want = (len(a) + len(b)) // 24
        lab.dm.wait_stats(lambda st: D.by_name(st, NAME)["stats"]["counters"]["events"] == want,
                          10, what="B counted")
        D.wait_until(lambda: lab.on_disk() >= len(a) + len(b), 10, "B stored")
        lab.dm.kill()
        s.close()
        lab.start()
        C.send_and_close(lab.dm, lab.port, c)
        # live: C's disconnect is a gap too (history counts a gap only between its events)
        C.compare(C.stats_of(lab.dm), oracle_of(tmp, a, "GAP", b, "GAP", c, "GAP"),
                  "live statistics")
        model = oracle_of(tmp, a, "GAP", b, "GAP", c)
        T.eq(model["counters"]["gaps"], 2, "the reference has two gaps")
        ta = struct.unpack_from("<q", a, 16)[0]
        tc = struct.unpack_from("<q", c, len(c) - 8)[0]
        C.compare(lab.stats("--since", "-1h"), model, "tlcap stats --since -1h")
        C.compare(lab.stats("--since", "ns:%d" % ta, "--until", "ns:%d" % (tc + 1)), model,
                  "tlcap stats, target-time range")
        C.compare(lab.http("since=-1h"), model, "HTTP since=-1h")
        C.compare(lab.http("since=ns:%d&until=ns:%d" % (ta, tc + 1)), model,
                  "HTTP, target-time range")
        rng = pb.TimeRange(clock=pb.TimeRange.TARGET, has_since=True, since=ta, has_until=True,
                           until=tc + 1)
        check_proto(lab.proto(pb, rng), model, "protobuf, target-time range")
        C.compare(lab.replay("--since", "-1h"), model, "tlcapd replay --since -1h")
        C.compare(lab.replay("--since", "ns:%d" % ta, "--until", "ns:%d" % (tc + 1)), model,
                  "tlcapd replay, target-time range")
        rc, _ = lab.dm.stop()
        T.eq(rc, 0, "exit status")


MAP = "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n\n00000003,worker,\n"


def window(data, lo, hi):
    """The records of a bin11 byte string whose time t has lo <= t <= hi."""
    return b"".join(data[i:i + 24] for i in range(0, len(data), 24)
                    if lo <= struct.unpack_from("<q", data, i + 16)[0] <= hi)


def test_around(d):
    """The moment (issue 36): `tlcapd replay --state-dir --target --around REF --span DUR`
    and `tlcap around TARGET REF` write every stored event within DUR of REF, every core, read
    through the index from plain and from zstd-compressed segments: the JSON events are the
    records of the window (times, cores, handles, the mapping's names) and their statistics
    the oracle's; bin11 is the window's records byte for byte, and `tlcapd replay` of it gives
    the same statistics; Text1 has a TIMELINE line per event."""
    g = C.Gen(C.SEED + 41)
    for compress in ("no", "yes"):
        sub = os.path.join(d, compress)
        os.mkdir(sub)
        with tempfile.TemporaryDirectory() as tmp:
            lab = Lab(sub, rotate="20000", extra=["--compress", compress])
            try:
                data = g.chunk(3000)
                C.send_and_close(lab.dm, lab.port, data)
                mp = os.path.join(tmp, "names.txt")
                with open(mp, "w") as f:
                    f.write(MAP)
                rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % lab.sport, "mapping",
                                    NAME, mp], timeout=30)
                T.eq(rc, 0, "tlcap mapping: " + err)
                tdir = os.path.join(lab.dm.state, NAME)
                if compress == "yes":
                    D.wait_until(lambda: sum(f.endswith(".zst") for f in os.listdir(tdir)) >= 3,
                                 20, "compressed segments")
                ref = struct.unpack_from("<q", data, 24 * 1500 + 16)[0]
                span = 40000
                want = window(data, ref - span, ref + span)
                T.check(len(want) >= 24 * 10, "a window of some events (%d)" % (len(want) // 24))
                raw = os.path.join(tmp, "all.txt.BIN")
                with open(raw, "wb") as f:
                    f.write(data)
                model = C.oracle(["--range", str(ref - span), str(ref + span + 1), raw])
                wt = [struct.unpack_from("<q", want, i + 16)[0] for i in range(0, len(want), 24)]
                wh = [struct.unpack_from("<I", want, i)[0] for i in range(0, len(want), 24)]
                what = "%s segments" % ("compressed" if compress == "yes" else "plain")

                def check_json(doc, how):
                    T.eq([e["time"] for e in doc["events"]], wt, how + ": event times")
                    T.eq([int(e["handle"], 16) for e in doc["events"]], wh, how + ": handles")
                    T.eq(doc["count"], len(wt), how + ": count")
                    T.eq((doc["around"]["ref"], doc["around"]["span"]), (ref, span),
                         how + ": the moment")
                    T.check(len({e["core"] for e in doc["events"]}) >= 2, how + ": every core")
                    T.check(all(e.get("name") == "worker" for e in doc["events"]
                                if int(e["handle"], 16) == 3), how + ": the mapping's names")
                    C.compare(doc["stats"], model, how + ": statistics")

                def replay(*extra):
                    return T.run([TLCAPD, "replay", "--state-dir", lab.dm.state, "--target",
                                  NAME, "--around", "ns:%d" % ref, "--span", "40us"]
                                 + list(extra), timeout=60)

                def around(*extra):
                    return T.run([TLCAP, "--connect", "127.0.0.1:%d" % lab.sport, "around", NAME,
                                  "ns:%d" % ref, "--span", "40us"] + list(extra), timeout=60)

                for how, run in (("tlcapd replay", replay), ("tlcap around", around)):
                    rc, out, err = run("--export", "json")
                    T.eq(rc, 0, how + " json: " + err)
                    check_json(json.loads(out), "%s, %s" % (how, what))
                    out_bin = os.path.join(tmp, "moment.bin")
                    rc, _, err = run("--export", "bin11", "--output", out_bin)
                    T.eq(rc, 0, how + " bin11: " + err)
                    with open(out_bin, "rb") as f:
                        T.check(f.read() == want, "%s, %s: bin11 is the window's records"
                                % (how, what))
                    rc, out, err = T.run([TLCAPD, "replay", out_bin, "--format", "bin11",
                                          "--export", "json"], timeout=60)
                    T.eq(rc, 0, "replay of the moment: " + err)
                    C.compare(json.loads(out), model, "%s, %s: its capture replayed"
                              % (how, what))
                    rc, out, err = run()
                    T.eq(rc, 0, how + " text1: " + err)
                    text = out.decode()
                    T.check("* TIMELINE" in text, how + ": a TIMELINE section")
                    tl = text.split("* TIMELINE", 1)[1].strip().splitlines()[1:]
                    T.eq(len(tl), len(wt), "%s, %s: a TIMELINE line per event" % (how, what))
                # usage errors
                rc, _, err = replay("--since", "ns:1")
                T.eq(rc, 2, "--around with --since: " + err)
                rc, _, err = T.run([TLCAPD, "replay", "--state-dir", lab.dm.state, "--target",
                                    NAME, "--around", "soon"], timeout=30)
                T.eq(rc, 2, "a bad REF: " + err)
                rc, _, err = around("--export", "xml")
                T.eq(rc, 1, "tlcap around --export xml: " + err)
                rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % lab.sport, "around",
                                    NAME, "ns:1", "--span", "forever"], timeout=30)
                T.eq(rc, 1, "a bad span: " + err)
                T.check("duration" in err, "says why: " + err)
            finally:
                lab.dm.stop()


if __name__ == "__main__":
    T.main([test_wall_second, test_crash_gap, test_around])
