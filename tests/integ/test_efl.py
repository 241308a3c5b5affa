#!/usr/bin/env python3
"""Live EFL applications through efl_debugd (SPEC 12, docs/efl.md).

    test_efl.py TLCAPD TLCAP EFL_APP|none

Debian's real efl_debugd runs under a private XDG_RUNTIME_DIR; its debugger port is always
127.0.0.1:6666, so the whole test re-runs itself in a private network namespace (`unshare -rn`)
when it can (else ctest's RESOURCE_LOCK keeps the EFL tests apart). EFL_APP is the test
application (tests/integ/efl_app.c): N threads x R repetitions of
    +tlc_outer { +tlc_inner -tlc_inner } x 2  >tlc_stateK <tlc_stateK  !tlc_tick  -tlc_outer
(K = the thread's index), so the expected statistics come from N and R, not from tlcapd. Skips (77) only when the EFL
packages are missing (no efl_debugd, or EFL_APP could not be built: "none")."""
import fcntl
import glob
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import daemonlib as D
import fake_debugd
import tlctest as T

TLCAPD, TLCAP, APP = sys.argv[1], sys.argv[2], sys.argv[3]
THREADS, REPS = 3, 400


# ---- environment ----

def lo_up():
    """Brings up lo in a fresh network namespace (SIOCGIFFLAGS / SIOCSIFFLAGS, IFF_UP)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifr))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))
    finally:
        s.close()


def maybe_netns():
    if os.environ.get("TLC_EFL_NETNS") == "1":
        lo_up()
        return
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], stderr=subprocess.DEVNULL).returncode == 0:
        env = dict(os.environ, TLC_EFL_NETNS="1")
        r = subprocess.run([unshare, "-rn", sys.executable] + sys.argv, env=env)
        sys.exit(r.returncode)
    print("note: no private network namespace (unshare -rn failed): using the host's port 6666")


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


class Efl:
    """An efl_debugd of our own and the environment EFL applications need to reach it."""

    def __init__(self, d):
        self.d = d
        self.run = os.path.join(d, "run")
        os.makedirs(self.run, mode=0o700, exist_ok=True)
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.run, HOME=d,
                        ECORE_NO_SYSTEM_MODULES="1", EINA_LOG_LEVEL="0",
                        EINA_LOG_BACKTRACE="-1")
        self.sock = os.path.join(self.run, ".edebug", "efl_debug", "0")
        self.p = None
        self.apps = []

    def start_debugd(self):
        # A SIGKILLed efl_debugd leaves its socket file behind, and a new one then serves only
        # its TCP port (checked with Debian's 1.26.3): remove it, as a service manager would.
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        T.check(not port_open(6666), "port 6666 is taken by another program")
        self.errf = open(os.path.join(self.d, "efl_debugd.log"), "ab")
        self.p = subprocess.Popen([shutil.which("efl_debugd")], env=self.env,
                                  stdin=subprocess.DEVNULL, stdout=self.errf, stderr=self.errf)
        D.wait_until(lambda: os.path.exists(self.sock) and port_open(6666), 10,
                     "efl_debugd listening")

    def stop_debugd(self, sig=signal.SIGTERM):
        self.p.send_signal(sig)
        self.p.wait(10)
        self.errf.close()
        D.wait_until(lambda: not port_open(6666), 10, "efl_debugd gone")

    def app(self, *args):
        a = App(self.env, os.path.join(self.d, "app%d.err" % len(self.apps)), args)
        self.apps.append(a)
        return a

    def close(self):
        for a in self.apps:
            a.kill()
        if self.p is not None and self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)


class App:
    """efl_app; its report lines ("ready PID", "done PID", "cpufreq on PID", ...) collected."""

    def __init__(self, env, errpath, args):
        self.errf = open(errpath, "wb")
        self.p = subprocess.Popen([APP] + list(args), env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=self.errf)
        self.pid = self.p.pid
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.wait_line("ready")

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.decode(errors="replace").strip())

    def wait_line(self, word, timeout=15):
        want = "%s %d" % (word, self.pid)
        D.wait_until(lambda: want in self.lines or self.p.poll() is not None, timeout,
                     "efl_app %d: %r" % (self.pid, word))
        T.check(want in self.lines, "efl_app %d exited (%s) before %r; lines %r"
                % (self.pid, self.p.returncode, word, self.lines))

    def run_workload(self):
        self.p.send_signal(signal.SIGUSR1)
        self.wait_line("done", 30)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(10)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)
        self.errf.close()


def daemon(d, sport, poll_ms=50, pattern="efl_app", extra="", args=(), run=None):
    """tlcapd with [efl lab]; `run`: its XDG_RUNTIME_DIR (efl_debugd's socket is looked for
    there; default: an empty directory, so the port is taken unverified)."""
    conf = os.path.join(d, "tlcapd.ini")
    with open(conf, "w") as f:
        f.write("[efl lab]\npattern = %s\npoll_ms = %d\n%s" % (pattern, poll_ms, extra))
    if run is None:
        run = os.path.join(d, "tlcapd-run")
        os.makedirs(run, mode=0o700, exist_ok=True)
    return conf, D.Daemon(TLCAPD, d, ["--config", conf] + list(args), store=True,
                          serve="127.0.0.1:%d" % sport,
                          env={"XDG_RUNTIME_DIR": run, "HOME": run})


def tname(app):
    return "lab/efl_app-%d" % app.pid


def efl_app_entry(st, pid):
    for src in st.get("efl", []):
        for a in src["apps"]:
            if a["pid"] == pid:
                return a
    return None


def wait_state(dm, app, states, timeout=15):
    def get():
        a = efl_app_entry(dm.stats(), app.pid)
        return a if a is not None and a["state"] in states else None
    try:
        return D.wait_until(get, timeout, "efl_app %d in state %r" % (app.pid, states), 0.05)
    except T.Failure as e:
        raise T.Failure("%s; efl %r; log:\n%s" % (e, dm.stats().get("efl"), dm.log()[-2000:]))


def counts(js):
    """{area name: count} over the merged rows (Neutral for code areas, the only row else),
    and {area name: [per-thread counts]} for code areas."""
    total, per_thread = {}, {}
    for r in js["rows"]:
        n = r.get("name")
        if not n or not n.startswith("tlc_"):
            continue
        ctx = r.get("context")
        if ctx in (None, "Neutral"):
            total[n] = total.get(n, 0) + r["count"]
        else:
            per_thread.setdefault(n, []).append(r["count"])
    return total, per_thread


def expected():
    n = THREADS * REPS
    want = {"tlc_outer": n, "tlc_inner": 2 * n, "tlc_tick": n}
    for k in range(THREADS):
        want["tlc_state%d" % k] = REPS
    return want


def settle(dm, app):
    """After "done": two more evlog replies from the application, so the second was asked for
    after its workload ended and everything it logged has been fed."""
    r0 = efl_app_entry(dm.stats(), app.pid)["replies"]
    dm.wait_stats(lambda s: efl_app_entry(s, app.pid)["replies"] >= r0 + 2,
                  what="two more replies from %d" % app.pid)


def check_workload(rep, what):
    """The replayed statistics (which carry the evlog names) hold the workload's counts."""
    total, per = counts(rep)
    T.eq(total, expected(), what + " counts")
    T.eq(sorted(per["tlc_outer"]), [REPS] * THREADS, what + " tlc_outer per thread")
    T.eq(sorted(per["tlc_inner"]), [2 * REPS] * THREADS, what + " tlc_inner per thread")


