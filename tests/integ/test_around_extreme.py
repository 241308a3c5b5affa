#!/usr/bin/python3
"""The moment of an extreme (SPEC 13, docs/budgets.md "The moment of an extreme") against a real
tlcapd, and offline:
- `tlcap around TARGET max:KIND:AREA@CONTEXT --span DUR` writes the stored events from the
  start of the sample that made that MAX (or MIN) - DUR to its end + DUR: exactly the records
  of the stream sent whose time lies there (bin11, byte for byte, worked out here from the
  stream), the activation's own events among them; the JSON export names its start and end;
- the area by its mapped name or a handle (0x.., 8 hex digits, decimal), the context by name
  or by id;
- `tlcapd replay --state-dir --target --around max:...` finds the same sample in the
  statistics of the stored segments and writes the same events;
- errors: an area with samples in several contexts and none named (the message lists them),
  an unknown area or context, an area with no sample yet, a kind that does not apply to a data
  area, no sample of that kind yet: exit status 1 with the same messages live and offline; a
  bad spelling is a usage error (exit 2) before anything is asked.

Usage: test_around_extreme.py TLCAPD TLCAP"""
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]
NAME = "l@127.0.0.1"
X, S, R, E, W = 0, 1, 2, 3, 4
WORKER, FILLER, VAR, IDLE = 0x2, 0x5, 0x20000000, 0x7
MAP = ("* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n\n"
       "00000002,worker,\n00000005,filler,\n00000007,idle,\n")

# worker (handle 2) on core 0, three activations, worked out by hand:
#   A: E@1000000 X@1000200                        NET 200, CALL 200
#   B: E@2000000 S@2000100 R@2000300 X@2000450    NET 100 + 150 = 250, CALL 450
#   C: E@3000000 X@3000240                        NET 240, CALL 240
# so core 0's MAX NET is B (2000000..2000450), its MIN NET is A (1000000..1000200), its MAX
# CALL is B too; worker on core 1 once: E@1500000 X@1500300, NET 300 (1500000..1500300), more
# than any of core 0's: the area's extremes differ per context.
WORKER_CORE0 = [(E, 1000000), (X, 1000200), (E, 2000000), (S, 2000100), (R, 2000300),
                (X, 2000450), (E, 3000000), (X, 3000240)]
WORKER_CORE1 = [(E, 1500000), (X, 1500300)]
MAX_NET_CORE0 = (2000000, 2000450)
MIN_NET_CORE0 = (1000000, 1000200)
MAX_NET_CORE1 = (1500000, 1500300)


def stream():
    """The records in time order: worker's activations, a filler function on core 2 every
    700 ns (entry at t, exit at t + 100), a variable written once (no PERIOD yet)."""
    recs = [(t, T.bin11(WORKER, ty, 0, 0, t)) for (ty, t) in WORKER_CORE0]
    recs += [(t, T.bin11(WORKER, ty, 1, 0, t)) for (ty, t) in WORKER_CORE1]
    recs.append((1200000, T.bin11(VAR, W, 0, 9, 1200000)))
    for t in range(33, 4000000, 700):
        recs.append((t, T.bin11(FILLER, E, 2, 0, t)))
        recs.append((t + 100, T.bin11(FILLER, X, 2, 0, t + 100)))
    recs.sort(key=lambda r: r[0])
    return b"".join(r for (_, r) in recs)


def window(data, lo, hi):
    """The records of a bin11 byte string whose time t has lo <= t <= hi."""
    return b"".join(data[i:i + 24] for i in range(0, len(data), 24)
                    if lo <= struct.unpack_from("<q", data, i + 16)[0] <= hi)


def times_of(data):
    return [struct.unpack_from("<q", data, i + 16)[0] for i in range(0, len(data), 24)]


