"""Who may read the HTTP port (SPEC 8, 9; docs/http.md "Access"):

- the token rule and the router read one path: every encoding of every protected path (a
  second percent-encoding, %2F, //, /./, .., mixed case) gets 401 without the token, and with
  it no path encoded twice answers with data (400);
- a target name holding '/' (an efl target, SOURCE/APP-PID) is reached percent-encoded;
- DNS rebinding: a Host that is not this daemon's gets 421; a live WebSocket whose Origin is
  another page's is refused; in headless Chromium a page of another origin (another port, and
  a name pointed at loopback as a rebinding attacker does) reads nothing;
- one peer address cannot take every connection of the HTTP, HTTPS or TLS subscriber port
  (max_per_address): another address still gets in;
- a certificate outside its dates starts with a warning naming them.

usage: test_http_access.py TLCAPD"""
import http.server
import json
import os
import resource
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
import cdp  # noqa: E402
import daemonlib as D  # noqa: E402
import fake_debugd  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
TOKEN = "door-token"


def write_token(d):
    p = os.path.join(d, "token")
    with open(p, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(p, 0o600)
    return p


def make_cert(d, name="cert", dates=None):
    """A self-signed EC certificate for localhost/127.0.0.1; dates=(start, end) as
    YYYYMMDDHHMMSSZ makes one with those validity dates (openssl ca -selfsign)."""
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + "-key.pem")
    if dates is None:
        subprocess.check_call(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                               "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out",
                               cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
                               "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return cert, key
    ca = os.path.join(d, name + "-ca")
    os.makedirs(ca, exist_ok=True)
    open(os.path.join(ca, "index.txt"), "w").close()
    with open(os.path.join(ca, "serial"), "w") as f:
        f.write("01\n")
    cnf = os.path.join(ca, "ca.cnf")
    with open(cnf, "w") as f:
        f.write("[ca]\ndefault_ca = c\n[c]\ndatabase = %s/index.txt\nnew_certs_dir = %s\n"
                "serial = %s/serial\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n"
                % (ca, ca, ca))
    csr = os.path.join(ca, "req.csr")
    subprocess.check_call(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", csr,
                           "-subj", "/CN=localhost"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.check_call(["openssl", "ca", "-batch", "-selfsign", "-keyfile", key, "-in", csr,
                           "-out", cert, "-startdate", dates[0], "-enddate", dates[1],
                           "-config", cnf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


_src = [1]


def next_src():
    """A fresh loopback source address (127.0.3.N): the token module's delay and the
    per-address cap count per address, so requests that must not meet either use their own."""
    _src[0] += 1
    return "127.0.3.%d" % (_src[0] % 250 + 2)


def request(hport, path, headers=None, src=None, tls=False, method="GET"):
    """(status, headers text, body) of one request on a fresh connection."""
    s = socket.create_connection(("127.0.0.1", hport), timeout=20,
                                 source_address=(src or next_src(), 0))
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s = ctx.wrap_socket(s, server_hostname="localhost")
    h = {"Host": "127.0.0.1:%d" % hport, "Connection": "close"}
    h.update(headers or {})
    req = "%s %s HTTP/1.1\r\n" % (method, path) + "".join(
        "%s: %s\r\n" % (k, v) for k, v in h.items() if v is not None) + "\r\n"
    s.sendall(req.encode("latin-1"))
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (ConnectionResetError, ssl.SSLError):
        pass
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    line = head.split(b"\r\n", 1)[0].split(b" ")
    status = int(line[1]) if len(line) > 1 and line[1].isdigit() else 0
    return status, head.decode("latin-1"), body


def feed(port, name="lab"):
    s = D.connect(port)
    s.sendall(b"TLCAP/1 target=%s format=bin11\n" % name.encode() + D.calls(20, handle=3))
    return s


# Each protected path, and the same path in every encoding a peer may try; lws decodes once,
# so %2561 arrives as %61: the router must not decode it again.
PROTECTED = ["/api/v1/targets", "/api/v1/targets/lab/stats", "/api/v1/targets/lab/stats?since=-1h",
             "/metrics", "/api/v1/live", "/api/v1/nosuch"]


def encodings(p):
    path, q = (p.split("?", 1) + [""])[:2]
    q = "?" + q if q else ""
    segs = path.split("/")[1:]
    first = segs[0]
    out = {
        "as is": path,
        "double-encoded first letter (%2561)": "/%%25%02x%s/%s" % (ord(first[0]), first[1:],
                                                                  "/".join(segs[1:])),
        "double-encoded, upper case (%256D)": "/%%25%02X%s/%s" % (ord(first[0]), first[1:],
                                                                 "/".join(segs[1:])),
        "encoded first letter (%61)": "/%%%02x%s/%s" % (ord(first[0]), first[1:],
                                                       "/".join(segs[1:])),
        "encoded slashes (%2F, %2f)": "/" + "%2F".join(segs[:2]) + ("%2f" + "/".join(segs[2:])
                                                                     if len(segs) > 2 else ""),
        "//": "//" + "//".join(segs),
        "/./": "/./" + "/./".join(segs),
        "..": "/x/../" + "/".join(segs),
        "encoded .. (%2e%2E)": "/y/%2e%2E/" + "/".join(segs),
        "upper case": path.upper(),
    }
    if len(segs) > 1:
        out["double-encoded slashes (%252F)"] = "/" + "%252F".join(segs)
    return {k: v.rstrip("/") + q for k, v in out.items()}


def test_token_every_encoding(d):
    port, hport = D.free_port(), D.free_port()
    tok = write_token(d)
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--token-file", tok],
                  http="127.0.0.1:%d" % hport)
    try:
        s = feed(port)
        dm.wait_stats(lambda st: D.by_name(st, "lab")["events"] == 40, what="events")
        auth = {"Authorization": "Bearer " + TOKEN}
        n = 0
        for p in PROTECTED:
            for what, e in encodings(p).items():
                st, _, body = request(hport, e)
                T.check(st == 401 and b"lab" not in body and b"tlcap_" not in body,
                        "%s (%s: %s) without the token: %d %r" % (p, what, e, st, body[:80]))
                st, _, body = request(hport, e, auth)
                if "double" in what:
                    T.eq(st, 400, "%s (%s: %s) with the token: encoded twice" % (p, what, e))
                n += 1
        # the same decoded path is authorized and routed: with the token, what lws decodes
        # once reaches the API
        for e in ("/%61pi/v1/targets", "/api%2Fv1%2ftargets", "//api/./v1/x/../targets"):
            st, _, body = request(hport, e, auth)
            T.check(st == 200 and b'"name": "lab"' in body, "%s with the token: %d" % (e, st))
        # the page's own files need none, however encoded
        for e in ("/", "/index.html", "/%69ndex.html", "/app.js", "/vendor/dygraph.min.js"):
            st, _, _ = request(hport, e)
            T.eq(st, 200, "%s without the token" % e)
        print("%d encodings of %d protected paths: 401 without the token" % (n, len(PROTECTED)))
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


class OneAppDebugd(fake_debugd.Server):
    """A stand-in for efl_debugd on a free port, one connection: one application, "app" with
    pid 42, whose EvLog/get answers carry calls; tlcapd names it lab/app-42."""

    connections = 1
    quiet = (EOFError, OSError)

    def conversation(self, c, k):
        ids, tim = {}, 1.0
        while True:
            cid, op, p = fake_debugd.read_packet(c)
            if op == 0:  # register: u64 cookie, names
                fake_debugd.answer_register(c, p, ids)
                continue
            name = {v: n for n, v in ids.items()}.get(op)
            if name == "Daemon/Client/register_observer":
                fake_debugd.send_packet(c, 0, ids["Daemon/Client/added"],
                                        struct.pack("<ii", 5, 42) + b"app\0")
            elif name == "EvLog/get":
                items = b""
                for _ in range(5):
                    items += T.evlog_item(tim, 0x7f01, "+work") + T.evlog_item(tim + 1e-4, 0x7f01,
                                                                             "-work")
                    tim += 1e-3
                fake_debugd.send_packet(c, cid, op, struct.pack("<I", 0) + items)


def test_target_name_with_slash(d):
    """SPEC 12: efl targets are SOURCE/APP-PID; the URL carries the '/' percent-encoded."""
    fake = OneAppDebugd()
    hport = D.free_port()
    conf = os.path.join(d, "tlcapd.ini")
    with open(conf, "w") as f:
        f.write("[efl lab]\npattern = *\npoll_ms = 50\ndebugd = 127.0.0.1:%d\n" % fake.port)
    dm = D.Daemon(TLCAPD, d, ["--config", conf], http="127.0.0.1:%d" % hport)
    try:
        dm.wait_stats(lambda st: any(t["name"] == "lab/app-42" and t["events"] > 0
                                     for t in st["targets"]), timeout=20, what="lab/app-42")
        st, _, body = request(hport, "/api/v1/targets/lab%2Fapp-42/stats")
        T.eq(st, 200, "lab%2Fapp-42's statistics: " + body[:200].decode(errors="replace"))
        T.eq(json.loads(body)["target"], "lab/app-42", "the document's target")
        st, _, body = request(hport, "/api/v1/targets/lab%2fapp-42/stats")
        T.eq(st, 200, "lower-case %2f")
        st, _, body = request(hport, "/api/v1/targets/lab%252Fapp-42/stats")
        T.eq(st, 400, "encoded twice")
        w = cdp.ws_connect("127.0.0.1", hport, "/api/v1/live")
        w.sendall(cdp.frame(b"target lab/app-42"))
        for _ in range(5):
            op, msg = cdp.recv_message(w)
            if b'"areas": {"target": "lab/app-42"' in msg:
                break
        T.check(b'"areas": {"target": "lab/app-42"' in msg, "live areas of lab/app-42")
        w.close()
        T.check(fake.error is None, "fake efl_debugd: %s" % fake.error)
    finally:
        rc, _ = dm.stop()
        fake.close()
    T.eq(rc, 0, "exit status")


def ws_handshake(hport, host, origin, path="/api/v1/live"):
    """The status line's code of a WebSocket handshake with these Host and Origin (0: the
    connection closed without one)."""
    s = socket.create_connection(("127.0.0.1", hport), timeout=10,
                                 source_address=(next_src(), 0))
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           % (path, host))
    if origin is not None:
        req += "Origin: %s\r\n" % origin
    s.sendall((req + "\r\n").encode())
    head = b""
    try:
        while b"\r\n\r\n" not in head:
            b = s.recv(4096)
            if not b:
                break
            head += b
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def test_host_and_origin(d):
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port,
                              "--http-hosts", "dash.example, lab1.example",
                              "--http-origins", "https://portal.example"],
                  http="127.0.0.1:%d" % hport)
    try:
        s = feed(port)
        dm.wait_stats(lambda st: D.by_name(st, "lab")["events"] == 40, what="events")
        own = "127.0.0.1:%d" % hport
        for host in ("evil.example", "evil.example:%d" % hport, "127.0.0.1.evil.example",
                     "dash.example.evil", "[::2]:%d" % hport, "10.1.2.3"):
            for p in ("/", "/api/v1/targets", "/metrics"):
                st, _, body = request(hport, p, {"Host": host})
                T.check(st == 421 and b"lab" not in body and b"tlcap_" not in body,
                        "Host %s, %s: %d %r" % (host, p, st, body[:60]))
        for host in (own, "localhost:%d" % hport, "LocalHost", "[::1]:%d" % hport,
                     "[::ffff:127.0.0.1]:%d" % hport, "127.9.9.9", "dash.example:%d" % hport,
                     "LAB1.example.", None):
            st, _, body = request(hport, "/api/v1/targets", {"Host": host})
            T.check(st == 200 and b'"name": "lab"' in body, "Host %s: %d" % (host, st))
        # the live WebSocket: its own origin, a configured one, or none (not a browser)
        for host, origin, ok in ((own, "http://" + own, True), (own, None, True),
                                 (own, "https://portal.example", True),
                                 ("localhost:%d" % hport, "http://localhost:%d" % hport, True),
                                 (own, "http://evil.example", False),
                                 (own, "http://127.0.0.1:%d" % (hport + 1), False),
                                 (own, "https://" + own, False), (own, "null", False),
                                 ("evil.example:%d" % hport, "http://evil.example:%d" % hport,
                                  False)):
            code = ws_handshake(hport, host, origin)
            T.check((code == 101) == ok, "WebSocket Host %s Origin %s: %d" % (host, origin, code))
        st, _, body = request(hport, "/metrics")
        T.check(b"tlcap_http_misdirected_total " in body, "misdirected counted")
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