def rotate_replay(dm, sport, target):
    """Seals the target's open segment (`tlcap rotate`); returns the sealed .log paths and the
    replay (JSON) of the newest."""
    tdir = os.path.join(dm.state, target)
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "rotate", target],
                         timeout=30)
    T.eq(rc, 0, "tlcap rotate %s: %s" % (target, err))
    D.wait_until(lambda: glob.glob(os.path.join(tdir, "*.log")) and
                 not glob.glob(os.path.join(tdir, "*.part")), 60, "segment sealed")
    segs = sorted(glob.glob(os.path.join(tdir, "*.log")))
    rc, out, err = T.run([TLCAPD, "replay", segs[-1], "--format", "evlog", "--export", "json"])
    T.eq(rc, 0, "replay %s: %s" % (segs[-1], err))
    return segs, json.loads(out)


def live_equals_replay(dm, sport, target):
    """Seals the target's segment (`tlcap rotate`), replays the sealed .log segment and compares
    it with the live statistics, row by row (idle application: no event in between). Returns
    the replay."""
    tdir = os.path.join(dm.state, target)
    for attempt in range(3):
        live = D.live_json(TLCAP, sport, target)
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "rotate", target],
                             timeout=30)
        T.eq(rc, 0, "tlcap rotate %s: %s" % (target, err))
        D.wait_until(lambda: glob.glob(os.path.join(tdir, "*.log")) and
                     not glob.glob(os.path.join(tdir, "*.part")), 60, "segment sealed")
        segs = sorted(glob.glob(os.path.join(tdir, "*.log")))
        rc, out, err = T.run([TLCAPD, "replay"] + segs + ["--format", "evlog", "--export",
                                                          "json"])
        T.eq(rc, 0, "replay %r: %s" % (segs, err))
        rep = json.loads(out)
        if D.live_json(TLCAP, sport, target)["counters"]["events"] == live["counters"]["events"]:
            T.eq(len(segs), 1 + attempt, "segments of %s" % target)
            D.compare_stats(live, rep, target)
            # live statistics carry the evlog names too, as the replay gives them
            T.eq({D.row_key(r): r.get("name") for r in live["rows"]},
                 {D.row_key(r): r.get("name") for r in rep["rows"]}, target + " area names")
            return rep
    raise T.Failure("%s kept receiving events while idle" % target)


