"""Fleet over NATS JetStream (SPEC 11), against Debian's real nats-server -js on loopback.

Each test starts its own nats-server (JetStream, store in a temporary directory) and tlcapd
daemons with --nats. Messages are read back by nats_consume (libnats's own client, a JetStream
consumer from the start of the stream) and decoded with Google's protobuf runtime from
proto/tlcap.proto, so the test checks tlcapd against independent implementations of both the
broker protocol and the message format.

  - two daemons publish: a consumer that starts after all data was sent (JetStream) finds each
    target's statistics with the events counters that were sent, its CONNECTED event, and
    `tlcap fleet --json` shows both hosts' targets with the same counters;
  - the broker killed during ingest: ingest goes on (every event counted), messages meanwhile
    are dropped and counted (`tlcap targets`); the broker restarted: publishing resumes;
  - a broker that accepts and never reads: tlcapd's memory stays bounded and drops are counted
    (buffer_full, and timeout for what was sent and never acknowledged);
  - subject-safe names: a target name with '.' is published as %2E;
  - a stream that is full and refuses new messages (discard new): published counts only what
    the stream acknowledged (checked against the server's monitoring port), refusals are drops
    with reason stream_full in /metrics, the stats dump and a rate-limited log line; a server
    without JetStream: every message is a no_responders drop, none counts as published.

usage: test_fleet_nats.py TLCAPD TLCAP NATS_CONSUME PROTO_DIR
Exit 0 pass, 1 fail, 77 skip (nats-server, protoc or python3-protobuf missing).
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP, CONSUME, PROTO_DIR = sys.argv[1:5]
NATS = shutil.which("nats-server") or ("/usr/sbin/nats-server"
                                        if os.path.exists("/usr/sbin/nats-server") else None)
pb = None


def gen_pb2(tmp):
    return T.gen_pb2(tmp, PROTO_DIR)


class NatsServer:
    def __init__(self, d, port=None, monitor=None, js=True):
        self.port = port or D.free_port()
        self.d = d
        self.monitor, self.js = monitor, js
        self.start()

    def start(self):
        """Starts nats-server on self.port and waits until it serves. The port it had is free
        again after a kill, but any process's outgoing connection may take it meanwhile as its
        source port (tlcapd's own reconnects included): a server that exits because the
        address is in use is started again, a few times."""
        args = [NATS, "-a", "127.0.0.1", "-p", str(self.port)]
        if self.js:
            args += ["-js", "-sd", os.path.join(self.d, "js")]
        if self.monitor:
            args += ["-m", str(self.monitor)]
        for attempt in range(5):
            self.logf = open(os.path.join(self.d, "nats.log"), "ab")
            mark = self.logf.tell()
            self.p = subprocess.Popen(args, stdout=self.logf, stderr=self.logf)
            # ready when it accepts a connection and sends its INFO line; one that exited fails
            # at once (with its log)
            try:
                D.wait_until(self.up, 30, "nats-server up", step=0.05)
                return
            except T.Failure as e:
                self.kill()
                if attempt < 4 and "address already in use" in self.log()[mark:]:
                    D.wait_until(self.port_free, 10, "port %d free" % self.port, step=0.1)
                    continue
                raise T.Failure("%s; its log:\n%s" % (e, self.log()[-2000:]))

    def port_free(self):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", self.port))
                return True
            except OSError:
                return False

    def up(self):
        if self.p.poll() is not None:
            raise T.Failure("nats-server exited with %s" % self.p.returncode)
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                return s.recv(5) == b"INFO "
        except OSError:
            return False

    def log(self):
        with open(os.path.join(self.d, "nats.log"), "rb") as f:
            return f.read().decode(errors="replace")

    def url(self):
        return "nats://127.0.0.1:%d" % self.port

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.logf.close()


def consume(url, subject="tlcap.>", idle_ms=800, js=True, max_ms=0):
    """Every message on `subject` as (subject, ServerMessage); max_ms bounds the read of a
    subject that never goes quiet."""
    args = [CONSUME, url, subject, str(idle_ms)] + (["--js", str(max_ms)] if js else [])
    r = subprocess.run(args, capture_output=True, timeout=60)
    T.check(r.returncode == 0, "nats_consume: %d %s" % (r.returncode, r.stderr.decode()))
    out = []
    for line in r.stdout.decode().splitlines()[1:]:
        subj, hexdata = line.split("\t")
        m = pb.ServerMessage()
        m.ParseFromString(bytes.fromhex(hexdata))
        out.append((subj, m))
    return out


def daemon(d, name, nats_url, prefix, extra=(), store=False, env=None, http=None):
    port, serve = D.free_port(), D.free_port()
    dd = os.path.join(d, name)
    os.makedirs(dd)
    dm = D.Daemon(TLCAPD, dd, ["--listen", "ing=bin11@127.0.0.1:%d" % port,
                               "--nats", nats_url, "--nats-subject", prefix,
                               "--nats-interval", "100"] + list(extra),
                  serve="127.0.0.1:%d" % serve, store=store, env=env,
                  **({"http": http} if http else {}))
    dm.ingest, dm.serve = port, serve
    return dm


def send(port, data, preamble=None):
    s = D.connect(port)
    if preamble:
        s.sendall(preamble)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    D.wait_eof(s)
    s.close()


def targets_out(dm):
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % dm.serve, "targets"])
    T.check(rc == 0, "tlcap targets: %d %s" % (rc, err))
    return out.decode()


def nats_line(dm):
    m = re.search(r"^nats (\S+): (\w+), stream ([\w ]+), published (\d+), dropped (\d+), "
                  r"reconnects (\d+)$", targets_out(dm), re.M)
    T.check(m is not None, "no nats line in tlcap targets")
    return {"connected": m.group(2) == "connected", "stream": m.group(3),
            "published": int(m.group(4)), "dropped": int(m.group(5)),
            "reconnects": int(m.group(6))}


def last_stats(msgs, subject):
    """The statistics of the target at `subject` as the consumer would rebuild them: the last
    full snapshot, and the counters of the last message (deltas carry counters whole)."""
    snaps = [m.snapshot for s, m in msgs if s == subject and m.WhichOneof("msg") == "snapshot"]
    T.check(snaps, "no statistics on %s (subjects: %s)" % (subject, sorted({s for s, _ in msgs})))
    return snaps[-1]


def test_two_daemons_late_consumer(d):
    ns = NatsServer(d)
    a = daemon(d, "a", ns.url(), "tlcap.hostA")
    b = daemon(d, "b", ns.url(), "tlcap.hostB")
    try:
        D.wait_until(lambda: nats_line(a)["stream"] == "ready" and
                     nats_line(b)["stream"] == "ready", 10, "JetStream streams")
        # board1 in two connections: the second half after the first was published, so that
        # a delta (not only full snapshots) carries board1's row
        send(a.ingest, D.calls(150), b"TLCAP/1 target=board1 format=bin11\n")
        D.wait_until(lambda: any(m.snapshot.counters.events == 300 for _, m in consume(
            ns.url(), "tlcap.hostA.board1.stats", idle_ms=300)), 20, "board1's first half",
            step=0.2)
        send(a.ingest, D.calls(150, t0=1000 + 150 * 100), b"TLCAP/1 target=board1 format=bin11\n")
        send(b.ingest, D.calls(40, handle=7), b"TLCAP/1 target=app.v2 format=bin11\n")
        a.wait_stats(lambda s: D.by_name(s, "board1")["events"] == 600, what="a: 600 events")
        b.wait_stats(lambda s: D.by_name(s, "app.v2")["events"] == 80, what="b: 80 events")
        # the daemons publish every 100 ms: wait until both published what they counted, then
        # start the consumer, which reads the stream from its start
        sa, sb = "tlcap.hostA.board1.stats", "tlcap.hostB.app%2Ev2.stats"

        def published():
            msgs = consume(ns.url(), idle_ms=500)
            subj = {s for s, _ in msgs}
            if sa not in subj or sb not in subj:
                return None
            if (last_stats(msgs, sa).counters.events != 600 or
                    last_stats(msgs, sb).counters.events != 80):
                return None
            return msgs
        msgs = D.wait_until(published, 20, "both daemons' statistics in JetStream", step=0.3)
        A, B = last_stats(msgs, sa), last_stats(msgs, sb)
        T.eq(A.target, "board1", "target name in the snapshot")
        T.eq(B.target, "app.v2", "dotted name decoded back")
        # the rows: 300 calls on handle 0, each X 50 ns after its E (D.calls: step 100, X at
        # step // 2), 40 on handle 7
        full_a = [m.snapshot for s, m in msgs
                  if s == sa and m.WhichOneof("msg") == "snapshot" and m.snapshot.full]
        T.check(full_a, "a full snapshot of board1")
        # a consumer's table: a full snapshot replaces it, a delta the rows it carries
        table = {}
        for s, m in msgs:
            if s == sa and m.WhichOneof("msg") == "snapshot":
                if m.snapshot.full:
                    table = {}
                table.update({r.handle: r for r in m.snapshot.rows})
        T.check(0 in table, "row of handle 0")
        T.eq(table[0].count, 300, "calls counted")
        T.eq(table[0].totals[pb.KIND_NET], 300 * 50, "net time")
        rows = {r.handle: r for r in full_a[-1].rows}
        T.check(0 in rows, "row of handle 0 in the last full snapshot")
        # a full snapshot carries the rolling windows and the quantiles (every net time is
        # 50 ns: an exact bucket, so p50 .. p99.9 are 50); deltas carry neither (docs/fleet.md)
        T.check(len(rows[0].windows) > 0, "windows in the full snapshot")
        T.eq(list(rows[0].dists[pb.KIND_NET].quantiles), [50, 50, 50, 50], "quantiles")
        deltas = [m.snapshot for s, m in msgs if s == sa and m.WhichOneof("msg") == "snapshot"
                  and not m.snapshot.full]
        T.check(any(len(x.rows) > 0 for x in deltas), "a delta with board1's row")
        for sn in deltas:
            for r in sn.rows:
                T.check(len(r.windows) == 0 and all(len(x.quantiles) == 0 for x in r.dists),
                        "a delta row without windows and quantiles: %r" % r)
        kinds = [(s, m.target_event.kind) for s, m in msgs if m.WhichOneof("msg") == "target_event"]
        T.check(("tlcap.hostA.board1.events", pb.TE_CONNECTED) in kinds, "CONNECTED event: %r" % kinds)
        T.check(("tlcap.hostB.app%2Ev2.events", pb.TE_DISCONNECTED) in kinds, "DISCONNECTED event")
        # tlcap fleet, from the broker alone
        rc, out, err = T.run([TLCAP, "fleet", "--nats", ns.url(), "--json", "--exit-after", "2"])
        T.check(rc == 0, "tlcap fleet: %d %s" % (rc, err))
        import json
        seen = {}
        for line in out.decode().splitlines():
            j = json.loads(line)
            seen[(j["host"], j["target"])] = j
        T.check(("hostA", "board1") in seen and ("hostB", "app.v2") in seen,
                "fleet rows: %r" % list(seen))
        T.eq(seen[("hostA", "board1")]["events"], 600, "fleet events of board1")
        T.eq(seen[("hostB", "app.v2")]["events"], 80, "fleet events of app.v2")
        T.eq(seen[("hostA", "board1")]["connected"], False, "fleet state")
        rc, out, err = T.run([TLCAP, "fleet", "--nats", ns.url(), "--exit-after", "1.2"])
        T.check(rc == 0 and "hostA" in out.decode() and "board1" in out.decode(),
                "fleet table: %r" % out)
        for dm in (a, b):
            rc, _ = dm.stop()
            T.eq(rc, 0, "exit status")
    finally:
        for dm in (a, b):
            dm.kill()
        ns.kill()


def test_broker_killed_and_back(d):
    ns = NatsServer(d)
    hport = D.free_port()
    a = daemon(d, "a", ns.url(), "tlcap.k", http="127.0.0.1:%d" % hport)
    try:
        D.wait_until(lambda: nats_line(a)["stream"] == "ready", 10, "stream")
        send(a.ingest, D.calls(100), b"TLCAP/1 target=t1 format=bin11\n")
        D.wait_until(lambda: nats_line(a)["published"] >= 3, 10, "publishing")
        ns.kill()
        D.wait_until(lambda: not nats_line(a)["connected"], 10, "disconnect noticed")
        # ingest goes on while the broker is away; the target events of these connections
        # cannot be published: dropped and counted
        for i in range(3):
            send(a.ingest, D.calls(100, t0=10**9 * (i + 1)), b"TLCAP/1 target=t1 format=bin11\n")
        a.wait_stats(lambda s: D.by_name(s, "t1")["events"] == 800,
                     what="every event counted while the broker is away")
        T.check(nats_line(a)["dropped"] >= 6, "drops counted: %r" % nats_line(a))
        # ... and shown in /metrics
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=5) as r:
            met = r.read().decode()
        mm = re.search(r'^tlcap_nats_dropped_total\{reason="not_connected"\} (\d+)$', met, re.M)
        T.check(mm is not None and int(mm.group(1)) >= 6, "tlcap_nats_dropped_total in /metrics")
        T.check(re.search(r"^tlcap_nats_connected 0$", met, re.M) is not None,
                "tlcap_nats_connected 0 while the broker is away")
        ns.start()
        D.wait_until(lambda: nats_line(a)["connected"], 20, "reconnected", step=0.2)
        T.check(nats_line(a)["reconnects"] >= 1, "reconnect counted")

        def resumed():
            msgs = consume(ns.url(), "tlcap.k.t1.stats", idle_ms=400)
            return msgs if msgs and msgs[-1][1].snapshot.counters.events == 800 else None
        D.wait_until(resumed, 20, "statistics after the restart", step=0.3)
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=5) as r:
            met = r.read().decode()
        mm = re.search(r"^tlcap_nats_publish_cpu_seconds_total ([0-9.]+)$", met, re.M)
        T.check(mm is not None and float(mm.group(1)) > 0,
                "tlcap_nats_publish_cpu_seconds_total: %r" % (mm and mm.group(0)))
        rc, _ = a.stop()
        T.eq(rc, 0, "exit status")
    finally:
        a.kill()
        ns.kill()


def test_broker_never_reads(d):
    """A server that completes the handshake and then never reads: tlcapd's unsent bytes stay
    under nats_buffer (64 KiB here) and the rest is dropped and counted."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    port = ls.getsockname()[1]
    conns, stop = [], threading.Event()

    def serve():
        ls.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            conns.append(c)
            c.sendall(b'INFO {"server_id":"x","version":"2.9.0","proto":1,"max_payload":'
                      b'67108864,"headers":true}\r\n')
            buf = b""
            c.settimeout(2)
            try:
                while b"PING\r\n" not in buf:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                if b"PING\r\n" in buf:
                    c.sendall(b"PONG\r\n")
            except OSError:
                pass
            # and from now on never read from c
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    # under ASan, freed memory sits in its quarantine (256 MiB by default) and RSS would grow to
    # that: a small quarantine lets RSS show what the daemon holds
    env = None
    if "ASAN_OPTIONS" in os.environ:
        env = {"ASAN_OPTIONS": os.environ["ASAN_OPTIONS"] + ":quarantine_size_mb=4"}
    a = daemon(d, "a", "nats://127.0.0.1:%d" % port, "tlcap.stuck",
               ["--nats-buffer", "65536", "--nats-full-interval", "100"], env=env)
    try:
        D.wait_until(lambda: nats_line(a)["connected"], 15, "connected to the stuck broker")
        # 3,000 areas: every full snapshot is a few hundred KB, every 100 ms
        data = b"".join(D.calls(1, t0=1000 + 300 * h, handle=h) for h in range(3000))
        send(a.ingest, data, b"TLCAP/1 target=big format=bin11\n")
        D.wait_until(lambda: nats_line(a)["dropped"] >= 20, 30, "drops counted", step=0.2)
        rss1 = D.proc_status_kib(a.p.pid, "VmRSS", 0)
        D.wait_until(lambda: nats_line(a)["dropped"] >= 100, 30, "more drops", step=0.2)
        rss2 = D.proc_status_kib(a.p.pid, "VmRSS", 0)
        T.check(rss2 < rss1 + 8 * 1024, "RSS grew from %d to %d KiB" % (rss1, rss2))
        a.wait_stats(lambda s: D.by_name(s, "big")["events"] == 6000,
                     what="ingest unharmed")
        # what was sent is never acknowledged: after 5 s each is a timeout drop, and its
        # place among the messages awaiting acknowledgement is free again
        st = a.wait_stats(lambda s: s["nats"]["dropped"]["timeout"] > 0, 30,
                          "timeout drops")["nats"]
        T.eq(st["published"], 0, "nothing acknowledged")
        T.check(st["dropped"]["buffer_full"] > 0, "buffer_full drops: %r" % st)
        rc, _ = a.stop()
        T.eq(rc, 0, "exit status with a stuck broker")
    finally:
        stop.set()
        a.kill()
        for c in conns:
            c.close()
        ls.close()


def test_sealed_segments(d):
    """Every sealed segment is announced on PREFIX.TARGET.segments with its manifest."""
    ns = NatsServer(d)
    a = daemon(d, "a", ns.url(), "tlcap.seg", store=True)
    try:
        D.wait_until(lambda: nats_line(a)["stream"] == "ready", 10, "stream")
        send(a.ingest, D.calls(50), b"TLCAP/1 target=s1 format=bin11\n")
        a.wait_stats(lambda s: D.by_name(s, "s1")["events"] == 100, what="100 events")
        rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % a.serve, "rotate", "s1"])
        T.check(rc == 0, "tlcap rotate: %d %s" % (rc, err))

        def sealed():
            msgs = consume(ns.url(), "tlcap.seg.s1.segments", idle_ms=400)
            return msgs or None
        msgs = D.wait_until(sealed, 20, "a segment notice", step=0.3)
        ss = msgs[0][1].segment_sealed
        T.eq(ss.target, "s1", "notice target")
        T.check(os.path.exists(ss.path) and ss.path.startswith(a.state), "path %r" % ss.path)
        T.check(ss.manifest.startswith(b"tlcap-manifest 1"), "manifest: %r" % ss.manifest[:60])
        T.check(b"records 100" in ss.manifest, "the manifest counts the 100 records: %r" %
                ss.manifest)
        rc, _ = a.stop()
        T.eq(rc, 0, "exit status")
    finally:
        a.kill()
        ns.kill()


