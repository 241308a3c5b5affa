#!/usr/bin/python3
"""tlcapd operations end to end (RELIABILITY T15, T20, T34, T35, T36, T38): SIGHUP reload, the
notify lifecycle and the health-gated watchdog, fd exhaustion, socket activation, a stalled log
reader.

Usage: test_daemon_ops.py TLCAPD"""
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time

import daemonlib as D
import tlctest as T

TLCAPD = sys.argv[1]


def write_conf(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def refused(port):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except ConnectionRefusedError:
        return True
    s.close()
    return False


def still_open(sock):
    """True while the peer has not closed `sock` (no EOF, no reset); never blocks."""
    prev = sock.gettimeout()
    sock.setblocking(False)
    try:
        return sock.recv(65536, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(prev)


def hup(dm):
    """SIGHUP; waits for RELOADING=1 and then READY=1 (sent whether the reload applied or not)."""
    n0 = len(dm.notify.msgs)
    dm.p.send_signal(signal.SIGHUP)
    i = dm.notify.wait_for("RELOADING=1", after=n0)
    dm.notify.wait_for("READY=1", after=i)


def test_reload(d):
    """T15: SIGHUP adds and removes listeners by name without disturbing the others;
    an invalid configuration, and one that would move a running listener or the subscriber
    server, is refused as a whole with one error line ("restart required" for a move); no
    reload drops an ingest or subscriber connection."""
    pa, pb, ps = D.free_port(), D.free_port(), D.free_port()
    conf = os.path.join(d, "tlcapd.ini")
    head = "[daemon]\npartial_timeout = 5s\nserve = 127.0.0.1:%d\n\n" % ps
    la = "[listen a]\nformat = bin11\naddress = 127.0.0.1:%d\n" % pa
    lb = "[listen b]\nformat = bin10\naddress = 127.0.0.1:%d\n" % pb
    write_conf(conf, head + la)
    dm = D.Daemon(TLCAPD, d, ["--config", conf], serve=False)
    try:
        ca = D.connect(pa)
        ca.sendall(D.calls(5))
        dm.wait_stats(lambda s: D.by_name(s, "a@127.0.0.1")["records"] == 10, what="a data")
        T.check(refused(pb), "b not listening yet")
        # A subscriber connection (no Hello: the checks below come well within pubsub's 10 s
        # Hello deadline; the test takes about a second).
        sub = socket.create_connection(("127.0.0.1", ps), timeout=2)
        # (a) add listener b
        write_conf(conf, head + la + lb)
        hup(dm)
        cb = D.connect(pb)
        cb.sendall(b"".join(T.bin10(0, 3, 0, 10 + k) for k in range(3)))
        dm.wait_stats(lambda s: any(t["name"] == "b@127.0.0.1" and t["records"] == 3
                                    for t in s["targets"]), what="b data")
        # the existing connection on a was not disturbed
        ca.sendall(D.calls(5, t0=10 ** 6))
        dm.wait_stats(lambda s: D.by_name(s, "a@127.0.0.1")["records"] == 20, what="a kept")
        # (b) an invalid configuration is rejected: one error line, everything keeps running
        write_conf(conf, head + la + "[listen c]\nformat = bin99\n")
        hup(dm)
        D.wait_until(lambda: "reload rejected" in dm.log(), 5, "rejection logged")
        log = dm.log()
        T.check("tlcapd.ini:9: [listen c] format" in log, "error names file:line and option")
        T.eq(sum(1 for l in log.splitlines() if "reload rejected" in l), 1, "one error line")
        T.check(not refused(pb), "b still listening after a rejected reload")
        # (c) moving listener b is refused as a whole ("restart required"): b stays where it
        # is, and listener c, added by the same file, is not started either
        pc, pd = D.free_port(), D.free_port()
        write_conf(conf, head + la + "[listen b]\nformat = bin10\naddress = 127.0.0.1:%d\n"
                   "[listen c]\nformat = bin11\naddress = 127.0.0.1:%d\n" % (pc, pd))
        hup(dm)
        D.wait_until(lambda: "restart required" in dm.log(), 5, "restart required logged")
        lines = [l for l in dm.log().splitlines() if "restart required" in l]
        T.eq(len(lines), 1, "one error line for the move")
        T.check("reload rejected" in lines[0] and "listener b: address 127.0.0.1:%d -> "
                "127.0.0.1:%d" % (pb, pc) in lines[0], "the line names the move: %r" % lines[0])
        T.check(not refused(pb) and refused(pc), "b still on its old port, not on the new one")
        T.check(refused(pd), "c of the refused configuration not started")
        # (c) the subscriber server's address: refused the same way
        write_conf(conf, head.replace(str(ps), str(pd)) + la + lb)
        hup(dm)
        D.wait_until(lambda: sum(1 for l in dm.log().splitlines()
                                 if "restart required" in l) == 2, 5, "serve move refused")
        line = [l for l in dm.log().splitlines() if "restart required" in l][1]
        T.check("serve" in line and "reload rejected" in line, "the line names serve: %r" % line)
        T.check(refused(pd), "subscriber server not moved")
        s2 = socket.create_connection(("127.0.0.1", ps), timeout=2)  # still serving
        s2.close()
        T.check(still_open(sub), "the subscriber connection survived the refused reloads")
        # every ingest connection survived the refused reloads
        ca.sendall(D.calls(1, t0=10 ** 7))
        cb.sendall(b"".join(T.bin10(0, 0, 0, 100 + k) for k in range(3)))
        dm.wait_stats(lambda s: D.by_name(s, "a@127.0.0.1")["records"] == 22 and
                      D.by_name(s, "b@127.0.0.1")["records"] == 6, what="a and b go on")
        # (d) remove a (its connection stays), add a2 on a's address (free at once), change
        # b's format in place (its socket stays; new connections get bin11)
        write_conf(conf, head + "[listen a2]\nformat = bin11\naddress = 127.0.0.1:%d\n" % pa
                   + "[listen b]\nformat = bin11\naddress = 127.0.0.1:%d\n" % pb)
        hup(dm)
        T.eq(sum(1 for l in dm.log().splitlines() if "reload rejected" in l), 3,
             "this reload was applied")
        c2 = D.connect(pa)
        c2.sendall(D.calls(2))
        nb = D.connect(pb)
        nb.sendall(b"TLCAP/1 target=nb\n" + D.calls(2))
        ca.sendall(D.calls(5, t0=10 ** 8))
        cb.sendall(b"".join(T.bin10(0, 3, 0, 200 + k) for k in range(3)))
        st = dm.wait_stats(lambda s: D.by_name(s, "a@127.0.0.1")["records"] == 32 and
                           D.by_name(s, "b@127.0.0.1")["records"] == 9 and
                           any(t["name"] == "a2@127.0.0.1" and t["records"] == 4
                               for t in s["targets"]) and
                           any(t["name"] == "nb" and t["records"] == 4 for t in s["targets"]),
                           what="a's connection survives its listener; a2 and b's new format")
        T.eq(D.by_name(st, "nb")["format"], "bin11", "b's new format for new connections")
        T.eq(D.by_name(st, "b@127.0.0.1")["format"], "bin10", "b's running connection kept")
        T.eq(st["daemon"]["listeners"], 2, "listeners a2 and b")
        for t in ("a@127.0.0.1", "b@127.0.0.1"):
            T.eq(D.by_name(st, t)["connections"], 1, "%s never reconnected" % t)
        log = dm.log()
        T.check("listener a (127.0.0.1:%d): stopped" % pa in log, "a stopped")
        T.check("listener b (127.0.0.1:%d): stopped" % pb not in log, "b never closed")
        T.check("listener b (127.0.0.1:%d): format bin11" % pb in log, "b's format in place")
        T.check(still_open(sub), "the subscriber connection survived every reload")
        for s in (ca, cb, c2, nb, sub):
            s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_reload_restart_keys(d):
    """A reload that changes keys the settings table marks "restart" applies the rest and
    names those keys in one warning, keeping their running values: the target limit stays the
    one the daemon started with, while a live key (status_interval) takes effect."""
    pa, ps = D.free_port(), D.free_port()
    conf = os.path.join(d, "tlcapd.ini")
    la = "[listen a]\nformat = bin11\naddress = 127.0.0.1:%d\n" % pa
    head = "[daemon]\nserve = 127.0.0.1:%d\nmax_targets = 2\nread_buffer = 64k\n" % ps
    write_conf(conf, head + "\n" + la)
    dm = D.Daemon(TLCAPD, d, ["--config", conf], serve=False)
    try:
        write_conf(conf, head.replace("max_targets = 2", "max_targets = 1")
                   .replace("64k", "128k") + "status_interval = 200ms\n\n" + la)
        hup(dm)
        D.wait_until(lambda: "configuration reloaded" in dm.log(), 5, "reload applied")
        lines = [l for l in dm.log().splitlines() if "take effect only after a restart" in l]
        T.eq(len(lines), 1, "one line for the restart keys: %r" % lines)
        T.check("max_targets, read_buffer" in lines[0], "it names both keys: %r" % lines[0])
        T.check("reload rejected" not in dm.log(), "the reload was not refused")
        # max_targets keeps its running value (2): a second target is still accepted
        c1 = D.connect(pa)
        c1.sendall(D.calls(2))
        dm.wait_stats(lambda s: D.by_name(s, "a@127.0.0.1")["records"] == 4, what="first")
        c2 = D.connect(pa)
        c2.sendall(D.calls(3))
        dm.wait_stats(lambda s: any(t["name"] == "a@127.0.0.1#2" and t["records"] == 6
                                    for t in s["targets"]), what="second target accepted")
        c1.close()
        c2.close()
    finally:
        dm.stop()


def test_bind_failure_at_start(d):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        notify = D.Notify(d)
        env = dict(os.environ, NOTIFY_SOCKET=notify.path)
        p = subprocess.run([TLCAPD, "--listen", "x=bin11@127.0.0.1:%d" % port, "--no-store",
                            "--serve", ""], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, timeout=15)
        err = p.stderr.decode(errors="replace")
        T.eq(p.returncode, 1, "exit status when a listener cannot bind")
        T.check("listener x: cannot listen on 127.0.0.1:%d" % port in err, "message: %r" % err)
        notify.wait_for("ERRNO=", timeout=2)
        T.check(not any("READY=1" in m for _, m in notify.msgs), "no READY=1")
        notify.close()
    finally:
        busy.close()


def test_config_error_at_start(d):
    conf = os.path.join(d, "bad.ini")
    write_conf(conf, "[daemon]\nmax_connections = lots\n")
    rc, _, err = T.run([TLCAPD, "--config", conf], timeout=10)
    T.eq(rc, 2, "exit status")
    T.check("bad.ini:2: [daemon] max_connections" in err, "message: %r" % err)


def test_notify_watchdog_stop(d):
    port = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "x=bin11@127.0.0.1:%d" % port,
                              "--status-interval", "200ms"],
                  env={"WATCHDOG_USEC": "400000"}, wait_ready=False)
    try:
        i = dm.notify.wait_for("READY=1", timeout=15)
        # Listeners accept from READY=1 on.
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(D.calls(3))
        dm.notify.wait_for("STATUS=", after=i)
        dm.notify.wait_for("events=6", timeout=5, after=i)
        k = dm.notify.wait_for("WATCHDOG=1", after=i)
        k = dm.notify.wait_for("WATCHDOG=1", after=k + 1)
        D.wait_until(lambda: (dm.notify.pump(), sum(1 for _, m in dm.notify.msgs
                                                    if m == "WATCHDOG=1") >= 6)[1], 5, "pings")
        pings = [t for t, m in dm.notify.msgs if m == "WATCHDOG=1"]
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        T.check(max(gaps) < 0.4, "ping intervals within WATCHDOG_USEC/2 + slack: %r" % gaps)
        # A stalled loop (test hook: SIGUSR2 blocks it 3 s) sends no pings meanwhile.
        n0 = len(dm.notify.msgs)
        t_stall = time.monotonic()
        dm.p.send_signal(signal.SIGUSR2)
        j = dm.notify.wait_for("WATCHDOG=1", timeout=10, after=n0 + 1)
        dm.notify.pump()
        after = [t for t, m in dm.notify.msgs[n0:] if m == "WATCHDOG=1"]
        longest = max(b - a for a, b in zip([t_stall] + after, after)) if after else 0
        T.check(longest >= 2.5, "no pings during the stall (longest silence %.2fs)" % longest)
        s.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    T.check(any(m == "STOPPING=1" for _, m in dm.notify.msgs), "STOPPING=1 sent")