def check_slash_name_commands(dm, sport, target):
    """An efl target's name has a '/' (SOURCE/APP-PID): `tlcap rotate` prints the sealed
    segment's path, `tlcap segments` lists the target's segments, and `tlcap stats --since`
    answers from the stored records, as for any other name."""
    tdir = os.path.join(dm.state, target)
    cli = [TLCAP, "--connect", "127.0.0.1:%d" % sport]
    rc, out, err = T.run(cli + ["rotate", target], timeout=30)
    T.eq(rc, 0, "tlcap rotate %s: %s" % (target, err))
    out = out.decode() if isinstance(out, bytes) else out
    T.check("no open segment" not in out, "rotate found the open segment: %r" % out)
    paths = [ln for ln in out.splitlines() if ln.strip()]
    T.check(paths and all(p.endswith(".log") and target in p for p in paths),
            "rotate printed the sealed segment of %s: %r" % (target, out))
    rc, out, err = T.run(cli + ["segments", target, "--json"], timeout=30)
    T.eq(rc, 0, "tlcap segments %s: %s" % (target, err))
    segs = json.loads(out)
    segs = segs.get("segments", segs) if isinstance(segs, dict) else segs
    on_disk = sorted(os.path.basename(f) for f in glob.glob(os.path.join(tdir, "*.log")))
    listed = sorted(os.path.basename(x["path"]) for x in segs if x["path"].endswith(".log"))
    T.eq(listed, on_disk, "segments listed for %s" % target)
    rc, out, err = T.run(cli + ["stats", target, "--since", "ns:0", "--export", "json"],
                         timeout=60)
    T.eq(rc, 0, "tlcap stats %s --since: %s" % (target, err))
    past = json.loads(out)
    T.check(past["counters"]["events"] > 0, "stored events of %s: %r" % (target,
                                                                       past["counters"]))
    # the exports of its segments name it (JSON "target"), replayed by file or by name
    segs = sorted(glob.glob(os.path.join(tdir, "*.log")))
    rc, out, err = T.run([TLCAPD, "replay"] + segs + ["--export", "json"])
    T.eq(rc, 0, "replay %r: %s" % (segs, err))
    T.eq(json.loads(out)["target"], target, "replay JSON target of its segments")
    rc, out, err = T.run([TLCAPD, "replay", "--state-dir", dm.state, "--target", target,
                          "--export", "json"])
    T.eq(rc, 0, "replay --state-dir --target %s: %s" % (target, err))
    T.eq(json.loads(out)["target"], target, "replay --state-dir JSON target")
    # a mapping on such a name is kept inside the state directory, under the target's own
    mp = os.path.join(os.path.dirname(dm.state), "slash-map.txt")
    with open(mp, "w") as f:
        f.write("* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n\n00000001,worker,\n")
    rc, out, err = T.run(cli + ["mapping", target, mp], timeout=30)
    T.eq(rc, 0, "tlcap mapping %s: %s" % (target, err))
    D.wait_until(lambda: os.path.exists(os.path.join(tdir, "target.mapping")), 10,
                 "the kept mapping of %s" % target)
    rc, out, err = T.run(cli + ["reset", target], timeout=30)
    T.eq(rc, 0, "tlcap reset %s: %s" % (target, err))
    T.eq(json.loads(T.run(cli + ["stats", target, "--export", "json"], timeout=30)[1])
         ["counters"]["events"], 0, "no events after the reset of %s" % target)


def check_slash_forget(dm, sport, gone, live):
    """`tlcap forget` on names with '/': refused for a connected one, done for the target of an
    exited application (gone from `tlcap targets`; its kept files deleted, its segments
    kept)."""
    cli = [TLCAP, "--connect", "127.0.0.1:%d" % sport]
    rc, out, err = T.run(cli + ["forget", live], timeout=30)
    T.eq(rc, 1, "forget of the connected %s fails" % live)
    T.check("connected" in err, "the reason: %r" % err)
    rc, out, err = T.run(cli + ["forget", gone], timeout=30)
    T.eq(rc, 0, "tlcap forget %s: %s" % (gone, err))
    rc, out, err = T.run(cli + ["targets", "--json"], timeout=30)
    names = [t["name"] for t in json.loads(out)]
    T.check(gone not in names and live in names, "targets after forget: %r" % names)
    tdir = os.path.join(dm.state, gone)
    D.wait_until(lambda: not os.path.exists(os.path.join(tdir, "target.mapping")) and
                 not os.path.exists(os.path.join(tdir, "target.checkpoint")), 10,
                 "kept files of %s deleted" % gone)
    T.check(glob.glob(os.path.join(tdir, "*.log")), "segments of %s stay" % gone)


# ---- tests ----

