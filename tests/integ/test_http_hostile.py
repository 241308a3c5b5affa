"""Hostile peers on tlcapd's HTTP port (SPEC 7, 9; RELIABILITY's hostile-peer rules): oversized
headers, slowloris, bad WebSocket frames and messages, 1,000 connections at once. None may
crash the daemon, grow its memory or fds without bound, or harm ingest: a target streams
throughout and every one of its records must be counted at the end."""
import faulthandler
import http.client
import os
import resource
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
MAXC = 64


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def metric(hport, name):
    """A /metrics series, asked from 127.0.0.2: the hostile peers below use other addresses,
    and each address has at most max_per_address (16) connections."""
    c = http.client.HTTPConnection("127.0.0.1", hport, timeout=20,
                                   source_address=("127.0.0.2", 0))
    try:
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split(" ")[1])
    finally:
        c.close()
    return None


def closed_by_peer(s, timeout):
    """True when the daemon closes s (EOF or reset) within timeout (data read is dropped)."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            if not s.recv(65536):
                return True
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


class Feeder(threading.Thread):
    """A target that sends calls in small batches for the whole test."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.s = D.connect(port)
        self.s.sendall(b"TLCAP/1 target=steady format=bin11\n")
        self.stop = threading.Event()
        self.records = 0
        self.t = 1000

    def run(self):
        while not self.stop.is_set():
            b = D.calls(50, t0=self.t, step=100)
            self.t += 50 * 100
            self.s.sendall(b)
            self.records += len(b) // 24
            time.sleep(0.01)


def test_hostile(d):
    faulthandler.dump_traceback_later(100, exit=True)  # a hang shows where, then fails
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port,
                              "--http-max-connections", str(MAXC)],
                  http="127.0.0.1:%d" % hport)
    feeder = Feeder(port)
    feeder.start()
    try:
        T.check(metric(hport, "tlcap_http_connections") is not None, "metrics answer")
        rss0, fd0 = D.proc_status_kib(dm.p.pid, "VmRSS", 0), nfds(dm.p.pid)

        # (a) oversized headers: refused, the connection closed
        s = socket.create_connection(("127.0.0.1", hport))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n")
        try:
            got = s.recv(200)
        except ConnectionResetError:
            got = b""
        T.check(got == b"" or got.startswith(b"HTTP/1.1 4"), "oversized header: %r" % got[:60])
        s.close()

        # (b) slowloris: header bytes trickling in; the daemon closes them (lws's header
        # timeouts), and a normal request still gets through meanwhile
        slow = []
        for k in range(MAXC // 2):  # 8 per address: all under max_per_address, all served
            c = socket.create_connection(("127.0.0.1", hport),
                                         source_address=("127.0.4.%d" % (k // 8 + 1), 0))
            c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            slow.append(c)
        t0 = time.monotonic()
        alive = list(slow)
        while alive and time.monotonic() - t0 < 40:
            nxt = []
            for c in alive:
                try:
                    c.sendall(b"X")
                    nxt.append(c)
                except OSError:
                    pass
            alive = nxt
            T.check(metric(hport, "tlcap_http_connections") is not None,
                    "a normal request is served during the slowloris")
            time.sleep(0.5)
        T.eq(len(alive), 0, "every slowloris connection closed by the daemon within 40 s")
        print("slowloris: all %d closed after %.1f s" % (len(slow), time.monotonic() - t0))
        for c in slow:
            c.close()

        # (c) bad WebSocket frames and messages: each closes its own connection only
        cases = [
            # (lws 4.1 reads an unmasked client frame instead of refusing it; its content
            # is then judged like any other: a bad one closes)
            ("unmasked bad frame", cdp.frame(b"nonsense", mask=False)),
            ("reserved opcode", cdp.frame(b"x", opcode=3)),
            ("reserved bits", cdp.frame(b"overview", rsv=4)),
            ("2^63 length", b"\x81\xff\x7f\xff\xff\xff\xff\xff\xff\xff" + os.urandom(4) +
             b"target " * 20),
            ("binary message", cdp.frame(b"\x00\x01", opcode=2)),
            ("oversized message", cdp.frame(b"target " + b"x" * 5000)),
            ("unknown command", cdp.frame(b"rm -rf /")),
            ("fragment without end", cdp.frame(b"tar", fin=False) + cdp.frame(b"get", opcode=1)),
        ]
        for what, payload in cases:
            w = cdp.ws_connect("127.0.0.1", hport, "/api/v1/live", "tlcap-live")
            w.sendall(payload)
            T.check(closed_by_peer(w, 10), "bad WebSocket input (%s) closes it" % what)
            print("closed: " + what)
            w.close()
        try:
            cdp.ws_connect("127.0.0.1", hport, "/elsewhere")
            T.check(False, "a WebSocket on another path is refused")
        except OSError:
            pass
        w = cdp.ws_connect("127.0.0.1", hport, "/api/v1/live")  # no subprotocol: served too
        w.sendall(cdp.frame(b"target steady"))
        for _ in range(5):  # the first may be the overview sent on connect
            op, msg = cdp.recv_message(w)
            T.eq(op, 1, "live message is text")
            if b'"areas": {"target": "steady"' in msg:
                break
        T.check(b'"areas": {"target": "steady"' in msg, "live message with areas")
        # a live socket that never reads: its updates coalesce, nothing queues
        w.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        time.sleep(3)

        # (d) 1,000 connections at once from 100 addresses (10 each: under max_per_address,
        # so the port's own cap is what refuses): at most MAXC served, fds bounded
        conns = []
        for k in range(1000):
            try:
                conns.append(socket.create_connection(
                    ("127.0.0.1", hport), timeout=5, source_address=("127.0.5.%d" % (k % 100 + 1),
                                                                     0)))
            except OSError:
                break
        T.check(len(conns) >= 900, "opened %d connections" % len(conns))
        peak = 0
        for _ in range(20):  # while they are open: the daemon's fds stay bounded
            peak = max(peak, nfds(dm.p.pid))
            time.sleep(0.1)
        T.check(peak <= fd0 + MAXC + 40, "daemon fds bounded: %d (before %d)" % (peak, fd0))
        for c in conns:
            c.close()
        w.close()
        D.wait_until(lambda: (metric(hport, "tlcap_http_refused_total") or 0) >= 500, 30,
                     "connections past the cap refused (counted)", step=0.2)
        D.wait_until(lambda: metric(hport, "tlcap_http_connections") == 1.0, 20,
                     "connections back to the one asking")
        print("1000 connections: fd peak %d (before %d), refused %d" %
              (peak, fd0, metric(hport, "tlcap_http_refused_total")))

        rss1 = D.proc_status_kib(dm.p.pid, "VmRSS", 0)
        T.check(rss1 - rss0 < 64 * 1024, "memory bounded: RSS %d -> %d KiB" % (rss0, rss1))
        feeder.stop.set()
        feeder.join(10)
        dm.wait_stats(lambda st: D.by_name(st, "steady")["records"] == feeder.records, 20,
                      "every ingest record counted (%d)" % feeder.records)
        feeder.s.close()
    finally:
        feeder.stop.set()
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status (no handle left open)")


T.main([test_hostile])
