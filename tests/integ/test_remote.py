"""Remote access (SPEC 8) against the real tlcapd and tlcap: token file, TLS, Unix socket.

Each test starts its own daemon on loopback (free ports, a temporary directory) and checks what
a user sees: exit statuses and messages, what a peer receives on the socket, the socket file's
mode. The certificate is self-signed, made by `openssl req` in the test.

- no token, a wrong token, the right token (tlcap and a raw subscriber: without the token the
  peer gets one error and nothing else: no target names, no counters); a second wrong attempt
  from the same address is answered later than the first (per-peer rate limit);
- a token file readable by others (0644), an empty one: refused at start and by --check-config,
  exit 2; a non-loopback --serve without a token: the same; with a token and without TLS: starts
  with a warning;
- plain text to the TLS port gets nothing (not a byte) and the daemon goes on; random bytes to
  the TLS port from 60 connections: no crash, descriptors back to where they were;
- `openssl s_client -verify_return_error` verifies the chain; SIGHUP reloads the certificate
  (a new connection sees the new subject) and re-reads the token (the old one is refused, the
  new one accepted);
- --serve unix:PATH: mode 0660, tlcap works over it, a stale socket file is replaced at start,
  the file is removed at exit.

usage: test_remote.py TLCAPD TLCAP     Exit 0 pass, 1 fail, 77 skip (openssl missing).
"""
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

TLCAPD, TLCAP = sys.argv[1], sys.argv[2]


def make_cert(d, cn="localhost", name="cert"):
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + "-key.pem")
    subprocess.check_call(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out",
                           cert, "-days", "2", "-subj", "/CN=" + cn, "-addext",
                           "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def write_token(path, token, mode=0o600):
    with open(path, "wb") as f:
        f.write(token)
    os.chmod(path, mode)
    return path


def hello_frame(token=b""):
    """A ClientMessage{request_id=1, hello{protocol_version=1, token}} by hand (field numbers of
    proto/tlcap.proto: ClientMessage.request_id 1, .hello 10; Hello.protocol_version 1,
    .token 4)."""
    h = b"\x08\x01" + (b"\x22" + T.varint(len(token)) + token if token else b"")
    m = b"\x08\x01" + b"\x52" + T.varint(len(h)) + h
    return T.varint(len(m)) + m


def read_all(s, timeout=10.0):
    """Everything the peer sends until it closes."""
    s.settimeout(timeout)
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except (ConnectionResetError, ssl.SSLError, OSError):
            return out
        if not b:
            return out
        out += b


def feed_target(ping, name=b"board"):
    tgt = D.connect(ping)
    recs = b""
    t = 0
    for h, d in ((0, 100), (0, 100), (1, 900)):
        recs += T.bin11(h, 3, 0, 0, t) + T.bin11(h, 0, 0, 0, t + d)
        t += 1000
    tgt.sendall(b"TLCAP/1 target=" + name + b" format=bin11\n" + recs)
    return tgt


def start(d, extra, serve):
    ping = D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "ing=bin11@127.0.0.1:%d" % ping] + extra, serve=serve)
    return dm, ping