def test_two_apps_live_and_replay(d):
    """One application running before tlcapd starts, one started after: both become targets
    lab/efl_app-PID, capture; their workloads give exactly the known counts per area (and per
    thread); the stored .log segments replay to the same statistics; an application that
    exits is a disconnect (a gap)."""
    e = Efl(d)
    e.start_debugd()
    sport = D.free_port()
    dm = None
    try:
        a1 = e.app()
        _, dm = daemon(d, sport, run=e.run)
        a2 = e.app()
        for a in (a1, a2):
            wait_state(dm, a, ("capturing",))
            a.wait_line("cpufreq on")
        a1.run_workload()
        a2.run_workload()
        for a in (a1, a2):
            settle(dm, a)
            check_workload(live_equals_replay(dm, sport, tname(a)), tname(a))
        a1.run_workload()  # an open segment again, for rotate to seal
        settle(dm, a1)
        check_slash_name_commands(dm, sport, tname(a1))
        st = dm.stats()
        T.eq(len(st["efl"]), 1, "efl sources")
        T.eq(st["efl"][0]["no_cpufreq"], 0, "no_cpufreq")
        T.eq(st["efl"][0]["verification"], "verified", "port checked through the socket")
        a1.stop()
        dm.wait_stats(lambda s: not D.by_name(s, tname(a1))["connected"], what="a1 disconnected")
        t1 = D.by_name(dm.stats(), tname(a1))
        T.eq(t1["gaps"], 2, "gaps of the exited application (its reset, its exit)")
        T.check(D.by_name(dm.stats(), tname(a2))["connected"], "a2 still connected")
        T.check("application efl_app pid %d exited" % a1.pid in dm.log(), "exit logged")
        check_slash_forget(dm, sport, tname(a1), tname(a2))
        n = len(dm.notify.msgs)
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
        # shutdown turned the evlog off in the remaining application (its work-around says so)
        a2.wait_line("cpufreq off", 10)
        T.check(e.p.poll() is None, "efl_debugd still running")
        del n
    finally:
        if dm is not None:
            dm.kill()
        e.close()


def test_killed_and_debugd_restart(d):
    """An application killed mid-run is a disconnect; efl_debugd going away disconnects the
    others (their eina debug sessions end with it); tlcapd reconnects when it is back and picks
    up applications that start then; nothing crashes."""
    e = Efl(d)
    e.start_debugd()
    sport = D.free_port()
    dm = None
    try:
        _, dm = daemon(d, sport, run=e.run)
        victim = e.app("--reps", "200000")
        other = e.app()
        for a in (victim, other):
            wait_state(dm, a, ("capturing",))
        victim.p.send_signal(signal.SIGUSR1)  # a long run, killed in the middle of it
        dm.wait_stats(lambda s: D.by_name(s, tname(victim))["events"] > 1000,
                      what="victim's events flowing")
        victim.p.kill()
        victim.p.wait(10)
        dm.wait_stats(lambda s: not D.by_name(s, tname(victim))["connected"],
                      what="killed application disconnected")
        T.eq(D.by_name(dm.stats(), tname(victim))["gaps"], 1, "victim gaps")
        e.stop_debugd(signal.SIGKILL)  # killed: its socket file stays behind
        dm.wait_stats(lambda s: not D.by_name(s, tname(other))["connected"] and
                      not s["efl"][0]["connected"], what="efl_debugd gone")
        T.check("efl_debugd went away" in json.dumps(D.by_name(dm.stats(), tname(other))) or
                "efl_debugd" in dm.log(), "reason logged")
        e.start_debugd()
        dm.wait_stats(lambda s: s["efl"][0]["connected"] and s["efl"][0]["connects"] == 2,
                      timeout=40, what="reconnected to efl_debugd")
        late = e.app()
        wait_state(dm, late, ("capturing",))
        late.run_workload()
        settle(dm, late)
        check_workload(live_equals_replay(dm, sport, tname(late)), tname(late))
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
    finally:
        if dm is not None:
            dm.kill()
        e.close()


def test_app_without_workaround(d):
    """An application that does not answer CPU/Freq/on (the EFL 1.26.3 bug): reported with its
    pid and the reason (log line, state in the stats dump, STATUS), captured through EvLog/on
    instead, its workload counted exactly; an application with the work-around beside it is
    unaffected."""
    e = Efl(d)
    e.start_debugd()
    sport = D.free_port()
    dm = None
    try:
        _, dm = daemon(d, sport, run=e.run)
        bad = e.app("--no-workaround")
        good = e.app()
        wait_state(dm, bad, ("no-cpufreq",))
        wait_state(dm, good, ("capturing",))
        log = dm.log()
        line = [ln for ln in log.splitlines() if "pid %d" % bad.pid in ln and " warn " in ln and
                "does not answer CPU/Freq/on" in ln and "0xfffffffc" in ln]
        T.eq(len(line), 1, "one warning naming pid and reason; log:\n" + log[-2000:])
        T.eq(dm.stats()["efl"][0]["no_cpufreq"], 1, "no_cpufreq counter")
        tb = D.by_name(dm.stats(), tname(bad))
        T.check(tb["connected"] and tb["peer"].endswith("pid %d no-cpufreq" % bad.pid),
                "the target's peer text says no-cpufreq: %r" % tb["peer"])
        T.check("no-cpufreq" not in D.by_name(dm.stats(), tname(good))["peer"], "good peer")
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "targets"])
        T.check(rc == 0 and b"no-cpufreq" in out, "tlcap targets shows it: %r %r" % (out, err))
        dm.notify.wait_for("efl_no_cpufreq=1", timeout=10)
        bad.run_workload()
        good.run_workload()
        for a in (bad, good):
            settle(dm, a)
            check_workload(live_equals_replay(dm, sport, tname(a)), tname(a))
        T.check(bad.p.poll() is None, "the application without the work-around still runs")
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
    finally:
        if dm is not None:
            dm.kill()
        e.close()


