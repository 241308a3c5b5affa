"""Subscriber protocol, end to end, spoken by Google's protobuf runtime (python3-protobuf).

The Python classes are generated from proto/tlcap.proto with protoc at test time into a
temporary directory, so this proves the wire format is standard protobuf with standard
delimited framing, not something only protobuf-c reads. Then the real tlcapd (loopback, port
picked free, --no-store) gets a bin11 target, and the test checks: Hello/Welcome, ListTargets,
a subscription's full snapshot then deltas chained by seq, target events, live event batches,
GetStats, a columnar subscription (Snapshot.columns and packed cells), an unknown request type
(error, connection stays), an oversized frame (error, then closed), and the `tlcap` CLI:
targets, stats (json and text1), watch, send, rotate, usage and "daemon not reachable" exit
codes.

With --tls the same runs over TLS with a token (SPEC 8): a self-signed certificate made by
`openssl req` for the test, the daemon started with --tls-cert/--tls-key/--token-file, every
Python subscriber wrapped in ssl (verifying the chain and the name) and presenting the token,
and the CLI given tls://, --ca and --token-file. The 200-connection churn then also churns TLS
sessions (RST mid-handshake or mid-write included).

usage: test_subscribe_interop.py TLCAPD TLCAP PROTO_DIR [--tls]
Exit 0 pass, 1 fail, 77 skip (protoc, python3-protobuf or openssl missing).
"""
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP, PROTO_DIR = sys.argv[1], sys.argv[2], sys.argv[3]
TLS = "--tls" in sys.argv[4:]
SSLCTX = None  # TLS: the client context trusting the test's certificate
TOKEN = b""    # TLS: the token every Hello presents
PFX = ""       # TLS: "tls://" before the CLI's address
CONN = []      # TLS: the CLI's --ca and --token-file


