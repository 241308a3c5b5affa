"""Budget violations to Debian's real Prometheus Alertmanager (SPEC 13, docs/alerts.md), through
daemon/alert as tlcapd runs it (on a libuv loop: tests/integ/alert_drive.c), and tlcapd's own
alertmanager_url settings, /metrics families and stats dump.

The Alertmanager runs on loopback with a temporary configuration whose receiver is a webhook
served by this test (send_resolved on), so the test sees what a lab's receiver would: the alert
firing, then resolved. It also reads the alerts back from the API (GET /api/v2/alerts).

usage: test_alertmanager.py ALERT_DRIVE TLCAPD
Exit 0 pass, 1 fail, 77 skip (prometheus-alertmanager not installed)."""
import datetime
import http.server
import json
import os
import select
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

DRIVE, TLCAPD = sys.argv[1], sys.argv[2]
AM = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


class Hook:
    """The Alertmanager's webhook receiver: every notification's JSON, in order."""

    def __init__(self):
        self.got = []
        self.cv = threading.Condition()
        hook = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                doc = json.loads(self.rfile.read(n))
                with hook.cv:
                    hook.got.append(doc)
                    hook.cv.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def wait(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for doc in self.got:
                    for a in doc.get("alerts", []):
                        if pred(a):
                            return a
                left = deadline - time.monotonic()
                if left <= 0:
                    raise T.Failure("webhook: no %s within %.0fs (got %r)"
                                    % (what, timeout, self.got[-3:]))
                self.cv.wait(left)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Alertmanager:
    def __init__(self, d, port, hook_port, name="am", tls=None):
        """tls: (cert, key) PEM files: the Alertmanager serves https."""
        self.port = port
        self.scheme = "https" if tls else "http"
        self.dir = os.path.join(d, name)
        os.makedirs(self.dir, exist_ok=True)
        cfg = os.path.join(self.dir, "am.yml")
        with open(cfg, "w") as f:
            f.write("route:\n  receiver: hook\n  group_by: ['...']\n  group_wait: 0s\n"
                    "  group_interval: 1s\n  repeat_interval: 1h\n"
                    "receivers:\n  - name: hook\n    webhook_configs:\n"
                    "      - url: http://127.0.0.1:%d/\n        send_resolved: true\n" % hook_port)
        self.log = open(os.path.join(self.dir, "am.log"), "wb")
        args = [AM, "--config.file=" + cfg, "--storage.path=" + self.dir,
                "--web.listen-address=127.0.0.1:%d" % port, "--cluster.listen-address="]
        self.ctx = None
        if tls:
            web = os.path.join(self.dir, "web.yml")
            with open(web, "w") as f:
                f.write("tls_server_config:\n  cert_file: %s\n  key_file: %s\n" % tls)
            args.append("--web.config.file=" + web)
            self.ctx = ssl.create_default_context(cafile=tls[0])
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        D.wait_until(self.ready, 30, "the Alertmanager ready", step=0.1)

    def ready(self):
        try:
            with urllib.request.urlopen("%s://127.0.0.1:%d/-/ready" % (self.scheme, self.port),
                                        timeout=2, context=self.ctx) as r:
                return r.status == 200
        except OSError:
            return False

    def alerts(self):
        with urllib.request.urlopen("%s://127.0.0.1:%d/api/v2/alerts" % (self.scheme, self.port),
                                    timeout=5, context=self.ctx) as r:
            return json.load(r)

    def find(self, **labels):
        return [a for a in self.alerts()
                if all(a["labels"].get(k) == v for k, v in labels.items())]

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGCONT)
            self.p.terminate()
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


