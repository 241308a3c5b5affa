#!/usr/bin/env python3
"""A range query's answer is built off the event loop, however large it is (docs/continuity.md
"History from a running daemon"): the stats dump's history.encoded_bytes, the bytes of the
answers the threadpool built, equals what the clients received - the HTTP document of
?since= and the GetStats.range reply, frame included - once over a small store and again
after the store has grown tenfold (ten times the areas: a ten times larger answer). Every byte
of every answer thus came finished from the pool; the loop only queued the message or sent the
document as the socket took it. No timing is asserted.

Usage: test_history_answers.py TLCAPD"""
import json
import os
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD = sys.argv[1]
NAME = "l@127.0.0.1"
PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")


def send(sock, pb, **kw):
    b = pb.ClientMessage(**kw).SerializeToString()
    n, head = len(b), bytearray()
    while n > 0x7F:
        head.append((n & 0x7F) | 0x80)
        n >>= 7
    head.append(n)
    sock.sendall(bytes(head) + b)


def recv(sock, pb, buf):
    """The next message and its frame's length (the varint prefix included)."""
    from google.protobuf.internal.decoder import _DecodeVarint32
    while True:
        try:
            n, pos = _DecodeVarint32(buf[0], 0)
            if len(buf[0]) >= pos + n:
                m = pb.ServerMessage()
                m.ParseFromString(buf[0][pos:pos + n])
                buf[0] = buf[0][pos + n:]
                return m, pos + n
        except IndexError:
            pass
        b = sock.recv(1 << 20)
        T.check(b, "the daemon closed the connection")
        buf[0] += b


def capture(areas, t0):
    """Calls on `areas` functions on two cores, times from t0: (bytes, last time)."""
    out, t = [], t0
    for rep in range(20):
        for h in range(areas):
            core = h & 1
            out.append(T.bin11(0x1000 + h, 3, core, 0, t))
            out.append(T.bin11(0x1000 + h, 0, core, 0, t + 40 + (h + rep) % 17))
            t += 100
    return b"".join(out), t


def send_and_close(dm, port, data):
    s = D.connect(port)
    s.sendall(data)
    s.shutdown(1)
    D.wait_eof(s, timeout=60)  # answered once every byte is written to its segment
    s.close()


def history(dm):
    st = dm.stats()
    T.check("history" in st, "the stats dump has a history member: %r" % sorted(st))
    return st["history"]


def http_answer(hport):
    url = "http://127.0.0.1:%d/api/v1/targets/%s/stats?since=ns:0" % (hport, NAME)
    with urllib.request.urlopen(url, timeout=60) as r:
        T.eq(r.status, 200, "HTTP status")
        return r.read()


def pb_answer(sport, pb):
    """The GetStats.range reply (as tlcap stats --since asks) and its frame's length."""
    sock = D.connect(sport, timeout=60)
    buf = [b""]
    send(sock, pb, request_id=1, hello=pb.Hello(protocol_version=1, client_name="answers"))
    T.eq(recv(sock, pb, buf)[0].WhichOneof("msg"), "welcome", "Welcome")
    rng = pb.TimeRange(clock=pb.TimeRange.TARGET, has_since=True, since=0)
    send(sock, pb, request_id=2, get_stats=pb.GetStats(target=NAME, names=True, neutral=True,
                                                       windows=True, quantiles=True, range=rng))
    while True:
        m, flen = recv(sock, pb, buf)
        if m.request_id == 2:
            sock.close()
            return flen, m


def test_answers_built_off_the_loop(d):
    with tempfile.TemporaryDirectory() as tmp:
        pb = T.gen_pb2(tmp, PROTO_DIR)
        port, sport, hport = D.free_port(), D.free_port(), D.free_port()
        dm = D.Daemon(TLCAPD, d, ["--listen", "l=bin11@127.0.0.1:%d" % port], store=True,
                      serve="127.0.0.1:%d" % sport, http="127.0.0.1:%d" % hport)
        try:
            t = 1000
            sizes = []
            for areas in (30, 300):  # the store grows tenfold, and so does the answer
                data, t = capture(areas, t)
                send_and_close(dm, port, data)
                before = history(dm)
                doc = http_answer(hport)
                body = json.loads(doc)
                flen, m = pb_answer(sport, pb)
                T.eq(m.WhichOneof("msg"), "stats", "GetStats.range answered: %r" % m)
                snap = m.stats.snapshot
                T.eq(snap.counters.events, body["counters"]["events"], "both answers alike")
                T.check(len({r["handle"] for r in body["rows"]}) >= areas, "every area there")
                after = history(dm)
                T.eq(after["done"] - before["done"], 2, "two queries done")
                T.eq(after["encoded"] - before["encoded"], 2, "both answers built on the pool")
                T.eq(after["encoded_bytes"] - before["encoded_bytes"], len(doc) + flen,
                     "the answers' bytes (document %d, message %d) all built on the pool"
                     % (len(doc), flen))
                T.eq(after["running"], 0, "nothing running")
                sizes.append(len(doc) + flen)
            T.check(sizes[1] > 5 * sizes[0], "the answer grew with the store: %r" % sizes)
        finally:
            rc, _ = dm.stop()
            T.eq(rc, 0, "exit status")


if __name__ == "__main__":
    T.main([test_answers_built_off_the_loop])
