"""A small Chrome DevTools Protocol client over a WebSocket (standard library only), for the
dashboard test: starts headless Chromium, drives one page, records console errors.

Also the WebSocket framing (RFC 6455) the HTTP hostile test uses for its bad frames."""
import base64
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import time
import urllib.request


def read_head(s, what="an answer"):
    """An HTTP answer's head (through its blank line), read a byte at a time so that nothing
    after it (a body, WebSocket frames) is consumed; OSError when s closes first."""
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            raise OSError("closed during %s: %r" % (what, head))
        head += b
    return head


def ws_connect(host, port, path, protocol=None, timeout=10.0):
    """Opens a WebSocket (client side); returns the socket after a 101."""
    s = socket.create_connection((host, port), timeout=timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (path, host, port, key))
    if protocol:
        req += "Sec-WebSocket-Protocol: %s\r\n" % protocol
    s.sendall((req + "\r\n").encode())
    head = read_head(s, "the WebSocket handshake")
    if not head.startswith(b"HTTP/1.1 101"):
        raise OSError("WebSocket refused: %r" % head.split(b"\r\n")[0])
    return s


def frame(payload, opcode=1, mask=True, fin=True, rsv=0):
    """One client frame (masked unless told otherwise)."""
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload)
    if n < 126:
        hdr = struct.pack("!BB", b0, (0x80 if mask else 0) | n)
    elif n < 65536:
        hdr = struct.pack("!BBH", b0, (0x80 if mask else 0) | 126, n)
    else:
        hdr = struct.pack("!BBQ", b0, (0x80 if mask else 0) | 127, n)
    if not mask:
        return hdr + payload
    k = os.urandom(4)
    return hdr + k + bytes(c ^ k[i % 4] for i, c in enumerate(payload))


def recv_exact(s, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = s.recv_into(view[got:])
        if not k:
            raise EOFError("WebSocket closed")
        got += k
    return bytes(buf)


def recv_message(s):
    """(opcode, payload) of the next whole message (fragments joined; pings answered)."""
    data, op0 = b"", None
    while True:
        b0, b1 = recv_exact(s, 2)
        op, n = b0 & 0x0F, b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", recv_exact(s, 2))[0]
        elif n == 127:
            n = struct.unpack("!Q", recv_exact(s, 8))[0]
        if b1 & 0x80:
            k = recv_exact(s, 4)
            p = bytes(c ^ k[i % 4] for i, c in enumerate(recv_exact(s, n)))
        else:
            p = recv_exact(s, n)
        if op == 9:  # ping
            s.sendall(frame(p, opcode=10))
            continue
        if op in (1, 2, 8):
            op0 = op
        data += p
        if b0 & 0x80:
            return op0, data


class Browser:
    """Headless Chromium with one page driven over CDP."""

    def __init__(self, d, args=()):
        """args: more Chromium switches (e.g. --host-resolver-rules to point a name at
        loopback, as DNS rebinding does)."""
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise FileNotFoundError("chromium")
        self.port = free_port()
        self.log = open(os.path.join(d, "chromium.log"), "wb")
        self.p = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--mute-audio",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=%d" % self.port,
             "--user-data-dir=" + os.path.join(d, "chromium-profile"),
             "--window-size=1400,1000"] + list(args) + ["about:blank"],
            stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        pages = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % self.port,
                                            timeout=2) as r:
                    pages = [p for p in json.load(r) if p.get("type") == "page"]
                if pages:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        if not pages:
            self.close()
            raise OSError("Chromium's DevTools did not come up")
        url = pages[0]["webSocketDebuggerUrl"]
        hostport, path = url[len("ws://"):].split("/", 1)
        self.ws = ws_connect("127.0.0.1", int(hostport.rsplit(":", 1)[1]), "/" + path)
        self.ws.settimeout(30)
        self.next_id = 0
        self.events = []
        self.errors = []  # console errors, uncaught exceptions, error log entries
        self.prompt_answer = None  # what window.prompt() gets (None: dismissed)
        self.prompts = []  # the prompts' messages, in order
        for m in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(m)

    def _note(self, ev):
        m, p = ev.get("method"), ev.get("params", {})
        if m == "Page.javascriptDialogOpening":  # answer at once: the page waits for it
            self.prompts.append(p.get("message", ""))
            self.next_id += 1
            ans = self.prompt_answer
            if isinstance(ans, list):  # answers in turn, the last one for every later prompt
                ans = ans.pop(0) if len(ans) > 1 else ans[0]
            params = {"accept": ans is not None}
            if ans is not None:
                params["promptText"] = ans
            self.ws.sendall(frame(json.dumps({"id": self.next_id, "method":
                                              "Page.handleJavaScriptDialog",
                                              "params": params}).encode()))
        if m == "Runtime.exceptionThrown":
            self.errors.append(("exception", json.dumps(p.get("exceptionDetails"))[:500]))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append(("console", json.dumps(p.get("args"))[:500]))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.errors.append((e.get("source"), e.get("text", "")[:500]))
        self.events.append(ev)

    def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.sendall(frame(json.dumps({"id": mid, "method": method,
                                          "params": params}).encode()))
        while True:
            op, data = recv_message(self.ws)
            if op == 8:
                raise EOFError("DevTools closed the connection")
            msg = json.loads(data)
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            self._note(msg)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("evaluate %r: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def pump(self):
        """Reads pending events (console errors) without waiting long."""
        while select.select([self.ws], [], [], 0.05)[0]:
            op, data = recv_message(self.ws)  # a whole message: DevTools sends them at once
            self._note(json.loads(data))

    def viewport(self, width, height):
        """Sizes the page's viewport as a window of width x height CSS pixels would."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", format="png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def close(self):
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
        self.log.close()


def free_port():
    import tlctest

    return tlctest.free_port()