def test_large_target_in_parts(d):
    """A target of 3,000 areas is published in parts of at most 1,024 rows (Snapshot.part and
    .more): applied in order, part 0 full and the rest as deltas, they give every area."""
    ns = NatsServer(d)
    a = daemon(d, "a", ns.url(), "tlcap.parts", ["--nats-full-interval", "100"])
    try:
        D.wait_until(lambda: nats_line(a)["stream"] == "ready", 10, "stream")
        # one call on each of 3,000 handles, single core: 3,000 code rows
        data = b"".join(D.calls(1, t0=1000 + 300 * h, handle=h) for h in range(3000))
        send(a.ingest, data, b"TLCAP/1 target=big format=bin11\n")
        a.wait_stats(lambda s: D.by_name(s, "big")["events"] == 6000, what="6000 events")

        def whole():
            msgs = consume(ns.url(), "tlcap.parts.big.stats", idle_ms=400, max_ms=3000)
            snaps = [m.snapshot for _, m in msgs]
            # the last complete series: a part 0 that is full, then parts until more is false
            for k in range(len(snaps) - 1, -1, -1):
                if snaps[k].part == 0 and snaps[k].full:
                    series = [snaps[k]]
                    for x in snaps[k + 1:]:
                        if not series[-1].more:
                            break
                        series.append(x)
                    if not series[-1].more and series[-1].counters.events == 6000:
                        return series
            return None
        series = D.wait_until(whole, 20, "a whole series of parts", step=0.3)
        T.check(len(series) >= 3, "3,000 rows in parts of <= 1,024: %d parts" % len(series))
        T.eq([x.part for x in series], list(range(len(series))), "part numbers")
        for prev, x in zip(series, series[1:]):
            T.check(not x.full and x.base_seq == prev.seq, "later parts are deltas on the last")
        table = {}
        for x in series:
            for r in x.rows:
                table[(r.handle, r.context)] = r
        T.eq(sorted(h for h, _ in table), list(range(3000)), "every area once")
        T.check(all(r.count == 1 for r in table.values()), "one call each")
        rc, _ = a.stop()
        T.eq(rc, 0, "exit status")
    finally:
        a.kill()
        ns.kill()


