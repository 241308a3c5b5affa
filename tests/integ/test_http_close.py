#!/usr/bin/env python3
"""Shutdown with the HTTP port on closes every descriptor once (docs/http.md, "Shutdown").

libwebsockets 4.1 closes its event pipe twice when its context is destroyed on a foreign loop;
in between, a file another thread had just opened under that number (the stats dump, a
checkpoint's directory, a segment being sealed: all written at shutdown) was closed behind its
back, and CI once read an empty stats dump. tlcapd runs here under strace with storage on, a
target that sent records, a live WebSocket and a keep-alive HTTP connection open; at SIGTERM:

- no close(2) of any of its threads fails with EBADF (the second close of a number nobody
  holds, or the close of a file after someone else closed it);
- the stats dump at exit is whole JSON and counts every record sent;
- the exit status is 0.

Skips (77) when strace is missing or cannot trace (a container without ptrace).

usage: test_http_close.py TLCAPD"""
import os
import re
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = os.path.abspath(sys.argv[1])
ROUNDS = 3


def strace_usable():
    strace = shutil.which("strace")
    if strace is None:
        return None, "strace is not installed (scripts/install-deps installs it)"
    r = subprocess.run([strace, "-f", "-o", os.devnull, "true"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        return None, "strace cannot trace here: " + r.stderr.decode(errors="replace").strip()
    return strace, None


def wrapper(d, strace, out):
    """A script that execs tlcapd under strace -D (the tracee keeps the pid, and the signals
    the harness sends reach tlcapd itself)."""
    p = os.path.join(d, "tlcapd-traced")
    with open(p, "w") as f:
        f.write("#!/bin/sh\nexec %s -D -f -qq -e trace=close -e signal=none -o %s %s \"$@\"\n"
                % (strace, out, TLCAPD))
    os.chmod(p, 0o755)
    return p


def keepalive(hport):
    """An HTTP/1.1 connection that got one answer and stays open."""
    s = socket.create_connection(("127.0.0.1", hport), timeout=20)
    s.sendall(b"GET /api/v1/targets HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % hport)
    try:
        got = cdp.read_head(s, "the keep-alive connection's answer")
    except OSError as e:
        raise T.Failure(str(e))
    T.check(got.startswith(b"HTTP/1.1 200"), "keep-alive answer: %r" % got[:80])
    return s


def test_shutdown_closes_each_descriptor_once(d):
    strace, _ = strace_usable()
    for r in range(ROUNDS):
        sub = os.path.join(d, "r%d" % r)
        os.makedirs(sub)
        trace = os.path.join(sub, "close.trace")
        port, hport = D.free_port(), D.free_port()
        # LeakSanitizer stops the world with ptrace, which a traced process cannot: the other
        # tests look for leaks
        asan = ":".join(o for o in (os.environ.get("ASAN_OPTIONS"), "detect_leaks=0") if o)
        dm = D.Daemon(wrapper(sub, strace, trace), sub,
                      ["--listen", "in=bin11@127.0.0.1:%d" % port], store=True,
                      http="127.0.0.1:%d" % hport, env={"ASAN_OPTIONS": asan})
        conns = []
        try:
            s = D.connect(port)
            s.sendall(b"TLCAP/1 target=lab format=bin11\n" + D.calls(500, handle=3))
            conns.append(s)
            dm.wait_stats(lambda st: D.by_name(st, "lab")["events"] == 1000, timeout=30,
                          what="1,000 events of lab")
            w = cdp.ws_connect("127.0.0.1", hport, "/api/v1/live")
            w.sendall(cdp.frame(b"target lab"))
            cdp.recv_message(w)
            conns.append(w)
            conns.append(keepalive(hport))
        finally:
            rc, st = dm.stop(timeout=60)
            for c in conns:
                c.close()
        T.eq(rc, 0, "round %d: exit status" % r)
        T.check(st is not None, "round %d: a stats dump at exit" % r)
        T.eq(D.by_name(st, "lab")["events"], 1000, "round %d: the dump's events of lab" % r)
        with open(trace) as f:
            lines = f.read().splitlines()
        closes = [ln for ln in lines if re.search(r"\bclose\(\d+", ln)]
        bad = [ln for ln in lines if "EBADF" in ln]
        T.check(len(closes) > 20, "round %d: strace saw tlcapd's closes (%d)" % (r, len(closes)))
        T.check(not bad, "round %d: close(2) failed with EBADF %d times (of %d closes): %s"
                % (r, len(bad), len(closes), "; ".join(bad[:4])))


if __name__ == "__main__":
    _, why = strace_usable()
    if why is not None:
        print("SKIP test_http_close: " + why)
        sys.exit(77)
    T.main([test_shutdown_closes_each_descriptor_once])
