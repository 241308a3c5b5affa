#!/usr/bin/env python3
"""A large checkpoint's file is written in libuv's threadpool, never by the event loop.

A target of 10,000 function areas (TLC_SPILL_AREAS; a checkpoint of about 8 MB, written in
1 MiB spills) with storage off, so that the checkpoints are the only files written:
  - the loop thread (the main thread: /proc/PID/task/PID/io) writes almost nothing while the
    checkpoint is written (its bytes show in the process's write count instead);
  - such a checkpoint failing at its 3rd write (ENOSPC: TLCAP_TEST_CKPT_FAIL) keeps
    the previous checkpoint, leaves no .tmp behind, is counted (checkpoints.write_errors) and
    logged; the next one is written, and a restart restores every event;
  - on a slow disk (TLCAP_TEST_DISK_BPS: 2 MB/s, a checkpoint takes seconds) the loop answers
    HTTP requests meanwhile (the median answer well under one spill's write time, 520 ms), and
    a SIGTERM while the checkpoint is being written exits 0 (no handle left open) once it is
    complete: no .tmp left, a restart restores every event.

Usage: test_checkpoint_spill.py TLCAPD"""
import http.client
import os
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
AREAS = int(os.environ.get("TLC_SPILL_AREAS", "10000"))
BIG = "big@127.0.0.1"
LARGE = 4 << 20  # a checkpoint at least this large was spilled (1 MiB buffers)


def rec(h, typ, core, t):
    return struct.pack("<IIQq", h, (core << 4) | typ, 0, t)


def pairs(lo, hi, t0):
    """E/X pairs over areas [lo, hi) on 4 cores, times from t0 on."""
    out = []
    t = t0
    for a in range(lo, hi):
        out.append(rec(a, 3, a & 3, t))
        out.append(rec(a, 0, a & 3, t + 50 + (a % 97)))
        t += 200
    return b"".join(out)


def send(port, data):
    s = D.connect(port)
    s.settimeout(60)
    s.sendall(data)
    s.shutdown(1)
    D.wait_eof(s, timeout=60)
    s.close()
    return len(data) // 24


def ckpt(state):
    return os.path.join(state, BIG, "target.checkpoint")


