#!/usr/bin/python3
"""tlcapd replay --budgets: the offline gate (SPEC 13, docs/budgets.md). Real files in, the
violations table / JSON out, exit 3 with violations, 0 without, 2 for a bad budget file.

Usage: test_budget_gate.py TLCAPD. Expected values are worked out by hand from the stream below
(SPEC 2's rules), independently of the C code."""
import json
import os
import signal
import sys

import budget_stream as B
import daemonlib as D
import tlctest as T

TLCAPD = sys.argv[1]

# the stream and budgets worked out by hand: budget_stream.py
REC = B.REC
BUDGETS = "# the gate's budgets\n" + B.budgets("f_net", "main_call_min", "var_period", "f_core1",
                                               "fine")


def write(d, name, data):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def capture(d):
    return write(d, "a.bin", B.data())


def section(text, title):
    """The tab-separated rows of a report section (after its title and header lines)."""
    lines = text.split("\n")
    i = lines.index(title)
    rows = []
    for ln in lines[i + 2:]:
        if ln == "":
            break
        rows.append(ln.split("\t"))
    return rows


def test_violations_text(d):
    p = capture(d)
    b = write(d, "b.ini", BUDGETS.encode())
    rc, out, err = T.run([TLCAPD, "replay", p, "--budgets", b])
    T.eq(rc, 3, "exit status with violations (stderr: %s)" % err)
    text = out.decode()
    T.check(text.startswith("BUDGETS\t%s\t-\t5 budgets\t4 violations\n" % b), text[:300])
    budgets = {r[0]: r for r in section(text, "BUDGETS\t%s\t-\t5 budgets\t4 violations" % b)}
    T.eq(budgets["f_net"], ["f_net", "net", "00000001", "any", "-", "60ns", "-", "1"], "f_net")
    T.eq(budgets["main_call"][7], "1", "main_call: CALL 300 > 250")
    T.eq(budgets["var_period"][4], "150ns", "var_period's min")
    T.eq(budgets["var_period"][7], "1", "var_period: PERIOD 100 < 150")
    T.eq(budgets["f_core1"][7], "1", "f_core1: core1's NET 50 > 40 (core0's 100 is not core1)")
    T.eq(budgets["fine"][7], "0", "fine")
    counts = sorted(section(text, "COUNTS"))
    T.eq(counts, [["f_core1", "00000001", "core1", "1"], ["f_net", "00000001", "core0", "1"],
                  ["main_call", "00000000", "core0", "1"],
                  ["var_period", "20000000", "-", "1"]], "counts per (budget, area, context)")
    v = {r[0]: r for r in section(text, "VIOLATIONS")}
    # budget area context stat kind value limit start end epoch seq_start seq_end
    T.eq(v["f_net"], ["f_net", "00000001", "core0", "net", "max", "100", "60", "150", "250",
                      "0", "4", "7"], "f_net's violation")
    T.eq(v["main_call"], ["main_call", "00000000", "core0", "call", "max", "300", "250", "100",
                          "400", "0", "1", "10"], "main_call's violation")
    T.eq(v["var_period"], ["var_period", "20000000", "-", "period", "min", "100", "150", "200",
                           "300", "0", "6", "9"], "var_period's violation")
    T.eq(v["f_core1"], ["f_core1", "00000001", "core1", "net", "max", "50", "40", "120", "170",
                        "0", "2", "5"], "f_core1's violation")
    T.eq(sorted(section(text, "WORST")), sorted(v.values()), "one violation each: it is the worst")


def test_violations_json(d):
    p = capture(d)
    b = write(d, "b.ini", BUDGETS.encode())
    rc, out, err = T.run([TLCAPD, "replay", p, "--budgets", b, "--export", "json"])
    T.eq(rc, 3, "exit status (stderr: %s)" % err)
    doc = json.loads(out)
    T.eq(doc["violations"], 4, "violations")
    by = {x["name"]: x for x in doc["budgets"]}
    T.eq(by["main_call"]["max"], 250, "max in ns")
    T.eq(by["main_call"]["min"], 10, "min in ns")
    T.eq(by["main_call"]["origin"], b + ":7", "where the budget was defined")
    w = by["main_call"]["worst"]
    T.eq((w["value"], w["limit"], w["start_ns"], w["end_ns"], w["epoch"], w["seq_start"],
          w["seq_end"], w["limit_kind"], w["context"], w["handle"]),
         (300, 250, 100, 400, 0, 1, 10, "max", "core0", "00000000"), "main_call's worst")
    T.check("worst" not in by["fine"], "no worst without a violation")
    T.eq(len(doc["violations_kept"]), 4, "kept violations")
    vp = [x for x in doc["violations_kept"] if x["budget"] == "var_period"][0]
    T.eq((vp["value"], vp["limit"], vp["limit_kind"], vp["context"]), (100, 150, "min", None),
         "a data area's violation has no context")


