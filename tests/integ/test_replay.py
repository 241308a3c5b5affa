#!/usr/bin/python3
"""tlcapd replay end to end: real files in, exports out, exit codes and messages.

Usage: test_replay.py TLCAPD. Expected outputs are built here from the format documents (the
seed's record layout and Text1 number rules), independently of the C code."""
import json
import os
import sys

import budget_stream as B
import tlctest as T

TLCAPD = sys.argv[1]

# A small hand-checked bin11 stream on two cores:
#   core0: main (00000000) E@100, calls f (00000001) E@150 / X@250 (main S@150 R@250), X@400
#   core1: f E@120 X@170
#   variable 20000000 written 5 @200 and 7 @300 on core0
REC = B.REC  # the stream budget_stream.py works out by hand


def write(d, name, data):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def stream():
    return b"".join(T.bin11(h, t, c, v, tm) for (h, t, c, v, tm) in REC)


def expected_timeline():
    lines = ["* TIMELINE %HANDLE%,%EVENT%,%VALUE%,%TIME%"]
    for (h, t, c, v, tm) in REC:
        ev = "XSREW"[t]
        val = "%08X" % v if (t == 4 or (h >> 28) >= 2) else ""
        lines.append("%08X,%s,%s,%d" % (h, ev, val, tm))
    return "\n".join(lines) + "\n\n"


def test_timeline_text1(d):
    p = write(d, "a.bin", stream())
    rc, out, err = T.run([TLCAPD, "replay", p, "--export", "text1"])
    T.eq(rc, 0, "exit status (stderr: %s)" % err)
    text = out.decode()
    T.check(text.endswith(expected_timeline()), "TIMELINE section:\n" + text[-600:])
    T.check("format auto: bin11" in err, "auto detection is said on stderr: " + err)


def test_statistics_text1(d):
    # Worked out by hand (SPEC section 2):
    # core0 main: one activation E@100..X@400: CALL 300, GROSS 300, NET = running 100..150 and
    #   250..400 = 50 + 150 = 200; COUNT 1.
    # core0 f: E@150..X@250: NET = CALL = 100. core1 f: E@120..X@170: 50.
    # Neutral f: COUNT 2, NET 150, MIN 50, MAX 100.
    fmt = "StatisticsEntry=%HANDLE%,%COUNT%,%T.NET%,%T.NET.MIN%,%T.NET.MAX%,%T.CALL%"
    p = write(d, "a.bin", stream())
    rc, out, err = T.run([TLCAPD, "replay", p, "--format", "bin11", "--text1-format", fmt])
    T.eq(rc, 0, "exit status (stderr: %s)" % err)
    text = out.decode()
    T.check("* INFO %TOTAL_TIME%\n300\n" in text, "INFO total time 400-100:\n" + text[:200])
    T.check("* CONTEXTS %NAME%,%HANDLE%\ncore0,0x0\ncore1,0x1\n" in text, "contexts:\n" + text)
    f = fmt.split("=", 1)[1]
    T.check(("* STATISTICS(Functions) CONTEXT(core0) %s\n"
             "00000000,1,200,200,200,300\n"
             "00000001,1,100,100,100,100\n") % f in text, "core0 statistics:\n" + text)
    T.check(("* STATISTICS(Functions) CONTEXT(core1) %s\n"
             "00000001,1,50,50,50,50\n") % f in text, "core1 statistics:\n" + text)
    T.check(("* STATISTICS(Functions) CONTEXT(Neutral) %s\n"
             "00000000,1,200,200,200,300\n"
             "00000001,2,150,50,100,150\n") % f in text, "Neutral statistics:\n" + text)


def test_json(d):
    p = write(d, "a.bin", stream())
    rc, out, err = T.run([TLCAPD, "replay", p, "--export", "json"])
    T.eq(rc, 0, "exit status (stderr: %s)" % err)
    doc = json.loads(out)
    T.eq(doc["format"], "bin11", "format")
    T.eq(doc["counters"]["records"], len(REC), "records")
    T.eq(doc["total_time"], 300, "total_time")
    var = [r for r in doc["rows"] if r["handle"] == "20000000"]
    T.eq(len(var), 1, "one variable row")
    T.eq((var[0]["count"], var[0]["value"], var[0]["value_min"], var[0]["value_max"]),
         (2, 7, 5, 7), "variable count/value/min/max")
    T.eq(var[0]["period"]["n"], 1, "one period sample")
    T.eq(var[0]["period"]["min"], 100, "period 300-200")


def test_bin10_to_bin11(d):
    raw = b"".join(T.bin10(h, t, v, tm) for (h, t, c, v, tm) in REC)
    p = write(d, "a10.bin", raw)
    outp = os.path.join(d, "out.bin")
    rc, out, err = T.run([TLCAPD, "replay", p, "--format", "bin10", "--export", "bin11",
                          "--output", outp])
    T.eq(rc, 0, "exit status (stderr: %s)" % err)
    want = b"".join(T.bin11(h, t, 0xFF, v, tm) for (h, t, c, v, tm) in REC)
    T.eq(open(outp, "rb").read(), want, "bin11 conversion (core unknown = 0xFF)")


def test_native_roundtrip_byte_identical(d):
    # unknown flag bits above the core survive a bin11 -> bin11 re-encode
    raw = stream() + T.bin11(0x00000002, 3, 7, 0, 500, extra_flag_bits=0x5000)
    p = write(d, "a.bin", raw)
    rc, out, err = T.run([TLCAPD, "replay", p, "--format", "bin11", "--export", "bin11"])
    T.eq(rc, 0, "exit status (stderr: %s)" % err)
    T.eq(out, raw, "byte-identical re-encode")


