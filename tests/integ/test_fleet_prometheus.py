"""Prometheus across hosts (SPEC 11, docs/fleet.md): Debian's real `prometheus` server scrapes
two tlcapd on loopback through file-based service discovery, as docs/fleet.md configures it,
and `sum(tlcap_target_events_total)` equals every event sent to both daemons; the recording
rule of docs/fleet.md for calls per area is loaded and evaluated, and the `instance` label (not
one of tlcap's) tells the two daemons apart.

usage: test_fleet_prometheus.py TLCAPD
Exit 0 pass, 1 fail, 77 skip (prometheus not installed).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
PROM = shutil.which("prometheus") or ("/usr/bin/prometheus"
                                       if os.path.exists("/usr/bin/prometheus") else None)


def query(port, q):
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (port, urllib.parse.quote(q))
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            doc = json.load(r)
    except OSError:
        return None
    if doc.get("status") != "success":
        return None
    return doc["data"]["result"]


def send(port, data, preamble):
    s = D.connect(port)
    s.sendall(preamble + data)
    s.shutdown(socket.SHUT_WR)
    D.wait_eof(s)
    s.close()


def test_two_daemons_one_prometheus(d):
    daemons, prom = [], None
    try:
        sent = 0
        for i, (name, n) in enumerate((("boardA", 120), ("boardB", 45))):
            ing, http = D.free_port(), D.free_port()
            dd = os.path.join(d, "d%d" % i)
            os.makedirs(dd)
            dm = D.Daemon(TLCAPD, dd, ["--listen", "ing=bin11@127.0.0.1:%d" % ing],
                          http="127.0.0.1:%d" % http)
            dm.ing, dm.http = ing, http
            daemons.append(dm)
            # D.calls(n): n calls = 2n events on handle 5
            send(ing, D.calls(n, handle=5), b"TLCAP/1 target=%s format=bin11\n" % name.encode())
            sent += 2 * n
            dm.wait_stats(lambda s, name=name, n=n: D.by_name(s, name)["events"] == 2 * n,
                          what="%s counted" % name)
        sd = os.path.join(d, "sd")
        os.makedirs(sd)
        with open(os.path.join(sd, "lab.yml"), "w") as f:
            f.write("- targets: [%s]\n  labels: { lab: 'test' }\n"
                    % ", ".join("'127.0.0.1:%d'" % dm.http for dm in daemons))
        rules = os.path.join(d, "tlcap.rules.yml")
        with open(rules, "w") as f:
            f.write("groups:\n  - name: tlcap\n    interval: 1s\n    rules:\n"
                    "      - record: tlcap:area_calls:rate1m\n"
                    "        expr: sum by (target, area, context) "
                    "(rate(tlcap_area_calls_total[1m]))\n")
        conf = os.path.join(d, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
                    "rule_files: ['%s']\n"
                    "scrape_configs:\n  - job_name: tlcap\n    file_sd_configs:\n"
                    "      - files: ['%s/*.yml']\n        refresh_interval: 1s\n" % (rules, sd))
        pport = D.free_port()
        plog = open(os.path.join(d, "prometheus.log"), "wb")
        prom = subprocess.Popen([PROM, "--config.file=" + conf,
                                 "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
                                 "--web.listen-address=127.0.0.1:%d" % pport],
                                stdout=plog, stderr=plog)

        def total():
            r = query(pport, "sum(tlcap_target_events_total)")
            n = len(query(pport, "tlcap_target_events_total") or [])
            return r if r and n == 2 and float(r[0]["value"][1]) == sent else None
        try:
            D.wait_until(total, 60, "sum(tlcap_target_events_total) == %d" % sent, step=0.5)
        except T.Failure:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/targets" % pport,
                                            timeout=5) as r:
                    tg = r.read().decode()[:1500]
            except OSError as e:
                tg = str(e)
            raise T.Failure("prometheus never saw %d events: %r; targets: %s"
                            % (sent, query(pport, "tlcap_target_events_total"), tg))
        per = query(pport, "tlcap_target_events_total")
        inst = {r["metric"]["instance"]: (r["metric"]["target"], float(r["value"][1]))
                for r in per}
        T.eq(inst, {"127.0.0.1:%d" % daemons[0].http: ("boardA", 240.0),
                    "127.0.0.1:%d" % daemons[1].http: ("boardB", 90.0)},
             "per instance (Prometheus's label tells the hosts apart)")
        calls = query(pport, 'sum(tlcap_area_calls_total{area="00000005"})')
        T.check(calls and float(calls[0]["value"][1]) == 165.0,
                "calls of area 00000005 across hosts: %r" % calls)
        D.wait_until(lambda: query(pport, "tlcap:area_calls:rate1m"), 30,
                     "the recording rule evaluated", step=0.5)
        for dm in daemons:
            rc, _ = dm.stop()
            T.eq(rc, 0, "exit status")
    finally:
        if prom is not None:
            prom.kill()
            prom.wait()
        for dm in daemons:
            dm.kill()


if __name__ == "__main__":
    if PROM is None:
        print("SKIP: prometheus not installed (apt-get install prometheus)")
        sys.exit(T.SKIP)
    T.main([test_two_daemons_one_prometheus])