def ckpt_id(state):
    try:
        st = os.stat(ckpt(state))
        return (st.st_ino, st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return None


def wait_large(state, other=None, timeout=60):
    """Waits for a large checkpoint (other than `other`) renamed in; returns its id."""
    return D.wait_until(lambda: (lambda c: c if c is not None and c[2] >= LARGE and c != other
                                 else None)(ckpt_id(state)), timeout, "a large checkpoint")


def wchar(path):
    with open(path) as f:
        for ln in f:
            k, v = ln.split(":")
            if k == "wchar":
                return int(v)
    raise T.Failure("no wchar in " + path)


def start(d, port, extra=(), env=None, http=""):
    return D.Daemon(TLCAPD, d, ["--listen", "big=bin11@127.0.0.1:%d" % port] + list(extra),
                    env=env, http=http)


def preload(d, port):
    """The large target loaded and checkpointed at shutdown (the later checkpoints of a test are
    all of the whole state, whatever the time a load takes). Returns the events sent."""
    dm = start(d, port, ["--checkpoint-interval", "600"])
    try:
        sent = send(port, pairs(0, AREAS, 1000))
    finally:
        rc, _ = dm.stop(timeout=120)
    T.eq(rc, 0, "exit status")
    T.check(ckpt_id(dm.state)[2] >= LARGE, "a large checkpoint at shutdown")
    return sent


def restored_events(d, port):
    """Restarts the daemon: the events of the restored target (created at start)."""
    dm = start(d, port)
    try:
        return D.by_name(dm.stats(timeout=60), BIG)["stats"]["counters"]["events"]
    finally:
        rc, _ = dm.stop(timeout=60)
        T.eq(rc, 0, "exit status after the restore")


def test_loop_writes_no_checkpoint(d):
    port = D.free_port()
    dm = start(d, port, ["--checkpoint-interval", "0.5"])
    try:
        pid = dm.p.pid
        loop0 = wchar("/proc/%d/task/%d/io" % (pid, pid))
        all0 = wchar("/proc/%d/io" % pid)
        send(port, pairs(0, AREAS, 1000))
        c = wait_large(dm.state)
        loop = wchar("/proc/%d/task/%d/io" % (pid, pid)) - loop0
        total = wchar("/proc/%d/io" % pid) - all0
        print("  checkpoint %d bytes; written by the loop thread %d bytes, by the process %d"
              % (c[2], loop, total))
        T.check(total >= c[2], "the process wrote the checkpoint (%d of %d bytes)"
                % (total, c[2]))
        T.check(loop < 256 << 10, "the loop thread wrote %d bytes while a %d-byte checkpoint "
                "was written" % (loop, c[2]))
    finally:
        rc, _ = dm.stop(timeout=60)
    T.eq(rc, 0, "exit status")


def test_failed_write_keeps_old(d):
    port = D.free_port()
    # the 3rd write of the second large checkpoint fails (a small one has a single write)
    sent = preload(d, port)
    first = ckpt_id(os.path.join(d, "state"))
    # the 3rd write of the first large checkpoint fails (a small one has a single write);
    # every 3 s: the state directory is looked at between the failure and the next one
    dm = start(d, port, ["--checkpoint-interval", "3"], env={"TLCAP_TEST_CKPT_FAIL": "1:3"})
    try:
        sent += send(port, pairs(0, 100, 10 ** 10))

        def failed():
            return [ln for ln in dm.log().splitlines() if "checkpoint not written" in ln]
        log = D.wait_until(failed, 30, "a checkpoint write error logged", step=0.01)
        T.eq(ckpt_id(dm.state), first, "the previous checkpoint kept")
        T.check(not os.path.exists(ckpt(dm.state) + ".tmp"), "no .tmp left")
        T.check("No space left on device" in log[0] and ".tmp" in log[0],
                "the failure logged: %r" % log)
        print("  " + log[0].split(": ", 1)[-1])
        T.eq(dm.stats(timeout=60)["checkpoints"]["write_errors"], 1, "checkpoints.write_errors")
        wait_large(dm.state, first)  # the next interval's checkpoint is written
        T.check(not os.path.exists(ckpt(dm.state) + ".tmp"), "no .tmp left")
    finally:
        rc, _ = dm.stop(timeout=60)
    T.eq(rc, 0, "exit status")
    T.eq(restored_events(d, port), sent, "events restored")


def get_ms(hport):
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", hport, timeout=30)
    c.request("GET", "/api/v1/targets")
    r = c.getresponse()
    r.read()
    c.close()
    T.eq(r.status, 200, "GET /api/v1/targets")
    return (time.monotonic() - t0) * 1e3


def test_slow_disk_loop_answers(d):
    port, hport = D.free_port(), D.free_port()
    sent = preload(d, port)
    dm = start(d, port, ["--checkpoint-interval", "0.5"], env={"TLCAP_TEST_DISK_BPS": "2000000"},
               http="127.0.0.1:%d" % hport)
    tmp = ckpt(dm.state) + ".tmp"
    try:
        sent += send(port, pairs(0, 100, 10 ** 10))
        D.wait_until(lambda: os.path.exists(tmp) and os.path.getsize(tmp) >= 4 << 20, 60,
                     "a large checkpoint being written", step=0.01)
        lat = []
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end and os.path.exists(tmp):
            lat.append(get_ms(hport))
        lat.sort()
        T.check(len(lat) >= 5, "answers while the checkpoint was written (%d)" % len(lat))
        med, worst = lat[len(lat) // 2], lat[-1]
        print("  %d answers while the checkpoint was written: median %.1f ms, longest %.1f ms"
              % (len(lat), med, worst))
        T.check(med < 30, "the loop answered in %.1f ms (median) while the checkpoint was "
                "written on a slow disk" % med)
        T.check(os.path.exists(tmp), "the checkpoint still being written at the SIGTERM")
        t0 = time.monotonic()
        dm.p.send_signal(signal.SIGTERM)
        rc = dm.p.wait(120)
        print("  exit %.1f s after SIGTERM" % (time.monotonic() - t0))
    finally:
        dm.kill()
    T.eq(rc, 0, "exit status (3: a handle left open)")
    T.check(not os.path.exists(tmp), "no .tmp left")
    T.eq(restored_events(d, port), sent, "events restored")


if __name__ == "__main__":
    T.main([test_loop_writes_no_checkpoint, test_failed_write_keeps_old,
            test_slow_disk_loop_answers])