def test_token(d):
    tok = write_token(os.path.join(d, "tok"), b"right-token\n")
    bad = write_token(os.path.join(d, "bad"), b"wrong-token\n")
    serve = D.free_port()
    addr = "127.0.0.1:%d" % serve
    dm, ping = start(d, ["--token-file", tok], addr)
    try:
        tgt = feed_target(ping)
        dm.target("board")
        env = dict(os.environ)
        env.pop("TLCAP_TOKEN", None)
        rc, out, err = T.run([TLCAP, "--connect", addr, "targets"], env=env)
        T.check(rc == 1 and "authentication failed" in err and b"board" not in out,
                "no token: %d %r %s" % (rc, out, err))
        rc, out, err = T.run([TLCAP, "--connect", addr, "--token-file", bad, "targets"], env=env)
        T.check(rc == 1 and "authentication failed" in err, "wrong token: %d %s" % (rc, err))
        rc, out, err = T.run([TLCAP, "--connect", addr, "--token-file", tok, "targets"], env=env)
        T.check(rc == 0 and b"board" in out, "right token (file): %d %r %s" % (rc, out, err))
        env["TLCAP_TOKEN"] = "right-token"
        rc, out, err = T.run([TLCAP, "--connect", addr, "targets"], env=env)
        T.check(rc == 0 and b"board" in out, "right token ($TLCAP_TOKEN): %d %s" % (rc, err))
        # A raw peer with a wrong token then a ListTargets: one Error frame, nothing else.
        times = []
        for _ in range(2):
            s = D.connect(serve)
            t0 = time.monotonic()
            s.sendall(hello_frame(b"guess") + b"\x04\x08\x02\x6a\x00")  # + ListTargets
            got = read_all(s)
            times.append(time.monotonic() - t0)
            s.close()
            T.check(b"board" not in got and b"authentication failed" in got and
                    len(got) < 100, "unauthenticated peer got: %r" % got)
        # per-peer rate limit: 250 ms, then 500 ms (after the CLI's wrong attempts: more)
        T.check(times[1] > times[0] and times[1] >= 0.45,
                "second wrong attempt not slowed down: %r" % times)
        s = D.connect(serve)
        s.sendall(hello_frame(b""))
        got = read_all(s)
        s.close()
        T.check(b"authentication failed" in got and b"board" not in got, "empty token: %r" % got)
        tgt.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_refused_at_start(d):
    open_tok = write_token(os.path.join(d, "open"), b"secret\n", 0o644)
    empty = write_token(os.path.join(d, "empty"), b"\n")
    good = write_token(os.path.join(d, "good"), b"secret\n")
    port = D.free_port()
    cases = [
        (["--token-file", open_tok, "--serve", "127.0.0.1:%d" % port], "readable by group or others"),
        (["--token-file", empty, "--serve", "127.0.0.1:%d" % port], "empty"),
        (["--token-file", os.path.join(d, "missing"), "--serve", "127.0.0.1:%d" % port],
         "No such file"),
        (["--serve", "0.0.0.0:%d" % port], "token_file"),
        (["--serve", "0.0.0.0:%d" % port, "--tls-cert", os.path.join(d, "x.pem")],
         "token_file"),
    ]
    for args, want in cases:
        for check in ([], ["--check-config"]):
            rc, out, err = T.run([TLCAPD, "--no-store", "--state-dir", os.path.join(d, "st")] +
                                 args + check, timeout=20)
            T.check(rc == 2 and want in err, "%r %r: exit %d, stderr %s" % (args, check, rc, err))
    # tls_cert without tls_key, a key that is not PEM
    cert, key = make_cert(d)
    for args, want in ((["--tls-cert", cert], "both"), (["--tls-cert", cert, "--tls-key", good],
                                                         "key")):
        rc, out, err = T.run([TLCAPD, "--no-store", "--check-config", "--token-file", good] + args,
                             timeout=20)
        T.check(rc == 2 and want in err, "%r: exit %d, stderr %s" % (args, rc, err))
    # beyond loopback with a token and no TLS: starts, with a warning
    # (a listener of its own: without one the embedded default's fixed ports 7411/7412 are used)
    dm = D.Daemon(TLCAPD, d, ["--token-file", good, "--listen",
                              "ing=bin11@127.0.0.1:%d" % D.free_port()], serve="0.0.0.0:%d" % port)
    rc, _ = dm.stop()
    T.check(rc == 0 and "without TLS" in dm.log(), "non-loopback warning: %d\n%s" % (rc, dm.log()))