def test_no_violation(d):
    p = capture(d)
    b = write(d, "b.ini", b"[budget ok]\narea = 00000001\nstat = net\nmax = 100ns\nmin = 50ns\n")
    rc, out, err = T.run([TLCAPD, "replay", p, "--budgets", b])
    T.eq(rc, 0, "exit status without violations (stderr: %s)" % err)
    T.check("\t1 budgets\t0 violations\n" in out.decode(), out.decode()[:200])


def test_bad_budget_file(d):
    p = capture(d)
    b = write(d, "b.ini", b"[budget a]\narea = 00000001\nstat = net\nmax = 5 parsecs\n")
    rc, out, err = T.run([TLCAPD, "replay", p, "--budgets", b])
    T.eq(rc, 2, "a bad budget file is a usage error")
    T.check("%s:4: [budget a] max:" % b in err, "names file:line, section and key: " + err)
    rc, out, err = T.run([TLCAPD, "replay", p, "--budgets", os.path.join(d, "none.ini")])
    T.eq(rc, 2, "a missing budget file")
    T.check("none.ini" in err, err)


def test_target_glob_and_bad_input(d):
    p = capture(d)
    # a budget for other targets: the capture names none (no --target, no manifest)
    b = write(d, "b.ini", b"[budget x]\ntarget = board-*\narea = 00000001\nstat = net\n"
                          b"max = 1ns\n")
    rc, out, err = T.run([TLCAPD, "replay", p, "--budgets", b])
    T.eq(rc, 0, "a budget of another target does not apply (stderr: %s)" % err)
    T.check("\t0 budgets\t0 violations\n" in out.decode(), out.decode()[:200])
    # bad input after a violation: the gate fails with 1 (the capture cannot be trusted)
    b = write(d, "c.ini", BUDGETS.encode())
    q = write(d, "bad.bin", open(p, "rb").read() + b"\x01\x02\x03")
    rc, out, err = T.run([TLCAPD, "replay", q, "--budgets", b])
    T.eq(rc, 1, "bad input wins over violations (stderr: %s)" % err)


def hup(dm):
    """SIGHUP; waits for RELOADING=1 and then READY=1 (sent whether the reload applied or not)."""
    n0 = len(dm.notify.msgs)
    dm.p.send_signal(signal.SIGHUP)
    i = dm.notify.wait_for("RELOADING=1", after=n0)
    dm.notify.wait_for("READY=1", after=i)


def test_daemon_budgets_reload(d):
    """tlcapd --budgets FILE: a bad file at start is refused with FILE:LINE; a SIGHUP that
    finds the file bad is rejected as a whole (one line naming FILE:LINE), the daemon keeps
    running with its configuration, and a good file again reloads."""
    conf = write(d, "tlcapd.ini", ("[listen a]\nformat = bin11\naddress = 127.0.0.1:%d\n"
                                   % D.free_port()).encode())
    b = write(d, "b.ini", BUDGETS.encode())
    bad = b"[budget a]\narea = 00000001\nstat = net\nmax = 5 parsecs\n"
    rc, out, err = T.run([TLCAPD, "--config", conf, "--budgets", write(d, "x.ini", bad),
                          "--check-config"])
    T.eq(rc, 2, "--check-config with a bad budget file")
    T.check("x.ini:4: [budget a] max:" in err, err)
    dm = D.Daemon(TLCAPD, d, ["--config", conf, "--budgets", b], serve=False)
    try:
        write(d, "b.ini", bad)
        hup(dm)
        D.wait_until(lambda: "reload rejected" in dm.log(), 5, "rejection logged")
        log = dm.log()
        T.check("b.ini:4: [budget a] max:" in log, "the rejection names FILE:LINE: " + log)
        T.eq(sum(1 for l in log.splitlines() if "reload rejected" in l), 1, "one error line")
        write(d, "b.ini", BUDGETS.encode())
        hup(dm)
        T.eq(sum(1 for l in dm.log().splitlines() if "reload rejected" in l), 1,
             "a good file reloads")
        T.check(dm.p.poll() is None, "still running")
    finally:
        dm.stop()


if __name__ == "__main__":
    T.main([test_violations_text, test_violations_json, test_no_violation, test_bad_budget_file,
            test_target_glob_and_bad_input, test_daemon_budgets_reload])