def test_truncated_last_record(d):
    raw = stream() + T.bin11(0x00000000, 3, 0, 0, 500)[:10]
    p = write(d, "t.bin", raw)
    rc, out, err = T.run([TLCAPD, "replay", p, "--format", "bin11", "--export", "bin11"])
    T.eq(rc, 1, "exit status for a truncated record")
    T.check(p in err and ("byte %d" % (24 * len(REC))) in err, "message names file and offset: " + err)
    T.eq(out, stream(), "every whole record is still exported")


def test_invalid_record(d):
    bad = T.bin11(0x00000000, 7, 0, 0, 130)  # event type 7 does not exist
    raw = stream()[:48] + bad + stream()[48:]
    p = write(d, "bad.bin", raw)
    rc, out, err = T.run([TLCAPD, "replay", p, "--format", "bin11", "--export", "bin11"])
    T.eq(rc, 1, "exit status for an invalid record")
    T.check("byte 48" in err and p in err, "message names file and offset: " + err)
    T.eq(out, stream()[:48], "records before the bad one are exported")


def test_usage_errors(d):
    for args in ([], ["x.bin", "--export", "nope"], ["x.bin", "--format"],
                 ["x.bin", "--text1-format", "TimelineEntry=%BOGUS%"], ["x.bin", "--bogus"]):
        rc, out, err = T.run([TLCAPD, "replay"] + args)
        T.eq(rc, 2, "usage error exit status for %r (stderr %s)" % (args, err))
    rc, out, err = T.run([TLCAPD, "replay", os.path.join(d, "missing.bin")])
    T.eq(rc, 1, "missing file is bad input")


def test_evlog_roundtrip(d):
    items = [T.evlog_item(1.0, 7, "+main"), T.evlog_item(1.5, 7, "+sub", "detail"),
             T.evlog_item(1.75, 9, "*CPUFREQ 0", "2400"), T.evlog_item(2.0, 7, "-sub"),
             T.evlog_item(2.5, 7, "-main")]
    raw = T.evlog_block(items[:3], header_big_endian=True) + T.evlog_block(items[3:])
    p = write(d, "e.log", raw)
    rc, out, err = T.run([TLCAPD, "replay", p, "--export", "evlog"])
    T.eq(rc, 0, "exit status (stderr: %s)" % err)
    T.check("format auto: evlog" in err, "auto detection: " + err)
    T.eq(out, raw, "byte-identical evlog re-encode")
    # statistics: thread 7: main E@1e9..X@2.5e9 (CALL 1.5e9, NET 1.5e9 - 0.5e9 = 1e9)
    rc, out, err = T.run([TLCAPD, "replay", p, "--text1-format",
                          "StatisticsEntry=%NAME%,%COUNT%,%T.NET%,%T.CALL%,%CONTEXT%"])
    T.eq(rc, 0, "exit status (stderr: %s)" % err)
    text = out.decode()
    T.check("main,1,1000000000,1500000000,thread7\n" in text, "main statistics:\n" + text)
    T.check("sub,1,500000000,500000000,thread7\n" in text, "sub statistics:\n" + text)


def test_report_inputs_default_to_json(d):
    """`tlcapd replay FILE.br` (and .aprof) needs no --export json: it is their default (and
    the only export they have)."""
    # a function and one of its line areas (BR exports line areas)
    p = write(d, "a.bin", stream() + T.bin11(0x10000000, 3, 0, 0, 400) +
              T.bin11(0x10000000, 0, 0, 0, 450))
    for kind in ("br", "aprof"):
        rep = os.path.join(d, "a." + kind)
        rc, _, err = T.run([TLCAPD, "replay", p, "--export", kind, "--output", rep])
        T.eq(rc, 0, "export %s (stderr: %s)" % (kind, err))
        rc, out, err = T.run([TLCAPD, "replay", rep])
        T.eq(rc, 0, "replay %s without --export (stderr: %s)" % (rep, err))
        json.loads(out)
        rc, out2, err = T.run([TLCAPD, "replay", rep, "--export", "json"])
        T.eq(out2, out, "the default is --export json")
        rc, _, err = T.run([TLCAPD, "replay", rep, "--export", "text1"])
        T.eq(rc, 2, "another export asked for explicitly: usage error")


def test_br_without_line_areas_says_why(d):
    """A capture of functions only has nothing a BR profile holds: the export is empty, and
    stderr says why instead of nothing at all."""
    p = write(d, "f.bin", stream())
    rc, out, err = T.run([TLCAPD, "replay", p, "--export", "br"])
    T.eq((rc, out), (0, b""), "exit status and output (stderr: %s)" % err)
    T.check("no line areas" in err, "stderr names the reason: %r" % err)
    # with a line area there is a profile and no such word
    p = write(d, "l.bin", stream() + T.bin11(0x10000000, 3, 0, 0, 400) +
              T.bin11(0x10000000, 0, 0, 0, 450))
    rc, out, err = T.run([TLCAPD, "replay", p, "--export", "br"])
    T.check(rc == 0 and len(out) > 0 and "no line areas" not in err, "line areas: %r" % err)


T.main([test_br_without_line_areas_says_why, test_report_inputs_default_to_json,
        test_timeline_text1, test_statistics_text1, test_json, test_bin10_to_bin11,
        test_native_roundtrip_byte_identical, test_truncated_last_record, test_invalid_record,
        test_usage_errors, test_evlog_roundtrip])
