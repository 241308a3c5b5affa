#!/usr/bin/python3
"""The moment of a violation (issue 36, SPEC 13, docs/budgets.md "The moment") against a real
tlcapd started with --budgets:
- `tlcap around TARGET v:BUDGET:N --span DUR` writes the stored events from the violation's
  start - DUR to its end + DUR: exactly the records of the stream sent whose time lies there
  (bin11, byte for byte, worked out here from the stream), among them the violating call's
  entry and exit; the JSON export names the moment (its start and the span);
- a violation no longer kept (budget_keep 2: the last two and the worst) is a clear error
  naming the kept ones; an unknown budget names the target's budgets; a bad spelling is a
  usage error before anything is asked.

- `tlcapd replay --state-dir --target --budgets FILE --around v:BUDGET:N` runs the budgets
  over the stored segments and writes the same moment as `tlcap around` (the first violation
  too, which the daemon no longer keeps); without --budgets it is a usage error.

- the watch survives restarts (docs/budgets.md "Restarts"): after a clean restart `tlcap
  violations` says the same; after a SIGKILL, what the last checkpoint saved; a damaged file
  is refused, the target's budgets afresh.

Usage: test_budget_moment.py TLCAPD TLCAP"""
import contextlib
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

BUDGETS = b"""[budget main_call]
area = 0x00000000
stat = call
max = 250ns

[budget quiet]
area = 00000005
stat = call
max = 1s
"""

# main (handle 0, core 0) called three times over its 250 ns: CALL 260, 300, 280 ns, so its
# violations are 1, 2, 3; with two kept, 1 is gone and the worst is 2
CALLS = [(1000000, 1000260), (2000000, 2000300), (3000000, 3000280)]


def stream():
    """The records, in time order: main's calls on core 0, a filler function (handle 5) called
    every 700 ns on core 1 (entry at t, exit at t + 100)."""
    recs = []
    for (a, b) in CALLS:
        recs.append((a, T.bin11(0, 3, 0, 0, a)))
        recs.append((b, T.bin11(0, 0, 0, 0, b)))
    for t in range(33, 4000000, 700):
        recs.append((t, T.bin11(5, 3, 1, 0, t)))
        recs.append((t + 100, T.bin11(5, 0, 1, 0, t + 100)))
    recs.sort(key=lambda r: r[0])
    return b"".join(r for (_, r) in recs)


def window(data, lo, hi):
    """The records of a bin11 byte string whose time t has lo <= t <= hi."""
    return b"".join(data[i:i + 24] for i in range(0, len(data), 24)
                    if lo <= struct.unpack_from("<q", data, i + 16)[0] <= hi)


def send(port, data):
    s = D.connect(port)
    s.sendall(data)
    s.shutdown(1)
    D.wait_eof(s, timeout=30)
    s.close()


def start(d, env=None):
    b = os.path.join(d, "b.ini")
    with open(b, "wb") as f:
        f.write(BUDGETS)
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port, "--budgets", b,
                              "--budget-keep", "2", "--checkpoint-interval", "0.3"],
                  store=True, serve="127.0.0.1:%d" % sport, env=env)
    return dm, port, sport, b


@contextlib.contextmanager
def running(d, env=None, kill=False):
    """tlcapd on state directory d (start): yields (daemon, port, serve port, budgets file);
    stopped at the end (SIGTERM), or SIGKILLed with kill."""
    dm, port, sport, bfile = start(d, env)
    try:
        yield dm, port, sport, bfile
    finally:
        if kill:
            dm.kill()
        else:
            dm.stop()


def violations(sport):
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "violations", NAME,
                          "--json"], timeout=30)
    T.eq(rc, 0, "tlcap violations: %s" % err)
    return json.loads(out)


def wait_total(sport, n, what):
    """The violations document once it counts n violations."""
    return D.wait_until(lambda: (lambda x: x if x["total"] == n else None)(violations(sport)),
                        10, what)


