"""/metrics is built in slices: the loop answers other requests while a large scrape is being
made (docs/http.md, "The scrape's cost").

300 targets x 20 area series are a scrape of about 14 MB, which the daemon renders a bounded
number of bytes per loop turn (at most 1 MiB: many turns whatever the machine's speed). The
order of events is fixed with the test hook that blocks the loop for 3 s (SIGUSR2): during the
stall the scrape is asked for on connection A, then the target list on connection B, so that
both requests wait for the same loop turn, A's first. The scrape's tlcap_http_requests_total is
read when the scrape is complete; B counts in it only when the loop answered B while A's scrape
was still being made (a scrape made in one go, in the turn that reads A, counts only the two
requests before the stall). A's answer must also be whole and well formed (promtool), and B's
answer complete."""
import os
import re
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD_TEST = sys.argv[1]
NT, NA = 300, 20


def answer(s, got=b""):
    """(status line, body) of one answer (Content-Length) on s, after the bytes already read."""
    while b"\r\n\r\n" not in got:
        b = s.recv(65536)
        T.check(b, "connection closed before the headers")
        got += b
    head, body = got.split(b"\r\n\r\n", 1)
    n = [int(ln.split(b":", 1)[1]) for ln in head.split(b"\r\n")
         if ln.lower().startswith(b"content-length:")][0]
    while len(body) < n:
        b = s.recv(1 << 20)
        T.check(b, "connection closed after %d of %d bytes" % (len(body), n))
        body += b
    T.eq(len(body), n, "body length")
    return head.split(b"\r\n", 1)[0], body


def get(s, path):
    s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path)


def test_scrape_in_slices(d):
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD_TEST, d, ["--listen", "in=bin11@127.0.0.1:%d" % port,
                                   "--metrics-areas", str(NA)], http="127.0.0.1:%d" % hport)
    conns = []
    try:
        for k in range(NT):
            recs = []
            t = 1000
            for h in range(NA):
                recs.append(T.bin11(h, 3, 0, 0, t))
                recs.append(T.bin11(h, 0, 0, 0, t + 50 + 10 * k))
                t += 100
            s = D.connect(port)
            s.sendall(b"TLCAP/1 target=t%d format=bin11\n" % k + b"".join(recs))
            conns.append(s)
        dm.wait_stats(lambda st: sum(t["records"] for t in st["targets"]) == NT * NA * 2,
                      timeout=30, what="every record processed")
        for attempt in range(3):
            a = socket.create_connection(("127.0.0.1", hport), timeout=30)
            b = socket.create_connection(("127.0.0.1", hport), timeout=30)
            # both connections accepted and answered once before the stall: the requests below
            # are then the 3rd and 4th, A's read first in the turn after the stall
            get(a, b"/api/v1/targets")
            T.eq(answer(a)[0], b"HTTP/1.1 200 OK", "A's first answer")
            get(b, b"/api/v1/targets")
            T.eq(answer(b)[0], b"HTTP/1.1 200 OK", "B's first answer")
            mark = len(dm.log())
            t0 = time.monotonic()
            dm.p.send_signal(signal.SIGUSR2)
            D.wait_until(lambda: "stalling the loop" in dm.log()[mark:], 10, "the loop stalled")
            get(a, b"/metrics")
            get(b, b"/api/v1/targets")
            sent = time.monotonic() - t0
            if sent < 2.0:
                break
            a.close()  # the machine was too slow to send both within the stall: again
            b.close()
        else:
            raise T.Failure("could not send both requests within the loop's 3 s stall")
        status, body = answer(a)
        T.eq(status, b"HTTP/1.1 200 OK", "the scrape's status")
        bstatus, bbody = answer(b)
        T.eq(bstatus, b"HTTP/1.1 200 OK", "B's status")
        T.check(bbody.startswith(b"["), "B's answer is the target list")
        T.check(len(body) > 8 << 20, "a large scrape: %d bytes" % len(body))
        text = body.decode()
        m = re.search(r"^tlcap_http_requests_total (\d+)$", text, re.M)
        T.check(m is not None, "tlcap_http_requests_total in the scrape")
        T.eq(int(m.group(1)), 3, "requests answered when the scrape was complete (the two "
             "before the stall and B, answered while the scrape was being made)")
        for k in (0, NT // 2, NT - 1):
            T.check('tlcap_area_calls_total{target="t%d",area="%08X"' % (k, NA - 1) in text,
                    "area series of t%d" % k)
        T.eq(text.count("\ntlcap_area_calls_total{"), NT * NA, "area series")
        D.check_promtool_metrics(body)
        a.close()
        b.close()
        for c in conns:
            c.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


T.main([test_scrape_in_slices])
