"""The process's own figures and the health paths (docs/http.md, "Health and the process"):
- /metrics has node_exporter's process_* series, each checked against what the kernel says of
  the daemon's pid (/proc/PID/fd, /proc/PID/status, /proc/PID/limits, its start), and the memory
  budget the daemon was given;
- /-/healthy and /-/ready answer 200 while all is well; a listen source that cannot bind at a
  reload makes /-/ready a 503 naming it (health stays 200), and the next reload that can bind
  it makes the daemon ready again;
- with a token both paths need it, as every other path but the page's own files."""
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
BUDGET = 48 << 20


def get(port, path, headers=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def series(body):
    """{name: value} of the unlabelled samples."""
    out = {}
    for line in body.split("\n"):
        if line and not line.startswith("#") and "{" not in line:
            name, v = line.rsplit(" ", 1)
            out[name] = float(v)
    return out


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def soft_nofile(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                v = line.split()[3]
                return float("inf") if v == "unlimited" else float(v)
    raise T.Failure("no Max open files")


def test_process_series(d):
    port, hport = T.free_port(), T.free_port()
    before = time.time()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port,
                              "--memory-limit", str(BUDGET)], http="127.0.0.1:%d" % hport)
    after = time.time()
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=t format=bin11\n" + D.calls(200))
        dm.wait_stats(lambda st: any(t["name"] == "t" and t["records"] == 400
                                     for t in st["targets"]), what="records in")
        pid = dm.p.pid
        fds0 = fd_count(pid)
        st, body = get(hport, "/metrics")
        T.eq(st, 200, "/metrics status")
        fds1 = fd_count(pid)
        m = series(body)
        D.check_promtool_metrics(body.encode())
        # the scrape's own connection may be open or closed when /proc is read (one either
        # way), and the daemon's threads open files of their own meanwhile (a segment, a
        # checkpoint): the count it reports lies within what /proc said before and after
        lo, hi = min(fds0, fds1) - 1, max(fds0, fds1) + 1
        T.check(lo <= m["process_open_fds"] <= hi, "process_open_fds %s, /proc/%d/fd had %d "
                "before the scrape and %d after" % (m["process_open_fds"], pid, fds0, fds1))
        T.eq(m["process_max_fds"], soft_nofile(pid), "process_max_fds: the soft RLIMIT_NOFILE")
        rss = D.proc_status_kib(pid, "VmRSS") * 1024
        T.check(0.5 * rss <= m["process_resident_memory_bytes"] <= 2 * rss,
                "resident %s, VmRSS %d" % (m["process_resident_memory_bytes"], rss))
        vm = D.proc_status_kib(pid, "VmSize") * 1024
        T.check(abs(m["process_virtual_memory_bytes"] - vm) <= 0.1 * vm,
                "virtual %s, VmSize %d" % (m["process_virtual_memory_bytes"], vm))
        # /proc/stat's btime is whole seconds and the start is in clock ticks
        T.check(before - 1.5 <= m["process_start_time_seconds"] <= after + 1.5,
                "start %.2f not within [%.2f, %.2f]" % (m["process_start_time_seconds"],
                                                        before, after))
        cpu = dm.cpu_seconds()
        T.check(abs(m["process_cpu_seconds_total"] - cpu) <= 0.05 + 0.1 * cpu,
                "cpu %s, /proc says %s" % (m["process_cpu_seconds_total"], cpu))
        T.eq(m["tlcap_memory_budget_bytes"], float(BUDGET), "the budget given")
        T.check(0 < m["tlcap_memory_used_bytes"] <= BUDGET,
                "used %s of %d" % (m["tlcap_memory_used_bytes"], BUDGET))
        T.eq(m["tlcap_memory_refused_total"], 0.0, "nothing refused")
        s.close()
    finally:
        dm.stop()


def test_ready_follows_sources(d):
    hport, p1, p2 = T.free_port(), T.free_port(), T.free_port()
    conf = os.path.join(d, "t.ini")

    def write(text):
        with open(conf + ".tmp", "w") as f:
            f.write(text)
        os.replace(conf + ".tmp", conf)

    def reload():
        n0 = len(dm.notify.msgs)
        dm.p.send_signal(signal.SIGHUP)
        dm.notify.wait_for("READY=1", after=n0)

    write("[listen a]\nformat = bin11\naddress = 127.0.0.1:%d\n" % p1)
    dm = D.Daemon(TLCAPD, d, ["--config", conf], http="127.0.0.1:%d" % hport)
    blocker = socket.socket()
    try:
        T.eq(get(hport, "/-/healthy"), (200, "tlcapd is Healthy.\n"), "healthy")
        T.eq(get(hport, "/-/ready"), (200, "tlcapd is Ready.\n"), "ready")
        blocker.bind(("127.0.0.1", p2))
        blocker.listen(1)
        write("[listen a]\nformat = bin11\naddress = 127.0.0.1:%d\n"
              "[listen b]\nformat = bin11\naddress = 127.0.0.1:%d\n" % (p1, p2))
        reload()
        st, body = get(hport, "/-/ready")
        T.eq((st, body), (503, "tlcapd is not ready: listen b not running\n"),
             "a listener that could not bind")
        T.eq(get(hport, "/-/healthy")[0], 200, "still healthy")
        blocker.close()
        reload()
        T.eq(get(hport, "/-/ready"), (200, "tlcapd is Ready.\n"), "bound at the next reload")
        s = D.connect(p2)
        s.sendall(b"TLCAP/1 target=b format=bin11\n" + D.calls(3))
        dm.wait_stats(lambda st: any(t["name"] == "b" and t["records"] == 6
                                     for t in st["targets"]), what="b takes a stream")
        s.close()
    finally:
        blocker.close()
        dm.stop()


def test_token(d):
    hport = T.free_port()
    tok = os.path.join(d, "token")
    with open(tok, "w") as f:
        f.write("health-token\n")
    os.chmod(tok, 0o600)
    dm = D.Daemon(TLCAPD, d, ["--token-file", tok], http="127.0.0.1:%d" % hport)
    try:
        for p in ("/-/healthy", "/-/ready"):
            T.eq(get(hport, p)[0], 401, p + " without the token")
            T.eq(get(hport, p, {"Authorization": "Bearer health-token"})[0], 200,
                 p + " with the token")
    finally:
        dm.stop()


if __name__ == "__main__":
    T.main([test_process_series, test_ready_follows_sources, test_token])
