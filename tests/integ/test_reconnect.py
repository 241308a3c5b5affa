"""Long-lived clients outlive a daemon restart (SPEC 8): `tlcap watch` over TLS with a token,
and `tlcap top` in tmux, each across a SIGTERM + restart and a SIGKILL + restart of tlcapd on
the same port. They go on (new snapshots of the new daemon, a target fed again after each
restart) and say so: watch prints a {"reconnected": {...}} JSON line naming both daemon
instances (restarted: true), top shows a "reconnected ... the daemon restarted" status line.
A one-shot command (`tlcap targets`) against the stopped daemon fails at once (exit 1).

Waits poll the client's output or the tmux pane with deadlines; the daemon's readiness is its
READY=1 notification.

usage: test_reconnect.py TLCAPD TLCAP     Exit 0 pass, 1 fail, 77 skip (openssl or tmux missing).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]


def feed(ping, n):
    """Target `board`: n activations of area 0 (100 ns each)."""
    tgt = D.connect(ping)
    recs = b""
    for i in range(n):
        recs += T.bin11(0, 3, 0, 0, i * 1000) + T.bin11(0, 0, 0, 0, i * 1000 + 100)
    tgt.sendall(b"TLCAP/1 target=board format=bin11\n" + recs)
    return tgt


class Lines:
    """A child's stdout read line by line without blocking (a pipe made non-blocking)."""

    def __init__(self, p):
        self.p = p
        os.set_blocking(p.stdout.fileno(), False)
        self.buf = b""
        self.lines = []

    def pump(self):
        while True:
            try:
                b = os.read(self.p.stdout.fileno(), 65536)
            except BlockingIOError:
                break
            if not b:
                break
            self.buf += b
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self.lines.append(line.decode(errors="replace"))
        return self.lines

    def wait(self, pred, what, after=0, timeout=20.0):
        def f():
            for i, l in enumerate(self.pump()[after:], after):
                if pred(l):
                    return (i, l)
            return None
        try:
            return D.wait_until(f, timeout, what, step=0.02)
        except T.Failure as e:
            raise T.Failure("%s; lines: %r" % (e, self.lines[-6:]))


def events_of(line):
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc.get("counters", {}).get("events") if isinstance(doc, dict) else None