def test_reload_removes_source(d):
    """SIGHUP with the [efl] section removed turns the evlog off in the applications (the
    work-around's CPU/Freq/off handler runs) and disconnects their targets; putting it back
    captures again (same application, same target: a reconnect)."""
    e = Efl(d)
    e.start_debugd()
    sport = D.free_port()
    dm = None
    try:
        conf, dm = daemon(d, sport, run=e.run)
        a = e.app()
        wait_state(dm, a, ("capturing",))
        a.wait_line("cpufreq on")
        with open(conf, "w") as f:
            f.write("[daemon]\n")
        dm.p.send_signal(signal.SIGHUP)
        a.wait_line("cpufreq off", 10)
        dm.wait_stats(lambda s: not D.by_name(s, tname(a))["connected"] and not s["efl"],
                      what="source removed")
        with open(conf, "w") as f:
            f.write("[efl lab]\npattern = %d\npoll_ms = 50\n" % a.pid)  # by pid this time
        on_before = a.lines.count("cpufreq on %d" % a.pid)
        dm.p.send_signal(signal.SIGHUP)
        wait_state(dm, a, ("capturing",))
        D.wait_until(lambda: a.lines.count("cpufreq on %d" % a.pid) > on_before, 10,
                     "evlog on again")
        a.run_workload()
        settle(dm, a)
        segs, rep = rotate_replay(dm, sport, tname(a))
        T.check(len(segs) >= 1, "a sealed segment")
        check_workload(rep, tname(a))
        T.eq(D.by_name(dm.stats(), tname(a))["reconnects"], 1, "reconnects")
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
    finally:
        if dm is not None:
            dm.kill()
        e.close()


def test_tlcapd_killed_recovers_segment(d):
    """tlcapd SIGKILLed while capturing: on restart the .part segment of the efl target, in
    its directory per source (STATE/lab/efl_app-PID/), is recovered and sealed, and replays to
    the workload; the application is captured again under the same target."""
    e = Efl(d)
    e.start_debugd()
    sport = D.free_port()
    dm = None
    try:
        _, dm = daemon(d, sport, run=e.run)
        a = e.app()
        wait_state(dm, a, ("capturing",))
        a.run_workload()
        settle(dm, a)
        tdir = os.path.join(dm.state, tname(a))
        fed = D.by_name(dm.stats(), tname(a))["bytes"]

        def part_size():
            ps = glob.glob(os.path.join(tdir, "*.part"))
            return sum(os.path.getsize(p) for p in ps) if ps else 0
        D.wait_until(lambda: part_size() == fed, 10, "the .part holds every byte fed (%d)" % fed)
        dm.kill()
        dm = None
        _, dm = daemon(d, sport, run=e.run)
        T.check(not glob.glob(os.path.join(tdir, "*.part")), "no .part left after recovery")
        segs = sorted(glob.glob(os.path.join(tdir, "*.log")))
        T.eq(len(segs), 1, "recovered segments")
        rc, out, err = T.run([TLCAPD, "replay", segs[0], "--format", "evlog", "--export", "json"])
        T.eq(rc, 0, "replay: " + err)
        check_workload(json.loads(out), "recovered " + tname(a))
        wait_state(dm, a, ("capturing",))
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
    finally:
        if dm is not None:
            dm.kill()
        e.close()


class HostileDebugd(fake_debugd.Server):
    """A hostile stand-in for efl_debugd on 127.0.0.1:6666, one connection at a time:
    `plans[k]` drives the k-th connection - "cookie" answers the registration with a wrong
    cookie; otherwise a list of answers to EvLog/get (bytes: a payload; "badsize": a packet
    whose size field is 5)."""

    def __init__(self, plans):
        self.plans = plans
        self.connections = len(plans)
        self.gets = 0
        self.ops_seen = []
        super().__init__(6666)

    def conversation(self, c, k):
        plan = self.plans[k]
        ids = {}
        while True:
            cid, op, p = fake_debugd.read_packet(c)
            if op == 0:  # register: u64 cookie, names
                fake_debugd.answer_register(c, p, ids, bytes(8) if plan == "cookie" else None)
                if plan == "cookie":
                    fake_debugd.drain_until_closed(c)  # tlcapd must hang up
                    return
                continue
            if op == 1:
                continue
            name = {v: n for n, v in ids.items()}.get(op, str(op))
            self.ops_seen.append(name)
            if name == "Daemon/Client/register_observer":
                fake_debugd.send_packet(c, 0, ids["Daemon/Client/added"],
                                        struct.pack("<ii", 5, 777) + b"evil\napp\0")
                fake_debugd.send_packet(c, 0, ids["Daemon/Client/added"],
                                        struct.pack("<ii", 6, 778) + b"." + b"y" * 300 + b"\0")
            elif name == "EvLog/get" and cid != 5:
                fake_debugd.send_packet(c, cid, op, struct.pack("<I", 0))  # on, nothing logged
            elif name == "EvLog/get":
                self.gets += 1
                ans = plan.pop(0) if plan else struct.pack("<I", 0)
                if ans == "badsize":
                    c.sendall(struct.pack("<Iii", 5, 5, op))
                    fake_debugd.drain_until_closed(c)
                    return
                fake_debugd.send_packet(c, 5, op, ans)


