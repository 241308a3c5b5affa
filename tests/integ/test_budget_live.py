#!/usr/bin/python3
"""Timing budgets on a live target (SPEC 13, docs/budgets.md) against a real tlcapd:
- the HTTP document /api/v1/targets/NAME/violations holds the violations worked out by hand
  from the stream below (the values of test_budget_gate.py, independently of the C code), and
  equals what `tlcapd replay --state-dir --target --budgets FILE --export json` says on the
  stored segments of the same target (same counts, values, limits, start and end, and the
  same stored locations: live vs replay);
- ?budget= keeps one budget; an unknown target is a 404; a target no budget applies to has
  the document with zero budgets;
- /metrics has tlcap_budget_violations_total per (target, budget, area, context, stat) with
  the right counts, and tlcap_budget_limit_seconds / tlcap_budget_limit_events, with HELP
  and TYPE;
- SIGHUP with a changed budget file takes effect (a changed budget starts afresh, the
  unchanged ones keep their counts); a bad file is refused with FILE:LINE and the old budgets
  stay.

Usage: test_budget_live.py TLCAPD"""
import json
import os
import signal
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import budget_stream as B  # noqa: E402
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
NAME = "l@127.0.0.1"

# the stream worked out by hand (budget_stream.py: engine sequences from 1, the samples)
REC = B.REC
DATA = B.data()

BUDGETS = B.budgets("f_net", "main_call_min", "var_period", "f_core1") + """[budget writes]
area = 20000000
stat = rate
window = 1ms
max = 100

[budget other]
target = board-*
area = 00000001
stat = net
max = 1ns
"""

# (budget, stat, handle, context, limit_kind, value, limit, start, end), by hand
WANT = {
    ("f_net", "net", "00000001", "core0", "max", 100, 60, 150, 250),
    ("main_call", "call", "00000000", "core0", "max", 300, 250, 100, 400),
    ("var_period", "period", "20000000", None, "min", 100, 150, 200, 300),
    ("f_core1", "net", "00000001", "core1", "max", 50, 40, 120, 170),
}


def write(d, name, data):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def get(hport, path):
    url = "http://127.0.0.1:%d%s" % (hport, path)
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read()
            return r.status, (json.loads(body) if path != "/metrics" else body.decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def send(port, data):
    s = D.connect(port)
    s.sendall(data)
    s.shutdown(1)
    D.wait_eof(s, timeout=30)
    s.close()


def key(v):
    return (v["budget"], v["stat"], v["handle"], v["context"], v["limit_kind"], v["value"],
            v["limit"], v["start_ns"], v["end_ns"])


def hup(dm):
    n0 = len(dm.notify.msgs)
    dm.p.send_signal(signal.SIGHUP)
    i = dm.notify.wait_for("RELOADING=1", after=n0)
    dm.notify.wait_for("READY=1", after=i)


def start(d, b, store=False, serve=None):
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port, "--budgets", b],
                  store=store, http="127.0.0.1:%d" % hport, serve=serve)
    return dm, port, hport


def violations(hport, q=""):
    st, doc = get(hport, "/api/v1/targets/%s/violations%s" % (NAME, q))
    T.eq(st, 200, "violations status: %r" % (doc,))
    return doc


