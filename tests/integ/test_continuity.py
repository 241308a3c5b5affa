#!/usr/bin/env python3
"""Continuity (SPEC section 10): statistics survive restarts exactly.

Every check compares the daemon's statistics (its stats dump) with the brute-force oracle
(tests/oracle, through oracle_segments) run over the bytes the daemon stored, with a gap at
every disconnect its manifests record and at every restart after a crash:
  - SIGTERM + restart: the restored statistics equal the ones before the stop, and after more
    data, the model over every stored segment;
  - SIGKILL at random moments (seeded; checkpoints every 0.3 s, so the kill falls anywhere
    between two): after each restart and at the end, the model over the stored bytes with
    one gap per restart;
  - a damaged checkpoint (truncated, a bit flipped, another version, zero length) is set
    aside in .quarantine with one log line, the daemon starts, and the target rebuilt from
    its segments equals the model.

Usage: test_continuity.py TLCAPD ORACLE_SEGMENTS"""
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, ORACLE = sys.argv[1], sys.argv[2]
TLCAP = sys.argv[3] if len(sys.argv) > 3 else None
NAME = "l@127.0.0.1"
SEED = int(os.environ.get("TLC_SEED", "20"))


class Gen:
    """Random bin11 stream: nested calls on 3 cores, S/R, data writes, state changes, some
    anomalies; times increase across every chunk (one capture)."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.t = 1000
        self.stacks = {0: [], 1: [], 2: []}

    def chunk(self, n):
        out = []
        r = self.r
        for _ in range(n):
            self.t += r.randint(1, 5000)
            core = r.randint(0, 2)
            st = self.stacks[core]
            k = r.randint(0, 99)
            if k < 35 and len(st) < 8:
                h = r.randint(0, 15)
                st.append(h)
                out.append(T.bin11(h, 3, core, 0, self.t))
            elif k < 70 and st:
                out.append(T.bin11(st.pop(), 0, core, 0, self.t))
            elif k < 78 and st:
                out.append(T.bin11(st[-1], r.choice((1, 2)), core, 0, self.t))
            elif k < 88:
                out.append(T.bin11(0x20000000 | r.randint(0, 4), 4, core, r.randint(0, 999),
                                   self.t))
            elif k < 97:
                out.append(T.bin11(0x30000000 | r.randint(0, 2), 4, core, r.randint(0, 3),
                                   self.t))
            else:
                out.append(T.bin11(r.randint(0, 15), 0, core, 0, self.t))  # X without E
        return b"".join(out)


class EvGen:
    """Random evlog stream: blocks of items of 3 threads (+name/-name nesting, >state, !var),
    times increasing per thread, sent in chunks that cut blocks anywhere."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.t = 1.0
        self.stacks = {1: [], 2: [], 3: []}

    def chunk(self, n):
        r = self.r
        blocks = []
        while n > 0:
            items = []
            for _ in range(min(n, r.randint(5, 60))):
                self.t += r.randint(1, 5000) * 1e-9
                th = r.randint(1, 3)
                st = self.stacks[th]
                k = r.randint(0, 99)
                if k < 40 and len(st) < 6:
                    nm = "f%d" % r.randint(0, 9)
                    st.append(nm)
                    items.append(T.evlog_item(self.t, th, "+" + nm))
                elif k < 80 and st:
                    items.append(T.evlog_item(self.t, th, "-" + st.pop()))
                elif k < 90:
                    items.append(T.evlog_item(self.t, th, ">s%d" % r.randint(0, 2)))
                else:
                    items.append(T.evlog_item(self.t, th, "!v%d" % r.randint(0, 2)))
            n -= len(items)
            blocks.append(T.evlog_block(items))
        return b"".join(blocks)


FMT = ["bin11"]


def segments(state):
    d = os.path.join(state, NAME)
    out = {}
    if not os.path.isdir(d):
        return []
    ext = (".log", ".log.part") if FMT[0] == "evlog" else (".txt.BIN", ".txt.BIN.part")
    for f in os.listdir(d):
        if f.endswith(ext[0]) or f.endswith(ext[1]):
            seq = int(f.split("-")[1].split(".")[0])
            out[seq] = os.path.join(d, f)
    return [out[k] for k in sorted(out)]


