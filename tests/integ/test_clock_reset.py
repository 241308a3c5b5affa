#!/usr/bin/python3
"""Board resets end to end (SPEC 2 "Clock restarts", docs/board-resets.md): a TCP target that
reconnects with its clock restarted, and a serial line (a pty) whose board restarts its clock
mid-stream. Each: clock_resets counted, the statistics equal to the brute-force oracle over the
stored segments (tests/oracle, through oracle_segments), the serial segment rotated with reason
clock-reset, and no /metrics counter ever going down.

With TLCAP, `tlcap segments` numbers the segments' epochs. test_random_points puts resets at
random points (TLC_SEED picks them) of five runs, on TCP (a connection a run) and on a pty (one
stream).

Usage: test_clock_reset.py TLCAPD ORACLE_SEGMENTS [TLCAP]"""
import json
import os
import random
import sys
import urllib.request

import daemonlib as D
import tlctest as T

TLCAPD, ORACLE = sys.argv[1], sys.argv[2]
TLCAP = sys.argv[3] if len(sys.argv) > 3 else None
OLD = 50 * 10 ** 9  # the old clock, 50 s: a restart to 1 us is far past the 1 s threshold


def metrics(hport):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=5) as r:
        body = r.read().decode()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def never_down(before, after, what):
    for k, v in before.items():
        if "_total" in k and k in after:
            T.check(after[k] >= v, "%s: %s went down: %s -> %s" % (what, k, v, after[k]))


def segments(state, name):
    d = os.path.join(state, name)
    out = {}
    for f in os.listdir(d):
        if f.endswith(".txt.BIN") or f.endswith(".txt.BIN.part"):
            out[int(f.split("-")[1].split(".")[0])] = os.path.join(d, f)
    return [out[k] for k in sorted(out)]


def manifests_text(state, name):
    d = os.path.join(state, name)
    return "".join(open(os.path.join(d, f), errors="replace").read()
                   for f in sorted(os.listdir(d)) if f.endswith(".manifest"))


def epochs(sport, name):
    if TLCAP is None:
        return None
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "segments", name, "--json"])
    T.eq(rc, 0, "tlcap segments: " + err)
    segs = json.loads(out)
    segs = segs.get("segments", segs) if isinstance(segs, dict) else segs
    return [x["epoch"] for x in segs]


def against_oracle(t, files, what):
    rc, out, err = T.run([ORACLE, "bin11"] + files, timeout=120)
    T.eq(rc, 0, "oracle_segments: " + err)
    model = json.loads(out)
    T.eq(model["counters"]["events"], t["events"], what + " events")
    lr = {D.row_key(r): r for r in t["stats"]["rows"]}
    mr = {D.row_key(r): r for r in model["rows"]}
    T.eq(sorted(lr, key=repr), sorted(mr, key=repr), what + " row keys")
    for key, m in mr.items():
        lv = lr[key]
        for f in D.ROW_KEYS:
            T.eq(lv.get(f), m.get(f), "%s row %r %s" % (what, key, f))
        for dk in ("net", "gross", "call", "outside", "period"):
            T.eq(dk in lv, dk in m, "%s row %r has %s" % (what, key, dk))
            if dk in m:
                for f in ("total", "n", "sum", "min", "max"):
                    T.eq(lv[dk].get(f), m[dk].get(f), "%s row %r %s.%s" % (what, key, dk, f))


def history_epochs(sport, name, files):
    """History by target time addresses one clock epoch (SPEC 10): ns:N the latest, epoch:K:N
    epoch K. Both runs' times lie in [0, 10^12): each spelling gives the statistics of its own
    run's segment alone, against the oracle over that segment."""
    lo, hi = 0, 10 ** 12
    for what, since, until, segs in (
            ("ns: the latest epoch", "ns:%d" % lo, "ns:%d" % hi, files[1:]),
            ("epoch 0", "epoch:0:%d" % lo, "epoch:0:%d" % hi, files[:1]),
            ("epoch 1", "epoch:1:%d" % lo, "epoch:1:%d" % hi, files[1:])):
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "stats", name,
                              "--export", "json", "--since", since, "--until", until], timeout=60)
        T.eq(rc, 0, "%s: tlcap stats: %s" % (what, err))
        live = json.loads(out)
        rc, mout, err = T.run([ORACLE, "bin11", "--range", str(lo), str(hi)] + segs,
                              timeout=120)
        T.eq(rc, 0, "oracle_segments: " + err)
        model = json.loads(mout)
        T.eq(live["counters"]["events"], model["counters"]["events"], what + ": events")
        lr = {D.row_key(r): r for r in live["rows"]}
        mr = {D.row_key(r): r for r in model["rows"]}
        T.eq(sorted(lr, key=repr), sorted(mr, key=repr), what + ": row keys")
        for key, m in mr.items():
            for dk in ("net", "call"):
                if dk in m:
                    for f in ("total", "n", "min", "max"):
                        T.eq(lr[key][dk].get(f), m[dk].get(f),
                             "%s: row %r %s.%s" % (what, key, dk, f))
    rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "stats", name, "--since",
                        "epoch:0:0", "--until", "ns:%d" % hi])
    T.eq(rc, 2, "bounds in two epochs: a usage error: " + err)
    T.check("same clock epoch" in err, "the message says why: " + err)