def test_tls(d):
    if shutil.which("openssl") is None:
        print("SKIP: openssl not installed")
        sys.exit(T.SKIP)
    cert, key = make_cert(d, "first")
    tokpath = write_token(os.path.join(d, "tok"), b"tls-token\n")
    serve = D.free_port()
    dm, ping = start(d, ["--token-file", tokpath, "--tls-cert", cert, "--tls-key", key],
                     "127.0.0.1:%d" % serve)
    try:
        tgt = feed_target(ping)
        dm.target("board")
        addr = "tls://127.0.0.1:%d" % serve
        rc, out, err = T.run([TLCAP, "--connect", addr, "--ca", cert, "--token-file", tokpath,
                              "targets"])
        T.check(rc == 0 and b"board" in out, "tlcap over TLS: %d %s" % (rc, err))
        rc, out, err = T.run([TLCAP, "--connect", addr, "--token-file", tokpath, "targets"])
        T.check(rc == 1 and "does not verify" in err, "untrusted certificate: %d %s" % (rc, err))
        # plain text to the TLS port: not a byte back
        s = D.connect(serve)
        s.sendall(hello_frame(b"tls-token") + b"\x04\x08\x02\x6a\x00")
        s.shutdown(socket.SHUT_WR)
        got = read_all(s)
        s.close()
        T.eq(got, b"", "plain text to the TLS port")
        # openssl s_client verifies the chain
        p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % serve,
                            "-CAfile", cert, "-verify_return_error", "-servername", "localhost"],
                           input=b"", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        o = p.stdout.decode(errors="replace")
        T.check(p.returncode == 0 and "Verify return code: 0 (ok)" in o and "CN = first" in o,
                "s_client: %d\n%s" % (p.returncode, o[-1500:]))
        # random bytes from 60 connections (some looking like a TLS record): no crash, no leak
        fds = len(os.listdir("/proc/%d/fd" % dm.p.pid))
        rnd = __import__("random").Random(18)
        for i in range(60):
            c = D.connect(serve)
            junk = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 3000)))
            if i % 3 == 0:
                junk = b"\x16\x03\x01" + junk
            try:
                c.sendall(junk)
                c.shutdown(socket.SHUT_WR)
                read_all(c, 10)
            except OSError:
                pass
            c.close()
        D.wait_until(lambda: len(os.listdir("/proc/%d/fd" % dm.p.pid)) <= fds, 15,
                     "descriptors back to %d" % fds, step=0.05)
        rc, out, err = T.run([TLCAP, "--connect", addr, "--ca", cert, "--token-file", tokpath,
                              "stats", "board", "--export", "json"])
        T.check(rc == 0 and b'"events": 6' in out.replace(b'"events":6', b'"events": 6'),
                "after the junk: %d %s %r" % (rc, err, out[:300]))
        # SIGHUP: new certificate and new token
        cert2, key2 = make_cert(d, "second", "cert2")
        shutil.copy(cert2, cert)
        shutil.copy(key2, key)
        write_token(tokpath, b"rotated-token\n")
        before = dm.log().count("re-read")
        dm.p.send_signal(signal.SIGHUP)
        D.wait_until(lambda: dm.log().count("re-read") > before, 10, "token re-read")
        p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % serve,
                            "-CAfile", cert, "-verify_return_error"],
                           input=b"", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        o = p.stdout.decode(errors="replace")
        T.check(p.returncode == 0 and "CN = second" in o, "reloaded certificate:\n%s" % o[-800:])
        env = dict(os.environ, TLCAP_TOKEN="tls-token")
        rc, out, err = T.run([TLCAP, "--connect", addr, "--ca", cert, "targets"], env=env)
        T.check(rc == 1 and "authentication failed" in err, "old token after SIGHUP: %d" % rc)
        env["TLCAP_TOKEN"] = "rotated-token"
        rc, out, err = T.run([TLCAP, "--connect", addr, "--ca", cert, "targets"], env=env)
        T.check(rc == 0 and b"board" in out, "new token after SIGHUP: %d %s" % (rc, err))
        tgt.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")


def test_unix(d):
    path = os.path.join(d, "sub.sock")
    # a stale socket file: bound once, nobody listening
    st = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    st.bind(path)
    st.close()
    dm, ping = start(d, [], "unix:" + path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        T.eq(oct(mode), oct(0o660), "socket mode")
        tgt = feed_target(ping)
        dm.target("board")
        rc, out, err = T.run([TLCAP, "--connect", "unix:" + path, "targets"])
        T.check(rc == 0 and b"board" in out, "tlcap over unix: %d %s" % (rc, err))
        T.check("stale" in dm.log(), "stale socket not reported:\n" + dm.log())
        tgt.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "exit status")
    T.check(not os.path.exists(path), "socket file left at exit")


if __name__ == "__main__":
    if shutil.which("openssl") is None:
        print("SKIP: openssl not installed (apt-get install openssl)")
        sys.exit(T.SKIP)
    T.main([test_token, test_refused_at_start, test_tls, test_unix])
