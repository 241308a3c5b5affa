#!/usr/bin/env python3
"""Rollups, trend and diff (SPEC 14; docs/rollups.md) against a real tlcapd, over HTTP:
- trend: calls whose target times span several minutes; /trend per minute, per hour and by
  wall clock equals the counts, means and maxima computed here from the durations sent, and
  p99 is within 1% of the exact nearest rank; the same answers after a clean restart (the
  rollups are on disk, the open minute was sealed at shutdown);
- diff: one area made slower by a known factor in the second of two ranges comes first, with
  that factor (the ratio of the means computed here), significant; the unchanged areas are not;
- bad parameters are a 400 naming the parameter;
- names: with a mapping loaded (`tlcap mapping`), trend and diff (JSON and tables) carry the
  area's mapped name and the asked context's name, as `tlcap stats` shows them;
- `tlcap trend --json` and `tlcap diff --json` (protobuf) print the HTTP API's documents, and
  their tables list the minutes and the slowed area first.
- a SIGKILL after a statistics checkpoint loses no rollup: the open minute is saved with the
  checkpoint and written at the restart, and trend answers as the oracle says;
- rollups missing at start (their directory deleted) are rebuilt from the stored segments off
  the loop, logged, counted in the stats dump, and trend answers as before;
- each target shows its rebuild (`tlcap targets`, --json through protobuf, /api/v1/targets):
  none, then rebuilding with its progress while it runs, then done with every segment on disk
  read and every sample sent counted; without storage, rollups off (null);
Target times are crafted (minutes of target time, no waiting for real minutes).

Usage: test_rollups.py TLCAPD TLCAP"""
import json
import math
import subprocess
import os
import random
import re
import shutil
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]
NAME = "l@127.0.0.1"
MIN = 60 * 10**9
# test_rebuild_shown_in_targets: 600 segments of 2000 records, 3 M samples to rebuild (about
# half a second here): long enough for the views polled in turn to see it running
REC_PER_SEG, PER_MIN = 2000, 40000