def stream(t0, n):
    """n calls of two nested functions and a state area: E a, E b, W s, X b, X a."""
    out, t = [], t0
    for i in range(n):
        out += [T.bin11(0x00000001, 3, 0, 0, t), T.bin11(0x00000002, 3, 0, 0, t + 100),
                T.bin11(0x30000001, 4, 0, i % 3, t + 150), T.bin11(0x00000002, 0, 0, 0, t + 300),
                T.bin11(0x00000001, 0, 0, 0, t + 400)]
        t += 1000
    return b"".join(out)


def test_tcp_reconnect(d):
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port], store=True,
                  http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % sport)
    try:
        s = D.connect(port)
        s.sendall(stream(OLD, 300))
        s.shutdown(1)
        D.wait_eof(s)
        s.close()
        dm.wait_stats(lambda st: D.by_name(st, "lab@127.0.0.1")["connected"] == 0
                      and D.by_name(st, "lab@127.0.0.1")["events"] == 1500, what="first run")
        m0 = metrics(hport)
        s = D.connect(port)
        s.sendall(stream(1000, 200))  # the board was reset: its clock restarted
        s.shutdown(1)
        D.wait_eof(s)
        s.close()
        st = dm.wait_stats(lambda st: D.by_name(st, "lab@127.0.0.1")["events"] == 2500,
                           what="second run")
        t = D.by_name(st, "lab@127.0.0.1")
        T.eq(t["clock_resets"], 1, "clock_resets")
        m1 = metrics(hport)
        never_down(m0, m1, "tcp")
        T.eq(m1.get('tlcap_target_clock_resets_total{target="lab@127.0.0.1"}'), 1.0,
             "metrics clock_resets")
        against_oracle(t, segments(dm.state, "lab@127.0.0.1"), "tcp")
        if TLCAP:
            T.eq(epochs(sport, "lab@127.0.0.1"), [0, 1], "tcp segment epochs")
            history_epochs(sport, "lab@127.0.0.1", segments(dm.state, "lab@127.0.0.1"))
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_tcp_mid_connection(d):
    """A board behind TCP reset while its connection stays open (a probe that keeps the socket):
    the strict decoder confirms the restart by the records after it, as serial does; the same
    epoch, counters, segment rotation and history as a serial restart."""
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port], store=True,
                  http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % sport)
    name = "lab@127.0.0.1"
    try:
        s = D.connect(port)
        s.sendall(stream(OLD, 300))
        dm.wait_stats(lambda st: D.by_name(st, name)["events"] == 1500, what="before the reset")
        m0 = metrics(hport)
        s.sendall(stream(1000, 200))  # the board was reset: same connection, clock restarted
        st = dm.wait_stats(lambda st: D.by_name(st, name)["events"] == 2500, what="after it")
        t = D.by_name(st, name)
        T.eq((t["clock_resets"], t["connected"]), (1, 1), "a restart in the stream")
        m1 = metrics(hport)
        never_down(m0, m1, "tcp mid-connection")
        T.eq(m1.get('tlcap_target_clock_resets_total{target="%s"}' % name), 1.0,
             "metrics clock_resets")
        D.wait_until(lambda: "reason clock-reset" in manifests_text(dm.state, name),
                     what="segment rotated for the clock reset")
        files = segments(dm.state, name)
        T.check(len(files) >= 2, "a segment per epoch: %r" % files)
        against_oracle(t, files, "tcp mid-connection")
        if TLCAP:
            T.eq(epochs(sport, name), [0, 1], "tcp mid-connection segment epochs")
            history_epochs(sport, name, files)
        s.shutdown(1)
        D.wait_eof(s)
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_serial_restart(d):
    link = os.path.join(d, "ttyLAB0")
    m = D.make_pty(link)
    hport, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--serial", "lab=bin11@%s:115200" % link], store=True,
                  http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % sport)
    try:
        dm.wait_stats(lambda s: D.by_name(s, "lab")["connected"] == 1, what="serial open")
        D.pty_write_all(m, stream(OLD, 300))
        dm.wait_stats(lambda s: D.by_name(s, "lab")["events"] == 1500, what="before the reset")
        m0 = metrics(hport)
        D.pty_write_all(m, stream(1000, 200))  # reset: no disconnect on a serial line
        st = dm.wait_stats(lambda s: D.by_name(s, "lab")["events"] == 2500, what="after it")
        t = D.by_name(st, "lab")
        T.eq((t["clock_resets"], t["resyncs"], t["bytes_skipped"], t["records_invalid"]),
             (1, 0, 0, 0), "a restart, not noise")
        m1 = metrics(hport)
        never_down(m0, m1, "serial")
        D.wait_until(lambda: "reason clock-reset" in manifests_text(dm.state, "lab"),
                     what="segment rotated for the clock reset")
        files = segments(dm.state, "lab")
        T.check(len(files) >= 2, "a segment per epoch: %r" % files)
        against_oracle(t, files, "serial")
        if TLCAP:
            T.eq(epochs(sport, "lab"), [0, 1], "serial segment epochs")
    finally:
        rc, _ = dm.stop()
        os.close(m)
    T.eq(rc, 0, "exit status")