def test_watch(d):
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.check_call(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out",
                           cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
                           "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tok = os.path.join(d, "tok")
    with open(tok, "wb") as f:
        f.write(b"watch-token\n")
    os.chmod(tok, 0o600)
    serve, ping = D.free_port(), D.free_port()
    args = ["--listen", "ing=bin11@127.0.0.1:%d" % ping, "--token-file", tok, "--tls-cert", cert,
            "--tls-key", key]
    addr = "tls://localhost:%d" % serve
    os.mkdir(os.path.join(d, "a"))
    dm = D.Daemon(TLCAPD, os.path.join(d, "a"), args, serve="127.0.0.1:%d" % serve)
    w = subprocess.Popen([TLCAP, "--connect", addr, "--ca", cert, "--token-file", tok, "watch",
                          "board", "--interval", "100", "--wait"], stdout=subprocess.PIPE,
                         stderr=open(os.path.join(d, "watch.err"), "wb"))
    out = Lines(w)
    try:
        tgt = feed(ping, 3)
        i, _ = out.wait(lambda l: events_of(l) == 6, "first daemon's snapshot")
        tgt.close()
        iids = []
        for n, how in enumerate(("SIGTERM", "SIGKILL")):
            if how == "SIGTERM":
                rc, _ = dm.stop()
                T.eq(rc, 0, "exit status after SIGTERM")
            else:
                dm.kill()
            rc, _, err = T.run([TLCAP, "--connect", addr, "--ca", cert, "--token-file", tok,
                                "targets"], timeout=20)
            T.check(rc == 1 and "cannot connect" in err, "one-shot while down: %d %s" % (rc, err))
            sub = os.path.join(d, "r%d" % n)
            os.mkdir(sub)
            dm = D.Daemon(TLCAPD, sub, args, serve="127.0.0.1:%d" % serve)
            i, l = out.wait(lambda l: l.startswith('{"reconnected"'), "reconnected line after " +
                            how, after=i + 1)
            rec = json.loads(l)["reconnected"]
            T.check(rec["restarted"] is True and rec["instance_id"] != rec["previous_instance_id"]
                    and rec["address"] == addr, "reconnected after %s: %r" % (how, rec))
            iids.append(rec["instance_id"])
            tgt = feed(ping, 4 + n)
            i, _ = out.wait(lambda l: events_of(l) == 2 * (4 + n),
                            "a snapshot of the restarted daemon after " + how, after=i + 1)
            tgt.close()
        T.check(w.poll() is None, "watch exited (status %r)" % w.poll())
        T.check(iids[0] != iids[1], "the two restarts: the same instance id %r" % iids)
    finally:
        w.send_signal(signal.SIGINT)
        try:
            w.wait(10)
        except subprocess.TimeoutExpired:
            w.kill()
        dm.kill()
    with open(os.path.join(d, "watch.err"), "rb") as f:
        err = f.read().decode(errors="replace")
    T.check("connection lost" in err and "the daemon restarted" in err, "watch stderr:\n" + err)
    T.eq(w.returncode, 0, "watch exit status after SIGINT")


def test_top(d):
    tmux = shutil.which("tmux")
    if tmux is None:
        print("SKIP: tmux not installed")
        sys.exit(T.SKIP)
    sock = os.path.join(d, "tmux.sock")

    def tm(*args, check=True):
        return subprocess.run([tmux, "-S", sock] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=20, check=check)

    def screen():
        return tm("capture-pane", "-p", "-t", "top", check=False).stdout.decode(errors="replace")

    def wait_screen(pred, what, timeout=20.0):
        try:
            return D.wait_until(lambda: (lambda x: x if pred(x) else None)(screen()), timeout,
                                what, step=0.05)
        except T.Failure as e:
            raise T.Failure("%s\n--- screen ---\n%s" % (e, screen()))

    serve, ping = D.free_port(), D.free_port()
    args = ["--listen", "ing=bin11@127.0.0.1:%d" % ping]
    os.mkdir(os.path.join(d, "a"))
    dm = D.Daemon(TLCAPD, os.path.join(d, "a"), args, serve="127.0.0.1:%d" % serve)
    try:
        tgt = feed(ping, 3)
        cmd = "%s --connect 127.0.0.1:%d top board --interval 100 --wait" % (TLCAP, serve)
        tm("-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "160", "-y", "30",
           "env TERM=xterm " + cmd + "; echo EXITED $?; sleep 30")
        wait_screen(lambda s: "target board" in s and "events 6 " in s, "top before restarts")
        tgt.close()
        for n, how in enumerate(("SIGTERM", "SIGKILL")):
            if how == "SIGTERM":
                dm.stop()
            else:
                dm.kill()
            wait_screen(lambda s: "DISCONNECTED" in s and "reconnecting" in s,
                        "top says the link is down after " + how)
            sub = os.path.join(d, "r%d" % n)
            os.mkdir(sub)
            dm = D.Daemon(TLCAPD, sub, args, serve="127.0.0.1:%d" % serve)
            tgt = feed(ping, 4 + n)
            want = "events %d " % (2 * (4 + n))
            wait_screen(lambda s: "reconnected at" in s and "the daemon restarted" in s and
                        want in s, "top goes on after " + how)
            tgt.close()
        tm("send-keys", "-t", "top", "q")
        wait_screen(lambda s: "EXITED 0" in s, "q quits with status 0")
    finally:
        subprocess.run([tmux, "-S", sock, "kill-server"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=20)
        dm.kill()


if __name__ == "__main__":
    if shutil.which("openssl") is None:
        print("SKIP: openssl not installed (apt-get install openssl)")
        sys.exit(T.SKIP)
    T.main([test_watch, test_top])
