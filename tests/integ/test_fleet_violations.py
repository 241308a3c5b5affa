"""Budget violations published to NATS JetStream (SPEC 13, docs/fleet.md), against Debian's
real nats-server -js on loopback, read back with libnats's own client (nats_consume) and decoded
with Google's protobuf runtime from proto/tlcap.proto.

fleet_violation_drive publishes through daemon/fleet with a real engine and budget watch: a
storm of 1,000 violations of one budget in one engine push, then one more 1.1 s later. The
stream must hold, on PREFIX.lab%2E1.violations only, TE_VIOLATION target events carrying the
budget, the area and context names, value, limit and times of the activations pushed; at most
the rate limit's burst of the storm; and the `suppressed` counts of the messages must add up,
with the messages themselves, to every violation.

usage: test_fleet_violations.py DRIVE CONSUME PROTO_DIR
Exit 0 pass, 1 fail, 77 skip (nats-server, protoc or python3-protobuf missing).
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402

DRIVE, CONSUME, PROTO_DIR = sys.argv[1:4]
NATS = shutil.which("nats-server") or ("/usr/sbin/nats-server"
                                        if os.path.exists("/usr/sbin/nats-server") else None)
STORM = 1000
RATE = 10  # TLC_VSERVE_RATE (daemon/vserve/vserve.h)


def test_violation_storm(d):
    port = D.free_port()
    logf = open(os.path.join(d, "nats.log"), "ab")
    srv = subprocess.Popen([NATS, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd",
                            os.path.join(d, "js")], stdout=logf, stderr=logf)
    try:
        def up():
            import socket
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    return s.recv(5) == b"INFO "
            except OSError:
                return False
        D.wait_until(up, 10, "nats-server up")
        url = "nats://127.0.0.1:%d" % port
        r = subprocess.run([DRIVE, url, "tlcap.labv", str(STORM)], capture_output=True,
                           timeout=60)
        T.check(r.returncode == 0, "drive: %d %s" % (r.returncode, r.stderr.decode()))
        f = r.stdout.decode().split()
        got = dict(zip(f[0::2], (int(x) for x in f[1::2])))
        T.check(got["seen"] == STORM + 1, "violations seen: %s" % got)
        T.check(got["sent"] + got["suppressed"] == STORM + 1, "sent + suppressed: %s" % got)
        T.check(got["published"] == got["sent"] and got["dropped"] == 0, "published: %s" % got)
        out = subprocess.run([CONSUME, url, "tlcap.labv.>", "800", "--js"], capture_output=True,
                             timeout=60)
        T.check(out.returncode == 0, "nats_consume: %s" % out.stderr.decode())
        msgs = []
        for line in out.stdout.decode().splitlines()[1:]:
            subj, hexdata = line.split("\t")
            m = pb.ServerMessage()
            m.ParseFromString(bytes.fromhex(hexdata))
            msgs.append((subj, m))
        T.check(len(msgs) == got["sent"], "messages in the stream: %d, sent %d"
                % (len(msgs), got["sent"]))
        T.check(2 <= len(msgs) <= RATE + 2, "a storm is at most the burst: %d" % len(msgs))
        total = 0
        for subj, m in msgs:
            T.check(subj == "tlcap.labv.lab%2E1.violations", "subject %s" % subj)
            te = m.target_event
            T.check(m.WhichOneof("msg") == "target_event" and te.kind == pb.TE_VIOLATION,
                    "not a violation event: %s" % m)
            T.check(te.target == "lab.1" and te.instance_id == 77, "target %s" % te)
            v = te.violation
            T.check(v.budget == "net_a" and v.stat == "net" and v.area == "TaskA"
                    and v.context == "core0" and v.handle == 1 and v.over and v.limit == 100,
                    "violation fields: %s" % v)
            T.check(v.end_ns - v.start_ns == v.value, "value is end - start: %s" % v)
            total += 1 + te.suppressed
        last = msgs[-1][1].target_event
        T.check(last.violation.value == 700 and last.violation.number == STORM + 1
                and last.violation.start_ns == 1000 + STORM * 1000,
                "the last one: %s" % last.violation)
        T.check(all(m.target_event.violation.value == 500 for _, m in msgs[:-1]),
                "the storm's values")
        T.check(total == STORM + 1, "messages + suppressed = %d, want %d" % (total, STORM + 1))
    finally:
        srv.kill()
        srv.wait()
        logf.close()


if __name__ == "__main__":
    if NATS is None:
        print("SKIP: nats-server not installed (apt-get install nats-server)")
        sys.exit(T.SKIP)
    tmp = tempfile.mkdtemp(prefix="tlc_fleetv_")
    try:
        pb = T.gen_pb2(tmp, PROTO_DIR)
        T.main([test_violation_storm])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