def test_hostile_debugd(d):
    """Everything from efl_debugd is checked: an evlog answer whose items are garbage (a decode
    error: the target detaches and comes back at the next block), one over max_block (skipped
    with a gap), a packet size below the header and a registration answer with a wrong cookie
    (both drop the connection, counted as protocol errors, then tlcapd reconnects), an
    application name with a control character, one too long for max_name. Only the valid
    blocks are counted."""
    def block(n, overflow=0):
        return struct.pack("<I", overflow) + b"".join(T.evlog_item(1.0 + i * 1e-3, 0x7f01, "!tick")
                                               for i in range(n))
    garbage = struct.pack("<I", 0) + b"\xff" * 48
    big = block(100)  # 4800 bytes of items > max_block 4096
    fake = HostileDebugd([[block(10), garbage, block(10, overflow=3), big, block(10), "badsize"],
                       "cookie",
                       [block(10)]])
    sport = D.free_port()
    dm = None
    try:
        _, dm = daemon(d, sport, pattern="*", extra="[daemon]\nmax_block = 4096\n")
        name = "lab/evil_app-777"
        dm.wait_stats(lambda s: s["efl"] and s["efl"][0]["connects"] == 3 and
                      s["efl"][0]["connected"] and any(t["name"] == name and t["events"] == 40
                                                       for t in s["targets"]),
                      timeout=30, what="three connections, 4 valid blocks counted")
        st = dm.stats()
        t = D.by_name(st, name)
        T.eq(t["decode_errors"], 1, "decode errors")
        T.eq(t["overflow_items"], 3, "the application's overflow count reaches the target")
        T.eq(st["efl"][0]["protocol_errors"], 2, "protocol errors (bad size, wrong cookie)")
        T.check(t["connected"], "attached again")
        log = dm.log()
        T.check("over max_block, skipped" in log, "oversized block logged")
        T.check("packet size 5 is below the 12-byte header" in log, "bad size logged")
        T.check("evil?app" in log and "evil\napp" not in log, "control character not logged")
        T.check(fake.error is None, "fake efl_debugd: %s" % fake.error)
        # a name longer than the room left in max_name (64), starting with '.': cut, '_' first
        long_name = "lab/_" + "y" * (64 - len("lab/_") - len("-778")) + "-778"
        T.check(D.by_name(st, long_name)["connected"], "long-named application attached")
        T.check("CPU/Freq/on" in fake.ops_seen, "evlog turned on")
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
        D.wait_until(lambda: "CPU/Freq/off" in fake.ops_seen, 10, "evlog turned off at exit")
    finally:
        if dm is not None:
            dm.kill()
        fake.close()


class ChurnDebugd(fake_debugd.Server):
    """A stand-in for efl_debugd that speaks its protocol correctly (docs/efl.md) on
    127.0.0.1:PORT, one connection at a time until closed: the registration is answered, and
    `register_observer` is answered with `batch`, a list of ("added", cid, pid, name) and
    ("deleted", cid), once `go` is set; every EvLog/get gets an empty evlog (the overflow word
    only)."""

    quiet = (OSError,)  # closed

    def __init__(self, port, batch, go=True):
        self.batch = batch
        self.sent = False
        self.go = threading.Event()
        if go:
            self.go.set()
        super().__init__(port)

    def conversation(self, c, k):
        ids = {}
        try:
            while True:
                cid, op, p = fake_debugd.read_packet(c)
                if op == 0:
                    fake_debugd.answer_register(c, p, ids)
                elif op == ids.get("Daemon/Client/register_observer"):
                    self.go.wait(30)
                    out = []
                    for ev in self.batch:
                        if ev[0] == "added":
                            pay = struct.pack("<ii", ev[1], ev[2]) + ev[3].encode() + b"\0"
                            out.append(fake_debugd.packet(0, ids["Daemon/Client/added"], pay))
                        else:
                            out.append(fake_debugd.packet(0, ids["Daemon/Client/deleted"],
                                                          struct.pack("<i", ev[1])))
                    c.sendall(b"".join(out))
                    self.sent = True
                elif op == ids.get("EvLog/get"):
                    fake_debugd.send_packet(c, cid, op, struct.pack("<I", 0))
        except EOFError:
            pass


def lab_targets(st, src="lab"):
    return sorted(t["name"] for t in st["targets"] if t["name"].startswith(src + "/"))