def test_fd_exhaustion(d):
    port = D.free_port()

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    dm = D.Daemon(TLCAPD, d, ["--listen", "x=bin11@127.0.0.1:%d" % port], preexec_fn=limit)
    socks = []
    try:
        first = D.connect(port)
        first.sendall(b"TLCAP/1 target=first\n" + D.calls(2))
        dm.wait_stats(lambda s: any(t["name"] == "first" for t in s["targets"]), what="first")
        for i in range(200):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                s.sendall(b"TLCAP/1 target=f%d\n" % i)
                socks.append(s)
            except OSError:
                pass
        cpu0, t0 = dm.cpu_seconds(), time.monotonic()
        time.sleep(2.0)  # measuring CPU while saturated (not synchronisation)
        cpu = (dm.cpu_seconds() - cpu0) / (time.monotonic() - t0)
        T.check(cpu < 0.20, "CPU while saturated: %.1f%%" % (100 * cpu))
        first.sendall(D.calls(3, t0=10 ** 6))  # existing sessions continue
        st = dm.wait_stats(lambda s: D.by_name(s, "first")["records"] == 10, what="first goes on")
        T.check(st["daemon"]["refused_limit"] + st["daemon"]["accept_errors"] > 0,
                "refusals counted")
        for s in socks:
            s.close()
        socks = []
        dm.wait_stats(lambda s: s["daemon"]["connections"] <= 1, timeout=15, what="released")
        late = D.connect(port)
        late.sendall(b"TLCAP/1 target=late\n" + D.calls(1))
        dm.wait_stats(lambda s: any(t["name"] == "late" and t["records"] == 2
                                    for t in s["targets"]), what="service after release")
        late.close()
        first.close()
    finally:
        for s in socks:
            s.close()
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_socket_activation(d):
    sa = shutil.which("systemd-socket-activate")
    if sa is None:
        print("SKIP test_socket_activation: systemd-socket-activate not installed")
        return
    port = D.free_port()
    notify = D.Notify(d)
    dump = os.path.join(d, "stats.json")
    env = dict(os.environ)
    env.pop("JOURNAL_STREAM", None)
    p = subprocess.Popen([sa, "-l", "127.0.0.1:%d" % port, "--fdname=ingest-bin11",
                          "-E", "NOTIFY_SOCKET=" + notify.path, TLCAPD, "--listen",
                          "other=bin11@127.0.0.1:%d" % D.free_port(), "--no-store", "--serve", "",
                          "--dump-stats-on-exit", dump,
                          # its own state directory: statistics survive restarts (checkpoints)
                          "--state-dir", os.path.join(d, "state")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        # systemd-socket-activate starts the program at the first connection.
        c = D.connect(port)
        c.sendall(D.calls(4))
        c.shutdown(socket.SHUT_WR)
        notify.wait_for("READY=1", timeout=15)
        D.wait_eof(c)
        c.close()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(15)
        err = p.stderr.read().decode(errors="replace")
        T.eq(rc, 0, "exit status")
        T.check("socket activation" in err, "adoption logged: %r" % err[-500:])
        import json
        with open(dump) as f:
            st = json.load(f)
        T.eq(D.by_name(st, "ingest-bin11@127.0.0.1")["records"], 8, "records via adopted fd")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        notify.close()
    # The wrong socket type (datagram) is a loud start-up failure.
    notify = D.Notify(os.path.join(d))  # fresh socket file name below
    port = D.free_port()
    p = subprocess.Popen([sa, "-d", "-l", "127.0.0.1:%d" % port, "--fdname=bin11", "-E",
                          "NOTIFY_SOCKET=" + notify.path, TLCAPD, "--no-store", "--serve", "",
                          "--state-dir", os.path.join(d, "state")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        # systemd-socket-activate -d waits for a datagram before starting the program.
        # Its socket may not be bound yet: repeat the datagram until the program has run.
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rc = None
        for _ in range(75):
            u.sendto(b"x", ("127.0.0.1", port))
            try:
                rc = p.wait(0.2)
                break
            except subprocess.TimeoutExpired:
                pass
        u.close()
        if rc is None:
            raise T.Failure("tlcapd did not fail on a datagram socket within 15 s")
        err = p.stderr.read().decode(errors="replace")
        T.eq(rc, 1, "exit status with a datagram socket")
        T.check("datagram" in err, "the log says what is wrong: %r" % err[-400:])
        notify.wait_for("ERRNO=", timeout=2)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        notify.close()


def test_log_sink_stall(d):
    port = D.free_port()
    # stderr is a pipe nobody reads (a stopped journal reader): the loop must not block.
    # --max-targets: a connection whose name is still held by an earlier one that the daemon
    # has not seen close gets a "#k" target of its own; on a slow (sanitized, loaded) run,
    # most of the 1200 overlap and the default 1024 targets refused some of them
    dm = D.Daemon(TLCAPD, d, ["--listen", "x=bin11@127.0.0.1:%d" % port, "--log-level",
                              "debug", "--max-targets", "2000"], stderr_pipe=True)
    try:
        # Debug lines are not rate-limited: about 2 per connection, ~200 KB in all.
        for i in range(1200):
            s = D.connect(port)
            s.sendall(b"TLCAP/1 target=n%d\n" % (i % 50) + D.calls(1))
            s.close()
        st = dm.wait_stats(lambda s: s["daemon"]["log_dropped"] > 0 and
                           sum(t["records"] for t in s["targets"]) == 2400, timeout=20,
                           what="ingest goes on while the log is stalled")
        # Reader comes back: the drop is reported.
        os.set_blocking(dm.p.stderr.fileno(), False)
        buf = b""

        def drained():
            nonlocal buf
            try:
                while True:
                    b = os.read(dm.p.stderr.fileno(), 65536)
                    if not b:
                        break
                    buf += b
            except BlockingIOError:
                pass
            return b"lines dropped" in buf
        D.wait_until(drained, 10, "a 'lines dropped' line")
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_store_and_serve(d):
    """The whole pipeline with storage and the subscriber server on."""
    port, sport = D.free_port(), D.free_port()
    state = os.path.join(d, "state")
    notify = D.Notify(d)
    env = dict(os.environ)
    env.pop("JOURNAL_STREAM", None)
    env["NOTIFY_SOCKET"] = notify.path
    with open(os.path.join(d, "log"), "wb") as errf:
        p = subprocess.Popen([TLCAPD, "--listen", "x=bin11@127.0.0.1:%d" % port, "--serve",
                              "127.0.0.1:%d" % sport, "--state-dir", state,
                              "--status-interval", "200ms"],
                             stdout=subprocess.DEVNULL, stderr=errf, env=env)
        try:
            notify.wait_for("READY=1", timeout=15)
            socket.create_connection(("127.0.0.1", sport), timeout=2).close()  # serving
            c = D.connect(port)
            c.sendall(D.calls(50))
            c.shutdown(socket.SHUT_WR)
            D.wait_eof(c)
            c.close()
            notify.wait_for("stored=100", timeout=10)
            p.send_signal(signal.SIGTERM)
            T.eq(p.wait(15), 0, "exit status")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            notify.close()
    tdir = os.path.join(state, "x@127.0.0.1")
    files = os.listdir(tdir)
    T.check(any(f.endswith(".txt.BIN") for f in files), "a sealed bin11 segment: %r" % files)
    seg = [f for f in files if f.endswith(".txt.BIN")][0]
    T.eq(os.path.getsize(os.path.join(tdir, seg)), 100 * 24, "segment size")


T.main([test_store_and_serve, test_reload, test_reload_restart_keys, test_bind_failure_at_start, test_config_error_at_start, test_notify_watchdog_stop, test_fd_exhaustion,
        test_socket_activation, test_log_sink_stall])