def test_live_vs_replay(d):
    b = write(d, "b.ini", BUDGETS.encode())
    dm, port, hport = start(d, b, store=True, serve="127.0.0.1:%d" % D.free_port())
    try:
        send(port, DATA)
        doc = D.wait_until(lambda: (lambda x: x if x["violations"] == 4 else None)(
            violations(hport)), 10, "four violations")
        T.eq(doc["target"], NAME, "target")
        T.eq(sorted(x["name"] for x in doc["budgets"]),
             ["f_core1", "f_net", "main_call", "var_period", "writes"],
             "the budgets that apply to the target (not board-*'s)")
        T.eq({key(v) for v in doc["violations_kept"]}, WANT, "the violations, by hand")
        for v in doc["violations_kept"]:
            T.eq(v["ref"], "v:%s:%d" % (v["budget"], v["number"]), "ref")
            T.check(v["wall_ms"] > 1.6e12, "a live violation has its wall clock: %r" % v)
        T.eq({key(v) for v in doc["worst"]}, WANT, "one each: the worst")
        T.eq(sorted((c["budget"], c["area"], c["context"], c["violations"])
                    for c in doc["counts"]),
             [("f_core1", "00000001", "core1", 1), ("f_net", "00000001", "core0", 1),
              ("main_call", "00000000", "core0", 1), ("var_period", "20000000", None, 1)],
             "counts per (budget, area, context)")
        one = violations(hport, "?budget=main_call")
        T.eq([x["name"] for x in one["budgets"]], ["main_call"], "?budget= filter")
        T.eq(one["violations"], 1, "?budget=: its count")
        T.eq([key(v) for v in one["violations_kept"]],
             [k for k in WANT if k[0] == "main_call"], "?budget=: its violation")
        st, e = get(hport, "/api/v1/targets/%s/violations?budget=nope" % NAME)
        T.eq(st, 404, "an unknown budget")
        st, e = get(hport, "/api/v1/targets/nobody/violations")
        T.eq(st, 404, "an unknown target: %r" % e)
        st, e = get(hport, "/api/v1/targets/%s/violations?bogus=1" % NAME)
        T.eq(st, 400, "an unknown parameter")

        st, m = get(hport, "/metrics")
        T.eq(st, 200, "metrics")
        D.check_promtool_metrics(m.encode())
        T.check("# TYPE tlcap_budget_violations_total counter" in m, "violations family TYPE")
        T.check("# HELP tlcap_budget_violations_total " in m, "violations family HELP")
        T.check("# TYPE tlcap_budget_limit_seconds gauge" in m, "limit family")
        T.check("# TYPE tlcap_budget_limit_events gauge" in m, "rate limit family")
        lines = [ln for ln in m.splitlines() if ln.startswith("tlcap_budget_")]
        T.check('tlcap_budget_violations_total{target="%s",budget="f_net",area="00000001",'
                'context="core0",stat="net"} 1' % NAME in lines, "\n".join(lines))
        T.check('tlcap_budget_violations_total{target="%s",budget="var_period",area="20000000",'
                'context="",stat="period"} 1' % NAME in lines, "\n".join(lines))
        T.eq(sum(1 for ln in lines if ln.startswith("tlcap_budget_violations_total")), 4,
             "one counter per (budget, area, context) with violations")
        T.check('tlcap_budget_limit_seconds{target="%s",budget="f_net",stat="net",limit="max"} '
                '0.00000006' % NAME in lines, "f_net's max in seconds: " + "\n".join(lines))
        T.check('tlcap_budget_limit_seconds{target="%s",budget="main_call",stat="call",'
                'limit="min"} 0.00000001' % NAME in lines, "main_call's min")
        T.check('tlcap_budget_limit_events{target="%s",budget="writes",stat="rate",limit="max",'
                'window_seconds="0.001"} 100' % NAME in lines, "the rate budget's max")
        # the subscriber server handed every violation on (one per budget, under its rate
        # limit's burst of 10); no NATS publisher runs, so no nats sink
        ev = sorted(ln for ln in m.splitlines() if ln.startswith("tlcap_violation_events_"))
        T.eq(ev, ['tlcap_violation_events_sent_total{sink="subscribers"} %d' % len(WANT),
                  'tlcap_violation_events_suppressed_total{sink="subscribers"} 0'],
             "violation events by sink")
        T.check("# TYPE tlcap_violation_events_sent_total counter" in m, "sent family TYPE")
        sub = dm.stats()["subscribers"]
        T.eq((sub["violations_sent"], sub["violations_suppressed"]), (len(WANT), 0),
             "the stats dump's subscriber violation events")
        dm.wait_sealed()
    finally:
        dm.stop()
    rc, out, err = T.run([TLCAPD, "replay", "--state-dir", dm.state, "--target", NAME,
                          "--budgets", b, "--export", "json"])
    T.eq(rc, 3, "replay of the stored segments: violations (stderr: %s)" % err)
    rep = json.loads(out)
    T.eq(rep["violations"], doc["violations"], "live vs replay: the count")
    T.eq(sorted(key(v) + (v["epoch"], v["number"]) for v in rep["violations_kept"]),
         sorted(key(v) + (v["epoch"], v["number"]) for v in doc["violations_kept"]),
         "live vs replay: the violations")

    def where(v):
        return tuple(v.get(k, 0) for k in ("seg_first", "off_first", "seg_last", "off_last"))
    live = sorted(key(v) + where(v) for v in doc["violations_kept"])
    T.check(all(x[-4] and x[-2] for x in live),
            "every live violation located (one segment): %r" % live)
    T.eq(sorted(key(v) + where(v) for v in rep["violations_kept"]), live,
         "live vs replay: the same stored locations")
    T.eq(sorted((c["budget"], c["handle"], c["context"], c["violations"]) for c in rep["counts"]),
         sorted((c["budget"], c["handle"], c["context"], c["violations"])
                for c in doc["counts"]), "live vs replay: the counts")
    T.eq(sorted((x["name"], x["violations"]) for x in rep["budgets"]),
         sorted((x["name"], x["violations"]) for x in doc["budgets"]),
         "live vs replay: the budgets and their totals")


