#!/usr/bin/env python3
"""Names last, reset and forget (SPEC 10):
  - a mapping loaded with `tlcap mapping` reaches a running `tlcap watch` without a reconnect,
    is kept in the state directory (<state>/<target>/target.mapping), applies again after a
    restart, live and to history (`tlcap stats --since`);
  - `tlcap reset` starts the statistics afresh (the next events alone are counted; the stored
    segments stay: history still has the calls before the reset);
  - `tlcap forget` refuses a connected target with a clear message, removes a disconnected one
    from `tlcap targets`, /api/v1/targets and /metrics, deletes its checkpoint and kept mapping
    (it does not come back at a restart) and keeps its stored segments.

Usage: test_names.py TLCAPD TLCAP"""
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]
MAP = "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n\n00000001,worker,\n"


class Lab:
    def __init__(self, d):
        self.d = d
        self.port, self.sport, self.hport = D.free_port(), D.free_port(), D.free_port()
        self.dm = None

    def start(self):
        self.dm = D.Daemon(TLCAPD, self.d, ["--listen", "in=bin11@127.0.0.1:%d" % self.port],
                           serve="127.0.0.1:%d" % self.sport, http="127.0.0.1:%d" % self.hport,
                           store=True)
        return self.dm

    def cli(self, *args):
        return T.run([TLCAP, "--connect", "127.0.0.1:%d" % self.sport] + list(args), timeout=30)

    def stats(self, target, *extra):
        rc, out, err = self.cli("stats", target, "--export", "json", *extra)
        T.eq(rc, 0, "tlcap stats %s %s: %r" % (target, extra, err))
        return json.loads(out)

    def http(self, path):
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.hport, path),
                                    timeout=20) as r:
            return r.read().decode()

    def send(self, name, data, nrec):
        s = D.connect(self.port)
        s.sendall(b"TLCAP/1 target=%s format=bin11\n" % name.encode())
        s.sendall(data)
        self.dm.wait_stats(lambda st: any(t["name"] == name and t["records"] == nrec
                                          for t in st["targets"]), what=name + " records")
        return s


def live_msg(ws):
    op, m = cdp.recv_message(ws)
    T.eq(op, 1, "a text message")
    return json.loads(m)


def live_names(doc):
    a = doc["areas"]
    return {dict(zip(a["cols"], r))["name"] for r in a["rows"]}


def names(doc):
    return {r.get("name") for r in doc["rows"]}


def calls_of(doc, handle):
    return sum(r["count"] for r in doc["rows"]
               if str(r["handle"]).lower() == "%08x" % handle and r.get("context") != "Neutral")


