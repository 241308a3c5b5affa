"""benchd.py - shared helpers of the daemon-level benchmarks (bench_ingest.py,
bench_subscribers.py): a tlcapd runner with a notify harness (READY=1) and a stats dump
(SIGUSR1), helper processes with their rusage, and CPU accounting of the whole machine.

Design notes. The machine is small (2 cores) and may be shared with other work, so every
measurement records, beside its wall-clock figure, the CPU time of each process involved and
the CPU time the rest of the machine used meanwhile ("foreign" load, from /proc/stat), so that
a reader can tell a slow daemon from a busy machine. Every wait has a deadline; every loop a
count."""
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_until(fn, timeout, what, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(step)
    raise BenchError("timed out after %.0fs waiting for %s" % (timeout, what))


def machine_busy_s():
    """CPU seconds the whole machine spent busy (all cores) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / TCK


def proc_cpu_s(pid):
    """utime + stime of a live process (all threads)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fl = f.read().rsplit(")", 1)[1].split()
        return (int(fl[11]) + int(fl[12])) / TCK
    except OSError:
        return 0.0


def task_cpu_s(pid, tid):
    """CPU seconds of one live thread as the scheduler counts them, in nanoseconds
    (/proc/PID/task/TID/schedstat): utime and stime come in clock ticks (10 ms), too coarse for
    the 0.3 s runs of a 144 MiB burst. None without schedstat."""
    try:
        with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def loop_cpu_s(pid):
    """CPU seconds of a live process's main thread (tlcapd's loop thread) alone."""
    v = task_cpu_s(pid, pid)
    if v is not None:
        return v
    try:
        with open("/proc/%d/task/%d/stat" % (pid, pid)) as f:
            fl = f.read().rsplit(")", 1)[1].split()
        return (int(fl[11]) + int(fl[12])) / TCK
    except OSError:
        return 0.0


def threads_cpu_s(pid):
    """CPU seconds of a live process's threads alive now, summed from their schedstat (see
    task_cpu_s; tlcapd's threads live as long as it does); proc_cpu_s without schedstat."""
    total = 0.0
    try:
        tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    except OSError:
        return 0.0
    for t in tids:
        v = task_cpu_s(pid, t)
        if v is None:
            return proc_cpu_s(pid)
        total += v
    return total


def vm_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BenchError("no VmRSS for %d" % pid)


def run_child(argv, timeout):
    """Runs argv to completion; returns (stdout text, cpu seconds from rusage)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    out = b""
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            break
        if time.monotonic() > deadline:
            p.kill()
            p.wait()
            raise BenchError("%s timed out" % argv[0])
        time.sleep(0.005)
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise BenchError("%s failed (%d): %s" % (" ".join(argv), p.returncode, err.strip()))
    return out, ru.ru_utime + ru.ru_stime


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


class Daemon:
    """tlcapd with NOTIFY_SOCKET (waits for READY=1) and --dump-stats-on-exit."""

    def __init__(self, build, d, args):
        self.d = d
        self.dump = os.path.join(d, "stats.json")
        self.npath = os.path.join(d, "notify.sock")
        if os.path.exists(self.npath):
            os.unlink(self.npath)
        self.nsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.nsock.bind(self.npath)
        self.nsock.settimeout(0.05)
        env = dict(os.environ)
        env.pop("JOURNAL_STREAM", None)
        env["NOTIFY_SOCKET"] = self.npath
        self.logpath = os.path.join(d, "tlcapd.log")
        self.logf = open(self.logpath, "wb")
        argv = [os.path.join(build, "daemon", "tlcapd")] + list(args) + [
            "--dump-stats-on-exit", self.dump]
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=self.logf, env=env)
        self.pid = self.p.pid
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                m = self.nsock.recv(65536).decode(errors="replace")
            except (socket.timeout, BlockingIOError):
                if self.p.poll() is not None:
                    break
                continue
            if "READY=1" in m:
                return
        self.kill()
        raise BenchError("tlcapd did not become ready; log:\n" + self.log()[-2000:])

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def cpu(self):
        return threads_cpu_s(self.pid)

    def stats(self, timeout=20.0):
        try:
            os.unlink(self.dump)
        except FileNotFoundError:
            pass
        if self.p.poll() is not None:
            raise BenchError("tlcapd exited (%s); log:\n%s" % (self.p.returncode,
                                                              self.log()[-2000:]))
        self.p.send_signal(signal.SIGUSR1)
        wait_until(lambda: os.path.exists(self.dump), timeout, "stats dump")
        with open(self.dump) as f:
            return json.load(f)

    def target(self, name):
        for t in self.stats()["targets"]:
            if t["name"] == name:
                return t
        return None

    def stop(self, timeout=60.0):
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchError("tlcapd did not stop within %.0fs" % timeout)
        self.close()
        if rc != 0:
            raise BenchError("tlcapd exit status %d; log:\n%s" % (rc, self.log()[-2000:]))

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)
        self.close()

    def close(self):
        if not self.logf.closed:
            self.logf.close()
        self.nsock.close()


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def start_nats(d, binary="nats-server"):
    """A `nats-server -js` on a free loopback port, its JetStream store under d; returns
    (process, port) once it accepts connections. The caller kills it."""
    port = free_port()
    ns = subprocess.Popen([binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd",
                           os.path.join(d, "js")], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return True
        except OSError:
            return False
    try:
        wait_until(up, 10, "nats-server")
    except BaseException:
        ns.kill()
        raise
    return ns, port


def tempdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR", "/tmp"))


def machine_line():
    cores = os.cpu_count()
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%d cores (%s), kernel %s" % (cores, model, os.uname().release)