def test_churn_capped_reused_no_eviction(d):
    """A program that holds the debugger port can announce applications without end: an efl
    source keeps at most max_targets targets (state directories too), further applications
    are refused (counted, logged naming the source), an exited application's target is reused
    by a new process of the same name, and no disconnected target of another source is evicted
    to make room."""
    sport, lport = D.free_port(), D.free_port()
    batch = [("added", 0, 0, "")]  # a client listed before its hello: not an application
    for k in range(8):  # eight applications that start and exit: the cap
        batch += [("added", 10 + k, 1000 + k, "app%d" % k), ("deleted", 10 + k)]
    for i in range(3000):  # a flood of new names
        batch += [("added", 100 + i, 20000 + i, "churn%d" % i), ("deleted", 100 + i)]
    batch.append(("added", 5000, 5555, "app3"))  # app3 again, a new process: reuses its target
    fake = ChurnDebugd(6666, batch, go=False)
    dm = None
    try:
        _, dm = daemon(d, sport, pattern="*", extra="max_targets = 8\n",
                       args=["--listen", "bench=bin11@127.0.0.1:%d" % lport,
                             "--max-targets", "40"])
        for name in ("t1", "t2", "t3", "t4", "t5"):  # the lab's targets, disconnected
            s = D.connect(lport)
            s.sendall(b"TLCAP/1 target=%s\n" % name.encode() + D.calls(2))
            dm.wait_stats(lambda st: any(t["name"] == name and t["records"] == 4
                                         for t in st["targets"]), what=name)
            s.close()
            dm.wait_stats(lambda st: not D.by_name(st, name)["connected"], what=name + " gone")
        fake.go.set()  # now the flood
        dm.wait_stats(lambda st: st["efl"] and st["efl"][0]["apps_seen"] >= 3009,
                      timeout=60, what="all 3009 applications announced")
        st = dm.stats()
        src = st["efl"][0]
        want = ["lab/app%d-%d" % (k, 1000 + k) for k in range(8)]
        T.eq(lab_targets(st), want, "the source's targets: the first eight, no more")
        T.eq(sorted(os.listdir(os.path.join(dm.state, "lab"))), [w[4:] for w in want],
             "state directories of the source")
        for n in ("t1", "t2", "t3", "t4", "t5"):
            T.check(D.by_name(st, n) is not None, "the lab's disconnected target %s kept" % n)
        T.eq(st["daemon"]["targets_evicted"], 0, "targets evicted")
        T.eq(src["apps_refused_cap"], 3000, "applications refused at the cap")
        T.eq(src["apps_seen"], 3009, "applications seen (the one without a hello is not)")
        T.eq(src["targets"], 8, "targets of the source")
        T.eq(src["max_targets"], 8, "max_targets")
        T.eq(src["targets_reused"], 1, "targets reused")
        T.eq(src["verification"], "none", "no efl_debugd socket: the port taken unverified")
        t3 = D.by_name(st, "lab/app3-1003")
        T.check(t3["connected"] and t3["peer"].endswith("pid 5555"),
                "app3's new process reuses lab/app3-1003: %r" % t3["peer"])
        T.eq(t3["reconnects"], 1, "a reconnect of the reused target")
        log = dm.log()
        T.check("efl lab: application churn0 pid 20000 not captured: the source has its 8 "
                "targets" in log, "refusal logged naming the source")
        T.check(log.count("not captured: the source has its") < 100,
                "refusals are rate-limited in the log")
        T.check("no efl_debugd socket at" in log, "unverified port logged")
        T.check(fake.error is None, "fake efl_debugd: %s" % fake.error)
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
    finally:
        if dm is not None:
            dm.kill()
        fake.close()


def test_full_table_not_evicted_for_efl(d):
    """With the daemon's target table full, an efl source evicts nothing: a new application
    takes an exited same-name application's target or is refused (counted, logged); the lab's
    disconnected listener targets stay."""
    sport, lport = D.free_port(), D.free_port()
    batch = []
    for k in range(5):
        batch += [("added", 10 + k, 1000 + k, "app%d" % k), ("deleted", 10 + k)]
    for i in range(50):
        batch += [("added", 100 + i, 20000 + i, "churn%d" % i), ("deleted", 100 + i)]
    batch.append(("added", 5000, 5555, "app1"))
    fake = ChurnDebugd(6666, batch, go=False)
    dm = None
    try:
        _, dm = daemon(d, sport, pattern="*",
                       args=["--listen", "bench=bin11@127.0.0.1:%d" % lport,
                             "--max-targets", "8"])
        for name in ("t1", "t2", "t3", "t4", "t5"):
            s = D.connect(lport)
            s.sendall(b"TLCAP/1 target=%s\n" % name.encode() + D.calls(2))
            dm.wait_stats(lambda st: any(t["name"] == name and t["records"] == 4
                                         for t in st["targets"]), what=name)
            s.close()
            dm.wait_stats(lambda st: not D.by_name(st, name)["connected"], what=name + " gone")
        fake.go.set()
        dm.wait_stats(lambda st: st["efl"] and st["efl"][0]["apps_seen"] >= 56,
                      timeout=30, what="all 56 applications announced")
        st = dm.stats()
        T.eq(st["daemon"]["targets_evicted"], 0, "targets evicted")
        T.eq(sorted(t["name"] for t in st["targets"]),
             ["lab/app0-1000", "lab/app1-1001", "lab/app2-1002", "t1", "t2", "t3", "t4", "t5"],
             "the table: the lab's five and three efl targets")
        src = st["efl"][0]
        T.eq(src["apps_refused_full"], 52, "refused with the table full (app3, app4, 50 churn)")
        T.eq(src["targets_reused"], 1, "app1's new process reuses its target")
        t1 = D.by_name(st, "lab/app1-1001")
        T.check(t1["connected"] and t1["peer"].endswith("pid 5555"), "reused: %r" % t1["peer"])
        T.check("efl lab: application app3 pid 1003 not captured: the target table is full "
                "(max_targets 8)" in dm.log(), "refusal logged naming the source")
        T.check(fake.error is None, "fake efl_debugd: %s" % fake.error)
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
    finally:
        if dm is not None:
            dm.kill()
        fake.close()