def metrics(hport):
    """tlcapd's /metrics: the nats published total, and the drops by reason."""
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=5) as r:
        met = r.read().decode()
    pub = re.search(r"^tlcap_nats_published_total (\d+)$", met, re.M)
    T.check(pub is not None, "tlcap_nats_published_total in /metrics")
    drops = {k: int(v) for k, v in
             re.findall(r'^tlcap_nats_dropped_total\{reason="(\w+)"\} (\d+)$', met, re.M)}
    T.check(drops, "tlcap_nats_dropped_total{reason=...} in /metrics")
    return int(pub.group(1)), drops


def test_stream_full_refusals(d):
    """The stream exists, made by an operator with room for 20 messages and discard new: once
    it is full the server refuses every message. Only acknowledged messages count as published
    (as many as the stream holds, read from the server's monitoring port); each refusal is a
    drop with reason stream_full in /metrics and the stats dump, and is logged, rate-limited."""
    import json
    import urllib.request
    mport, hport = D.free_port(), D.free_port()
    ns = NatsServer(d, monitor=mport)
    r = subprocess.run([CONSUME, ns.url(), "--add-stream", "TLCAP_tlcap", "tlcap.>", "20"],
                       capture_output=True, timeout=30)
    T.check(r.returncode == 0, "stream created: %r" % r.stderr)

    def held():
        with urllib.request.urlopen("http://127.0.0.1:%d/jsz?streams=true" % mport,
                                    timeout=5) as rr:
            j = json.load(rr)
        for acc in j.get("account_details", []):
            for st in acc.get("stream_detail", []):
                if st["name"] == "TLCAP_tlcap":
                    return st["state"]["messages"]
        return None
    # a full snapshot of the target every 100 ms: ten messages a second
    a = daemon(d, "a", ns.url(), "tlcap.full", ["--nats-full-interval", "100"],
               http="127.0.0.1:%d" % hport)
    try:
        D.wait_until(lambda: nats_line(a)["stream"] == "ready", 10, "stream (kept as made)")
        send(a.ingest, D.calls(50), b"TLCAP/1 target=board format=bin11\n")
        D.wait_until(lambda: held() == 20 and metrics(hport)[1].get("stream_full", 0) >= 20,
                     30, "the stream full and 20 refusals", step=0.2)
        pub, drops = metrics(hport)
        if shutil.which("promtool"):
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport, timeout=5) as rr:
                D.check_promtool_metrics(rr.read())
        T.eq(pub, held(), "published = the messages the stream holds")
        T.eq(pub, 20, "published")
        T.eq(drops.get("no_responders", 0) + drops.get("timeout", 0), 0,
             "no other JetStream refusal: %r" % drops)
        st = a.stats()["nats"]
        T.eq(st["published"], 20, "stats dump: published")
        T.check(st["dropped"]["stream_full"] >= 20, "stats dump: drops by reason %r" % st)
        T.eq(nats_line(a)["published"], 20, "tlcap targets: published")
        # refused about ten times a second for two seconds or more: logged, not ten lines
        # a second
        lines = [ln for ln in a.log().splitlines() if "not published" in ln]
        T.check(lines and "stream full" in lines[0] and "maximum messages exceeded" in lines[0],
                "a log line: %r" % a.log()[-2000:])
        T.check(len(lines) <= 2, "rate-limited: %r" % lines)
        rc, _ = a.stop()
        T.eq(rc, 0, "exit status")
    finally:
        a.kill()
        ns.kill()