def test_mapping_lasts(d):
    lab = Lab(d)
    dm = lab.start()
    watch = None
    try:
        s = lab.send("k", D.calls(10, handle=1), 20)
        watch = subprocess.Popen([TLCAP, "--connect", "127.0.0.1:%d" % lab.sport, "watch", "k",
                                  "--interval", "100"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
        first = json.loads(watch.stdout.readline())
        T.check("worker" not in json.dumps(first), "no name before the mapping")
        ws = cdp.ws_connect("127.0.0.1", lab.hport, "/api/v1/live", "tlcap-live")
        ws.sendall(cdp.frame(b"target k"))
        while True:  # the dashboard's first full table, without the name
            doc = live_msg(ws)
            if doc["areas"] is not None and doc["areas"].get("full"):
                break
        T.check("worker" not in live_names(doc), "the dashboard has no name before")
        mp = os.path.join(d, "map.txt")
        with open(mp, "w") as f:
            f.write(MAP)
        rc, out, err = lab.cli("mapping", "k", mp)
        T.eq(rc, 0, "tlcap mapping: %r" % err)
        # the running watch gets the name without reconnecting (no event needed)
        seen = False
        for _ in range(200):
            line = watch.stdout.readline()
            T.check(line, "watch still running")
            T.check(b"reconnected" not in line, "no reconnection")
            doc = json.loads(line)
            if doc.get("rows") and "worker" in names(doc):
                seen = True
                break
        T.check(seen, "the running watch shows the new name")
        # the dashboard's socket too, at its next message (not at the 10th, its periodic full)
        doc = live_msg(ws)
        T.check(doc["areas"]["full"] and "worker" in live_names(doc),
                "the dashboard's next message is full, with the new name")
        ws.close()
        T.check(os.path.exists(os.path.join(dm.state, "k", "target.mapping")),
                "the mapping is kept in the state directory")
        T.check("worker" in names(lab.stats("k")), "live stats name the area")
        s.close()
    finally:
        if watch is not None:
            watch.kill()
            watch.wait()
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    dm = lab.start()
    try:
        T.check("worker" in names(lab.stats("k")), "the name after a restart")
        h = lab.stats("k", "--since", "-1h")
        T.check("worker" in names(h), "the name in history")
        T.eq(calls_of(h, 1), 10, "history counts the calls")
        T.check("worker" in lab.http("/metrics"), "/metrics names the area after the restart")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_reset(d):
    lab = Lab(d)
    dm = lab.start()
    try:
        s = lab.send("r", D.calls(10, handle=1), 20)
        T.eq(calls_of(lab.stats("r"), 1), 10, "calls before the reset")
        rc, out, err = lab.cli("reset", "r")
        T.eq((rc, out), (0, b"reset r\n"), "tlcap reset: %r" % err)
        after = lab.stats("r")
        T.eq(after["rows"], [], "no rows after the reset")
        T.eq(after["counters"]["events"], 0, "no events after the reset")
        s.sendall(D.calls(5, t0=10 ** 6, handle=1))
        dm.wait_stats(lambda st: any(t["name"] == "r" and t["records"] == 30
                                     for t in st["targets"]), what="5 more calls")
        T.eq(calls_of(lab.stats("r"), 1), 5, "only the calls after the reset")
        # history reads what the storage thread has written, which may trail the engine
        dm.wait_stats(lambda st: st["store"]["records_written"] == 30, what="30 records stored")
        hist = lab.stats("r", "--since", "-1h")
        T.eq(calls_of(hist, 1), 15, "history still has the calls before the reset")
        T.eq(hist["counters"]["gaps"], 1, "history replays the reset as the gap it was")
        rc, out, err = lab.cli("segments", "r", "--json")
        T.eq(rc, 0, "tlcap segments: %r" % err)
        segs = json.loads(out)
        segs = segs.get("segments", segs) if isinstance(segs, dict) else segs
        T.check(any(x.get("reason") == "reset" for x in segs),
                "the segment before the reset is sealed with reason reset: %r" % segs)
        rc, out, err = lab.cli("reset", "nosuch")
        T.eq(rc, 1, "reset of an unknown target fails")
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_forget(d):
    lab = Lab(d)
    dm = lab.start()
    try:
        s = lab.send("f", D.calls(10, handle=1), 20)
        lab.send("other", D.calls(3, handle=2), 6).close()
        mp = os.path.join(d, "map.txt")
        with open(mp, "w") as f:
            f.write(MAP)
        T.eq(lab.cli("mapping", "f", mp)[0], 0, "tlcap mapping")
        rc, out, err = lab.cli("forget", "f")
        T.eq(rc, 1, "forget of a connected target fails")
        T.check("connected" in err, "the reason says connected: %r" % err)
        s.close()
        dm.wait_stats(lambda st: any(t["name"] == "f" and not t["connected"]
                                     for t in st["targets"]), what="f disconnected")
        D.wait_until(lambda: os.path.exists(os.path.join(dm.state, "f", "target.mapping")),
                     what="the kept mapping")
        watch = subprocess.Popen([TLCAP, "--connect", "127.0.0.1:%d" % lab.sport, "watch", "f",
                                  "--interval", "100"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
        json.loads(watch.stdout.readline())  # subscribed: its first snapshot
        rc, out, err = lab.cli("forget", "f")
        T.eq((rc, out), (0, b"forgot f\n"), "tlcap forget: %r" % err)
        try:
            for _ in range(100):
                doc = json.loads(watch.stdout.readline())
                if doc.get("type") == "target_event" and doc["kind"] == "forgotten":
                    break
            else:
                raise T.Failure("the subscriber was not told")
        finally:
            watch.kill()
            watch.wait()
        rc, out, err = lab.cli("targets", "--json")
        T.eq(rc, 0, "tlcap targets")
        T.eq([t["name"] for t in json.loads(out)], ["other"], "only the other target is listed")
        T.eq([t["name"] for t in json.loads(lab.http("/api/v1/targets"))], ["other"],
             "/api/v1/targets")
        T.check('target="f"' not in lab.http("/metrics"), "/metrics has no series of f")
        T.eq(calls_of(lab.stats("other"), 2), 3, "the other target's statistics stay")
        D.wait_until(lambda: not os.path.exists(os.path.join(dm.state, "f", "target.mapping"))
                     and not os.path.exists(os.path.join(dm.state, "f", "target.checkpoint")),
                     what="checkpoint and mapping deleted")
        T.eq(lab.cli("forget", "f")[0], 1, "a forgotten target is unknown")
        # a stream refused at byte 0 leaves its target listed, until it is forgotten
        z = D.connect(lab.port)
        z.sendall(b"TLCAP/1 target=junk format=bin11\n" + b"\xff" * 96)
        D.wait_eof(z)
        dm.wait_stats(lambda st: any(t["name"] == "junk" and not t["connected"]
                                     for t in st["targets"]), what="junk refused")
        T.eq(lab.cli("forget", "junk")[0], 0, "tlcap forget junk")
        rc, out, err = lab.cli("targets", "--json")
        T.eq([t["name"] for t in json.loads(out)], ["other"], "the refused stream's target gone")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    segs = [n for n in os.listdir(os.path.join(dm.state, "f")) if ".txt.BIN" in n]
    T.check(segs, "its stored segments stay: %r" % segs)
    dm = lab.start()
    try:
        rc, out, err = lab.cli("targets", "--json")
        T.eq([t["name"] for t in json.loads(out)], ["other"], "not back after a restart")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


STATE_MAP = """* HANDLE(Functions) %HANDLE%,%NAME%
00000000,main
* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%
20000001,task_state,
30000001,RUNNING,1
30000001,BLOCKED,2
"""


def test_state_names(d):
    """The dashboard names a state row VARIABLE = VALUE NAME (as tlcap top does): the
    variable's and the value's names from the mapping, the numbers without one."""
    lab = Lab(d)
    dm = lab.start()
    rec = b"".join(T.bin11(0x30000001, 4, 0, 1 + i % 2, 1000 + 100 * i) for i in range(10))
    try:
        s = lab.send("s", rec, 10)

        def states():
            ws = cdp.ws_connect("127.0.0.1", lab.hport, "/api/v1/live", "tlcap-live")
            ws.sendall(cdp.frame(b"target s"))
            while True:
                doc = live_msg(ws)
                if doc["areas"] is not None and doc["areas"].get("full"):
                    break
            ws.close()
            a = doc["areas"]
            return sorted(dict(zip(a["cols"], r))["name"] for r in a["rows"]
                          if dict(zip(a["cols"], r))["kind"] == "state")
        T.eq(states(), ["30000001 = 1", "30000001 = 2"], "state rows without a mapping")
        mp = os.path.join(d, "map.txt")
        with open(mp, "w") as f:
            f.write(STATE_MAP)
        T.eq(lab.cli("mapping", "s", mp)[0], 0, "tlcap mapping")
        T.eq(states(), ["task_state = BLOCKED", "task_state = RUNNING"],
             "state rows with the mapping")
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


T.main([test_mapping_lasts, test_reset, test_forget, test_state_names])
