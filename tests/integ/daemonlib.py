"""Helpers for the tlcapd integration tests: a notify harness, a daemon runner, waits.

Everything is bounded: every wait has a deadline, every loop a count. Synchronisation is by
explicit readiness (READY=1 on the notify socket) or by polling a condition (the stats dump
that SIGUSR1 writes), never by sleeping for a guessed time."""
import json
import os
import pty
import shutil
import signal
import socket
import struct
import subprocess
import time

import tlctest as T


free_port = T.free_port


def wait_until(fn, timeout=10.0, what="condition", step=0.02):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(step)
    raise T.Failure("timed out after %.1fs waiting for %s (last: %r)" % (timeout, what, last))


class Notify:
    """An AF_UNIX datagram socket to give tlcapd as NOTIFY_SOCKET; records (time, message)."""

    def __init__(self, d):
        self.path = os.path.join(d, "notify.sock")
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.msgs = []

    def pump(self):
        while True:
            try:
                m = self.sock.recv(65536)
            except (socket.timeout, BlockingIOError):
                return
            self.msgs.append((time.monotonic(), m.decode(errors="replace")))

    def wait_for(self, needle, timeout=10.0, after=0):
        """Waits for a message (index >= after) containing needle; returns its index."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump()
            for i in range(after, len(self.msgs)):
                if needle in self.msgs[i][1]:
                    return i
        raise T.Failure("no notify message with %r within %.1fs (got %r)"
                        % (needle, timeout, [m for _, m in self.msgs[-5:]]))

    def close(self):
        self.sock.close()


class Daemon:
    """Runs tlcapd with a notify harness and a stats dump; waits for READY=1."""

    def __init__(self, binary, d, args, env=None, preexec_fn=None, stderr_path=None,
                 wait_ready=True, stderr_pipe=False, store=False, serve=None, http=""):
        """store=True keeps storage on (state under d/state); serve="HOST:PORT" runs the
        subscriber server there. By default both are off (--no-store, --serve ""). serve=False
        gives no --serve at all: the configuration file decides. http="HOST:PORT" serves the
        HTTP port there (default "": off; False: the configuration decides)."""
        self.d = d
        self.state = os.path.join(d, "state")
        self.dump = os.path.join(d, "stats.json")
        self.notify = Notify(d)
        e = dict(os.environ)
        e.pop("JOURNAL_STREAM", None)
        e["NOTIFY_SOCKET"] = self.notify.path
        if env:
            e.update(env)
        self.stderr_path = stderr_path or os.path.join(d, "tlcapd.log")
        self.errf = None
        if stderr_pipe:
            err = subprocess.PIPE
        else:
            self.errf = open(self.stderr_path, "wb")
            err = self.errf
        full = [binary] + list(args) + ["--dump-stats-on-exit", self.dump,
                                        "--state-dir", self.state]
        if serve is not False:
            full += ["--serve", serve or ""]
        if http is not False:  # HTTP port (docs/http.md): off unless a test asks for it
            full += ["--http", http]
        if not store:
            full.append("--no-store")
        self.p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=err, env=e, preexec_fn=preexec_fn)
        if wait_ready:
            try:
                self.notify.wait_for("READY=1", timeout=15)
            except T.Failure:
                self.kill()
                raise T.Failure("tlcapd did not become ready; log:\n" + self.log())

    def log(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stats(self, timeout=10.0):
        """Asks for a fresh stats dump (SIGUSR1) and returns it parsed."""
        try:
            os.unlink(self.dump)
        except FileNotFoundError:
            pass
        if self.p.poll() is not None:
            raise T.Failure("tlcapd exited with %s; log:\n%s" % (self.p.returncode,
                                                                 self.log()[-4000:]))
        self.p.send_signal(signal.SIGUSR1)
        try:
            wait_until(lambda: os.path.exists(self.dump), timeout, "stats dump")
        except T.Failure:
            raise T.Failure("no stats dump (tlcapd status %s); log:\n%s"
                            % (self.p.poll(), self.log()[-4000:]))
        with open(self.dump) as f:
            return json.load(f)

    def target(self, name, timeout=10.0):
        def get():
            for t in self.stats()["targets"]:
                if t["name"] == name:
                    return t
            return None
        return wait_until(get, timeout, "target %s" % name, step=0.05)

    def wait_stats(self, pred, timeout=10.0, what="stats condition"):
        try:
            return wait_until(lambda: (lambda s: s if pred(s) else None)(self.stats()), timeout,
                              what, step=0.05)
        except T.Failure as e:
            st = self.stats()
            brief = [{k: v for k, v in t.items() if k != "stats"} for t in st["targets"][:4]]
            raise T.Failure("%s; daemon %r; targets %r; log tail:\n%s"
                            % (e, st["daemon"], brief, self.log()[-1500:]))

    def wait_sealed(self, timeout=30.0):
        """Waits until no closed segment is waiting for its seal or its main export (stats
        dump: store.seal_queue and store.export_queue 0). A half-closed target is answered once
        its bytes are written, before the segments it filled are sealed, and a sealed segment's
        main export follows it (docs/storage.md, "The exporter"): a test that reads the state
        directory while the daemon runs waits for this first."""
        def done(st):
            s = st.get("store", {})
            return s.get("seal_queue", 0) == 0 and s.get("export_queue", 0) == 0
        return self.wait_stats(done, timeout, "every closed segment sealed and exported")

    def stop(self, timeout=15.0):
        """SIGTERM; returns (exit status, final stats)."""
        try:
            os.unlink(self.dump)
        except FileNotFoundError:
            pass
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise T.Failure("tlcapd did not exit within %.0fs after SIGTERM" % timeout)
        if self.errf:
            self.errf.close()
        if rc != 0:  # a crash or a sanitizer's abort: what the daemon said, for the failure
            print("tlcapd exited with status %s; log tail:\n%s" % (rc, self.log()[-3000:]))
        self.notify.pump()
        st = None
        if os.path.exists(self.dump):
            with open(self.dump) as f:
                raw = f.read()
            try:
                st = json.loads(raw)
            except ValueError as e:  # say what was there: the dump must always be whole JSON
                raise T.Failure("the stats dump at exit is not JSON (%s): %d bytes, %r ... %r; "
                                "exit status %s; log tail:\n%s"
                                % (e, len(raw), raw[:200], raw[-200:], rc, self.log()[-2000:]))
        self.notify.close()
        return rc, st

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)
        if self.errf:
            self.errf.close()

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / tck


def by_name(stats, name):
    for t in stats["targets"]:
        if t["name"] == name:
            return t
    raise T.Failure("no target %r in %r" % (name, [t["name"] for t in stats["targets"]]))


def segment_path(state, target, seq):
    """The file of target's plain bin1x segment number `seq` under state (sealed or open)."""
    d = os.path.join(state, target)
    for f in os.listdir(d):
        if (f.endswith(".txt.BIN") or f.endswith(".txt.BIN.part")) and \
                int(f.split("-")[1].split(".")[0]) == seq:
            return os.path.join(d, f)
    raise T.Failure("no segment %d in %r" % (seq, os.listdir(d)))