class AttackerPage:
    """Another origin: a page on its own port that tries to read the dashboard's data (its
    live WebSocket, its API) and writes what it got into the page's title."""

    def __init__(self, hport):
        page = ("<!doctype html><title>pending</title><script>\n"
                "const got = {ws: [], wsState: 'none', api: 'none', rebound: 'none'};\n"
                "function done() { document.title = 'done'; window.got = got; }\n"
                "try {\n"
                "  const w = new WebSocket('ws://127.0.0.1:%d/api/v1/live', 'tlcap-live');\n"
                "  w.onopen = () => { got.wsState = 'open'; w.send('target lab'); };\n"
                "  w.onmessage = (e) => { got.ws.push(String(e.data).slice(0, 200)); };\n"
                "  w.onerror = () => { got.wsState = 'error'; };\n"
                "  w.onclose = () => { if (got.wsState !== 'open') got.wsState = 'refused'; };\n"
                "} catch (e) { got.wsState = 'exception ' + e; }\n"
                "fetch('http://127.0.0.1:%d/api/v1/targets').then(r => r.text())\n"
                "  .then(t => { got.api = t.slice(0, 200); }, e => { got.api = 'blocked'; });\n"
                "fetch('/api/v1/targets').then(r => r.status + ' ' + r.statusText)\n"
                "  .then(t => r2(t), e => r2('failed'));\n"
                "function r2(t) { got.rebound = t; setTimeout(done, 3000); }\n"
                "</script>" % (hport, hport)).encode()

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *a):
                pass

        self.srv = http.server.HTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        self.page = page
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def test_other_origin_in_chromium(d):
    """A page the user opens elsewhere: on another port of this host, and served under a name
    that resolves to loopback (DNS rebinding: the page and the dashboard then share an origin
    as far as the browser knows), it must read nothing of the dashboard's data."""
    # Chromium's own directory (profile, log) apart: its helper processes may still write
    # into the profile for a moment after it exits
    bd = tempfile.mkdtemp(prefix="tlc-chromium.")
    try:
        b = cdp.Browser(bd, ["--host-resolver-rules=MAP evil.example 127.0.0.1"])
    except FileNotFoundError:
        shutil.rmtree(bd, ignore_errors=True)
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port],
                  http="127.0.0.1:%d" % hport)
    att = AttackerPage(hport)
    try:
        s = feed(port, "secretname")
        dm.wait_stats(lambda st: D.by_name(st, "secretname")["events"] == 40, what="events")
        # another port of this host
        b.call("Page.navigate", url="http://127.0.0.1:%d/" % att.port)
        D.wait_until(lambda: b.eval("document.title") == "done", 20, "the page's attempts")
        got = b.eval("window.got")
        print("another port:", got)
        T.check(not any("secretname" in m for m in got["ws"]) and got["wsState"] != "open",
                "the live WebSocket refused to another origin: %r" % got)
        T.check("secretname" not in got["api"], "the API not readable: %r" % got["api"])
        # DNS rebinding: the dashboard's own port under the attacker's name
        b.call("Page.navigate", url="http://evil.example:%d/" % hport)
        D.wait_until(lambda: b.eval("document.readyState") == "complete", 20, "rebound page")
        text = b.eval("document.documentElement.outerHTML")
        T.check("secretname" not in text and "421" in text,
                "the rebound name gets 421: %r" % text[:200])
        r = b.eval("fetch('/api/v1/targets').then(r => r.status + ' ' + "
                   "(r.headers.get('content-type') || '')).catch(e => 'failed ' + e)")
        T.check(r.startswith("421"), "the rebound page's API request: %r" % r)
        r = b.eval("new Promise(res => { const w = new WebSocket('ws://evil.example:%d/api/v1/"
                   "live'); let m = []; w.onmessage = e => m.push(String(e.data));"
                   " w.onclose = () => res('closed ' + m.join('')); w.onopen = () => "
                   "w.send('target secretname'); setTimeout(() => res('open ' + m.join('')),"
                   " 3000); })" % hport)
        T.check("secretname" not in r and not r.startswith("open"),
                "the rebound page's WebSocket: %r" % r[:200])
        # the dashboard itself, on its own origin, still works
        b.call("Page.navigate", url="http://127.0.0.1:%d/" % hport)
        D.wait_until(lambda: b.eval("document.querySelector('.card[data-target=\"secretname\"]')"
                                    " !== null"), 20, "the dashboard lists the target")
        s.close()
    finally:
        b.close()
        shutil.rmtree(bd, ignore_errors=True)
        att.close()
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def hold(port, n, src, payload=b"", tls_hello=False):
    """n connections from src that send payload (or the start of a TLS ClientHello) and then
    nothing; those the daemon takes stay open."""
    out = []
    for _ in range(n):
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(src, 0))
        except OSError:
            break
        if tls_hello:
            c.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
        elif payload:
            c.sendall(payload)
        out.append(c)
    return out


