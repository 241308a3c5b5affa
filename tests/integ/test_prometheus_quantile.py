"""Prometheus's p99 of tlcap's histograms against tlcap's own (docs/http.md, "Histogram
edges"): Debian's real `prometheus` server scrapes a real tlcapd whose target streams three
areas of known net durations (uniform, bimodal, long tail; 20,000 calls each), and
histogram_quantile(0.99, ...) of each area's tlcap_area_net_duration_seconds buckets must be
within 5 % of the p99 tlcapd reports for that area, which in turn must be within the engine
histogram's 1 % of the exact p99 of the durations sent (computed here from the samples).
Each series' buckets must be exact (the count of samples <= le) and bounded in number, and its
edges stable: the band chosen after the first half of the calls is the one after all of them.
Then the uniform area's durations move up 4 times: its band moves with its p99 (the others'
stay), and Prometheus's p99 of it is again within 5 %.

usage: test_prometheus_quantile.py TLCAPD
Exit 0 pass, 1 fail, 77 skip (prometheus not installed).
"""
import json
import os
import random
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
PROM = shutil.which("prometheus")
N = 20000


def query(port, q):
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (port, urllib.parse.quote(q))
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            doc = json.load(r)
    except OSError:
        return None
    return doc["data"]["result"] if doc.get("status") == "success" else None


def durations(rnd):
    """Per area handle: its name and N net durations (ns)."""
    uni = [rnd.randint(50000, 250000) for _ in range(N)]
    bi = [int(rnd.gauss(20000, 2000)) if rnd.random() < 0.95 else int(rnd.gauss(400000, 60000))
          for _ in range(N)]
    # long tail: 10 us times a Pareto (alpha 1.5), at most 1 s
    tail = [min(10 ** 9, int(10000 * rnd.paretovariate(1.5))) for _ in range(N)]
    return {1: ("uniform", [max(1, x) for x in uni]),
            2: ("bimodal", [max(1, x) for x in bi]),
            3: ("longtail", [max(1, x) for x in tail])}


def stream(areas, rnd, t0=1000):
    """One core: the areas' calls interleaved, E then X after the call's duration."""
    recs, t = [], t0
    order = [(h, x) for h, (_, xs) in areas.items() for x in xs]
    rnd.shuffle(order)
    for h, x in order:
        recs.append(T.bin11(h, 3, 0, 0, t))
        recs.append(T.bin11(h, 0, 0, 0, t + x))
        t += x + rnd.randint(100, 2000)
    return b"".join(recs)


