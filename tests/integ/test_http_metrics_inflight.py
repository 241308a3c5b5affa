"""/metrics while an earlier answer is still being sent (docs/http.md, "The scrape's cost"):
a scrape's area series are written once and sent from where they are, shared with the next
scrape, which copies the lines of the targets that did not change from them. A slow reader's
answer must stay the scrape it asked for while later scrapes, with changes in between, build
their own; each answer is checked against a model of the calls sent (counts and histogram
buckets computed here), and promtool checks the slow one.

The answer is about 9 MB (10 targets x 400 area series): more than the kernel's socket buffers
take for a reader that does not read (tcp_wmem's 4 MiB at most, a 4 KiB receive buffer), so
most of it is still the daemon's while the other scrapes run."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
NT, NA = 10, 400
SHORT, LONG = 50, 2000  # ns of NET: <= the 100 ns edge; in (1.005 us, 2.999 us]


def calls_of(k, areas, n, net, t):
    """n calls of `net` ns on each area of `areas` (core 0), from time t; (bytes, end time)."""
    out = []
    for _ in range(n):
        for h in areas:
            out.append(T.bin11(h, 3, 0, 0, t))
            out.append(T.bin11(h, 0, 0, 0, t + net))
            t += net + 10
    return b"".join(out), t


def parse(body):
    """{(family, target, area): value} for the calls, _count and two buckets."""
    out = {}
    for line in body.decode().split("\n"):
        if not line.startswith("tlcap_area_") and not line.startswith("tlcap_target_areas_not"):
            continue
        name, rest = line.split("{", 1)
        labels, value = rest.rsplit("} ", 1)
        lab = dict(p.split("=", 1) for p in labels.split(","))
        key = name
        if name.endswith("_bucket"):
            key += lab["le"].strip('"')
        out[(key, lab["target"].strip('"'), lab.get("area", '""').strip('"'))] = float(value)
    return out


def check(body, want, what):
    """want[k] = (short calls, long calls) of every area of target k."""
    m = parse(body)
    for k in range(NT):
        short, long_ = want[k]
        tg = "t%d" % k
        T.eq(m.get(("tlcap_target_areas_not_exported", tg, "")), 0.0, what + ": not exported")
        for h in range(NA):
            a = "%08X" % h
            for fam, v in (("tlcap_area_calls_total", short + long_),
                           ("tlcap_area_net_duration_seconds_count", short + long_),
                           ("tlcap_area_net_duration_seconds_bucket0.0000001", short),
                           ("tlcap_area_net_duration_seconds_bucket0.000001005", short),
                           ("tlcap_area_net_duration_seconds_bucket0.000002999", short + long_),
                           ("tlcap_area_net_duration_seconds_bucket+Inf", short + long_)):
                got = m.get((fam, tg, a))
                if got != float(v):
                    T.eq(got, float(v), "%s: %s of %s area %s" % (what, fam, tg, a))


def request(hport, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", hport))
    s.settimeout(30)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return s


def read_answer(s, got=b""):
    """The body of one answer (Content-Length) on s, after the bytes already read."""
    while b"\r\n\r\n" not in got:
        b = s.recv(65536)
        T.check(b, "connection closed before the headers")
        got += b
    head, body = got.split(b"\r\n\r\n", 1)
    T.check(head.startswith(b"HTTP/1.1 200"), "status: %r" % head[:40])
    n = [int(ln.split(b":", 1)[1]) for ln in head.split(b"\r\n")
         if ln.lower().startswith(b"content-length:")][0]
    while len(body) < n:
        b = s.recv(1 << 20)
        T.check(b, "connection closed after %d of %d bytes" % (len(body), n))
        body += b
    T.eq(len(body), n, "body length")
    return body


def test_inflight(d):
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port,
                              "--metrics-areas", str(NA)], http="127.0.0.1:%d" % hport)
    conns, ends, want = [], [], []
    try:
        nrec = 0
        for k in range(NT):
            data, t = calls_of(k, range(NA), 2, SHORT, 1000)
            s = D.connect(port)
            s.sendall(b"TLCAP/1 target=t%d format=bin11\n" % k + data)
            conns.append(s)
            ends.append(t)
            want.append([2, 0])
            nrec += 4 * NA

        def sent(n):
            dm.wait_stats(lambda st: sum(t["records"] for t in st["targets"]) == n,
                          what="%d records processed" % n)
        sent(nrec)

        def change(targets):
            nonlocal nrec
            for k in targets:
                data, ends[k] = calls_of(k, range(NA), 1, LONG, ends[k] + 100)
                conns[k].sendall(data)
                want[k][1] += 1
                nrec += 2 * NA
            sent(nrec)

        # a slow reader: the headers and the first bytes, then it stops reading
        slow = request(hport, rcvbuf=4096)
        first = slow.recv(65536)
        T.check(first.startswith(b"HTTP/1.1 200"), "slow reader's status: %r" % first[:40])
        want_slow = [list(w) for w in want]  # the scrape was made when its headers came
        # half the targets change: the next scrape copies the other half from the slow one's
        change(range(0, NT, 2))
        s = request(hport)
        check(read_answer(s), want, "second scrape")
        # the rest change: the third copies the first half from the second's
        change(range(1, NT, 2))
        # a new connection: checking the second answer and sending the changes can leave the
        # first idle past libwebsockets' keep-alive timeout (5 s) on a loaded machine
        s.close()
        s = request(hport)
        check(read_answer(s), want, "third scrape")
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        check(read_answer(s), want, "fourth scrape, nothing changed")
        s.close()
        # the slow reader's answer: the scrape it asked for, whole
        body = read_answer(slow, first)
        slow.close()
        check(body, want_slow, "slow reader's scrape")
        T.check(len(body) > 8 << 20, "the answer is larger than the socket buffers: %d bytes"
                % len(body))
        D.check_promtool_metrics(body)
        for c in conns:
            c.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


T.main([test_inflight])