def test_around_extreme(d):
    data = stream()
    nrec = len(data) // 24
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port], store=True,
                  serve="127.0.0.1:%d" % sport)
    try:
        s = D.connect(port)
        s.sendall(data)
        s.shutdown(1)
        D.wait_eof(s, timeout=30)
        s.close()
        dm.wait_stats(lambda st: any(t["name"] == NAME and t["records"] == nrec
                                     for t in st["targets"]), what="every record")
        mp = os.path.join(d, "names.txt")
        with open(mp, "w") as f:
            f.write(MAP)

        def cli(*args):
            return T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport] + list(args), timeout=60)

        rc, _, err = cli("mapping", NAME, mp)
        T.eq(rc, 0, "tlcap mapping: %s" % err)
        D.wait_until(lambda: os.path.exists(os.path.join(dm.state, NAME, "target.mapping")),
                     10, "the kept mapping")
        dm.wait_sealed()

        def around(ref, *extra):
            return cli("around", NAME, ref, *extra)

        def replay(ref, *extra):
            return T.run([TLCAPD, "replay", "--state-dir", dm.state, "--target", NAME,
                          "--around", ref] + list(extra), timeout=60)

        cases = [
            # REF, span, span in ns, the sample's stretch, its own events
            ("max:net:worker@core0", "1us", 1000, MAX_NET_CORE0,
             [T.bin11(WORKER, ty, 0, 0, t) for (ty, t) in WORKER_CORE0[2:6]]),
            ("min:net:worker@core0", "500ns", 500, MIN_NET_CORE0,
             [T.bin11(WORKER, ty, 0, 0, t) for (ty, t) in WORKER_CORE0[0:2]]),
            ("max:net:worker@1", "2us", 2000, MAX_NET_CORE1,
             [T.bin11(WORKER, ty, 1, 0, t) for (ty, t) in WORKER_CORE1]),
            ("max:call:0x00000002@core0", "1us", 1000, MAX_NET_CORE0,
             [T.bin11(WORKER, ty, 0, 0, t) for (ty, t) in WORKER_CORE0[2:6]]),
            ("max:NET:00000002@CORE1", "1us", 1000, MAX_NET_CORE1,
             [T.bin11(WORKER, ty, 1, 0, t) for (ty, t) in WORKER_CORE1]),
            ("min:call:2@core0", "1us", 1000, MIN_NET_CORE0,
             [T.bin11(WORKER, ty, 0, 0, t) for (ty, t) in WORKER_CORE0[0:2]]),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            for (ref, span, span_ns, (a, b), own) in cases:
                want = window(data, a - span_ns, b + span_ns)
                T.check(len(want) >= 24 * 4, "%s: a window of some events" % ref)
                out_bin = os.path.join(tmp, "live.bin")
                rc, _, err = around(ref, "--span", span, "--export", "bin11", "--output",
                                    out_bin)
                T.eq(rc, 0, "tlcap around %s: %s" % (ref, err))
                with open(out_bin, "rb") as f:
                    got = f.read()
                T.check(got == want, "%s: the records from start - %s to end + %s (%d vs %d)"
                        % (ref, span, span, len(got) // 24, len(want) // 24))
                T.check(all(r in got for r in own), ref + ": the activation's own events")
                rc, out, err = around(ref, "--span", span, "--export", "json")
                T.eq(rc, 0, "tlcap around %s json: %s" % (ref, err))
                j = json.loads(out)
                T.eq((j["around"]["ref"], j["around"]["since"], j["around"]["until"],
                      j["around"]["span"], j["around"]["epoch"]),
                     (a, a - span_ns, b + span_ns + 1, span_ns, 0),
                     ref + ": the moment of the sample's start and end")
                T.eq([e["time"] for e in j["events"]], times_of(want), ref + ": json events")
                # offline: the statistics of the stored segments give the same sample
                rp_bin = os.path.join(tmp, "replay.bin")
                rc, _, err = replay(ref, "--span", span, "--export", "bin11", "--output", rp_bin)
                T.eq(rc, 0, "tlcapd replay --around %s: %s" % (ref, err))
                with open(rp_bin, "rb") as f:
                    T.check(f.read() == got, ref + ": replay's moment is tlcap around's")
                rc, out, err = replay(ref, "--span", span, "--export", "json")
                T.eq(rc, 0, "tlcapd replay --around %s json: %s" % (ref, err))
                rj = json.loads(out)
                T.eq((rj["around"], [e["time"] for e in rj["events"]]),
                     (j["around"], times_of(want)), ref + ": replay's json moment")

        # errors: the same message live (exit 1) and offline (exit 1)
        errors = [
            ("max:net:worker", ["max:net:worker: worker has samples in 2 contexts", "core0, core1"]),
            ("max:net:worker@core7", ["no context core7 in worker; its contexts: core0, core1"]),
            ("max:net:nosuch", ["no area named nosuch"]),
            ("max:gross:idle", ["no sample of idle (0x00000007) yet"]),
            ("max:net:0x20000000", ["is a data area: it has no net samples"]),
            ("min:period:20000000", ["no period sample of 20000000 yet"]),
            ("max:period:0x20000000@core0", ["is a data area: it has no contexts"]),
        ]
        for (ref, says) in errors:
            for (how, run) in (("tlcap around", around), ("tlcapd replay", replay)):
                rc, _, err = run(ref)
                T.eq(rc, 1, "%s %s fails: %s" % (how, ref, err))
                T.check(all(w in err for w in says), "%s %s says why: %s" % (how, ref, err))
        for bad in ("max:net:", "max:bogus:worker", "max:net", "min:net:worker@", "max::w"):
            rc, _, err = around(bad)
            T.eq(rc, 2, "%r is a usage error: %s" % (bad, err))
            T.check("not an extreme's REF" in err, "says why: " + err)
            rc, _, err = replay(bad)
            T.eq(rc, 2, "replay: %r is a usage error: %s" % (bad, err))
            T.check("not an extreme's REF" in err, "replay says why: " + err)
    finally:
        dm.stop()


if __name__ == "__main__":
    T.main([test_around_extreme])