def test_no_budget_applies(d):
    b = write(d, "b.ini", b"[budget x]\ntarget = board-*\narea = 00000001\nstat = net\n"
                          b"max = 1ns\n")
    dm, port, hport = start(d, b)
    try:
        send(port, DATA)
        D.wait_until(lambda: get(hport, "/api/v1/targets/%s/violations" % NAME)[0] == 200, 10,
                     "the target exists")
        doc = violations(hport)
        T.eq((doc["target"], doc["violations"], doc["budgets"], doc["counts"],
              doc["violations_kept"], doc["worst"]), (NAME, 0, [], [], [], []),
             "zero budgets")
        st, m = get(hport, "/metrics")
        T.check("tlcap_budget_violations_total{" not in m, "no counters")
    finally:
        dm.stop()


def test_reload(d):
    b = write(d, "b.ini", BUDGETS.encode())
    dm, port, hport = start(d, b)
    try:
        send(port, DATA)
        D.wait_until(lambda: violations(hport)["violations"] == 4, 10, "four violations")
        # f_net's max goes to 200ns (changed: it starts afresh and the 100ns NET is fine);
        # main_call unchanged keeps its count; a new budget on f's CALL
        write(d, "b.ini", BUDGETS.replace("max = 60ns", "max = 200ns").encode()
              + b"\n[budget f_call]\narea = 00000001\nstat = call\nmax = 70ns\n")
        hup(dm)
        doc = violations(hport)
        by = {x["name"]: x for x in doc["budgets"]}
        T.check("f_call" in by, "the new budget applies: %r" % list(by))
        T.eq(by["f_net"]["max"], 200, "the changed budget's new max")
        T.eq(by["f_net"]["violations"], 0, "the changed budget starts afresh")
        T.eq(by["main_call"]["violations"], 1, "an unchanged budget keeps its count")
        # the stream again (a new connection, later target times): f_call sees core0's f
        # CALL 100 > 70; f_net (200ns) none
        send(port, B.data(shift=1000))
        doc = D.wait_until(lambda: (lambda x: x if {y["name"]: y for y in x["budgets"]}
                                    ["f_call"]["violations"] == 1 else None)(violations(hport)),
                           10, "f_call's violation")
        by = {x["name"]: x for x in doc["budgets"]}
        T.eq(by["f_net"]["violations"], 0, "f_net at 200ns: none")
        T.eq(by["main_call"]["violations"], 2, "main_call: one more")
        fc = [v for v in doc["violations_kept"] if v["budget"] == "f_call"]
        T.eq([(v["value"], v["limit"], v["start_ns"], v["end_ns"], v["context"]) for v in fc],
             [(100, 70, 1150, 1250, "core0")], "f_call's violation")
        # a bad file: refused with FILE:LINE, the old budgets stay
        write(d, "b.ini", b"[budget a]\narea = 00000001\nstat = net\nmax = 5 parsecs\n")
        hup(dm)
        D.wait_until(lambda: "reload rejected" in dm.log(), 5, "rejection logged")
        T.check("b.ini:4: [budget a] max:" in dm.log(), "names FILE:LINE: " + dm.log()[-800:])
        after = violations(hport)
        T.eq(sorted((x["name"], x["violations"]) for x in after["budgets"]),
             sorted((x["name"], x["violations"]) for x in doc["budgets"]), "the old budgets stay")
    finally:
        dm.stop()


if __name__ == "__main__":
    T.main([test_live_vs_replay, test_no_budget_applies, test_reload])