def open_count(conns, timeout=1.0):
    """How many of conns the daemon keeps open (those it refused read EOF or a reset)."""
    alive = 0
    for c in conns:
        c.settimeout(0.02)
        try:
            if c.recv(1, socket.MSG_PEEK):
                alive += 1
        except socket.timeout:
            alive += 1
        except OSError:
            pass
    return alive


def test_per_address_cap(d):
    if shutil.which("openssl") is None:
        print("SKIP: openssl not installed")
        sys.exit(T.SKIP)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 8192:  # the flood below holds up to 3,700 sockets on this side
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    tok = write_token(d)
    cert, key = make_cert(d)
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--token-file", tok,
                              "--tls-cert", cert, "--tls-key", key],
                  http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % sport)
    flood = []
    try:
        s = feed(port)
        dm.wait_stats(lambda st: D.by_name(st, "lab")["events"] == 40, what="events")
        auth = {"Authorization": "Bearer " + TOKEN}
        # HTTPS: 3,000 idle connections and 300 slowloris ones and 400 half-open handshakes
        # from 127.0.0.1 - more than the 64 connections of the port
        room = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 1000  # 700 below, and a reserve
        flood += hold(hport, max(100, min(3000, room)), "127.0.0.1")
        flood += hold(hport, 300, "127.0.0.1", b"GET / HTTP/1.1\r\nHost: x\r\n")
        flood += hold(hport, 400, "127.0.0.1", tls_hello=True)
        kept = D.wait_until(lambda: open_count(flood) <= 16 and open_count(flood) or None, 30,
                            "the flooder keeps at most 16 connections")
        print("HTTPS: the flooder holds %d of its %d connections" % (kept, len(flood)))
        for other in ("127.0.0.2", "127.0.0.3"):
            st, _, body = request(hport, "/api/v1/targets", auth, src=other, tls=True)
            T.check(st == 200 and b'"name": "lab"' in body,
                    "another address (%s) gets in during the flood: %d" % (other, st))
        st, _, body = request(hport, "/metrics", auth, src="127.0.0.4", tls=True)
        T.check(b"tlcap_http_refused_address_total" in body, "refusals counted")
        for c in flood:
            c.close()
        flood = []
        # the flooder's slots come back as its connections close (one after the other: more
        # than 16 in all)
        D.wait_until(lambda: request(hport, "/metrics", auth, src="127.0.0.1", tls=True)[0] == 200,
                     20, "the flooder's address served again once its connections closed")
        for i in range(40):
            st, _, _ = request(hport, "/metrics", auth, src="127.0.0.1", tls=True)
            T.eq(st, 200, "request %d from one address, one connection at a time" % i)
        # the subscriber port (TLS, cap 256): the flooder holds 16 subscribers, then tries 400
        # half-open handshakes more; another address is still served
        ctx = ssl.create_default_context(cafile=cert)

        def subscriber(src):
            c = ctx.wrap_socket(socket.create_connection(("127.0.0.1", sport), timeout=10,
                                                         source_address=(src, 0)),
                                server_hostname="localhost")
            c.sendall(hello_frame(TOKEN.encode()))
            c.settimeout(10)
            return c, c.recv(4096)
        for _ in range(16):
            c, got = subscriber("127.0.0.1")
            T.check(got and b"too many" not in got, "the flooder's first 16: %r" % got)
            flood.append(c)
        flood += hold(sport, 400, "127.0.0.1", tls_hello=True)
        c, got = subscriber("127.0.0.2")
        T.check(got and b"too many" not in got, "another address's Hello answered: %r" % got)
        c.close()
        for c in flood:
            c.close()
        flood = []

        def served(src):
            try:
                c, got = subscriber(src)
                c.close()
                return got and b"too many" not in got
            except (ssl.SSLError, OSError):
                return False
        D.wait_until(lambda: served("127.0.0.1"), 30, "the flooder's address served again")
        for i in range(40):
            T.check(served("127.0.0.1"), "subscriber %d from one address, one at a time" % i)
        # (the refusal's error frame is sent once a TLS handshake is done; a half-open one only
        # sees the close) the log names the cap
        D.wait_until(lambda: "refused: too many connections from this address (max 16)"
                     in dm.log(), 10, "the refusals logged")
        s.close()
    finally:
        for c in flood:
            c.close()
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def hello_frame(token):
    """ClientMessage{request_id=1, hello{protocol_version=1, token}} (proto/tlcap.proto)."""
    h = b"\x08\x01" + b"\x22" + T.varint(len(token)) + token
    m = b"\x08\x01" + b"\x52" + T.varint(len(h)) + h
    return T.varint(len(m)) + m