def random_runs(seed, k):
    """k runs of the stream at random lengths; each after the first starts either far below the
    previous run's times (a reset, with a random new clock) or just after them (no reset).
    Returns ([bytes of each run], resets)."""
    rnd = random.Random(seed)
    runs, resets, t = [], 0, OLD
    for i in range(k):
        n = rnd.randrange(20, 200)
        if i > 0 and t > 2 * 10 ** 9 and rnd.random() < 0.7:
            t = rnd.randrange(0, t - 2 * 10 ** 9)  # more than the 1 s threshold below
            resets += 1
        runs.append(stream(t, n))
        t += n * 1000 + rnd.randrange(1000, 10 ** 6)
    return runs, resets


def test_random_points(d):
    """Resets at random points: on TCP each run is a connection (lab), on TCP all runs one
    connection (mid: resets mid-connection), on a pty one stream with no disconnect;
    clock_resets, the epochs and the statistics (against the oracle) follow."""
    seed = int(os.environ.get("TLC_SEED", "4242"))
    print("seed", seed)
    runs, resets = random_runs(seed, 5)
    nev = sum(len(r) // 24 for r in runs)
    port, mport, sport = D.free_port(), D.free_port(), D.free_port()
    link = os.path.join(d, "ttyLAB1")
    m = D.make_pty(link)
    dm = D.Daemon(TLCAPD, d, ["--listen", "lab=bin11@127.0.0.1:%d" % port,
                              "--listen", "mid=bin11@127.0.0.1:%d" % mport,
                              "--serial", "tty=bin11@%s:115200" % link], store=True,
                  serve="127.0.0.1:%d" % sport)
    try:
        for r in runs:
            s = D.connect(port)
            s.sendall(r)
            s.shutdown(1)
            D.wait_eof(s)
            s.close()
        s = D.connect(mport)
        for r in runs:  # one connection: each reset is mid-stream
            s.sendall(r)
        s.shutdown(1)
        D.wait_eof(s)
        s.close()
        dm.wait_stats(lambda s: D.by_name(s, "tty")["connected"] == 1, what="serial open")
        for r in runs:
            D.pty_write_all(m, r)
        st = dm.wait_stats(lambda s: D.by_name(s, "lab@127.0.0.1")["events"] == nev and
                           D.by_name(s, "mid@127.0.0.1")["events"] == nev and
                           D.by_name(s, "tty")["events"] == nev, what="every run counted")
        for name in ("lab@127.0.0.1", "mid@127.0.0.1", "tty"):
            t = D.by_name(st, name)
            T.eq(t["clock_resets"], resets, "%s: clock_resets (seed %d)" % (name, seed))
            if name == "tty":
                T.eq((t["resyncs"], t["bytes_skipped"], t["records_invalid"]), (0, 0, 0),
                     "tty: restarts, not noise (seed %d)" % seed)
            against_oracle(t, segments(dm.state, name), "%s seed %d" % (name, seed))
            if TLCAP:
                ep = epochs(sport, name)
                T.eq((ep[0], ep[-1]), (0, resets), "%s: epochs %r (seed %d)" % (name, ep, seed))
    finally:
        rc, _ = dm.stop()
        os.close(m)
    T.eq(rc, 0, "exit status")


if __name__ == "__main__":
    T.main([test_tcp_reconnect, test_tcp_mid_connection, test_serial_restart,
            test_random_points])