class Drive:
    """alert_drive: one command, one line back (bounded waits)."""

    def __init__(self, d, url, resolve_ms=3000, repost_ms=1000, timeout_ms=1500, max_alerts=64,
                 state_dir="/var/lib/tlcapd", ca=None):
        self.errpath = os.path.join(d, "drive-%d.err" % T.free_port())
        self.err = open(self.errpath, "wb")
        self.p = subprocess.Popen([DRIVE, url, str(resolve_ms), str(repost_ms), str(timeout_ms),
                                   str(max_alerts), state_dir] + ([ca] if ca else []),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err)
        T.eq(self.line(10), "ready", "alert_drive started")

    def line(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        T.check(r, "alert_drive answered within %.1fs" % timeout)
        return self.p.stdout.readline().decode().rstrip("\n")

    def cmd(self, text, timeout=10):
        self.p.stdin.write((text + "\n").encode())
        self.p.stdin.flush()
        return self.line(timeout)

    def violation(self, budget, target, area, ctx, stat, value, limit, start, end, epoch,
                  wall_ns):
        T.eq(self.cmd("v %s %s %s %s %s %d %d 1 %d %d %d %d x" % (
            budget, target, area, ctx, stat, value, limit, start, end, epoch, wall_ns)), "ok",
            "violation taken")

    def counters(self, timeout=10):
        return json.loads(self.cmd("c", timeout))["alerts"]

    def wait(self, pred, timeout, what):
        return D.wait_until(lambda: pred(self.counters()) and self.counters(), timeout, what,
                            step=0.1)

    def close(self, timeout=10):
        t0 = time.monotonic()
        T.eq(self.cmd("q", timeout), "closed", "alert_drive closed")
        T.eq(self.p.wait(timeout), 0, "alert_drive's exit status (a sanitizer's report: %s)"
             % self.errpath)
        self.err.close()
        return time.monotonic() - t0

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def rfc3339(ns):
    s = datetime.datetime.fromtimestamp(ns // 10**9, datetime.timezone.utc)
    return s.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % (ns % 10**9)


def parse_time(s):
    """An RFC 3339 time as the Alertmanager writes it, in seconds since the epoch."""
    s = s.rstrip("Z")
    base, _, frac = s.partition(".")
    t = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def test_fires_continues_resolves(d):
    hook = Hook()
    am = Alertmanager(d, T.free_port(), hook.port)
    dr = Drive(d, "http://127.0.0.1:%d" % am.port, resolve_ms=3000, repost_ms=1000)
    try:
        wall = time.time_ns()
        dr.violation("isr_period", "probe1", "ISR_Timer", "core0", "period", 1500000, 1000000,
                     1000, 1501000, 2, wall)
        got = D.wait_until(lambda: am.find(budget="isr_period"), 15, "the alert in the API",
                           step=0.1)
        T.eq(len(got), 1, "one alert")
        a = got[0]
        T.eq({k: v for k, v in a["labels"].items()},
             {"alertname": "TlcapBudgetViolation", "budget": "isr_period", "target": "probe1",
              "area": "ISR_Timer", "context": "core0", "stat": "period", "host": "testhost"},
             "labels")
        an = a["annotations"]
        T.eq(an["value"], "1.5ms", "value")
        T.eq(an["limit"], "1ms", "limit")
        T.eq((an["value_raw"], an["limit_raw"], an["count"]), ("1500000", "1000000", "1"),
             "exact value, limit, count")
        T.eq(an["target_time"], "ns:1000..ns:1501000 epoch 2", "target time")
        T.eq(an["first_violation"], rfc3339(wall), "wall clock of the violation")
        T.eq(an["around"], "tlcap around probe1 ns:1000", "the around command")
        T.eq(an["replay"],
             "tlcapd replay --state-dir /var/lib/tlcapd --target probe1 --around ns:1000",
             "the replay command")
        T.check("over budget isr_period" in an["summary"] and "1.5ms" in an["summary"],
                "summary: %r" % an["summary"])
        T.check(abs(parse_time(a["startsAt"]) - wall / 1e9) < 0.002, "startsAt: %r" % a)
        T.eq(a["status"]["state"], "active", "firing")
        hook.wait(lambda x: x["status"] == "firing" and x["labels"]["budget"] == "isr_period",
                  15, "firing notification")

        # Violations go on for twice alert_resolve: the alert stays firing throughout (re-posted
        # before each endsAt), with the latest value, the worst and the count.
        values = [1200000, 2500000, 1100000, 1300000, 1700000, 1050000, 1400000, 1250000,
                  1600000, 1150000, 1350000, 1450000]
        for i, v in enumerate(values):
            time.sleep(0.5)  # pacing of the violations, not a synchronisation
            dr.violation("isr_period", "probe1", "ISR_Timer", "core0", "period", v, 1000000,
                         10000 * (i + 1), 10000 * (i + 1) + v, 2, time.time_ns())
            got = am.find(budget="isr_period")
            T.eq(len(got), 1, "still one alert after %.1fs" % ((i + 1) * 0.5))
            T.eq(got[0]["status"]["state"], "active", "still firing")
        last_wall = time.time()
        got = D.wait_until(lambda: [a for a in am.find(budget="isr_period")
                                    if a["annotations"]["count"] == str(len(values) + 1)],
                           10, "the latest re-post", step=0.1)[0]
        T.eq(got["annotations"]["worst"], "2.5ms", "the worst value")
        T.eq(got["annotations"]["value"], "1.45ms", "the latest value")
        T.eq(got["annotations"]["around"], "tlcap around probe1 ns:120000", "latest around")
        T.eq(got["startsAt"], a["startsAt"], "the same alert: startsAt kept")

        # No violation for alert_resolve: resolved, and the receiver told so.
        r = hook.wait(lambda x: x["status"] == "resolved" and x["labels"]["budget"] ==
                      "isr_period", 20, "resolved notification")
        T.check(parse_time(r["endsAt"]) >= last_wall + 3.0 - 0.6,
                "resolved no sooner than alert_resolve after the last violation: %r (last %f)"
                % (r["endsAt"], last_wall))
        c = dr.wait(lambda c: c["resolved"] == 1, 10, "the resolution delivered")
        T.eq((c["active"], c["firing"], c["violations"], c["dropped_total"], c["failures_total"]),
             (0, 0, len(values) + 1, 0, 0), "counters after the resolution")
        T.eq(len(am.find(budget="isr_period")), 0, "no longer in the API")
        T.check(dr.close() < 5, "closed promptly")
    finally:
        dr.kill()
        am.stop()
        hook.close()


def test_slow_then_absent(d):
    """A stopped (SIGSTOP) Alertmanager, then none at all: violations keep being taken at once,
    the table stays bounded (drops counted exactly), requests fail and are counted by reason,
    and once an Alertmanager answers again every firing alert reaches it."""
    hook = Hook()
    port = T.free_port()
    am = Alertmanager(d, port, hook.port)
    dr = Drive(d, "http://127.0.0.1:%d" % port, resolve_ms=60000, repost_ms=1000,
               timeout_ms=1500, max_alerts=64)
    try:
        am.p.send_signal(signal.SIGSTOP)  # accepts connections (the kernel does), never answers
        wall = time.time_ns()
        dr.violation("net", "sim", "Task_A", "-", "net", 300000, 250000, 5, 300005, 0, wall)
        c = dr.wait(lambda c: c["failures"]["timeout"] >= 1, 15, "a request timing out")
        T.eq(c["requests"], 0, "nothing accepted")
        T.check(c["backoff_ms"] >= 1000, "backing off: %r" % c)
        # A storm while the Alertmanager hangs: every call returns at once, the loop answers.
        out = dr.cmd("storm 5000 net sim area_ net 300000 250000", 30).split()
        T.eq(out[:2], ["storm", "5000"], "storm ran")
        # (the slowest single call is left out: on a shared VM it measures the scheduler)
        T.check(int(out[3]) < 100000, "99%% of the calls under 100us: %s ns" % out[3])
        T.check(int(out[4]) < 5000 * 20000, "20us a call on average: %s ns" % out[4])
        t0 = time.monotonic()
        c = dr.counters()
        T.check(time.monotonic() - t0 < 1.0, "the loop answers while a request hangs")
        T.eq(c["violations"], 5001, "every violation counted")
        T.eq(c["active"], 64, "the table at its bound")
        T.eq(c["dropped"]["table_full"], 5001 - 64, "violations past the bound, counted")
        T.eq(c["dropped_total"], 5001 - 64, "no other drop")

        am.p.send_signal(signal.SIGCONT)
        D.wait_until(lambda: len(am.find(target="sim")) == 64, 30,
                     "all 64 alerts in the Alertmanager", step=0.2)
        T.eq(am.find(area="Task_A")[0]["labels"].get("context"), None,
             "no context label for a violation without context")

        # Gone: connections refused, counted; a new Alertmanager on the port gets every firing
        # alert again (re-posted: an Alertmanager keeps no alerts across a restart).
        am.stop()
        c = dr.wait(lambda c: c["failures"]["connect"] >= 1, 15, "refused connections")
        am = Alertmanager(d, port, hook.port, name="am2")  # its own storage: nothing kept
        D.wait_until(lambda: len(am.find(target="sim")) == 64, 40,
                     "the firing alerts re-posted to the new Alertmanager", step=0.2)
        c = dr.counters()
        T.check(c["requests"] >= 2 and c["last_error"] != "", "counters: %r" % c)

        # Closing while a request hangs cancels it at once.
        am.p.send_signal(signal.SIGSTOP)
        dr.violation("net", "sim", "Task_B", "-", "net", 300000, 250000, 5, 300005, 0, wall)
        dr.wait(lambda c: c["active"] == 64, 5, "still bounded")
        T.check(dr.close() < 2.0, "close cancels a request in flight")
    finally:
        dr.kill()
        am.stop()
        hook.close()


def test_https(d):
    """An Alertmanager serving https: with its authority (alertmanager_ca) the alert goes
    through; checked against the system's store instead, every request fails as "tls" with
    the certificate's reason, and nothing reaches the Alertmanager."""
    cert, key = os.path.join(d, "am.pem"), os.path.join(d, "am.key")
    T.eq(T.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=tlcap test alertmanager", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", key, "-out", cert])[0], 0, "openssl made a certificate")
    hook = Hook()
    am = Alertmanager(d, T.free_port(), hook.port, tls=(cert, key))
    url = "https://127.0.0.1:%d" % am.port
    bad = Drive(d, url, ca="")
    good = Drive(d, url, ca=cert)
    try:
        wall = time.time_ns()
        bad.violation("b", "untrusted", "A", "-", "net", 2, 1, 0, 2, 0, wall)
        good.violation("b", "trusted", "A", "-", "net", 2, 1, 0, 2, 0, wall)
        D.wait_until(lambda: am.find(target="trusted"), 15, "the alert over https", step=0.1)
        c = bad.wait(lambda c: c["failures"]["tls"] >= 1, 15, "the untrusted certificate refused")
        T.check("certificate" in c["last_error"], "why: %r" % c["last_error"])
        T.eq(len(am.find(target="untrusted")), 0, "nothing from the refusing client")
        T.eq(good.counters()["failures_total"], 0, "no failure with the right authority")
        bad.close()
        good.close()
    finally:
        bad.kill()
        good.kill()
        am.stop()
        hook.close()


