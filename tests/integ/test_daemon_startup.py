#!/usr/bin/python3
"""tlcapd start-up failures with storage on: every port already in use (each ingest listener
format, the subscriber port, the HTTP port; a second tlcapd on the same ports, the commonest
operator mistake) ends start-up with exit status 1 and its message, after closing what was
opened: no abort, no handle left open, the state directory as it was, so that a tlcapd started
on it next recovers nothing and restores the stored target as it was.

Usage: test_daemon_startup.py TLCAPD"""
import os
import socket
import subprocess
import sys

import daemonlib as D
import tlctest as T

TLCAPD = sys.argv[1]
FORMATS = ("bin11", "bin10", "evlog")
ROUNDS = 3  # runs per busy port: the abort this guards against came in 7 runs of 10


def hold(port):
    """A socket listening on 127.0.0.1:port, as another program's would."""
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen(1)
    return s


def args_for(ports):
    a = []
    for f in FORMATS:
        a += ["--listen", "%s=%s@127.0.0.1:%d" % (f, f, ports[f])]
    return a


def state_files(state):
    """Every file under the state directory with its size (a checkpoint by name only: a clean
    close may write it again)."""
    out = {}
    for root, _, files in os.walk(state):
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, state)
            out[rel] = None if f == "target.checkpoint" else os.path.getsize(p)
    return out


def failed_start(d, ports, busy, what):
    """Runs tlcapd with storage on while `busy` (a port of `ports`) is taken; checks the exit
    status and the message; returns stderr."""
    p = subprocess.run([TLCAPD] + args_for(ports) +
                       ["--state-dir", os.path.join(d, "state"),
                        "--serve", "127.0.0.1:%d" % ports["serve"],
                        "--http", "127.0.0.1:%d" % ports["http"]],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    err = p.stderr.decode(errors="replace")
    want = {"serve": "subscribers: cannot listen on 127.0.0.1:%d",
            "http": "http: cannot serve on 127.0.0.1:%d"}.get(
                busy, "listener " + busy + ": cannot listen on 127.0.0.1:%d")
    want += ": address already in use"
    T.eq(p.returncode, 1, "%s: exit status; stderr:\n%s" % (what, err[-3000:]))
    T.check(want % ports[busy] in err, "%s: message %r; stderr:\n%s" % (what, want, err[-3000:]))
    T.check("handles left open" not in err, "%s: a handle left open:\n%s" % (what, err[-3000:]))
    T.check("exit 1" in err.splitlines()[-1], "%s: 'exit 1' is the last line:\n%s"
            % (what, err[-3000:]))
    return err


def test_port_busy_at_start(d):
    ports = {k: D.free_port() for k in FORMATS + ("serve", "http")}
    # a stored target with a checkpoint: start-up recovers and restores it before binding
    dm = D.Daemon(TLCAPD, d, args_for(ports), store=True,
                  serve="127.0.0.1:%d" % ports["serve"], http="127.0.0.1:%d" % ports["http"])
    try:
        s = D.connect(ports["bin11"])
        s.sendall(b"TLCAP/1 target=kept format=bin11\n" + D.calls(200))
        s.shutdown(socket.SHUT_WR)
        D.wait_eof(s)
        s.close()
        dm.wait_stats(lambda st: any(t["name"] == "kept" and t["events"] == 400
                                     for t in st["targets"]), what="the stream stored")
        # a second tlcapd on the same ports (its own state directory): the first port it
        # binds, the subscriber port, is taken
        other = os.path.join(d, "other")
        os.makedirs(other)
        failed_start(other, ports, "serve", "a second tlcapd")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status of the first tlcapd")
    before = state_files(dm.state)
    T.check(any(f.startswith("kept" + os.sep) and f.endswith(".BIN") for f in before),
            "a sealed segment of the target: %r" % sorted(before))
    for busy in FORMATS + ("serve", "http"):
        for k in range(ROUNDS):
            h = hold(ports[busy])
            try:
                failed_start(d, ports, busy, "%s busy (run %d)" % (busy, k + 1))
            finally:
                h.close()
            T.eq(state_files(dm.state), before, "state directory after %s busy" % busy)
    # the state directory is usable: the next start recovers nothing and restores the target
    dm = D.Daemon(TLCAPD, d, args_for(ports), store=True)
    try:
        t = dm.target("kept")
        T.eq(t["events"], 400, "the target restored from its checkpoint")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status after the failed starts")
    log = dm.log()
    T.check("recovered" not in log and "quarantine" not in log,
            "nothing to recover after the failed starts:\n" + log)


if __name__ == "__main__":
    T.main([test_port_busy_at_start])
