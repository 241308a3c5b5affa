#!/usr/bin/python3
"""Packed RTOS task variables end to end (SPEC 2): a tlcapd target with context_rtos pointing at
iSYSTEM's public FreeRTOS description (../shared/samples/winidea/FreeRTOSProfiler.xml, read
where it lies), a bin11 stream written as that firmware writes `isystem_trace` ((state << 16) +
task tag, a blocking reason in bits 24-31), and `tlcap stats`: the contexts are the tasks, named
from the description, and each task's statistics are the hand-computed ones; a longer random
stream of the same kind gives the same statistics live and in `tlcapd replay --context-rtos`.

Usage: test_rtos_contexts.py TLCAPD TLCAP"""
import os
import random
import socket
import sys

import daemonlib as D
import tlctest as T

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = None
for up in ("../../..", "../../../.."):
    p = os.path.normpath(os.path.join(HERE, up, "shared/samples/winidea/FreeRTOSProfiler.xml"))
    if SAMPLE is None and os.path.exists(p):
        SAMPLE = p

CTX = 0x30000000  # the task-state variable's state area
RUNNING, READY, CREATED, BLOCKED = 1, 2, 3, 5
X, S, R, E, W = 0, 1, 2, 3, 4


def trace(state, task, reason=0):
    return (reason << 24) + (state << 16) + task


def send(port, name, data):
    c = D.connect(port)
    c.sendall(b"TLCAP/1 target=" + name.encode() + b"\n" + data)
    c.shutdown(socket.SHUT_WR)
    D.wait_eof(c)
    c.close()


def stats(sport, name):
    return D.live_json(TLCAP, sport, name)


def start(d, store=False):
    ini = os.path.join(d, "tlcapd.ini")
    with open(ini, "w") as f:
        f.write("[target board]\ncontext_area = 30000000\ncontext_rtos = %s\n"
                "[target rand]\ncontext_area = 30000000\ncontext_rtos = %s\n" % (SAMPLE, SAMPLE))
    port, sport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--config", ini, "--listen", "ing=bin11@127.0.0.1:%d" % port],
                  serve="127.0.0.1:%d" % sport, store=store)
    return dm, port, sport


def test_named_tasks(d):
    if SAMPLE is None:
        print("SKIP: ../shared/samples/winidea not found")
        sys.exit(77)
    dm, port, sport = start(d, store=True)
    try:
        ev = [
            (CTX, W, 0, trace(RUNNING, 1), 0),               # Tmr Svc runs on core 0
            (0x0, E, 0, 0, 0),
            (CTX, W, 1, trace(RUNNING, 4), 10),              # MessageQueueCon on core 1
            (0x1, E, 1, 0, 20),
            (CTX, W, 1, trace(BLOCKED, 1, 0x07), 50),        # not core 1's task: no change
            (CTX, W, 0, trace(BLOCKED, 1, 0x07), 100),       # Tmr Svc blocks: out
            (0x1, X, 1, 0, 120),                             # MessageQueueCon: NET 100
            (CTX, W, 0, trace(RUNNING, 2), 150),             # LEDThread
            (0x0, E, 0, 0, 150),
            (CTX, W, 0, trace(CREATED, 3), 200),             # neither list: no change
            (0x0, X, 0, 0, 250),                             # LEDThread: NET 100
            (CTX, W, 0, trace(READY, 2), 260),               # preempted: out
            (CTX, W, 0, trace(RUNNING, 1, 0x2A), 300),       # Tmr Svc back (reason bits ignored)
            (0x0, X, 0, 0, 400),                             # Tmr Svc: NET 200, CALL 400
        ]
        send(port, "board", b"".join(T.bin11(h, t, c, v, ts) for h, t, c, v, ts in ev))
        dm.wait_stats(lambda s: D.by_name(s, "board")["events"] == len(ev), what="events")
        st = stats(sport, "board")
        names = [c["name"] for c in st["contexts"]]
        for n in ("Tmr Svc", "MessageQueueCon", "LEDThread"):
            T.check(n in names, "context %r in %r" % (n, names))
        T.check(not any("task" in n for n in names), "no unnamed task context: %r" % names)
        rows = {(r["handle"], r.get("context")): r for r in st["rows"]}
        want = {("00000000", "Tmr Svc"): (1, 200, 200, 400),
                ("00000000", "LEDThread"): (1, 100, 100, 100),
                ("00000001", "MessageQueueCon"): (1, 100, 100, 100)}
        for k, (count, net, gross, call) in want.items():
            T.check(k in rows, "row %r in %r" % (k, sorted(rows, key=repr)))
            r = rows[k]
            T.eq((r["count"], r["net"]["total"], r["gross"]["total"], r["call"]["total"]),
                 (count, net, gross, call), "%r COUNT, NET, GROSS, CALL" % (k,))
        # a mapping loaded later: its CONTEXTS win, the description names the other tasks
        mp = os.path.join(d, "map.txt")
        with open(mp, "w") as f:
            f.write("* CONTEXTS %NAME%,%HANDLE%\nLED task,0x2\n\n"
                    "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n00000000,main,\n")
        rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "mapping", "board", mp])
        T.eq(rc, 0, "tlcap mapping: " + err)
        names = [c["name"] for c in stats(sport, "board")["contexts"]]
        for n in ("Tmr Svc", "MessageQueueCon", "LED task"):
            T.check(n in names, "context %r in %r after tlcap mapping" % (n, names))
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    # the main export beside the sealed segment counts the same way, with the names in force
    # when it was sealed (default Text1 entries:
    # HANDLE, VALUE, COUNT, T.NET)
    sdir = os.path.join(dm.state, "board")
    txt = [f for f in os.listdir(sdir) if f.endswith(".txt")]
    T.eq(len(txt), 1, "one main export in %r" % os.listdir(sdir))
    with open(os.path.join(sdir, txt[0])) as f:
        body = f.read()
    for ctx, line in (("Tmr Svc", "00000000,,1,200"), ("LED task", "00000000,,1,100"),
                      ("MessageQueueCon", "00000001,,1,100")):
        sec = body.split("CONTEXT(%s)" % ctx)
        T.check(len(sec) == 2, "a section for %s in the main export" % ctx)
        T.check(sec[1].split("\n* ")[0].find("\n" + line + "\n") >= 0,
                "%s: %r in the main export:\n%s" % (ctx, line, sec[1][:300]))
    # a restart: the checkpoint holds the packing it was taken with, so it restores (not set
    # aside), and later writes of the task variable are read as before
    dm, port, sport = start(d, store=True)
    try:
        T.check("target board: statistics restored from its checkpoint" in dm.log(),
                "board restored from its checkpoint:\n" + dm.log()[-1500:])
        more = [(CTX, W, 0, trace(RUNNING, 2), 10 ** 6), (0x0, E, 0, 0, 10 ** 6 + 10),
                (0x0, X, 0, 0, 10 ** 6 + 60)]
        send(port, "board", b"".join(T.bin11(h, t, c, v, ts) for h, t, c, v, ts in more))
        dm.wait_stats(lambda s: D.by_name(s, "board")["events"] == len(ev) + len(more),
                      what="events after the restart")
        rows = {(r["handle"], r.get("context")): r for r in stats(sport, "board")["rows"]}
        T.eq(rows.get(("00000000", "LED task"), {}).get("count"), 2,
             "LED task's second call, after the restart: %r" % sorted(rows, key=repr))
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status after the restart")