def test_table_bounds(d):
    """No Alertmanager at all (nothing listens): resolved alerts wait for delivery in the table
    and give their places to new ones (evicted); with every place firing a new alert is
    dropped (table_full); a name past the bound is refused (bad_input). Each counted exactly."""
    dr = Drive(d, "http://127.0.0.1:%d" % T.free_port(), resolve_ms=400, repost_ms=200,
               max_alerts=4)
    try:
        wall = time.time_ns()
        for i in range(4):
            dr.violation("b", "t", "a%d" % i, "-", "gross", 20, 10, i, i + 20, 1, wall)
        c = dr.counters()
        T.eq((c["active"], c["firing"]), (4, 4), "four firing")
        c = dr.wait(lambda c: c["firing"] == 0, 10, "the four resolved (not delivered)")
        T.eq(c["active"], 4, "resolved alerts kept for delivery")
        T.check(c["failures"]["connect"] >= 1, "refused connections counted: %r" % c)
        for i in range(4):
            dr.violation("b", "t", "n%d" % i, "-", "gross", 20, 10, i, i + 20, 1, wall)
        c = dr.counters()
        T.eq((c["active"], c["firing"], c["dropped"]["evicted"], c["dropped"]["table_full"]),
             (4, 4, 4, 0), "resolved alerts gave their places")
        dr.violation("b", "t", "x", "-", "gross", 20, 10, 0, 20, 1, wall)
        dr.violation("b", "t", "n0", "-", "gross", 30, 10, 0, 30, 1, wall)  # held: taken
        dr.violation("b", "t", "a" * 300, "-", "gross", 20, 10, 0, 20, 1, wall)
        c = dr.counters()
        T.eq((c["violations"], c["active"], c["dropped"]["table_full"], c["dropped"]["bad_input"],
              c["dropped_total"]), (11, 4, 1, 1, 6), "counters")
        T.check(dr.close() < 2.0, "closed promptly")
    finally:
        dr.kill()