def tls_setup(tmp):
    """A self-signed certificate for localhost and 127.0.0.1, and a 0600 token file."""
    global SSLCTX, TOKEN, PFX, CONN
    if shutil.which("openssl") is None:
        print("SKIP: openssl not installed (apt-get install openssl)")
        sys.exit(T.SKIP)
    cert, key, tok = (os.path.join(tmp, n) for n in ("cert.pem", "key.pem", "token"))
    subprocess.check_call(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out",
                           cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
                           "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    TOKEN = b"interop-" + os.urandom(8).hex().encode()
    fd = os.open(tok, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, TOKEN + b"\n")
    os.close(fd)
    SSLCTX = ssl.create_default_context(cafile=cert)
    PFX = "tls://"
    CONN = ["--ca", cert, "--token-file", tok]
    return ["--tls-cert", cert, "--tls-key", key, "--token-file", tok]


def gen_pb2(tmp):
    return T.gen_pb2(tmp, PROTO_DIR)


class Sub:
    """A subscriber written against the generated classes and protobuf's own framing."""

    def __init__(self, pb, port):
        self.pb = pb
        self.s = D.connect(port)
        if SSLCTX is not None:
            self.s = SSLCTX.wrap_socket(self.s, server_hostname="localhost")
        self.s.settimeout(10)
        self.buf = b""

    def send(self, **kw):
        m = self.pb.ClientMessage(**kw)
        b = m.SerializeToString()
        self.s.sendall(T.varint(len(b)) + b)

    def recv(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            # protobuf's own delimited decoder
            from google.protobuf.internal.decoder import _DecodeVarint32
            if self.buf:
                try:
                    n, pos = _DecodeVarint32(self.buf, 0)
                except IndexError:
                    n, pos = None, None
                if n is not None and len(self.buf) >= pos + n:
                    m = self.pb.ServerMessage()
                    m.ParseFromString(self.buf[pos:pos + n])
                    self.buf = self.buf[pos + n:]
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise T.Failure("no message within %.1fs" % timeout)
            self.s.settimeout(left)
            b = self.s.recv(65536)
            if not b:
                return None
            self.buf += b

    def expect(self, kind, timeout=10.0, keep=None):
        deadline = time.monotonic() + timeout
        for _ in range(100000):
            m = self.recv(max(0.01, deadline - time.monotonic()))
            if m is None:
                raise T.Failure("connection closed while waiting for %s" % kind)
            if m.WhichOneof("msg") == kind:
                return m
            if keep is not None:
                keep.append(m)
        raise T.Failure("no %s" % kind)

    def close(self):
        self.s.close()


def rec(handle, etype, t, core=0, data=0):
    return T.bin11(handle, etype, core, data, t)


def main():
    tmp = tempfile.mkdtemp(prefix="tlc_interop_")
    dm = None
    try:
        pb = gen_pb2(tmp)
        extra = tls_setup(tmp) if TLS else []
        ping, serve = D.free_port(), D.free_port()
        notify = D.Notify(tmp)
        env = dict(os.environ)
        env.pop("JOURNAL_STREAM", None)
        env["NOTIFY_SOCKET"] = notify.path
        log = open(os.path.join(tmp, "tlcapd.log"), "wb")
        dm = subprocess.Popen([TLCAPD, "--listen", "ing=bin11@127.0.0.1:%d" % ping,
                               "--serve", "127.0.0.1:%d" % serve, "--no-store",
                               "--state-dir", os.path.join(tmp, "state"),
                               # the churn below opens 200 connections from one address
                               # faster than the daemon sees the previous ones close
                               "--max-per-address", "0"] + extra,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                              env=env)
        notify.wait_for("READY=1", timeout=15)

        # --- Hello / Welcome, ListTargets (empty) ---
        a = Sub(pb, serve)
        a.send(request_id=1, hello=pb.Hello(token=TOKEN, protocol_version=1, client_name="py"))
        w = a.recv()
        T.check(w.WhichOneof("msg") == "welcome" and w.request_id == 1, "welcome: %r" % w)
        T.check(w.welcome.protocol_version == 1 and w.welcome.instance_id != 0, "welcome fields")
        iid = w.welcome.instance_id
        a.send(request_id=2, list_targets=pb.ListTargets())
        m = a.expect("targets")
        T.check(m.request_id == 2 and m.targets.instance_id == iid, "target list")

        # --- a newer client's request type: error, connection stays ---
        raw = pb.ClientMessage(request_id=3).SerializeToString() + b"\x98\x06\x01"  # field 99
        a.s.sendall(T.varint(len(raw)) + raw)
        m = a.expect("error")
        T.check(m.error.code == pb.ERR_UNKNOWN_REQUEST and not m.error.fatal and
                m.request_id == 3, "unknown request: %r" % m)

        # --- subscribe to everything, with event batches ---
        a.send(request_id=4, subscribe=pb.Subscribe(subscription_id=9, interval_ms=100,
                                                    windows=True, quantiles=True, neutral=True,
                                                    events=True, names=True))
        m = a.expect("ack")
        T.check(m.ack.subscription_id == 9, "ack")

        # --- a target streams: E/X of area 0 on core 0, 3 times ---
        tgt = D.connect(ping)
        recs = b""
        t = 1000
        for _ in range(3):
            recs += rec(0x00000000, 3, t) + rec(0x00000000, 0, t + 500)
            t += 1000
        tgt.sendall(b"TLCAP/1 target=py format=bin11\n" + recs)

        seen_events, last = 0, None
        stream_seq = {}
        other = []
        deadline = time.monotonic() + 15
        got_connected = False
        while time.monotonic() < deadline:
            m = a.recv(max(0.01, deadline - time.monotonic()))
            if m is None:
                raise T.Failure("subscriber closed")
            k = m.WhichOneof("msg")
            if k == "target_event" and m.target_event.target == "py" and \
                    m.target_event.kind == pb.TE_CONNECTED:
                got_connected = True
            elif k == "events" and m.events.target == "py":
                seen_events += len(m.events.events)
            elif k == "snapshot" and m.snapshot.target == "py":
                s = m.snapshot
                T.check(s.instance_id == iid, "snapshot instance id")
                if not s.full:
                    T.check(stream_seq.get(s.stream) == s.base_seq,
                            "delta base %d != previous seq %r" % (s.base_seq,
                                                                stream_seq.get(s.stream)))
                stream_seq[s.stream] = s.seq
                if s.counters.events == 6:
                    last = s
            else:
                other.append(m)
            if got_connected and seen_events >= 6 and last is not None:
                break
        T.check(got_connected, "no CONNECTED target event")
        T.check(seen_events == 6, "event batches carried %d events, want 6" % seen_events)
        T.check(last is not None, "no snapshot with 6 events")

        # --- GetStats, the rows the engine computed ---
        a.send(request_id=5, get_stats=pb.GetStats(target="py", windows=True, quantiles=True,
                                                   neutral=True, names=True))
        m = a.expect("stats")
        snap = m.stats.snapshot
        T.check(m.request_id == 5 and snap.full and snap.target == "py", "stats reply")
        rows = [r for r in snap.rows if r.handle == 0 and r.context == 0]
        T.check(len(rows) == 1, "rows: %r" % list(snap.rows))
        r = rows[0]
        T.check(r.count == 3 and r.totals[pb.KIND_NET] == 1500 and
                r.dists[pb.KIND_NET].n == 3 and r.dists[pb.KIND_NET].max == 500,
                "row values: %r" % r)
        # --- columnar rows: only the columns asked for, after the 4 key columns ---
        cs = Sub(pb, serve)
        cs.send(request_id=1, hello=pb.Hello(token=TOKEN, protocol_version=1, client_name="cols"))
        cs.expect("welcome")
        cs.send(request_id=2, subscribe=pb.Subscribe(
            subscription_id=1, targets=["py"], interval_ms=100, neutral_only=True,
            columns=[6, 16, 17, 20, 99999]))  # COUNT, NET total/n/max; 99999 unknown
        cs.expect("ack")
        m = cs.expect("snapshot")
        s = m.snapshot
        T.check(s.full and len(s.rows) == 0 and list(s.columns) == [1, 2, 3, 4, 6, 16, 17, 20],
                "columnar snapshot: %r" % s)
        nc = len(s.columns)
        cells = [list(s.cells[i:i + nc]) for i in range(0, len(s.cells), nc)]
        T.check(cells == [[0, 0, 0, 0, 3, 1500, 3, 500]], "cells: %r" % cells)
        cs.close()
        a.send(request_id=6, get_stats=pb.GetStats(target="nope"))
        m = a.expect("error")
        T.check(m.error.code == pb.ERR_NO_SUCH_TARGET and m.request_id == 6, "no such target")

        # --- the CLI against the same daemon ---
        addr = PFX + "127.0.0.1:%d" % serve
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "targets"])
        T.check(rc == 0 and b"py" in out and b"connected" in out, "targets: %d %r %s" %
                (rc, out, err))
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "stats", "py", "--export", "json"])
        T.check(rc == 0, "stats json: %d %s" % (rc, err))
        doc = json.loads(out)
        T.check(doc["counters"]["events"] == 6, "stats json counters: %r" % doc["counters"])
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "stats", "py", "--text1-format",
                              "StatisticsEntry=%HANDLE%,%COUNT%,%T.NET%"])
        T.check(rc == 0 and b"00000000,3,1500" in out, "stats text1: %d %r %s" % (rc, out, err))
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "stats", "py", "--export", "br"])
        T.check(rc == 0, "stats br: %d %s" % (rc, err))
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "stats", "py", "--export", "aprof"])
        T.check(rc == 1 and "timeline" in err, "stats aprof: %d %s" % (rc, err))
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "stats", "nope"])
        T.check(rc == 1 and "no such target" in err, "stats unknown target: %d %s" % (rc, err))
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "stats", "py", "--export", "pdf"])
        T.check(rc == 2, "bad export must be a usage error: %d" % rc)
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "watch", "py", "--count", "1",
                              "--interval", "50"], timeout=30)
        T.check(rc == 0 and json.loads(out.splitlines()[0])["schema"] == "tlcap-stats/1",
                "watch: %d %r %s" % (rc, out[:200], err))
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "rotate", "py"])
        T.check(rc == 1 and "rotate" in err, "rotate without storage: %d %s" % (rc, err))
        # watch and top of a target the daemon does not know say so instead of waiting forever
        for cmd in (["watch", "nosuch"], ["watch", "nosuch*"], ["top", "nosuch"]):
            rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr] + cmd, timeout=30)
            T.check(rc == 1 and "no such target: " + cmd[1] in err and "--wait" in err,
                    "%s: %d %s" % (" ".join(cmd), rc, err))
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", addr, "watch", "p*", "--count", "1",
                              "--interval", "50"], timeout=30)
        T.check(rc == 0, "watch of a pattern that matches: %d %s" % (rc, err))
        for cmd in (["targets"], ["stats"], ["top"], ["watch"], ["send"], ["rotate"]):
            rc, out, err = T.run([TLCAP] + cmd + ["--help"])
            T.check(rc == 0 and b"usage" in out, "%s --help: %d" % (cmd, rc))
        rc, out, err = T.run([TLCAP, "frobnicate"])
        T.check(rc == 2, "unknown command: %d" % rc)
        dead = "127.0.0.1:%d" % D.free_port()
        rc, out, err = T.run([TLCAP] + CONN + ["--connect", PFX + dead, "targets"])
        T.check(rc == 1 and dead in err and "cannot connect" in err,
                "unreachable: %d %s" % (rc, err))

        # --- tlcap send: a target simulator through the ingest port ---
        path = os.path.join(tmp, "cap.bin")
        with open(path, "wb") as f:
            t = 0
            for i in range(50):
                f.write(rec(0x00000001, 3, t) + rec(0x00000001, 0, t + 10))
                t += 100
        # tlcap watch --events sees the new target's lifecycle and its events as JSON lines
        wp = subprocess.Popen([TLCAP] + CONN + ["--connect", addr, "watch", "*", "--events",
                                                "--interval", "50", "--wait"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = []

        def pump():  # watch's stdout, a line at a time, as it comes
            for line in iter(wp.stdout.readline, b""):
                lines.append(line)
        threading.Thread(target=pump, daemon=True).start()
        # py's first snapshot: the subscription is in place before "sent" connects
        D.wait_until(lambda: lines, 15, "tlcap watch's first line")
        T.check(json.loads(lines[0])["schema"] == "tlcap-stats/1", "watch: %r" % lines[0])
        rc, out, err = T.run([TLCAP, "send", path, "--target", "sent", "--format", "bin11",
                              "--to", "127.0.0.1:%d" % ping, "--rate", "20000"], timeout=60)
        T.check(rc == 0, "send: %d %s" % (rc, err))

        def sent_count():
            rc2, out2, _ = T.run([TLCAP] + CONN + ["--connect", addr, "stats", "sent", "--export",
                                  "json"])
            return rc2 == 0 and json.loads(out2)["counters"]["events"] == 100
        D.wait_until(sent_count, 15, "100 events of target 'sent'", step=0.1)

        def watched(kind):
            docs = [json.loads(x) for x in list(lines)]
            return [x for x in docs if x.get("type") == kind and x.get("target") == "sent"]
        D.wait_until(lambda: sum(len(x["events"]) for x in watched("events")) >= 100, 15,
                     "the 100 events in tlcap watch --events", step=0.1)
        wp.terminate()
        wp.wait(timeout=10)
        evs = [e for x in watched("events") for e in x["events"]]
        T.eq([(e["handle"], e["type"]) for e in evs], [("00000001", "E"), ("00000001", "X")] * 50,
             "watched events: handle and type of each record sent")
        T.check(all(a["time"] < b["time"] for a, b in zip(evs, evs[1:])),
                "watched events in time order")
        T.check(all(e["core"] == 0 and e["data"] == 0 and "thread" not in e for e in evs),
                "watched events: core, data, no thread: %r" % evs[:2])
        T.check(any(x["kind"] == "connected" and isinstance(x["seq"], int)
                    for x in watched("target_event")),
                "watch: the target_event line of the connection: %r" % lines[:6])

        # --- an oversized frame closes only that connection, with an error first ---
        b = Sub(pb, serve)
        b.send(request_id=1, hello=pb.Hello(token=TOKEN, protocol_version=1))
        b.expect("welcome")
        b.s.sendall(T.varint(1 << 40))
        m = b.expect("error")
        T.check(m.error.code == pb.ERR_TOO_LARGE and m.error.fatal, "oversize: %r" % m)
        T.check(b.recv() is None, "oversize: connection not closed")
        b.close()
        # --- T28: reset during a large write; subscribe/unsubscribe/close churn ---
        fds_before = len(os.listdir("/proc/%d/fd" % dm.pid))
        for i in range(200):
            c = Sub(pb, serve)
            c.send(request_id=1, hello=pb.Hello(token=TOKEN, protocol_version=1))
            c.send(request_id=2, subscribe=pb.Subscribe(subscription_id=1, interval_ms=50,
                                                        events=True, windows=True))
            if i % 2 == 0:
                c.send(request_id=3, unsubscribe=pb.Unsubscribe(subscription_id=1))
            c.send(request_id=4, get_stats=pb.GetStats(target="py", windows=True,
                                                       quantiles=True, names=True))
            if i % 3 == 0:  # RST instead of FIN, replies possibly still being written
                c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
        a.send(request_id=8, list_targets=pb.ListTargets())
        a.expect("targets")  # the daemon is alive and serving
        D.wait_until(lambda: len(os.listdir("/proc/%d/fd" % dm.pid)) <= fds_before, 10,
                     "fd count back to %d" % fds_before, step=0.05)

        a.send(request_id=7, ping=pb.Ping(cookie=77))
        m = a.expect("pong")
        T.check(m.pong.cookie == 77, "the other subscriber is unaffected")
        # --- shutdown with a subscriber still connected: it is told, and the daemon exits 0 ---
        dm.terminate()
        m = a.expect("error", timeout=15)
        T.check(m.error.code == pb.ERR_SHUTDOWN and m.error.fatal, "shutdown: %r" % m)
        rc = dm.wait(20)
        T.check(rc == 0, "tlcapd exit status %d after SIGTERM" % rc)
        a.close()
        tgt.close()
        print("PASS (events %d, snapshot seq %d, rows %d)" % (seen_events, last.seq, len(snap.rows)))
        return 0
    except (T.Failure, OSError) as e:
        print("FAIL: %s" % e)
        if dm is not None and dm.poll() is not None:
            print("tlcapd had exited with status %d" % dm.returncode)
        try:
            with open(os.path.join(tmp, "tlcapd.log"), "rb") as f:
                print(f.read().decode(errors="replace")[-3000:])
        except OSError:
            pass
        return 1
    finally:
        if dm is not None and dm.poll() is None:
            dm.terminate()
            try:
                dm.wait(15)
            except subprocess.TimeoutExpired:
                dm.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