def test_no_jetstream(d):
    """A server without JetStream: nothing stores the messages (no responder acknowledges
    them): none counts as published, each is a drop with reason no_responders."""
    hport = D.free_port()
    ns = NatsServer(d, js=False)
    a = daemon(d, "a", ns.url(), "tlcap.nojs", ["--nats-full-interval", "100"],
               http="127.0.0.1:%d" % hport)
    try:
        D.wait_until(lambda: nats_line(a)["connected"], 10, "connected")
        send(a.ingest, D.calls(10), b"TLCAP/1 target=t format=bin11\n")
        D.wait_until(lambda: metrics(hport)[1].get("no_responders", 0) >= 5, 20,
                     "no_responders drops", step=0.2)
        T.eq(metrics(hport)[0], 0, "nothing published")
        T.check(any("not published" in ln and "no responders" in ln
                    for ln in a.log().splitlines()), "logged: %r" % a.log()[-2000:])
        rc, _ = a.stop()
        T.eq(rc, 0, "exit status")
    finally:
        a.kill()
        ns.kill()


def test_bad_url(d):
    rc, out, err = T.run([TLCAPD, "--nats", "http://x", "--check-config", "--no-store",
                          "--state-dir", d])
    T.eq(rc, 2, "a bad --nats URL is a usage error")
    T.check("nats" in err, "message names the option: %r" % err)


if __name__ == "__main__":
    if NATS is None:
        print("SKIP: nats-server not installed (apt-get install nats-server)")
        sys.exit(T.SKIP)
    tmp = tempfile.mkdtemp(prefix="tlc_nats_")
    try:
        pb = gen_pb2(tmp)
    except SystemExit:
        raise
    T.main([test_bad_url, test_stream_full_refusals, test_no_jetstream, test_sealed_segments, test_large_target_in_parts, test_two_daemons_late_consumer, test_broker_killed_and_back,
            test_broker_never_reads])