def seq_of(path):
    return int(os.path.basename(path).split("-")[1].split(".")[0])


def oracle(items):
    rc, out, err = T.run([ORACLE, FMT[0]] + items, timeout=120)
    T.eq(rc, 0, "oracle_segments: " + err)
    return json.loads(out)


def qclose(a, b):
    if a is None or b is None:
        return a == b
    return abs(a - b) <= max(1, abs(b) // 100 + 1)


def compare(live, model, what):
    """Every statistic of every row equal to the model's (quantiles within the histogram's
    1 % bound: the model's are exact); windows and byte counters are not modelled."""
    for k in ("events", "anomalies", "gaps"):
        T.eq(live["counters"][k], model["counters"][k], what + " counters." + k)
    T.eq(live["first_time"], model["first_time"], what + " first_time")
    T.eq(live["last_time"], model["last_time"], what + " last_time")
    lr = {D.row_key(r): r for r in live["rows"]}
    mr = {D.row_key(r): r for r in model["rows"]}
    T.eq(sorted(lr, key=repr), sorted(mr, key=repr), what + " row keys")
    T.check(len(mr) >= 5, what + ": too few rows (%d)" % len(mr))
    for key, m in mr.items():
        l = lr[key]
        for f in D.ROW_KEYS:
            T.eq(l.get(f), m.get(f), "%s row %r %s" % (what, key, f))
        for dk in ("net", "gross", "call", "outside", "period"):
            T.eq(dk in l, dk in m, "%s row %r has %s" % (what, key, dk))
            if dk not in m:
                continue
            for f in ("total", "n", "sum", "min", "max", "sumsq"):
                T.eq(l[dk].get(f), m[dk].get(f), "%s row %r %s.%s" % (what, key, dk, f))
            for f in ("p50", "p90", "p99", "p999"):
                T.check(qclose(l[dk].get(f), m[dk].get(f)),
                        "%s row %r %s.%s: %r vs exact %r" % (what, key, dk, f, l[dk].get(f),
                                                             m[dk].get(f)))


def start(d, port, interval="0.3", sliced=False, env=None):
    """sliced: every checkpoint encoded in slices of 16 rows across loop turns, the target's
    input held meanwhile (--checkpoint-slice-us 1), else the default (these small targets are
    encoded in one slice)."""
    return D.Daemon(TLCAPD, d, ["--listen", "l=%s@127.0.0.1:%d" % (FMT[0], port),
                                "--checkpoint-interval", interval, "--rotate-bytes", "60000"]
                    + (["--checkpoint-slice-us", "1"] if sliced else []), store=True, env=env)


def last_seq(state):
    """The highest segment sequence in the state directory. Taken once a start has recovered
    (the daemon is ready), it ends the runs before that start: recovery removes a .part that
    holds no whole record (a kill right after a segment opened) and the next segment takes its
    number (docs/storage.md), so the highest sequence seen BEFORE the start may be the new
    run's first segment."""
    return max([seq_of(p) for p in segments(state)] or [0])


def stats_of(dm):
    for t in dm.stats()["targets"]:
        if t["name"] == NAME:
            return t["stats"]
    return None


def send_and_close(dm, port, data):
    before = stats_of(dm)
    n0 = before["counters"]["events"] if before else 0
    s = D.connect(port)
    s.sendall(data)
    s.shutdown(1)
    D.wait_eof(s)
    s.close()
    want = n0 + len(data) // 24
    dm.wait_stats(lambda st: any(t["name"] == NAME and not t["connected"]
                                 and t["stats"]["counters"]["events"] == want
                                 for t in st["targets"]), what="events %d" % want)
    # the answer came once the bytes were written; the segments they filled are sealed after
    dm.wait_sealed()


def test_sigterm_restart(d):
    g = Gen(SEED)
    port = D.free_port()
    dm = start(d, port)
    send_and_close(dm, port, g.chunk(6000))
    rc, st = dm.stop()
    T.eq(rc, 0, "exit status")
    before = D.by_name(st, NAME)["stats"]
    T.check(os.path.exists(os.path.join(dm.state, NAME, "target.checkpoint")), "checkpoint file")
    dm = start(d, port)
    after = stats_of(dm)
    T.check(after is not None, "target restored at start (before any connection)")
    T.eq(json.dumps(after["rows"], sort_keys=True), json.dumps(before["rows"], sort_keys=True),
         "rows after restart")
    T.eq(after["counters"], before["counters"], "counters after restart")
    send_and_close(dm, port, g.chunk(4000))
    rc, st = dm.stop()
    T.eq(rc, 0, "exit status")
    compare(D.by_name(st, NAME)["stats"], oracle(segments(dm.state)), "after SIGTERM restart")


def test_nostore_sigterm(d):
    """Without storage: the checkpoint alone (the state directory is created for it)."""
    g = Gen(SEED + 6)
    port = D.free_port()
    args = ["--listen", "l=bin11@127.0.0.1:%d" % port, "--checkpoint-interval", "0.3"]
    dm = D.Daemon(TLCAPD, d, args)
    send_and_close(dm, port, g.chunk(3000))
    rc, st = dm.stop()
    T.eq(rc, 0, "exit status")
    before = D.by_name(st, NAME)["stats"]
    T.check("checkpoint not written" not in dm.log(), "a checkpoint failed:\n" + dm.log())
    dm = D.Daemon(TLCAPD, d, args)
    after = stats_of(dm)
    T.check(after is not None, "restored without storage")
    T.eq(json.dumps(after["rows"], sort_keys=True), json.dumps(before["rows"], sort_keys=True),
         "rows after restart")
    T.eq(after["counters"], before["counters"], "counters after restart")
    dm.stop()


def test_sigkill_random(d, iterations=12, seconds=30):
    """Kill -9 at random moments; after each restart the statistics are the model over what
    reached the disk, one gap per restart. Bounded to ~35 s."""
    r = random.Random(SEED + 1)
    g = EvGen(SEED + 2) if FMT[0] == "evlog" else Gen(SEED + 2)
    port = D.free_port()
    state = os.path.join(d, "state")
    runs = []  # per run: the highest segment sequence once it has started (last_seq)
    t_end = time.monotonic() + seconds
    it = 0
    while it < iterations and time.monotonic() < t_end:
        it += 1
        dm = start(d, port, interval=r.choice(("0.2", "0.3", "0.5")), sliced=r.random() < 0.5)
        runs.append(last_seq(state))
        if it > 1:
            for line in dm.log().splitlines():
                if "stored records replayed" in line:
                    print("  iteration %d: %s" % (it, line.split(": ", 2)[-1]))
            # restored: the model over everything stored before this start, a gap per restart
            items = []
            segs = segments(state)
            for k in range(len(runs) - 1):
                lo, hi = runs[k], runs[k + 1]
                part = [p for p in segs if lo < seq_of(p) <= hi]
                items += part + ["GAP"]
            compare(stats_of(dm), oracle(items), "iteration %d after restart" % it)
        s = D.connect(port)
        sent = 0
        if it == 1:  # the first checkpoint exists (a target without one is not made at start)
            s.sendall(g.chunk(500))
            D.wait_until(lambda: os.path.exists(os.path.join(state, NAME, "target.checkpoint")),
                         10, "first checkpoint")
        deadline = time.monotonic() + r.uniform(0.3, 1.5)
        pending = b""
        while time.monotonic() < deadline or sent < 2000:
            pending += g.chunk(r.randint(50, 400))
            cut = r.randint(1, len(pending))  # evlog: blocks cut anywhere
            s.sendall(pending[:cut])
            pending = pending[cut:]
            sent += 300
            time.sleep(r.uniform(0, 0.02))
        dm.kill()  # SIGKILL with the stream open
        s.close()
    dm = start(d, port)
    runs.append(last_seq(state))
    rc, st = dm.stop()
    T.eq(rc, 0, "exit status of the final run")
    segs = segments(state)
    items = []
    for k in range(len(runs) - 1):
        items += [p for p in segs if runs[k] < seq_of(p) <= runs[k + 1]] + ["GAP"]
    compare(D.by_name(st, NAME)["stats"], oracle(items), "after %d kills" % it)
    T.check("restored from its checkpoint" in dm.log(), "restore logged")


def corrupt_case(d, how):
    g = Gen(SEED + 3)
    port = D.free_port()
    dm = start(d, port)
    send_and_close(dm, port, g.chunk(5000))
    rc, st = dm.stop()
    path = os.path.join(dm.state, NAME, "target.checkpoint")
    b = bytearray(open(path, "rb").read())
    if how == "truncated":
        b = b[:len(b) // 2]
    elif how == "bitflip":
        b[len(b) // 3] ^= 0x10
    elif how == "version":
        b[8:12] = struct.pack("<I", 99)
    elif how == "empty":
        b = b""
    open(path, "wb").write(bytes(b))
    dm = start(d, port)
    T.check("unusable" in dm.log(), how + ": no log line about the checkpoint:\n" + dm.log())
    q = os.path.join(dm.state, ".quarantine", NAME)
    T.check(os.path.isdir(q) and any(f.startswith("target.checkpoint") for f in os.listdir(q)),
            how + ": checkpoint not in quarantine")
    # the listener target comes back with its first connection: rebuilt from its segments,
    # then the connection's records on top
    s = D.connect(port)
    s.sendall(g.chunk(1000))
    s.shutdown(1)
    D.wait_eof(s)
    s.close()
    dm.wait_stats(lambda st: any(t["name"] == NAME and not t["connected"]
                                 and t["stats"]["counters"]["events"] >= 6000
                                 for t in st["targets"]), what="target back")
    T.check("statistics rebuilt" in dm.log(), how + ": no rebuild logged")
    rc, st = dm.stop()
    T.eq(rc, 0, how + ": exit status")
    compare(D.by_name(st, NAME)["stats"], oracle(segments(dm.state)), how + ": rebuilt")


def test_corrupt_truncated(d):
    corrupt_case(d, "truncated")


def test_corrupt_bitflip(d):
    corrupt_case(d, "bitflip")


def test_corrupt_version(d):
    corrupt_case(d, "version")


def test_corrupt_empty(d):
    corrupt_case(d, "empty")


def test_checkpoint_without_segments(d):
    """A checkpoint with no segments beside it (retention took them all while the daemon was
    stopped): the start-up catch-up finds an empty directory and replays nothing; the target
    is restored from its checkpoint alone and goes on counting."""
    g = Gen(SEED + 7)
    port = D.free_port()
    dm = start(d, port)
    send_and_close(dm, port, g.chunk(3000))
    rc, st = dm.stop()
    T.eq(rc, 0, "exit status")
    before = D.by_name(st, NAME)["stats"]
    tdir = os.path.join(dm.state, NAME)
    T.check(segments(dm.state), "segments stored")
    for f in os.listdir(tdir):
        if f != "target.checkpoint":
            os.unlink(os.path.join(tdir, f))
    T.eq(os.listdir(tdir), ["target.checkpoint"], "only the checkpoint left")
    dm = start(d, port)
    after = stats_of(dm)
    T.check(after is not None, "target restored at start:\n" + dm.log())
    T.eq(json.dumps(after["rows"], sort_keys=True), json.dumps(before["rows"], sort_keys=True),
         "rows after restart")
    T.eq(after["counters"], before["counters"], "counters after restart")
    T.check("restored from its checkpoint, 0 bytes of stored records replayed" in dm.log(),
            "restore logged:\n" + dm.log())
    send_and_close(dm, port, g.chunk(1000))
    rc, st = dm.stop()
    T.eq(rc, 0, "exit status after the restart")
    T.eq(D.by_name(st, NAME)["stats"]["counters"]["events"],
         before["counters"]["events"] + 1000, "events counted on top of the checkpoint")


def test_idle_seal(d):
    """A target that stays disconnected gets its open segment sealed after idle_seal (reason
    idle in the manifest); before, it stays .part while the target is connected."""
    g = Gen(SEED + 4)
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port, "--idle-seal", "0.6"],
                  store=True)
    tdir = os.path.join(dm.state, NAME)
    s = D.connect(port)
    s.sendall(g.chunk(3000))
    D.wait_until(lambda: any(f.endswith(".part") for f in os.listdir(tdir))
                 if os.path.isdir(tdir) else False, 10, "open segment")
    time.sleep(1.0)  # connected: never sealed for idleness
    T.check(any(f.endswith(".part") for f in os.listdir(tdir)), "sealed while connected")
    s.close()
    t0 = time.monotonic()
    D.wait_until(lambda: not any(f.endswith(".part") for f in os.listdir(tdir)), 10,
                 "idle seal")
    T.check(time.monotonic() - t0 >= 0.4, "sealed before idle_seal passed")
    mans = [f for f in os.listdir(tdir) if f.endswith(".manifest")]
    T.eq(len(mans), 1, "sealed segments")
    text = open(os.path.join(tdir, mans[0])).read()
    T.check("\nreason idle\n" in text, "manifest reason: " + text[:400])
    rc, st = dm.stop()
    T.eq(rc, 0, "exit status")


def test_segments(d):
    """tlcap segments TARGET: every segment on disk, in order, with its state, records, bytes,
    spans and path (checked against the files and the records sent); --json the same."""
    if TLCAP is None:
        print("  (tlcap not built: skipped)")
        return
    g = Gen(SEED + 5)
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port, "--rotate-bytes",
                              "20000", "--idle-seal", "0"], store=True,
                  serve="127.0.0.1:%d" % sport)
    data = g.chunk(3000)
    send_and_close(dm, port, data)
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "segments", NAME,
                          "--json"])
    T.eq(rc, 0, "tlcap segments: " + err)
    segs = json.loads(out)
    files = segments(dm.state)
    T.eq([x["path"] for x in segs], files, "segments listed")
    T.eq([x["seq"] for x in segs], sorted(x["seq"] for x in segs), "in sequence order")
    T.eq([x["state"] for x in segs], ["sealed"] * (len(files) - 1) + ["open"], "states")
    T.eq(sum(x["records"] for x in segs), 3000, "records")
    T.eq(sum(x["bytes"] for x in segs), len(data), "bytes")
    for x in segs:
        T.eq(x["bytes"], os.path.getsize(x["path"]), "bytes of " + x["path"])
        T.check(x["first_time"] <= x["last_time"], "target-time span")
        T.check(x["opened"].endswith("Z") and x["opened_unix_ns"] > 0, "wall-clock start")
    T.check(all(x["reason"] == "size" for x in segs[:-1]), "reasons")
    # spans follow each other: what the segment index maps arrival time to target time with
    for a, b in zip(segs, segs[1:]):
        T.check(a["last_time"] <= b["first_time"], "target time ordered across segments")
        T.check(a["closed_unix_ns"] <= b["opened_unix_ns"] + 10**9, "wall clock ordered")
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "segments", NAME])
    T.eq(rc, 0, "tlcap segments (table): " + err)
    T.eq(len(out.decode().strip().splitlines()), len(files) + 1, "table lines")
    # tlcap rotate waits for the seal and prints the sealed file's path
    open_seg = segs[-1]
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "rotate", NAME])
    T.eq(rc, 0, "tlcap rotate: " + err)
    sealed_path = out.decode().strip()
    T.eq(sealed_path, open_seg["path"][:-len(".part")], "rotate prints the sealed path")
    T.check(os.path.exists(sealed_path) and not os.path.exists(open_seg["path"]),
            "sealed when rotate returns")
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "rotate", NAME])
    T.eq(rc, 0, "tlcap rotate again: " + err)
    T.check("no open segment" in out.decode(), "nothing to seal: " + out.decode())
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "segments", "nosuch"])
    T.eq(rc, 1, "unknown target: exit status (%s)" % err)
    rc, out, err = T.run([TLCAP, "segments"])
    T.eq(rc, 2, "no target: usage")
    dm.stop()