def stored_record(state, target, seq, off):
    """The bin11 record at byte `off` of target's segment `seq`, as (handle, type, core, data,
    time), the tuples T.bin11 takes."""
    path = segment_path(state, target, seq)
    with open(path, "rb") as f:
        f.seek(off)
        b = f.read(24)
    T.eq(len(b), 24, "a whole record at %s:%d" % (path, off))
    h, flags, data, tm = struct.unpack("<IIQq", b)
    return (h, flags & 0xF, (flags >> 4) & 0xFF, data, tm)


def connect(port, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=timeout)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def wait_eof(sock, timeout=10.0):
    """Reads until the daemon closes the connection; True on EOF/reset, raises on timeout."""
    sock.settimeout(timeout)
    try:
        while True:
            b = sock.recv(4096)
            if not b:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        raise T.Failure("daemon did not close the connection within %.1fs" % timeout)


def calls(n, t0=1000, step=100, handle=0x00000000, core=0):
    """n E/X pairs on one function: 2n bin11 records, times increasing."""
    out = []
    t = t0
    for _ in range(n):
        out.append(T.bin11(handle, 3, core, 0, t))
        out.append(T.bin11(handle, 0, core, 0, t + step // 2))
        t += step
    return b"".join(out)


# ---- live statistics against an offline replay of the same bytes (RELIABILITY T26) ----

def replay_json(tlcapd, path, fmt):
    rc, out, err = T.run([tlcapd, "replay", path, "--format", fmt, "--export", "json"])
    T.eq(rc, 0, "replay %s: %s" % (path, err))
    return json.loads(out)


def live_json(tlcap, sport, target):
    rc, out, err = T.run([tlcap, "--connect", "127.0.0.1:%d" % sport, "stats", target,
                          "--export", "json"], timeout=30)
    T.eq(rc, 0, "tlcap stats %s: %s" % (target, err))
    return json.loads(out)


DIST_KEYS = ("total", "n", "sum", "min", "max", "avg", "sumsq", "p50", "p90", "p99", "p999")
ROW_KEYS = ("count", "anomalies", "value", "value_min", "value_max")


def row_key(r):
    return (r["handle"], r.get("context"), r.get("state"))


def compare_stats(live, rep, what, min_rows=5):
    """Every row equal in count, anomalies, values and every distribution's figures; names,
    windows, seq and byte counters (the preamble) may legitimately differ."""
    T.eq(live["first_time"], rep["first_time"], what + " first_time")
    T.eq(live["last_time"], rep["last_time"], what + " last_time")
    T.eq(live["counters"]["events"], rep["counters"]["events"], what + " events")
    T.eq([c["name"] for c in live["contexts"]], [c["name"] for c in rep["contexts"]],
         what + " contexts")
    lr = {row_key(r): r for r in live["rows"]}
    rr = {row_key(r): r for r in rep["rows"]}
    T.eq(sorted(lr, key=repr), sorted(rr, key=repr), what + " row keys")
    T.check(len(rr) >= min_rows, what + ": too few rows to mean anything (%d)" % len(rr))
    for k, a in rr.items():
        b = lr[k]
        for f in ROW_KEYS:
            T.eq(b.get(f), a.get(f), "%s row %r %s" % (what, k, f))
        for dk in ("net", "gross", "call", "outside", "period"):
            T.eq(dk in b, dk in a, "%s row %r has %s" % (what, k, dk))
            if dk in a:
                for f in DIST_KEYS:
                    T.eq(b[dk].get(f), a[dk].get(f), "%s row %r %s.%s" % (what, k, dk, f))
                for f in ("min_at", "max_at"):  # when the extreme was taken (SPEC 13)
                    ta, tb = a[dk].get(f), b[dk].get(f)
                    T.eq(tb and (tb["start_ns"], tb["end_ns"], tb["epoch"]),
                         ta and (ta["start_ns"], ta["end_ns"], ta["epoch"]),
                         "%s row %r %s.%s" % (what, k, dk, f))


def proc_status_kib(pid, field, missing=None):
    """The `field` line (VmRSS, VmHWM, ...) of /proc/PID/status, in KiB. A line that is absent
    (a zombie has no VmRSS) gives `missing`, or fails the test when `missing` is None."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    if missing is None:
        raise T.Failure("no " + field)
    return missing


def check_promtool_metrics(body):
    """promtool (when installed) finds nothing to say about this /metrics text."""
    if not shutil.which("promtool"):
        return
    p = subprocess.run(["promtool", "check", "metrics"], input=body, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    T.eq((p.returncode, p.stdout.decode()[:300]), (0, ""), "promtool check metrics")


def make_pty(link):
    """A pty whose slave the daemon opens by the path `link` (a symlink, replaced atomically);
    returns the master."""
    m, s = pty.openpty()
    name = os.ttyname(s)
    os.close(s)  # the daemon opens the slave by path
    tmp = link + ".new"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(name, tmp)
    os.replace(tmp, link)
    return m


def pty_write_all(fd, data):
    """Writes all of data to a non-blocking pty master (at most 20 s)."""
    view = memoryview(data)
    deadline = time.monotonic() + 20
    while view:
        try:
            view = view[os.write(fd, view[:4096]):]
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise T.Failure("pty write stalled")
            time.sleep(0.01)  # the pty's buffer is full: back off (not synchronisation)