def stream(areas, minutes, per_min, slow=None, seed=1):
    """Calls of `areas` functions (handles 0x1000 + i) on core 0, `per_min` per area in each of
    `minutes` minutes of target time; durations random; slow = (area, factor, first minute):
    that area's durations times factor from that minute on. Returns (bytes, {(area, minute):
    [durations]}) with minute the one the call's exit fell in."""
    rnd = random.Random(seed)
    out, got = [], {}
    for m in range(minutes):
        t = m * MIN + 1000
        gap = (MIN - 2000) // (areas * per_min)
        for k in range(per_min):
            for a in range(areas):
                d = 1000 + rnd.randrange(0, 4000)
                if slow is not None and a == slow[0] and m >= slow[2]:
                    d *= slow[1]
                out.append(T.bin11(0x1000 + a, 3, 0, 0, t))
                out.append(T.bin11(0x1000 + a, 0, 0, 0, t + d))
                got.setdefault((a, (t + d) // MIN), []).append(d)
                t += gap
    return b"".join(out), got


def send_all(port, data):
    s = D.connect(port)
    s.sendall(data)
    s.shutdown(1)
    D.wait_eof(s, timeout=60)
    s.close()


def get(hport, path):
    url = "http://127.0.0.1:%d%s" % (hport, path)
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def cli(sport, *args):
    p = subprocess.run([TLCAP, "--connect", "127.0.0.1:%d" % sport] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    T.eq(p.returncode, 0, "tlcap %s: %s" % (" ".join(args), p.stderr.decode()))
    return p.stdout.decode()


def p99(vals):
    v = sorted(vals)
    k = max(1, math.ceil(0.99 * len(v)))
    return v[k - 1]


def check_step(step, vals, what):
    T.eq(step["count"], len(vals), what + " count")
    T.check(abs(step["mean"] - sum(vals) / len(vals)) < 1e-6 * step["mean"],
            "%s mean %r, want %r" % (what, step["mean"], sum(vals) / len(vals)))
    T.eq(step["max"], max(vals), what + " max")
    T.eq(step["min"], min(vals), what + " min")
    T.check(abs(step["p99"] - p99(vals)) <= 0.01 * p99(vals),
            "%s p99 %r, exact %r" % (what, step["p99"], p99(vals)))


def check_trend(hport, got, area, minutes):
    st, doc = get(hport, "/api/v1/targets/%s/trend?area=%d&since=ns:0&step=1m" % (NAME, 0x1000 + area))
    T.eq(st, 200, "trend status: %r" % doc)
    T.eq([s["start"] for s in doc["steps"]],
         [m * MIN for m in range(minutes + 1) if (area, m) in got], "one step per minute")
    for s in doc["steps"]:
        check_step(s, got[(area, s["start"] // MIN)], "minute %d" % (s["start"] // MIN))
    allv = [d for (a, m), v in got.items() if a == area for d in v]
    for q in ("since=ns:0&step=1h", "since=-1h&step=1d"):
        st, doc = get(hport, "/api/v1/targets/%s/trend?area=%d&%s" % (NAME, 0x1000 + area, q))
        T.eq(st, 200, "trend %s: %r" % (q, doc))
        T.eq(len(doc["steps"]), 1, "one step (%s)" % q)
        check_step(doc["steps"][0], allv, q)
    # a range of two minutes: exactly theirs
    st, doc = get(hport, "/api/v1/targets/%s/trend?area=%d&since=ns:%d&until=ns:%d&step=1h"
                  % (NAME, 0x1000 + area, 2 * MIN, 4 * MIN))
    T.eq(st, 200, "trend of minutes 2-3")
    check_step(doc["steps"][0], got[(area, 2)] + got[(area, 3)], "minutes 2-3")
    return doc


def test_trend_and_restart(d):
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    args = ["--listen", "l=bin11@127.0.0.1:%d" % port]
    data, got = stream(3, 5, 40)
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport,
                  serve="127.0.0.1:%d" % sport)
    try:
        send_all(port, data)
        for a in range(3):
            check_trend(hport, got, a, 5)
        # the command line: the same document over protobuf, and a table of the minutes
        st, doc = get(hport, "/api/v1/targets/%s/trend?area=4097&since=ns:0&step=1m" % NAME)
        T.eq(json.loads(cli(sport, "trend", NAME, "0x1001", "--since", "ns:0", "--json")), doc,
             "tlcap trend --json is the HTTP document")
        lines = cli(sport, "trend", NAME, "4097", "--since", "ns:0").splitlines()
        T.eq([ln.split()[0] for ln in lines[2:]], ["ns:%d" % (m * MIN) for m in range(6)
                                                   if (1, m) in got], "a row per minute")
        T.eq([int(ln.split()[1]) for ln in lines[2:]],
             [len(got[(1, m)]) for m in range(6) if (1, m) in got], "the counts")
        # every sample counted, none dropped: per call NET, GROSS and CALL at its X, and at every
        # E but each area's first PERIOD and OUTSIDE (the area was outside since its last X);
        # the stats dump's rollup object
        calls = sum(len(v) for v in got.values())
        ru = dm.stats()["rollup"]
        T.eq((ru["samples"], ru["samples_dropped"], ru["write_errors"]),
             (3 * calls + 2 * (calls - 3), 0, 0), "rollup counters %r" % ru)
        # names: none before a mapping; the mapped name and the context's name after
        T.check("area_name" not in doc, "no name without a mapping: %r" % doc.keys())
        mp = os.path.join(d, "names.txt")
        with open(mp, "w") as f:
            f.write("* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n\n00001001,worker,\n"
                    "00001002,idle loop,\n")
        cli(sport, "mapping", NAME, mp)
        stats = json.loads(cli(sport, "stats", NAME, "--export", "json"))
        T.check("worker" in json.dumps(stats), "tlcap stats names 0x1001 worker")
        st, doc = get(hport, "/api/v1/targets/%s/trend?area=4097&since=ns:0&context=0" % NAME)
        T.eq(st, 200, "trend with a context")
        T.eq((doc["area_name"], doc["context_name"]), ("worker", "core0"), "trend names")
        T.eq(json.loads(cli(sport, "trend", NAME, "0x1001", "--since", "ns:0", "--context", "0",
                            "--json")), doc, "tlcap trend --json names")
        title = cli(sport, "trend", NAME, "0x1001", "--since", "ns:0", "--context", "0")
        T.check("(worker)" in title.splitlines()[0] and "(core0)" in title.splitlines()[0],
                "the table's title names area and context: %r" % title.splitlines()[0])
        st, doc = get(hport, "/api/v1/targets/%s/diff?a=ns:0..ns:%d&b=ns:%d..&context=0"
                      % (NAME, 2 * MIN, 2 * MIN))
        T.eq(st, 200, "diff with names")
        T.eq(doc["context_name"], "core0", "diff context name")
        T.eq({r["area"]: r.get("area_name") for r in doc["areas"]},
             {0x1000: None, 0x1001: "worker", 0x1002: "idle loop"}, "diff area names")
        lines = cli(sport, "diff", NAME, "--a", "ns:0..ns:%d" % (2 * MIN), "--b",
                    "ns:%d.." % (2 * MIN)).splitlines()
        T.eq(sorted(ln.split(None, 12)[12] for ln in lines[2:]), ["-", "idle loop", "worker"],
             "the diff table's NAME column")
        # a mapping loaded again (as many areas): the next diff has its names
        with open(mp, "w") as f:
            f.write("* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n\n00001001,boss,\n"
                    "00001002,idle loop,\n")
        cli(sport, "mapping", NAME, mp)
        st, doc = get(hport, "/api/v1/targets/%s/diff?a=ns:0..ns:%d&b=ns:%d.."
                      % (NAME, 2 * MIN, 2 * MIN))
        T.eq({r["area"]: r.get("area_name") for r in doc["areas"]},
             {0x1000: None, 0x1001: "boss", 0x1002: "idle loop"}, "diff names after a reload")
        st, doc = get(hport, "/api/v1/targets/%s/trend?since=ns:0" % NAME)
        T.eq(st, 400, "no area")
        T.check("area" in doc["error"]["message"], doc["error"]["message"])
        st, doc = get(hport, "/api/v1/targets/%s/trend?area=1&since=ns:0&step=7x" % NAME)
        T.eq(st, 400, "bad step")
        T.check("step" in doc["error"]["message"], doc["error"]["message"])
        st, doc = get(hport, "/api/v1/targets/%s/trend?area=1&since=ns:0&bogus=1" % NAME)
        T.eq(st, 400, "unknown parameter")
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        for a in range(3):  # from the files alone
            check_trend(hport, got, a, 5)
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status after the restart")


def test_diff_one_area_slowed(d):
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    areas, slowed, factor = 6, 3, 3
    data, got = stream(areas, 10, 30, slow=(slowed, factor, 5), seed=5)
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port], store=True,
                  http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % sport)
    try:
        send_all(port, data)
        st, doc = get(hport, "/api/v1/targets/%s/diff?a=ns:0..ns:%d&b=ns:%d..ns:%d"
                      % (NAME, 5 * MIN, 5 * MIN, 10 * MIN + MIN))
        T.eq(st, 200, "diff status: %r" % doc)
        rows = doc["areas"]
        T.eq(len(rows), areas, "every area compared")
        T.eq(rows[0]["area"], 0x1000 + slowed, "the slowed area first: %r" % rows[0])
        T.check(rows[0]["significant"], "the slowed area is significant")
        T.check(rows[0]["p99_beyond_error"], "its p99 moved beyond the histograms' error")
        for r in rows:
            a = r["area"] - 0x1000
            va = [x for (h, m), v in got.items() if h == a and m < 5 for x in v]
            vb = [x for (h, m), v in got.items() if h == a and m >= 5 for x in v]
            T.eq((r["a"]["count"], r["b"]["count"]), (len(va), len(vb)), "counts of %d" % a)
            want = (sum(vb) / len(vb)) / (sum(va) / len(va))
            T.check(abs(r["factor"] - want) < 1e-6 * want,
                    "area %d factor %r, want %r" % (a, r["factor"], want))
            if a == slowed:
                T.check(abs(r["factor"] - factor) < 0.1 * factor, "about the factor slowed")
            else:
                T.check(not r["significant"], "unchanged area %d not significant: %r" % (a, r))
        # the same target on both sides: b_target names it explicitly
        st, doc2 = get(hport, "/api/v1/targets/%s/diff?a=ns:0..ns:%d&b=ns:%d..ns:%d&b_target=%s"
                       % (NAME, 5 * MIN, 5 * MIN, 11 * MIN, NAME))
        T.eq(st, 200, "diff with b_target")
        T.eq(doc2["areas"], rows, "the same answer")
        st, doc = get(hport, "/api/v1/targets/%s/diff?a=ns:0" % NAME)
        T.eq(st, 400, "a without b")
        # tlcap diff: the same document, and a table with the slowed area first
        ra, rb = "ns:0..ns:%d" % (5 * MIN), "ns:%d..ns:%d" % (5 * MIN, 11 * MIN)
        T.eq(json.loads(cli(sport, "diff", NAME, "--a", ra, "--b", rb, "--json"))["areas"], rows,
             "tlcap diff --json is the HTTP document")
        lines = cli(sport, "diff", NAME, "--a", ra, "--b", rb).splitlines()
        T.eq(lines[2].split()[0], "0x%08X" % (0x1000 + slowed), "the slowed area first")
        T.eq(lines[2].split()[10:12], ["yes", "yes"], "significant, p99 moved: %r" % lines[2])
        T.eq(sum(1 for ln in lines[3:] if ln.split()[10] == "yes"), 0,
             "no other significant: %r" % lines)
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")


def test_kill_after_checkpoint(d):
    port, hport = D.free_port(), D.free_port()
    args = ["--listen", "l=bin11@127.0.0.1:%d" % port, "--checkpoint-interval", "0.3"]
    data, got = stream(3, 5, 40, seed=3)
    calls = sum(len(v) for v in got.values())
    total = 3 * calls + 2 * (calls - 3)  # as test_trend_and_restart counts them
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        send_all(port, data)
        # no query before the kill (a query writes the open minute): the checkpoint taken
        # after the last event saves the open minute; "samples" counts the minutes written,
        # "saved_samples" those of the open minute saved
        full = dm.wait_stats(lambda st: st["rollup"]["samples"] + st["rollup"]["saved_samples"]
                             == total and st["rollup"]["saved_samples"] > 0, timeout=20,
                             what="the open minute saved with a checkpoint")
        st = full["rollup"]
        T.check(st["samples"] < total, "the last minute is open: %r" % st)
        T.eq(st["samples_dropped"], 0, "none dropped")
        # saved_samples counts the copy once the checkpoint's position is known, before its
        # file is written (it may be written already: an idle target is not checkpointed
        # again): the kill waits until the checkpoint on disk is the newest copy's
        seq = max(copy_seqs(dm.state))
        dm.wait_stats(lambda st: ckpt_seq(dm.state) == seq, timeout=20,
                      what="the checkpoint of the copy ckpt-%d-... on disk" % seq)
    finally:
        dm.kill()
    T.eq(dm.p.returncode, -signal.SIGKILL, "killed")
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        dm.wait_stats(lambda st: st["rollup"]["restored"] == 1,
                      what="the saved open minute written at start")
        T.check("the open minute saved with the last checkpoint written" in dm.log(), "logged")
        for a in range(3):  # the oracle: the durations sent
            check_trend(hport, got, a, 5)
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status after the restart")
    copies = [f for f in os.listdir(os.path.join(dm.state, ".rollup", NAME))
              if f.startswith("ckpt-")]
    T.check(1 <= len(copies) <= 2, "the newest checkpoints' copies kept, no more: %r" % copies)


def copy_seqs(state):
    """The engine sequences of NAME's saved copies of its open minute (.rollup/NAME/ckpt-SEQ-
    BYTES-DISCONNECTS, one per checkpoint position)."""
    d = os.path.join(state, ".rollup", NAME)
    return [int(f.split("-")[1]) for f in os.listdir(d) if f.startswith("ckpt-")]


def ckpt_seq(state):
    """The engine sequence in the header of NAME's checkpoint on disk (bytes 24-32), or None."""
    try:
        with open(os.path.join(state, NAME, "target.checkpoint"), "rb") as f:
            h = f.read(32)
    except FileNotFoundError:
        return None
    return int.from_bytes(h[24:32], sys.byteorder) if len(h) == 32 else None


def calls_in(areas, minute, lo, hi, per, rnd, got):
    """Calls of `areas` functions, `per` each, entering in [lo, hi) ns of target-time `minute`;
    durations random in 1-5 us; got[(area, minute of the exit)] gets them. Returns the bytes."""
    out = []
    t = minute * MIN + lo + 1000
    gap = (hi - lo - 7000) // (areas * per)
    for _ in range(per):
        for a in range(areas):
            d = 1000 + rnd.randrange(0, 4000)
            out.append(T.bin11(0x1000 + a, 3, 0, 0, t))
            out.append(T.bin11(0x1000 + a, 0, 0, 0, t + d))
            got.setdefault((a, (t + d) // MIN), []).append(d)
            t += gap
    return b"".join(out)


def marks(state):
    """The rollup marks of NAME (.rollup/NAME/written): (epoch, last minute written) or None."""
    try:
        with open(os.path.join(state, ".rollup", NAME, "written")) as f:
            v = f.read().split()
    except OSError:
        return None
    return (int(v[3]), int(v[4])) if len(v) == 9 and v[1] == "1" and v[2] == "1" else None


def check_all(hport, got, what):
    """Every area's trend minute by minute, its hour, and a diff of two ranges: the oracle."""
    minutes = sorted({m for (_, m) in got})
    for a in range(3):
        st, doc = get(hport, "/api/v1/targets/%s/trend?area=%d&since=ns:0&step=1m"
                      % (NAME, 0x1000 + a))
        T.eq(st, 200, "%s: trend %r" % (what, doc))
        T.eq([s["start"] // MIN for s in doc["steps"]], [m for m in minutes if (a, m) in got],
             "%s: area %d's minutes" % (what, a))
        for s in doc["steps"]:
            check_step(s, got[(a, s["start"] // MIN)], "%s: area %d minute %d"
                       % (what, a, s["start"] // MIN))
        allv = [d for (h, m), v in got.items() if h == a for d in v]
        st, doc = get(hport, "/api/v1/targets/%s/trend?area=%d&since=ns:0&step=1h"
                      % (NAME, 0x1000 + a))
        T.eq(len(doc["steps"]), 1, "%s: one hour" % what)
        check_step(doc["steps"][0], allv, "%s: area %d's hour" % (what, a))
    st, doc = get(hport, "/api/v1/targets/%s/diff?a=ns:0..ns:%d&b=ns:%d.."
                  % (NAME, 3 * MIN, 3 * MIN))
    T.eq(st, 200, "%s: diff %r" % (what, doc))
    T.eq(len(doc["areas"]), 3, "%s: every area in the diff" % what)
    for r in doc["areas"]:
        a = r["area"] - 0x1000
        va = [x for (h, m), v in got.items() if h == a and m < 3 for x in v]
        vb = [x for (h, m), v in got.items() if h == a and m >= 3 for x in v]
        T.eq((r["a"]["count"], r["b"]["count"]), (len(va), len(vb)),
             "%s: diff counts of area %d" % (what, a))
        T.check(abs(r["a"]["mean"] - sum(va) / len(va)) < 1e-6 * r["a"]["mean"] and
                abs(r["b"]["mean"] - sum(vb) / len(vb)) < 1e-6 * r["b"]["mean"],
                "%s: diff means of area %d: %r" % (what, a, r))


def stored(dm):
    """Waits until every record received is in the segments (a kill keeps it)."""
    dm.wait_stats(lambda st: st["store"]["queue_bytes"] == 0, what="the records written")


def replay_send_kill(d, args, port, hport, check, part, written=None):
    """A restart after a SIGKILL: waits for the checkpoint the daemon takes once it replayed the
    records stored after the last one (its open minute saved: saved_samples), hands the stats
    dump's rollup object to check(dm, rollup), sends `part`, waits until its records are stored
    and, given written = (epoch, minute), until the rollup marks say that minute was written;
    then SIGKILLs the daemon. Returns it."""
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        st = dm.wait_stats(lambda st: st["checkpoints"]["written"] >= 1 and
                           st["rollup"]["saved_samples"] > 0,
                           what="the checkpoint after the replay")["rollup"]
        check(dm, st)
        send_all(port, part)
        stored(dm)
        if written is not None:
            D.wait_until(lambda: marks(dm.state) == written, what="minute %d written" % written[1])
    finally:
        dm.kill()
    return dm


def test_kill_after_samples_past_checkpoint(d):
    """SIGKILLs with samples stored after the last checkpoint: in the checkpoint's open minute,
    in minutes written before the kill and in a new open minute. The restart replays their
    records into the rollups too, and drops those of minutes the killed run wrote: every minute
    (and the hour) holds exactly the samples sent, once. Checkpoints come only where the daemon
    takes them at once (a new target's empty state; a restart that replayed records): the
    interval is long, so what the last checkpoint covers is known."""
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    args = ["--listen", "l=bin11@127.0.0.1:%d" % port, "--checkpoint-interval", "600"]
    rnd, got = random.Random(11), {}
    half = MIN // 2
    a_part = b"".join(calls_in(3, m, 0, MIN, 20, rnd, got) for m in range(3)) + \
        calls_in(3, 3, 0, half, 10, rnd, got)
    b_part = calls_in(3, 3, half, MIN, 10, rnd, got) + calls_in(3, 4, 0, MIN, 20, rnd, got) + \
        calls_in(3, 5, 0, MIN // 3, 8, rnd, got)
    c_part = calls_in(3, 5, MIN // 3, 2 * MIN // 3, 8, rnd, got)

    # run 1: minutes 0-1 written (the worker writes a minute when it meets the next one's first
    # sample), 2 and 3 open; its only checkpoint is the new target's (one call in), taken at once
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        s = D.connect(port)
        first = 2 * len(T.bin11(0x1000, 3, 0, 0, 0))
        s.sendall(a_part[:first])
        dm.wait_stats(lambda st: st["checkpoints"]["written"] >= 1, what="the first checkpoint")
        s.sendall(a_part[first:])
        s.shutdown(1)
        D.wait_eof(s, timeout=60)
        s.close()
        stored(dm)
        D.wait_until(lambda: marks(dm.state) == (0, 1), what="minute 1 written")
    finally:
        dm.kill()
    # run 2: A's records replayed, minutes 0-1 dropped (written), 2 and 3 counted; the restart's
    # checkpoint saves minute 3 open (its copy on disk: saved_samples); then B adds to minute 3
    # and closes it (written), fills minute 4 and opens 5
    def run2(dm, st):
        T.check(st["replayed"] > 0 and st["replay_dropped"] > 0,
                "minutes 2-3 replayed, minutes 0-1 dropped: %r" % st)
        T.check("the records after the checkpoint replayed" in dm.log(), "logged")
    replay_send_kill(d, args, port, hport, run2, b_part, written=(0, 3))

    # run 3: minute 3 (its copy and B's part) is on disk: dropped; minutes 4 and 5 counted; the
    # restart's checkpoint writes 4 and saves 5 open; C adds to it, and nothing is written
    def run3(dm, st):
        T.check(st["replayed"] > 0 and st["replay_dropped"] > 0, "run 3's replay: %r" % st)
        T.eq(st["restored"], 0, "the copy of minute 3 not written again")
    dm = replay_send_kill(d, args, port, hport, run3, c_part)
    T.eq(marks(dm.state), (0, 4), "minute 5 never written before the kills")
    # run 4: nothing written since the checkpoint: its copy of minute 5 is written, and every
    # replayed sample (C's) counted
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport,
                  serve="127.0.0.1:%d" % sport)
    try:
        st = dm.wait_stats(lambda st: st["rollup"]["restored"] == 1,
                           what="the saved open minute written")["rollup"]
        T.check("the open minute saved with the last checkpoint written" in dm.log(), "logged")
        st = dm.wait_stats(lambda st: st["checkpoints"]["written"] >= 1,
                           what="the checkpoint after the replay")["rollup"]
        T.check(st["replayed"] > 0, "C replayed: %r" % st)
        T.eq((st["replay_dropped"], st["samples_dropped"]), (0, 0), "none dropped: %r" % st)
        check_all(hport, got, "after the kills")
        out = cli(sport, "trend", NAME, "0x1001", "--since", "ns:0")
        T.eq([int(ln.split()[1]) for ln in out.splitlines()[2:]],
             [len(got[(1, m)]) for m in range(6)], "tlcap trend's counts")
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    # a clean restart: the same; then the hour alone (its minutes deleted) is still exact
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        check_all(hport, got, "after a clean restart")
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    shutil.rmtree(os.path.join(dm.state, ".rollup", NAME, "e0", "m0"))
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        for a in range(3):
            st, doc = get(hport, "/api/v1/targets/%s/trend?area=%d&since=ns:0&step=1h"
                          % (NAME, 0x1000 + a))
            T.eq(len(doc["steps"]), 1, "the hour: %r" % doc)
            check_step(doc["steps"][0], [x for (h, m), v in got.items() if h == a for x in v],
                       "area %d's hour, from the hour file" % a)
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")


def test_rebuilt_from_segments(d):
    port, hport = D.free_port(), D.free_port()
    args = ["--listen", "l=bin11@127.0.0.1:%d" % port]
    data, got = stream(3, 5, 40, seed=9)
    calls = sum(len(v) for v in got.values())
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        send_all(port, data)
        before = [get(hport, "/api/v1/targets/%s/trend?area=%d&since=ns:0&step=1m"
                      % (NAME, 0x1000 + a))[1] for a in range(3)]
        T.eq(dm.stats()["rollup"]["rebuilds"], 0, "nothing rebuilt while the rollups are there")
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    shutil.rmtree(os.path.join(dm.state, ".rollup"))
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport)
    try:
        st = dm.wait_stats(lambda st: st["rollup"]["rebuilds_done"] == 1, timeout=30,
                           what="the rollups rebuilt")["rollup"]
        T.eq((st["rebuilds"], st["rebuilding"], st["samples_dropped"]), (1, 0, 0),
             "one rebuild, done: %r" % st)
        T.check("rebuilding them from its stored segments" in dm.log(), "the start logged")
        T.check("rollups rebuilt from" in dm.log(), "the end logged")
        for a in range(3):
            check_trend(hport, got, a, 5)  # the oracle
            T.eq(get(hport, "/api/v1/targets/%s/trend?area=%d&since=ns:0&step=1m"
                     % (NAME, 0x1000 + a))[1], before[a], "area %d: the trend before" % a)
        T.eq(dm.stats()["rollup"]["samples"], 3 * calls + 2 * (calls - 3), "every sample")
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status after the rebuild")


def targets_cli(sport):
    """`tlcap targets --json` (protobuf ListTargets): NAME's object."""
    return {t["name"]: t for t in json.loads(cli(sport, "targets", "--json"))}[NAME]


def targets_http(hport):
    """/api/v1/targets: NAME's object."""
    st, doc = get(hport, "/api/v1/targets")
    T.eq(st, 200, "/api/v1/targets: %r" % doc)
    return {t["name"]: t for t in doc}[NAME]


def test_rebuild_shown_in_targets(d):
    """A target shows its rollups' rebuild from segments, through the protobuf path (`tlcap
    targets`, --json and the table) and HTTP (/api/v1/targets): none while its rollups are on
    disk; rebuilding, with the segments read of those to read and the samples so far, while it
    runs (many segments, so that it runs long enough to be seen: each view is polled on a
    thread of its own until it shows the rebuild ended); then done, with every segment on disk read and
    every sample sent counted."""
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    args = ["--listen", "l=bin11@127.0.0.1:%d" % port, "--rotate-bytes", "%d" % (24 * REC_PER_SEG),
            "--sync", "never"]  # no fsync per segment
    data, got = stream(3, 5, PER_MIN, seed=13)
    calls = sum(len(v) for v in got.values())
    total = 3 * calls + 2 * (calls - 3)  # as test_trend_and_restart counts them
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport,
                  serve="127.0.0.1:%d" % sport)
    try:
        send_all(port, data)
        dm.wait_stats(lambda st: st["store"]["queue_bytes"] == 0, what="the records written")
        for t in (targets_cli(sport), targets_http(hport)):
            T.eq(t["rollups"], {"rebuild": "none", "segments_read": 0, "segments": 0,
                                "samples": 0, "done_unix_ms": 0}, "no rebuild: %r" % t)
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    segs = len([f for f in os.listdir(os.path.join(dm.state, NAME)) if f.endswith(".manifest")])
    T.check(segs >= 100, "many segments stored: %d" % segs)  # a manifest each
    shutil.rmtree(os.path.join(dm.state, ".rollup"))
    start_ms = int(time.time() * 1000)
    dm = D.Daemon(TLCAPD, d, args, store=True, http="127.0.0.1:%d" % hport,
                  serve="127.0.0.1:%d" % sport)
    try:
        seen = {"cli": [], "http": [], "table": []}  # what each view showed while it ran
        errors = []

        def state(rb):  # "done", the rollups object while rebuilding, or None (not yet)
            return "done" if rb["rebuild"] == "done" else \
                rb if rb["rebuild"] == "rebuilding" else None

        def table():
            out = cli(sport, "targets")
            if "rollups of %s: rebuilt from" % NAME in out:
                return "done"
            return out if "rollups of %s: rebuilding from its segments" % NAME in out else None

        def poll(view, look):  # a thread a view, each until its view shows the end (or 60 s)
            deadline = time.monotonic() + 60
            try:
                while time.monotonic() < deadline:
                    x = look()
                    if x == "done":
                        return
                    if x is not None:
                        seen[view].append(x)
                errors.append("%s: the rebuild not ended within 60 s" % view)
            except Exception as e:  # told below, on the test's thread
                errors.append("%s: %r" % (view, e))

        polls = [threading.Thread(target=poll, args=a) for a in (
            ("cli", lambda: state(targets_cli(sport)["rollups"])),
            ("http", lambda: state(targets_http(hport)["rollups"])),
            ("table", table))]
        for t in polls:
            t.start()
        for t in polls:
            t.join()
        T.eq(errors, [], "the views polled")
        T.check(all(seen.values()), "the rebuild seen running by every view (%r) before it "
                "ended: more segments needed" % {k: len(v) for k, v in seen.items()})
        for view in ("cli", "http"):
            rbs = seen[view]
            for rb in rbs:
                T.eq(rb["segments"], segs, "%s: the segments to read: %r" % (view, rb))
                T.check(rb["segments_read"] <= segs and rb["samples"] <= total and
                        rb["done_unix_ms"] == 0, "%s: progress within bounds: %r" % (view, rb))
            T.check(all(x["segments_read"] <= y["segments_read"] and x["samples"] <= y["samples"]
                        for x, y in zip(rbs, rbs[1:])), "%s: progress only grows: %r" % (view, rbs))
        line = [ln for ln in seen["table"][0].splitlines() if ln.startswith(NAME)][0]
        m = re.search(r" rebuilding (\d+)/(\d+) ", line)
        T.check(m is not None and int(m.group(1)) <= segs and int(m.group(2)) == segs,
                "the ROLLUPS column: %r" % line)
        dm.wait_stats(lambda st: st["rollup"]["rebuilds_done"] == 1, timeout=60,
                      what="the rollups rebuilt")
        now_ms = int(time.time() * 1000)
        for view, t in (("cli", targets_cli(sport)), ("http", targets_http(hport))):
            rb = t["rollups"]
            T.eq((rb["rebuild"], rb["segments_read"], rb["segments"], rb["samples"]),
                 ("done", segs, segs, total), "%s: done, every segment read: %r" % (view, rb))
            T.check(start_ms <= rb["done_unix_ms"] <= now_ms, "%s: when it ended: %r" % (view, rb))
        out = cli(sport, "targets")
        line = [ln for ln in out.splitlines() if ln.startswith(NAME)][0]
        T.check(" rebuilt %d " % segs in line, "the ROLLUPS column: %r" % line)
        T.check("rollups of %s: rebuilt from %d of %d segments, %d samples, "
                % (NAME, segs, segs, total) in out, "the rebuild's line: %r" % out)
        T.eq(dm.stats()["rollup"]["samples"], total, "every sample in the rollups")
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status after the rebuild")


def test_no_rollups_shown_off(d):
    """Without storage there are no rollups: `tlcap targets` shows ROLLUPS off, and its --json
    and /api/v1/targets a null rollups object."""
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port],
                  http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % sport)
    try:
        send_all(port, stream(1, 1, 5)[0])
        T.eq(targets_cli(sport)["rollups"], None, "tlcap targets --json")
        T.eq(targets_http(hport)["rollups"], None, "/api/v1/targets")
        out = cli(sport, "targets")
        line = [ln for ln in out.splitlines() if ln.startswith(NAME)][0]
        T.check(re.search(r" off +\S+ ago$", line) is not None, "the ROLLUPS column: %r" % out)
        T.check("rollups of" not in out, "no rebuild line: %r" % out)
    finally:
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")


if __name__ == "__main__":
    T.main([test_trend_and_restart, test_diff_one_area_slowed, test_kill_after_checkpoint,
            test_kill_after_samples_past_checkpoint, test_rebuilt_from_segments,
            test_rebuild_shown_in_targets, test_no_rollups_shown_off])