def test_refused(d):
    """A path the Alertmanager does not serve (a wrong prefix): every request is refused with
    404, counted as a failure (status) and its alerts as refused, not retried over and over;
    a firing alert is tried again at its re-post."""
    hook = Hook()
    am = Alertmanager(d, T.free_port(), hook.port)
    dr = Drive(d, "http://127.0.0.1:%d/nope" % am.port, resolve_ms=60000, repost_ms=1000)
    try:
        dr.violation("b", "t", "A", "-", "net", 2, 1, 0, 2, 0, time.time_ns())
        c = dr.wait(lambda c: c["dropped"]["refused"] >= 1, 15, "the refusal")
        T.eq((c["failures"]["status"], c["requests"], c["active"]), (1, 0, 1), "counters")
        T.check("404" in c["last_error"], "why: %r" % c["last_error"])
        c = dr.wait(lambda c: c["dropped"]["refused"] >= 2, 15, "the re-post refused too")
        T.eq(c["failures"]["status"], c["dropped"]["refused"], "one alert a request")
        T.eq(len(am.find(target="t")), 0, "nothing reached the Alertmanager")
        dr.close()
    finally:
        dr.kill()
        am.stop()
        hook.close()


def test_bad_urls(d):
    for url in ("ftp://127.0.0.1:9093", "http://", "http://h:0", "http://h:99999", "http://u@h:1",
                "http://h:1?x"):
        p = subprocess.run([DRIVE, url, "1000", "500", "1000", "8"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
        T.eq(p.returncode, 1, "%s refused" % url)
        T.check(b"alertmanager_url" in p.stderr, "message names the key: %r" % p.stderr)
    rc, _, err = T.run([TLCAPD, "--alertmanager-url", "tcp://x:1", "--check-config", "--no-store",
                        "--state-dir", d])
    T.check(rc != 0 and "alertmanager_url" in err, "tlcapd refuses it: %d %r" % (rc, err))
    rc, _, err = T.run([TLCAPD, "--alertmanager-url", "https://am.lab:9093/prefix",
                        "--alert-resolve", "2m", "--check-config", "--no-store",
                        "--state-dir", d])
    T.eq(rc, 0, "a good URL with a prefix: %r" % err)


def test_tlcapd_figures(d):
    """tlcapd with alertmanager_url: its /metrics families and its stats dump's object."""
    hook = Hook()
    am = Alertmanager(d, T.free_port(), hook.port)
    hport = T.free_port()
    dm = D.Daemon(TLCAPD, d, ["--alertmanager-url", "http://127.0.0.1:%d" % am.port,
                              "--alert-resolve", "10s"], http="127.0.0.1:%d" % hport)
    try:
        st = dm.stats()
        T.eq(st["alerts"]["url"], "http://127.0.0.1:%d" % am.port, "the dump's alerts object")
        T.eq((st["alerts"]["violations"], st["alerts"]["dropped"]["table_full"],
              st["alerts"]["failures"]["timeout"]), (0, 0, 0), "its counters")
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=10) as r:
            body = r.read()
        text = body.decode()
        for fam in ("tlcap_alerts_violations_total 0", "tlcap_alerts_active 0",
                    "tlcap_alerts_requests_total 0", 'tlcap_alerts_dropped_total{reason="table_full"} 0',
                    'tlcap_alerts_failures_total{reason="connect"} 0'):
            T.check(fam in text, "/metrics has %r" % fam)
        D.check_promtool_metrics(body)
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    finally:
        dm.kill()
        am.stop()
        hook.close()


def test_tlcapd_live_budget(d):
    """A real tlcapd with alertmanager_url and a budget: a stream whose f breaks its NET budget
    on core0 (NET 100ns > 60ns, from ns:150 to ns:250; worked out by hand as in
    test_budget_live.py) raises the alert in the Alertmanager with the budget's labels and the
    violation's annotations."""
    import socket
    hook = Hook()
    am = Alertmanager(d, T.free_port(), hook.port)
    port = T.free_port()
    b = os.path.join(d, "b.ini")
    with open(b, "w") as f:
        f.write("[budget f_net]\narea = 00000001\nstat = net\nmax = 60ns\n")
    dm = D.Daemon(TLCAPD, d, ["--alertmanager-url", "http://127.0.0.1:%d" % am.port,
                              "--alert-resolve", "30s", "--budgets", b,
                              "--listen", "l=bin11@127.0.0.1:%d" % port])
    try:
        # main on core0 calls f (E 150, X 250); f on core1 50ns (E 120, X 170)
        rec = [(0, 3, 0, 100), (1, 3, 1, 120), (0, 1, 0, 150), (1, 3, 0, 150), (1, 0, 1, 170),
               (1, 0, 0, 250), (0, 2, 0, 250), (0, 0, 0, 400)]
        s = D.connect(port)
        s.sendall(b"".join(T.bin11(h, t, c, 0, tm) for (h, t, c, tm) in rec))
        s.shutdown(1)
        D.wait_eof(s, timeout=30)
        s.close()
        got = D.wait_until(lambda: am.find(budget="f_net"), 15, "the alert in the API", step=0.1)
        T.eq(len(got), 1, "one alert: core1's 50ns is within the budget")
        a = got[0]
        T.eq(a["labels"], {"alertname": "TlcapBudgetViolation", "budget": "f_net",
                           "target": "l@127.0.0.1", "area": "00000001", "context": "core0",
                           "stat": "net", "host": socket.gethostname()}, "labels")
        an = a["annotations"]
        T.eq((an["value_raw"], an["limit_raw"], an["count"]), ("100", "60", "1"),
             "value, limit, count")
        T.eq(an["target_time"], "ns:150..ns:250 epoch 0", "target time")
        T.eq(an["around"], "tlcap around l@127.0.0.1 ns:150", "the around command")
        T.eq(a["status"]["state"], "active", "firing")
        hook.wait(lambda x: x["status"] == "firing" and x["labels"]["budget"] == "f_net", 15,
                  "firing notification")
        st = dm.stats()
        T.eq(st["alerts"]["violations"], 1, "one violation handed to the alerts")
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    finally:
        dm.kill()
        am.stop()
        hook.close()


if __name__ == "__main__":
    if AM is None:
        print("SKIP: prometheus-alertmanager not installed (apt-get install "
              "prometheus-alertmanager)")
        sys.exit(T.SKIP)
    T.main([test_bad_urls, test_table_bounds, test_refused, test_tlcapd_figures,
            test_tlcapd_live_budget, test_https, test_fires_continues_resolves,
            test_slow_then_absent])