def freertos_stream(seed, n=4000):
    """Two cores, five tasks, as the firmware writes isystem_trace at every switch."""
    rnd = random.Random(seed)
    out, t = [], 1000
    run = [None, None]
    depth = {}
    for _ in range(n):
        core = rnd.randrange(2)
        t += rnd.randrange(1, 300)
        x = rnd.randrange(100)
        if x < 12:
            if run[core] is not None:
                st = rnd.choice((READY, BLOCKED, BLOCKED, 6, 4))
                out.append(T.bin11(CTX, W, core, trace(st, run[core], rnd.randrange(256)), t))
                run[core] = None
            task = rnd.randrange(5)
            if task != run[1 - core]:
                out.append(T.bin11(CTX, W, core, trace(RUNNING, task), t))
                run[core] = task
        elif x < 14:
            out.append(T.bin11(CTX, W, core, trace(CREATED, rnd.randrange(5)), t))
        else:
            cx = (core, run[core])
            d = depth.get(cx, 0)
            if d == 0 or (d < 8 and rnd.randrange(2)):
                out.append(T.bin11(rnd.randrange(4), E, core, 0, t))
                depth[cx] = d + 1
            else:
                out.append(T.bin11(rnd.randrange(4), X, core, 0, t))
                depth[cx] = d - 1
    return b"".join(out)


def test_live_equals_replay(d):
    if SAMPLE is None:
        sys.exit(77)
    data = freertos_stream(7)
    path = os.path.join(d, "rand.bin11")
    with open(path, "wb") as f:
        f.write(data)
    dm, port, sport = start(d)
    try:
        send(port, "rand", data)
        n = len(data) // 24
        dm.wait_stats(lambda s: D.by_name(s, "rand")["records"] == n, what="records")
        live = stats(sport, "rand")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    rc, out, err = T.run([TLCAPD, "replay", path, "--format", "bin11", "--export", "json",
                          "--context-area", "30000000", "--context-rtos", SAMPLE])
    T.eq(rc, 0, "replay: %s" % err)
    import json
    rep = json.loads(out)
    T.check(any(c["name"] == "IDLE" for c in rep["contexts"]), "replay names the tasks")
    D.compare_stats(live, rep, "live vs replay")
    # the keys say what the description says: the same statistics, tasks unnamed
    rc, out, err = T.run([TLCAPD, "replay", path, "--format", "bin11", "--export", "json",
                          "--context-area", "30000000", "--context-id-mask", "0xFFFF",
                          "--context-state-mask", "FF0000", "--context-running", "1",
                          "--context-stopped", "2,4,5,6"])
    T.eq(rc, 0, "replay with the keys: %s" % err)
    keys = json.loads(out)
    T.check(any(c["name"] == "task1" for c in keys["contexts"]), "unnamed tasks")
    for st in (rep, keys):  # compare by context position, not name
        pos = {c["name"]: str(i) for i, c in enumerate(st["contexts"])}
        pos["Neutral"] = "Neutral"
        for r in st["rows"]:
            if r.get("context") is not None:
                r["context"] = pos[r["context"]]
        for i, c in enumerate(st["contexts"]):
            c["name"] = str(i)
    D.compare_stats(keys, rep, "keys vs description")
    # a mask alone, or packing without a context area: usage errors
    for bad in (["--context-area", "30000000", "--context-id-mask", "FFFF"],
                ["--context-id-mask", "FFFF", "--context-state-mask", "FF0000"],
                ["--context-area", "30000000", "--context-running", "x"]):
        rc, _, err = T.run([TLCAPD, "replay", path, "--format", "bin11"] + bad)
        T.eq(rc, 2, "replay %r: %s" % (bad, err))


if __name__ == "__main__":
    T.main([test_named_tasks, test_live_equals_replay])