def test_kill_before_first_checkpoint(d):
    """A new target's empty state is checkpointed at once (with the position of its first
    record): killed before any periodic checkpoint, it is brought forward over everything
    stored."""
    g = Gen(SEED + 8)
    port = D.free_port()
    args = ["--listen", "l=bin11@127.0.0.1:%d" % port, "--checkpoint-interval", "3600"]
    dm = D.Daemon(TLCAPD, d, args, store=True)
    s = D.connect(port)
    s.sendall(g.chunk(3000))
    dm.wait_stats(lambda st: any(t["name"] == NAME and t["stats"]["counters"]["events"] >= 3000
                                 for t in st["targets"]), what="events")
    # the writer has appended what is queued (the stats dump's store counters)
    dm.wait_stats(lambda st: st.get("store", {}).get("records_written", 0) >= 3000,
                  what="records written")
    dm.kill()
    s.close()
    dm = D.Daemon(TLCAPD, d, args, store=True)
    T.check("restored from its checkpoint" in dm.log(), "restored:\n" + dm.log())
    compare(stats_of(dm), oracle(segments(dm.state) + ["GAP"]), "after a kill before any "
            "periodic checkpoint")
    dm.stop()


def test_history(d):
    """tlcapd replay --state-dir --target --since --until: the statistics of the stored records
    in a range, against the oracle over the same records (gaps only between them): inside one
    segment, across segments, across a reconnect gap, an empty range; a wall-clock range
    covering everything and one covering nothing; --since after --until is a usage error."""
    g = Gen(SEED + 7)
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port, "--rotate-bytes",
                              "20000"], store=True)
    a, b = g.chunk(2000), g.chunk(2000)
    send_and_close(dm, port, a)
    send_and_close(dm, port, b)
    rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    ta = [struct.unpack_from("<q", a, 24 * i + 16)[0] for i in range(2000)]
    tb = [struct.unpack_from("<q", b, 24 * i + 16)[0] for i in range(2000)]
    segs = segments(dm.state)
    T.check(len(segs) >= 5, "several segments (%d)" % len(segs))

    def replay(*extra):
        return T.run([TLCAPD, "replay", "--state-dir", dm.state, "--target", NAME, "--export",
                      "json"] + list(extra), timeout=60)

    for what, lo, hi in (("inside one segment", ta[100], ta[300]),
                         ("across segments", ta[500], ta[1500]),
                         ("across the reconnect gap", ta[1800], tb[300])):
        rc, out, err = replay("--since", "ns:%d" % lo, "--until", "ns:%d" % hi)
        T.eq(rc, 0, what + ": " + err)
        live = json.loads(out)
        model = oracle(["--range", str(lo), str(hi)] + segs)
        compare(live, model, what)
        if what.startswith("across the reconnect"):
            T.eq(live["counters"]["gaps"], 1, what + ": the disconnect is a gap")
    rc, out, err = replay("--since", "ns:%d" % ta[100], "--until", "ns:%d" % ta[100])
    T.eq(rc, 0, "empty range: " + err)
    T.eq(json.loads(out)["counters"]["events"], 0, "empty range: events")
    rc, out, err = replay("--since", "ns:%d" % ta[300], "--until", "ns:%d" % ta[100])
    T.eq(rc, 2, "--since after --until: " + err)
    rc, out, err = replay("--since", "2000-01-01T00:00:00Z", "--until", "-0s")
    T.eq(rc, 0, "wall-clock range: " + err)
    compare(json.loads(out), oracle(["--range", str(-2**63), str(2**63 - 1)] + segs),
            "wall-clock range over everything")
    rc, out, err = replay("--until", "2000-01-01T00:00:00Z")
    T.eq(rc, 1, "wall-clock range before every segment: " + err)
    rc, out, err = replay("--since", "yesterday")
    T.eq(rc, 2, "bad T: " + err)


