"""`tlcap top` in a real terminal: tmux (private server socket in a temp dir) runs it against
a real tlcapd with one bin11 target; the test reads the screen with capture-pane and drives it
with send-keys: the header shows the target and its counters, areas are listed by net time, `s`
changes the sort key, `w` the window, `/` filters by name, j/k, the arrows, PgUp/PgDn and g/G
scroll a list longer than the screen, what does not apply prints "-" in every view, `q` quits
and restores the terminal.
Every wait polls the pane with a deadline.

usage: test_top_tmux.py TLCAPD TLCAP     Exit 0 pass, 1 fail, 77 skip (no tmux).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]


MAPPING = """* HANDLE(Functions) %HANDLE%,%NAME%
00000000,main
00000001,timer_isr
* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%
20000001,task_state,
30000001,RUNNING,1
30000001,BLOCKED,2
"""


def narrow(tm, wait_screen, tlcap, ping, serve, tmp):
    """80x24: a two-core target with a mapped state variable; the view fits (no line wraps,
    the header stays), c steps through the contexts, a state row reads VARIABLE = VALUE."""
    rec, t = b"", 0
    for i in range(20):  # main on core 0 (300 ns), timer_isr on core 1 (50 ns), a state
        rec += (T.bin11(0, 3, 0, 0, t) + T.bin11(1, 3, 1, 0, t + 10) +
                T.bin11(1, 0, 1, 0, t + 60) + T.bin11(0, 0, 0, 0, t + 300) +
                T.bin11(0x30000001, 4, 0, 1 + i % 2, t + 400))
        t += 1000
    span = t - 1000 + 400
    tgt = D.connect(ping)
    tgt.sendall(b"TLCAP/1 target=dual format=bin11\n" + rec)
    mp = os.path.join(tmp, "dual.txt")
    with open(mp, "w") as f:
        f.write(MAPPING)
    addr = ["--connect", "127.0.0.1:%d" % serve]
    D.wait_until(lambda: T.run([tlcap] + addr + ["mapping", "dual", mp])[0] == 0, 15,
                 "the mapping loaded")
    # The 80-column view starts in a session of its own before the first view's (sleeping
    # after its exit) is killed: killing a server's last session ends the server, and a
    # client that reaches the exiting server fails.
    tm("-f", "/dev/null", "new-session", "-d", "-s", "top80", "-x", "80", "-y", "24",
       "env TERM=xterm %s --connect 127.0.0.1:%d top dual; echo EXITED $?; sleep 30"
       % (tlcap, serve))
    tm("kill-session", "-t", "top")
    tm("rename-session", "-t", "top80", "top")

    def row(s, name):
        return [l for l in s.splitlines() if l.startswith(name + " ")]
    s = wait_screen(lambda s: "events 100" in s and row(s, "main") and row(s, "timer_isr") and
                    row(s, "task_state = BLOCKED"), "80 columns: every area")
    lines = s.splitlines()
    T.check(lines[0].startswith("tlcap top - target dual") and "all contexts" in lines[0],
            "the header stays on the first line:\n" + s)
    T.eq(lines[2].split()[:6], ["AREA", "%", "COUNT", "T.NET", "NET.AVG", "NET.MAX"],
         "columns at 80")
    T.check(all(len(l) < 80 for l in lines), "a line as wide as the terminal:\n" + s)
    T.eq(row(s, "main")[0].split()[:4], ["main", "%.1f" % (100 * 6000 / span), "20", "6.0us"],
         "main, both contexts")
    T.eq(row(s, "task_state = RUNNING")[0].split()[4:6], ["10", "10.0us"],
         "the state RUNNING (value 1, written at even i): 10 entries, 1000 ns each")
    tm("send-keys", "-t", "top", "c")
    s = wait_screen(lambda s: " - core0 - " in s and row(s, "main"), "c: core 0")
    T.check(not row(s, "timer_isr") and not row(s, "task_state = BLOCKED"),
            "core 0 shows its own areas only:\n" + s)
    tm("send-keys", "-t", "top", "c")
    s = wait_screen(lambda s: " - core1 - " in s and row(s, "timer_isr"), "c: core 1")
    T.check(not row(s, "main"), "core 1 shows its own areas only:\n" + s)
    tm("send-keys", "-t", "top", "c")
    wait_screen(lambda s: "all contexts" in s and row(s, "main") and row(s, "timer_isr"),
                "c: back to every context")
    # x: MAX AT, when NET.MAX's sample was taken (the earliest of equal ones): main's first
    # call, 0..300 (core 0), timer_isr's first, 10..60 (core 1), both in clock epoch 0
    tm("send-keys", "-t", "top", "x")
    s = wait_screen(lambda s: "MAX AT" in s and row(s, "main"), "x: MAX AT")
    lines = s.splitlines()
    T.check("NET.MAX" in lines[2] and lines[2].split()[-2:] == ["MAX", "AT"],
            "MAX AT after NET.MAX at 80 columns:\n" + s)
    T.check(all(len(l) < 80 for l in lines), "MAX AT: a line as wide as the terminal:\n" + s)
    T.eq(row(s, "main")[0].split()[-3:], ["300ns", "0..300", "e0"], "main's MAX and its time")
    T.eq(row(s, "timer_isr")[0].split()[-3:], ["50ns", "10..60", "e0"],
         "timer_isr's MAX and its time")
    T.check("x max-at" in lines[-1], "the key line names x:\n" + s)
    tm("send-keys", "-t", "top", "x")
    s = wait_screen(lambda s: "MAX AT" not in s and row(s, "main"), "x again: no MAX AT")
    T.eq(s.splitlines()[2].split()[:6], ["AREA", "%", "COUNT", "T.NET", "NET.AVG", "NET.MAX"],
         "the columns as before")
    tm("send-keys", "-t", "top", "q")
    wait_screen(lambda s: "EXITED 0" in s, "q quits")
    tgt.close()


def main():
    tmux = shutil.which("tmux")
    if tmux is None:
        print("SKIP: tmux not installed")
        return T.SKIP
    tmp = tempfile.mkdtemp(prefix="tlc_top_")
    sock = os.path.join(tmp, "tmux.sock")
    dm = None

    def tm(*args, check=True):
        return subprocess.run([tmux, "-S", sock] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=20, check=check)

    def screen():
        r = tm("capture-pane", "-p", "-t", "top", check=False)
        return r.stdout.decode(errors="replace")

    def wait_screen(pred, what, timeout=15.0):
        try:
            return D.wait_until(lambda: (lambda x: x if pred(x) else None)(screen()), timeout,
                                what, step=0.05)
        except T.Failure as e:
            raise T.Failure("%s\n--- screen ---\n%s" % (e, screen()))

    try:
        ping, serve = D.free_port(), D.free_port()
        notify = D.Notify(tmp)
        env = dict(os.environ)
        env.pop("JOURNAL_STREAM", None)
        env["NOTIFY_SOCKET"] = notify.path
        log = open(os.path.join(tmp, "tlcapd.log"), "wb")
        dm = subprocess.Popen([TLCAPD, "--listen", "ing=bin11@127.0.0.1:%d" % ping,
                               "--serve", "127.0.0.1:%d" % serve, "--no-store",
                               "--state-dir", os.path.join(tmp, "state")],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                              env=env)
        notify.wait_for("READY=1", timeout=15)
        tgt = D.connect(ping)
        recs = b""
        t = 0
        # area 0: 2 activations of 100 ns; area 1: 1 activation of 900 ns (more net time)
        for h, d in ((0, 100), (0, 100), (1, 900)):
            recs += T.bin11(h, 3, 0, 0, t) + T.bin11(h, 0, 0, 0, t + d)
            t += 1000
        tgt.sendall(b"TLCAP/1 target=board format=bin11\n" + recs)

        cmd = "%s --connect 127.0.0.1:%d top board --interval 100 --wait" % (TLCAP, serve)
        tm("-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "160", "-y", "30",
           "env TERM=xterm " + cmd + "; echo EXITED $?; sleep 30")
        s = wait_screen(lambda s: "target board" in s and "events 6" in s and
                        "00000001" in s, "top header and rows")
        if os.environ.get("TLC_SHOW_SCREEN"):
            print(s)
        lines = s.splitlines()
        i0 = [i for i, l in enumerate(lines) if l.startswith("00000000")]
        i1 = [i for i, l in enumerate(lines) if l.startswith("00000001")]
        T.check(i0 and i1 and i1[0] < i0[0], "areas not sorted by net time:\n" + s)
        T.check("sort net" in s and "cumulative" in s, "header:\n" + s)
        # the values shown (top subscribes to these columns only): AREA % COUNT T.NET NET.AVG
        # NET.MAX P99 T.CALL, from the records above; % is T.NET over the 2900 ns they span
        T.check("core0" in lines[0], "the one context in the header:\n" + s)
        T.check(lines[i1[0]].split() == ["00000001", "%.1f" % (100 * 900 / 2900), "1", "900ns",
                                         "900ns", "900ns", "900ns", "900ns"],
                "area 1 line:\n" + s)
        T.check(lines[i0[0]].split() == ["00000000", "%.1f" % (100 * 200 / 2900), "2", "200ns",
                                         "100ns", "100ns", "100ns", "200ns"],
                "area 0 line:\n" + s)

        tm("send-keys", "-t", "top", "s")
        # the header and the rows are drawn in turn: a capture may come between them
        s = wait_screen(lambda s: "sort count" in s and all(
            any(l.startswith(a) for l in s.splitlines()) for a in ("00000000", "00000001")),
            "sort key changes, both rows drawn")
        lines = s.splitlines()
        i0 = [i for i, l in enumerate(lines) if l.startswith("00000000")]
        i1 = [i for i, l in enumerate(lines) if l.startswith("00000001")]
        T.check(i0[0] < i1[0], "count sort: area 0 (2 calls) first:\n" + s)
        tm("send-keys", "-t", "top", "w")
        wait_screen(lambda s: "last 1s" in s, "window changes")
        tm("send-keys", "-t", "top", "/", "00000001", "Enter")
        s = wait_screen(lambda s: "filter 00000001" in s and "00000000 " not in s,
                        "filter applies")
        # a data area's window view shows "-" for T.NET and T.CALL, as the cumulative view
        # does (not 0ns); then more areas than fit: the view scrolls
        more = b""
        for k in range(41):  # functions 0x100.. : 41 more code areas, 1 activation each
            more += T.bin11(0x100 + k, 3, 0, 0, t) + T.bin11(0x100 + k, 0, 0, 0, t + 10)
            t += 100
        more += T.bin11(0x20000000, 4, 0, 7, t) + T.bin11(0x20000000, 4, 0, 9, t + 50)
        tgt.sendall(more)
        tm("send-keys", "-t", "top", "/", "20000000", "Enter")
        # the header names the filter too: wait for the area's own row
        s = wait_screen(lambda s: "filter 20000000" in s and any(
            l.startswith("20000000 ") for l in s.splitlines()), "the data area")
        row = [l for l in s.splitlines() if l.startswith("20000000")][0].split()
        T.eq(row[1:], ["-", "2", "-", "-", "-", "-", "-"], "data area in the window view:\n" + s)
        # w steps through the daemon's windows (1 s, 10 s, 60 s), each once, then cumulative
        for name in ("last 10s", "last 60s", "cumulative", "last 1s", "last 10s", "last 60s",
                     "cumulative"):
            tm("send-keys", "-t", "top", "w")
            s = wait_screen(lambda s: " - %s - " % name in s and any(
                l.startswith("20000000 ") for l in s.splitlines()), name)
        row = [l for l in s.splitlines() if l.startswith("20000000")][0].split()
        T.eq(row[1:], ["-", "2", "-", "-", "-", "-", "-"], "data area in the cumulative view:\n" + s)
        tm("send-keys", "-t", "top", "/", "Enter")  # no filter: 44 areas, 26 rows fit
        wait_screen(lambda s: "areas 1-26 of 44" in s, "first page")
        tm("send-keys", "-t", "top", "j")
        wait_screen(lambda s: "areas 2-27 of 44" in s, "j scrolls a row")
        tm("send-keys", "-t", "top", "Down")
        wait_screen(lambda s: "areas 3-28 of 44" in s, "the down arrow scrolls a row")
        tm("send-keys", "-t", "top", "Up")
        wait_screen(lambda s: "areas 2-27 of 44" in s, "the up arrow")
        tm("send-keys", "-t", "top", "NPage")
        wait_screen(lambda s: "areas 19-44 of 44" in s, "PgDn: down a page, to the last rows")
        tm("send-keys", "-t", "top", "PPage")
        wait_screen(lambda s: "areas 1-26 of 44" in s, "PgUp: back a page")
        tm("send-keys", "-t", "top", "G")
        s = wait_screen(lambda s: "areas 19-44 of 44" in s, "G: the last rows")
        tm("send-keys", "-t", "top", "g")
        wait_screen(lambda s: "areas 1-26 of 44" in s, "g: the first rows")
        tm("send-keys", "-t", "top", "q")
        s = wait_screen(lambda s: "EXITED 0" in s, "q quits with status 0")
        T.check("target board" not in s, "alternate screen not restored:\n" + s)
        tgt.close()
        narrow(tm, wait_screen, TLCAP, ping, serve, tmp)
        print("PASS")
        return 0
    except T.Failure as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        subprocess.run([tmux, "-S", sock, "kill-server"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=20)
        if dm is not None and dm.poll() is None:
            dm.terminate()
            try:
                dm.wait(15)
            except subprocess.TimeoutExpired:
                dm.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