def test_around_violation(d):
    data = stream()
    with running(d) as (dm, port, sport, bfile):
        send(port, data)
        doc = wait_total(sport, 3, "three violations")
        mc = {b["name"]: b for b in doc["budgets"]}["main_call"]
        kept = {v["ref"]: v for v in mc["recent"]}
        T.eq(mc["worst"]["ref"], "v:main_call:2", "the worst: the 300 ns call")
        T.eq(sorted(kept), ["v:main_call:2", "v:main_call:3"], "the last two kept")
        dm.wait_sealed()

        def replay(ref, *extra):
            return T.run([TLCAPD, "replay", "--state-dir", dm.state, "--target", NAME,
                          "--budgets", bfile, "--around", ref] + list(extra), timeout=60)

        def around(ref, *extra):
            return T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "around", NAME, ref]
                         + list(extra), timeout=60)

        with tempfile.TemporaryDirectory() as tmp:
            for n, span, span_ns in ((2, "1us", 1000), (3, "2500ns", 2500)):
                (a, b) = CALLS[n - 1]
                ref = "v:main_call:%d" % n
                T.eq((kept[ref]["start_ns"], kept[ref]["end_ns"]), (a, b), ref + ": its call")
                out_bin = os.path.join(tmp, "m%d.bin" % n)
                rc, _, err = around(ref, "--span", span, "--export", "bin11", "--output",
                                    out_bin)
                T.eq(rc, 0, "tlcap around %s: %s" % (ref, err))
                with open(out_bin, "rb") as f:
                    got = f.read()
                want = window(data, a - span_ns, b + span_ns)
                T.check(len(want) >= 24 * 6, "a window of some events (%d)" % (len(want) // 24))
                T.check(got == want, "%s: the records from start - %s to end + %s (%d vs %d)"
                        % (ref, span, span, len(got) // 24, len(want) // 24))
                T.check(T.bin11(0, 3, 0, 0, a) in got and T.bin11(0, 0, 0, 0, b) in got,
                        ref + ": the violating call's entry and exit")
                times = [struct.unpack_from("<q", got, i + 16)[0] for i in range(0, len(got), 24)]
                T.check(all(a - span_ns <= t <= b + span_ns for t in times),
                        ref + ": every event within the moment")
                rc, out, err = around(ref, "--span", span, "--export", "json")
                T.eq(rc, 0, "tlcap around %s json: %s" % (ref, err))
                j = json.loads(out)
                T.eq((j["around"]["ref"], j["around"]["span"]), (a, span_ns),
                     ref + ": the moment starts at the violation")
                T.eq([e["time"] for e in j["events"]], times, ref + ": json events")
                # tlcapd replay finds it by running the budgets over the stored segments
                rp_bin = os.path.join(tmp, "r%d.bin" % n)
                rc, _, err = replay(ref, "--span", span, "--export", "bin11", "--output",
                                    rp_bin)
                T.eq(rc, 0, "tlcapd replay --around %s: %s" % (ref, err))
                with open(rp_bin, "rb") as f:
                    T.check(f.read() == got, ref + ": replay's moment is tlcap around's")
                rc, out, err = replay(ref, "--span", span, "--export", "json")
                T.eq(rc, 0, "tlcapd replay --around %s json: %s" % (ref, err))
                rj = json.loads(out)
                T.eq((rj["around"], [e["time"] for e in rj["events"]]),
                     (j["around"], times), ref + ": replay's json moment")
            # replay counts every violation: the first, no longer kept live, is found too
            (a, b) = CALLS[0]
            rc, out, err = replay("v:main_call:1", "--span", "1us", "--export", "bin11")
            T.eq(rc, 0, "replay of the first violation: %s" % err)
            T.check(out == window(data, a - 1000, b + 1000), "replay: the first violation's "
                    "moment")
            # the default span (10 ms) covers the whole second call and its neighbours
            rc, out, err = around("v:main_call:3", "--export", "json")
            T.eq(rc, 0, "default span: " + err)
            T.eq(json.loads(out)["around"]["span"], 10000000, "the default span")

        # errors
        rc, _, err = around("v:main_call:1")
        T.eq(rc != 0, True, "a violation no longer kept fails")
        T.check("v:main_call:1 is not among the last 2 kept violations of main_call; kept: 2..3"
                in err, "names the kept ones: " + err)
        rc, _, err = around("v:main_call:9")
        T.check(rc != 0 and "main_call has had 3 violations" in err, "past the last: " + err)
        rc, _, err = around("v:nope:1")
        T.check(rc != 0 and "no budget named nope" in err and "main_call, quiet" in err,
                "an unknown budget names the target's budgets: " + err)
        for bad in ("v:main_call:0", "v:main_call:", "v::1", "v:main_call:x1", "v:a b:1"):
            rc, _, err = around(bad)
            T.eq(rc, 2, "%r is a usage error: %s" % (bad, err))
            T.check("not a violation's REF" in err, "says why: " + err)
        rc, _, err = replay("v:main_call:4")
        T.check(rc == 1 and "main_call has had 3 violations" in err, "replay, past the last: "
                + err)
        rc, _, err = replay("v:nope:1")
        T.check(rc == 1 and "no budget named nope" in err, "replay, an unknown budget: " + err)
        rc, _, err = T.run([TLCAPD, "replay", "--state-dir", dm.state, "--target", NAME,
                            "--around", "v:main_call:2"], timeout=60)
        T.check(rc == 2 and "needs --budgets FILE" in err, "replay without --budgets: " + err)
        rc, _, err = replay("v:main_call:0")
        T.check(rc == 2 and "not a violation's REF" in err, "replay, a bad REF: " + err)


def watched(doc):
    """What the watch holds, for comparing across a restart: per budget its total, kept and
    worst (every field), and the counts."""
    return (doc["total"], doc["dropped_keys"],
            sorted((b["name"], b["total"], json.dumps(b["worst"], sort_keys=True),
                    json.dumps(b["recent"], sort_keys=True),
                    json.dumps(sorted(b["counts"], key=lambda c: json.dumps(c, sort_keys=True)),
                               sort_keys=True))
                   for b in doc["budgets"]))


def saved_all(dm):
    """The violations the last saved watch holds (its header: docs/budgets.md "Restarts"),
    or -1 when there is none."""
    try:
        with open(os.path.join(dm.state, NAME, "budgets.checkpoint"), "rb") as f:
            head = f.read(32)
    except FileNotFoundError:
        return -1
    return struct.unpack_from("<Q", head, 16)[0] if len(head) == 32 else -1


def test_restarts(d):
    """The watch survives a clean restart (the same document) and a SIGKILL (the counts of
    the last checkpoint); a damaged file is refused with a log line, the watch afresh; a
    forgotten target's saved watch is removed."""
    with running(d) as (dm, port, sport, _):
        send(port, stream())
        before = wait_total(sport, 3, "three violations")
    with running(d, kill=True) as (dm, port, sport, _):
        T.eq(watched(violations(sport)), watched(before), "a clean restart keeps the watch")
        T.check("budgets restored (3 violations)" in dm.log(), "logged: " + dm.log()[-500:])
        # a fourth violation (CALL 270 ns), saved by a checkpoint, then SIGKILL
        send(port, T.bin11(0, 3, 0, 0, 5000000) + T.bin11(0, 0, 0, 0, 5000270))
        four = wait_total(sport, 4, "the fourth violation")
        D.wait_until(lambda: saved_all(dm) == 4, 10, "a checkpoint with the fourth")
    with running(d) as (dm, port, sport, _):
        doc = violations(sport)
        T.eq(watched(doc), watched(four), "after SIGKILL: the watch of the last checkpoint")
        mc = {b["name"]: b for b in doc["budgets"]}["main_call"]
        T.eq(([v["number"] for v in mc["recent"]], mc["worst"]["number"], mc["total"]),
             ([3, 4], 2, 4), "main_call: kept 3 and 4, the worst 2, 4 in all")
    # a damaged file: the target starts its budgets afresh, saying why
    path = os.path.join(dm.state, NAME, "budgets.checkpoint")
    with open(path, "r+b") as f:
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 0x55]))
    with running(d) as (dm, port, sport, _):
        T.eq(violations(sport)["total"], 0, "a damaged watch file: afresh")
        T.check("checksum does not match: its budgets start afresh" in dm.log(),
                "says why: " + dm.log()[-800:])
        # a forgotten target's saved watch goes with its checkpoint
        rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "forget", NAME],
                           timeout=30)
        T.eq(rc, 0, "tlcap forget: " + err)
        D.wait_until(lambda: not os.path.exists(path), 10, "budgets.checkpoint removed")


def test_stop_behind_slow_checkpoint(d):
    """A stop while a statistics checkpoint is still being written (a slow disk:
    TLCAP_TEST_DISK_BPS, one checkpoint after another, each for seconds) defers the stop's own
    checkpoint until that one is done; the watch as it ended is saved all the same, so a
    restart takes back every violation, not those of the checkpoint in flight."""
    calls = [T.bin11(0, 3, 0, 0, a) + T.bin11(0, 0, 0, 0, b) for (a, b) in CALLS]
    with running(d, env={"TLCAP_TEST_DISK_BPS": "4000"}) as (dm, port, sport, _):
        send(port, calls[0] + calls[1])
        D.wait_until(lambda: violations(sport)["total"] == 2, 10, "two violations")
        D.wait_until(lambda: saved_all(dm) == 2, 20, "a checkpoint with the two")
        send(port, calls[2])
        before = wait_total(sport, 3, "the third violation")
    with running(d) as (dm, port, sport, _):
        T.eq(watched(violations(sport)), watched(before),
             "a stop behind a slow checkpoint keeps the watch")


if __name__ == "__main__":
    T.main([test_around_violation, test_restarts, test_stop_behind_slow_checkpoint])