def test_certificate_dates(d):
    if shutil.which("openssl") is None:
        print("SKIP: openssl not installed")
        sys.exit(T.SKIP)
    tok = write_token(d)
    for name, dates, what in (("old", ("20200101000000Z", "20200201000000Z"), "has expired"),
                              ("future", ("20400101000000Z", "20410101000000Z"),
                               "is not valid yet")):
        cert, key = make_cert(d, name, dates)
        sub = os.path.join(d, name)
        os.makedirs(sub, exist_ok=True)
        dm = D.Daemon(TLCAPD, sub, ["--token-file", tok, "--tls-cert", cert, "--tls-key", key],
                      serve="127.0.0.1:%d" % D.free_port())
        try:
            log = dm.log()
        finally:
            rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
        want = "certificate %s %s: valid from %s-%s-%sT00:00:00Z to %s-%s-%sT00:00:00Z" % (
            cert, what, dates[0][:4], dates[0][4:6], dates[0][6:8], dates[1][:4], dates[1][4:6],
            dates[1][6:8])
        T.check(want in log, "start-up warning %r in the log:\n%s" % (want, log[-800:]))
    cert, key = make_cert(d, "good")
    dm = D.Daemon(TLCAPD, os.path.join(d, "old"), ["--token-file", tok, "--tls-cert", cert,
                                                   "--tls-key", key],
                  serve="127.0.0.1:%d" % D.free_port())
    try:
        log = dm.log()
    finally:
        dm.stop()
    T.check("valid from" not in log, "no warning for a valid certificate")


ALL = [test_token_every_encoding, test_target_name_with_slash, test_host_and_origin,
       test_other_origin_in_chromium, test_per_address_cap, test_certificate_dates]
ONLY = os.environ.get("TLC_TEST")  # one test by name, when debugging
T.main([t for t in ALL if not ONLY or t.__name__ == ONLY])