def exact_p99(xs):
    """The sample of rank 0.99 n rounded up (the engine's rank rule)."""
    s = sorted(xs)
    k = -(-99 * len(s) // 100)
    return s[k - 1]


def scrape_les(hport):
    """{handle: sorted le values} of tlcapd's own /metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=10) as r:
        body = r.read().decode()
    out = {}
    for line in body.splitlines():
        if line.startswith("tlcap_area_net_duration_seconds_bucket{"):
            lab = line[line.index("{") + 1:line.rindex("}")]
            h = int(lab.split('handle="')[1].split('"')[0], 16)
            out.setdefault(h, []).append(lab.split('le="')[1].split('"')[0])
    return out


def test_p99_within_5_percent(d):
    rnd = random.Random(35)
    areas = durations(rnd)
    data = stream(areas, rnd)
    ing, http, pport = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % ing],
                  http="127.0.0.1:%d" % http)
    prom = None
    try:
        s = D.connect(ing)
        half = len(data) // 48 * 24  # a whole record count, E/X pairs kept together
        s.sendall(b"TLCAP/1 target=q format=bin11\n" + data[:half])
        dm.wait_stats(lambda st: any(t["name"] == "q" and t["stats"]["counters"]["events"]
                                     == half // 24 for t in st["targets"]), 60, "half counted")
        first = scrape_les(http)
        T.eq(sorted(first), [1, 2, 3], "every area has its histogram after half the calls")
        s.sendall(data[half:])
        s.shutdown(socket.SHUT_WR)
        D.wait_eof(s, 60)
        s.close()
        st = dm.wait_stats(lambda st: any(t["name"] == "q" and t["stats"]["counters"]["events"]
                                          == 6 * N for t in st["targets"]),
                           60, "every event counted")
        T.eq(scrape_les(http), first, "each series' edges after all the calls are those after "
             "half of them (the bands are stable)")
        rows = {int(r["handle"], 16): r for r in D.by_name(st, "q")["stats"]["rows"]
                if r.get("context") == "core0" and "net" in r}
        own = {}
        for h, (name, xs) in areas.items():
            r = rows[h]["net"]
            T.eq(r["n"], N, "%s: NET samples" % name)
            ex = exact_p99(xs)
            T.check(abs(r["p99"] - ex) <= ex / 100 + 1, "%s: tlcap's p99 %d vs exact %d"
                    % (name, r["p99"], ex))
            own[h] = r["p99"]
        conf = os.path.join(d, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global: { scrape_interval: 1s }\n"
                    "scrape_configs:\n  - job_name: tlcap\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % http)
        plog = open(os.path.join(d, "prometheus.log"), "wb")
        prom = subprocess.Popen([PROM, "--config.file=" + conf,
                                 "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
                                 "--web.listen-address=127.0.0.1:%d" % pport],
                                stdout=plog, stderr=plog)

        def counted():
            r = query(pport, "tlcap_area_net_duration_seconds_count")
            return r if r and len(r) == 3 and all(float(x["value"][1]) == N for x in r) else None
        D.wait_until(counted, 90, "Prometheus has every area's histogram", step=0.5)
        check_prometheus(pport, areas, own)
        # the uniform area's durations move up 4 times (3 N more calls): its p99 leaves its
        # band, which moves with it; counts stay exact and Prometheus's p99 close
        more = [x * 4 for x in rnd.sample(areas[1][1], N)] * 3
        s = D.connect(ing)
        s.sendall(b"TLCAP/1 target=q format=bin11\n" + stream({1: ("uniform", more)}, rnd,
                                                                   10 ** 13))
        s.shutdown(socket.SHUT_WR)
        D.wait_eof(s, 60)
        s.close()
        areas[1] = ("uniform x4", areas[1][1] + more)
        st = dm.wait_stats(lambda st: any(t["name"] == "q" and t["stats"]["counters"]["events"]
                                          == 12 * N for t in st["targets"]), 60, "all counted")
        r = {int(r["handle"], 16): r for r in D.by_name(st, "q")["stats"]["rows"]
             if r.get("context") == "core0" and "net" in r}[1]["net"]
        ex = exact_p99(areas[1][1])
        T.check(abs(r["p99"] - ex) <= ex / 100 + 1, "moved: tlcap's p99 %d vs exact %d"
                % (r["p99"], ex))
        own[1] = r["p99"]
        moved = scrape_les(http)
        T.check(moved[1] != first[1] and moved[2] == first[2] and moved[3] == first[3],
                "the uniform area's band moved, the others' did not: %r" % moved[1])

        def counted4():
            r = query(pport, 'tlcap_area_net_duration_seconds_count{handle="00000001"}')
            return r if r and float(r[0]["value"][1]) == 4 * N else None
        D.wait_until(counted4, 60, "Prometheus has the moved histogram", step=0.5)
        check_prometheus(pport, {1: areas[1]}, own)
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
    finally:
        if prom is not None:
            prom.kill()
            prom.wait()
        dm.kill()


def check_prometheus(pport, areas, own):
    """Per area: its buckets in Prometheus exact and bounded, histogram_quantile(0.99) of them
    within 5 % of tlcap's p99."""
    for h, (name, xs) in areas.items():
        n = len(xs)
        sel = 'tlcap_area_net_duration_seconds_bucket{target="q",handle="%08X"}' % h
        buckets = query(pport, sel)
        T.check(buckets and len(buckets) <= 17 + 24 + 1, "%s: bounded buckets: %d"
                % (name, len(buckets or [])))
        for b in buckets:  # every count exact: the samples <= le
            le = b["metric"]["le"]
            want = n if le == "+Inf" else sum(1 for x in xs if x <= round(float(le) * 1e9))
            T.eq(float(b["value"][1]), float(want), "%s: bucket le=%s" % (name, le))
        got = query(pport, "histogram_quantile(0.99, %s)" % sel)
        T.check(got and len(got) == 1, "%s: one answer: %r" % (name, got))
        p = float(got[0]["value"][1]) * 1e9
        err = abs(p - own[h]) / own[h]
        print("%s: Prometheus p99 %.0f ns, tlcap p99 %d ns, exact %d ns: %.2f %% off, "
              "%d buckets" % (name, p, own[h], exact_p99(xs), 100 * err, len(buckets)))
        T.check(err <= 0.05, "%s: Prometheus's p99 %.0f ns is %.1f %% off tlcap's %d ns"
                % (name, p, 100 * err, own[h]))


if __name__ == "__main__":
    if PROM is None:
        print("SKIP: prometheus not installed (apt-get install prometheus)")
        sys.exit(T.SKIP)
    T.main([test_p99_within_5_percent])