def test_sigkill_random_evlog(d):
    """The same with an evlog target (the evlog mapping's state, blocks still open at a
    checkpoint: the store cuts it at the mark)."""
    FMT[0] = "evlog"
    try:
        test_sigkill_random(d, iterations=6, seconds=12)
    finally:
        FMT[0] = "bin11"


def kill_after_open_case(d):
    """One format: the daemon killed by the crash point right after it opened its third
    segment (an empty .part), restarted, fed more, stopped."""
    g = EvGen(SEED + 8) if FMT[0] == "evlog" else Gen(SEED + 8)
    port = D.free_port()
    state = os.path.join(d, "state")
    dm = start(d, port, env={"TLCAP_CRASHPOINT": "rotate.after_open_new:3"})
    s = D.connect(port)
    s.sendall(g.chunk(500))  # opens the first segment
    D.wait_until(lambda: os.path.exists(os.path.join(state, NAME, "target.checkpoint")), 10,
                 "first checkpoint")
    deadline = time.monotonic() + 20
    try:
        while dm.p.poll() is None and time.monotonic() < deadline:
            s.sendall(g.chunk(300))
            time.sleep(0.005)
    except OSError:
        pass  # the daemon is gone
    s.close()
    try:
        rc = dm.p.wait(10)
    except subprocess.TimeoutExpired:
        rc = None
    dm.kill()
    T.eq(rc, -signal.SIGKILL, "exit status (killed at the crash point)")
    segs = segments(state)
    T.check(segs and segs[-1].endswith(".part") and os.path.getsize(segs[-1]) == 0,
            "the kill left an empty .part last: %r" % segs[-3:])
    before = last_seq(state)
    dm = start(d, port)
    T.check("held no whole record" in dm.log(), "the empty .part removed:\n" + dm.log())
    runs = [0, last_seq(state)]
    T.eq(runs[1], before - 1, "highest sequence once recovered")
    first = [p for p in segments(state) if seq_of(p) <= runs[1]]
    compare(stats_of(dm), oracle(first + ["GAP"]), "%s after the restart" % FMT[0])
    s = D.connect(port)  # the next run: its first segment takes the removed one's number
    s.sendall(g.chunk(3000))
    s.shutdown(1)
    D.wait_eof(s)
    s.close()
    rc, st = dm.stop()
    T.eq(rc, 0, "exit status")
    after = [p for p in segments(state) if seq_of(p) > runs[1]]
    T.check(len(after) >= 2, "the second run stored segments: %r" % after)
    compare(D.by_name(st, NAME)["stats"], oracle(first + ["GAP"] + after),
            "%s at the end" % FMT[0])


def test_kill_after_segment_open(d):
    """A kill right after a segment opened, before its first record (crash point
    rotate.after_open_new; CI found it at random in test_sigkill_random_evlog under load):
    recovery removes the empty .part and the next run's first segment takes its number, so the
    runs are told apart by the highest sequence once the daemon has recovered (last_seq). The
    statistics after the restart and at the end equal the model with the gap at the restart;
    bin11 and evlog."""
    for fmt in ("evlog", "bin11"):
        FMT[0] = fmt
        try:
            os.makedirs(os.path.join(d, fmt))
            kill_after_open_case(os.path.join(d, fmt))
        finally:
            FMT[0] = "bin11"


if __name__ == "__main__":
    T.main([test_sigterm_restart, test_nostore_sigterm, test_kill_before_first_checkpoint,
            test_history, test_checkpoint_without_segments, test_sigkill_random,
            test_sigkill_random_evlog, test_idle_seal,
            test_kill_after_segment_open,
            test_segments,
            test_corrupt_truncated, test_corrupt_bitflip, test_corrupt_version,
            test_corrupt_empty])