def test_port_checked_against_socket(d):
    """With efl_debugd's Unix socket present, a debugger port is trusted only once it announces
    the probe tlcapd sends through that socket: the real efl_debugd's port is (its
    application is captured; the probes of both sources are never targets), a program that
    answers on another port with applications of its own is not (no target from it, counted,
    logged, retried)."""
    e = Efl(d)
    e.start_debugd()
    sport, fport = D.free_port(), D.free_port()
    fake = ChurnDebugd(fport, [("added", 7, 4242, "efl_app"), ("added", 8, 4343, "intruder")])
    dm = None
    try:
        a = e.app()
        _, dm = daemon(d, sport, pattern="*", run=e.run,
                       extra="[efl fake]\npattern = *\ndebugd = 127.0.0.1:%d\n" % fport)
        wait_state(dm, a, ("capturing",))
        dm.wait_stats(lambda s: any(x["source"] == "fake" and x["untrusted"] >= 1
                                    for x in s["efl"]), timeout=30, what="fake port untrusted")
        st = dm.stats()
        src = {x["source"]: x for x in st["efl"]}
        T.eq(src["lab"]["verification"], "verified", "the real port verified")
        T.eq(src["lab"]["debugd_socket"], e.sock, "the socket tlcapd checked")
        T.eq(lab_targets(st), [tname(a)], "lab's targets: the application only, no probe")
        T.eq(lab_targets(st, "fake"), [], "no target from the untrusted port")
        T.eq(src["fake"]["apps_matched"], 0, "nothing matched on the untrusted port")
        T.check(fake.sent, "the stand-in listed its applications")
        T.check("efl fake: efl_debugd 127.0.0.1:%d is not trusted: it did not announce the "
                "probe sent through efl_debugd's socket %s" % (fport, e.sock) in dm.log(),
                "untrusted port logged: " + dm.log()[-3000:])
        T.check(fake.error is None, "fake efl_debugd: %s" % fake.error)
        rc, _ = dm.stop()
        dm = None
        T.eq(rc, 0, "exit status")
    finally:
        if dm is not None:
            dm.kill()
        fake.close()
        e.close()


def test_config_errors(d):
    """A Unix socket path for `debugd` is refused with the reason (efl_debugd relays only
    between its TCP debuggers and its Unix-socket applications); a missing pattern too."""
    for text, needle in (("[efl x]\npattern = *\ndebugd = /run/user/0/.edebug/efl_debug/0\n",
                          "TCP port"),
                         ("[efl x]\npoll_ms = 100\n", "missing option \"pattern\""),
                         ("[efl x]\npattern = *\ndebugd = localhost:6666\n", "IP address"),
                         ("[efl x]\npattern = *\nmax_targets = 0\n", "1 to 1000000 targets"),
                         ("[efl x]\npattern = *\ndebugd_socket = run/0\n", "absolute path"),
                         ("[daemon]\nefl_max_targets = 0\n", "efl_max_targets")):
        conf = os.path.join(d, "bad.ini")
        with open(conf, "w") as f:
            f.write(text)
        rc, out, err = T.run([TLCAPD, "--config", conf, "--check-config"])
        T.eq(rc, 2, "exit status for %r" % text)
        T.check(needle in err, "message %r in %r" % (needle, err))
    rc, out, err = T.run([TLCAPD, "--efl", "lab=efl_*", "--check-config"])
    T.eq(rc, 0, "--efl NAME=PATTERN accepted: " + err)
    rc, out, err = T.run([TLCAPD, "--efl", "lab=efl_*", "--efl-max-targets", "16",
                          "--check-config"])
    T.eq(rc, 0, "--efl-max-targets accepted: " + err)


if __name__ == "__main__":
    if APP == "none" or not shutil.which("efl_debugd"):
        print("SKIP: the EFL packages are missing (libefl-all-dev to build efl_app, libeina-bin "
              "for efl_debugd)")
        sys.exit(T.SKIP)
    maybe_netns()
    tests = [test_config_errors, test_two_apps_live_and_replay, test_app_without_workaround,
             test_killed_and_debugd_restart, test_reload_removes_source,
             test_tlcapd_killed_recovers_segment, test_hostile_debugd,
             test_churn_capped_reused_no_eviction, test_full_table_not_evicted_for_efl,
             test_port_checked_against_socket]
    only = os.environ.get("TLC_EFL_ONLY")  # a comma-separated subset, for development
    T.main([t for t in tests if not only or t.__name__ in only.split(",")])
