"""The shipped Prometheus rules (dist/prometheus/tlcap.rules.yml) and Grafana dashboard
(dist/grafana/tlcap.json) against the real tools: `promtool check rules`, `promtool test rules`
on tests/data/prometheus/tlcap.rules.test.yml, then Debian's real Prometheus scraping a real
tlcapd (storage on, a target streaming) with the rules loaded: every rule group evaluates
without error, every recording rule yields series, and every panel query of the dashboard (its
variables set to All) and its variables' label queries return series.

usage: test_prometheus_rules.py TLCAPD SOURCE_DIR
Exit 0 pass, 1 fail, 77 skip (prometheus or promtool not installed).
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, SRC = sys.argv[1], os.path.abspath(sys.argv[2])
RULES = os.path.join(SRC, "dist", "prometheus", "tlcap.rules.yml")
RULES_TEST = os.path.join(SRC, "tests", "data", "prometheus", "tlcap.rules.test.yml")
DASHBOARD = os.path.join(SRC, "dist", "grafana", "tlcap.json")
PROM = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def api(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            doc = json.load(r)
    except OSError:
        return None
    return doc["data"] if doc.get("status") == "success" else None


def query(port, q):
    """The query's series now (a list, empty when none), or None."""
    data = api(port, "/api/v1/query?query=" + urllib.parse.quote(q))
    return data["result"] if data is not None else None


def panel_exprs():
    """(panel title, PromQL) of every panel target, the dashboard's variables set to All."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = []
    ids = [p["id"] for p in dash["panels"]]
    T.eq(len(ids), len(set(ids)), "panel ids are unique")
    for p in dash["panels"]:
        T.check(p.get("targets"), "panel %r has queries" % p["title"])
        T.eq(p["datasource"]["uid"], "${datasource}", "panel %r's data source" % p["title"])
        for t in p["targets"]:
            e = t["expr"].replace("$__rate_interval", "1m")
            e = e.replace("$instance", ".*").replace("$target", ".*")
            T.check("$" not in e, "panel %r: a variable left in %r" % (p["title"], e))
            out.append((p["title"], e))
    labels = []
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.match(r"label_values\((.*),\s*(\w+)\)$", v["query"])
            T.check(m is not None, "variable %s: label_values(SELECTOR, LABEL)" % v["name"])
            labels.append((v["name"], m.group(1).replace("$instance", ".*"), m.group(2)))
    return out, labels


def test_promtool(d):
    rc, out, err = T.run([PROMTOOL, "check", "rules", RULES])
    T.eq(rc, 0, "promtool check rules: %s %s" % (out, err))
    with open(RULES_TEST) as f:
        text = f.read().replace("RULES", RULES)
    t = os.path.join(d, "tlcap.rules.test.yml")
    with open(t, "w") as f:
        f.write(text)
    rc, out, err = T.run([PROMTOOL, "test", "rules", t])
    T.eq(rc, 0, "promtool test rules: %s %s" % (out, err))


def test_rules_and_dashboard_on_a_real_scrape(d):
    exprs, variables = panel_exprs()
    ing, http, pport = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % ing],
                  http="127.0.0.1:%d" % http, store=True)
    prom, stop = None, threading.Event()
    tgt = D.connect(ing)
    tgt.sendall(b"TLCAP/1 target=board format=bin11\n")

    def stream():  # calls of two areas for as long as the test runs: rates are not zero
        t = 1000
        while not stop.wait(0.05):
            try:
                tgt.sendall(D.calls(20, t0=t, handle=5) + D.calls(5, t0=t + 5000, handle=6))
            except OSError:
                return
            t += 10000
    th = threading.Thread(target=stream)
    th.start()
    try:
        conf = os.path.join(d, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
                    "rule_files: ['%s']\n"
                    "scrape_configs:\n  - job_name: tlcap\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % (RULES, http))
        plog = open(os.path.join(d, "prometheus.log"), "wb")
        prom = subprocess.Popen([PROM, "--config.file=" + conf,
                                 "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
                                 "--web.listen-address=127.0.0.1:%d" % pport],
                                stdout=plog, stderr=plog)
        pending = list(exprs)

        def panels_answer():
            for pe in list(pending):
                if query(pport, pe[1]):
                    pending.remove(pe)
            return not pending
        try:
            D.wait_until(panels_answer, 90, "every panel query returns series", step=1)
        except T.Failure:
            raise T.Failure("panel queries without series: %r" % pending)
        for name, sel, label in variables:
            vals = D.wait_until(lambda sel=sel, label=label: api(pport, "/api/v1/label/%s/values?match[]=%s"
                       % (label, urllib.parse.quote(sel))), 30,
                                "variable %s (%s of %s) has values" % (name, label, sel), step=1)
        groups = api(pport, "/api/v1/rules")["groups"]
        T.eq(sorted(g["name"] for g in groups), ["tlcap.alerts", "tlcap.budgets", "tlcap.recording"],
             "rule groups loaded")
        for g in groups:
            for r in g["rules"]:
                T.check(r["health"] in ("ok", "unknown") and not r.get("lastError"),
                        "rule %s: %s %s" % (r["name"], r["health"], r.get("lastError")))
        records = [r["name"] for g in groups for r in g["rules"] if r["type"] == "recording"]
        D.wait_until(lambda: all(query(pport, r) for r in records), 60,
                     "every recording rule has series", step=1)
        stop.set()
        th.join()
        tgt.close()
        rc, _ = dm.stop()
        T.eq(rc, 0, "tlcapd exit status")
    finally:
        stop.set()
        th.join()
        if prom is not None:
            prom.kill()
            prom.wait()
        dm.kill()


if __name__ == "__main__":
    if PROM is None or PROMTOOL is None:
        print("SKIP: prometheus or promtool not installed (apt-get install prometheus)")
        sys.exit(T.SKIP)
    T.main([test_promtool, test_rules_and_dashboard_on_a_real_scrape])
