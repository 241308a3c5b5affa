"""Shared helpers for tlcap's integration tests (Debian's python3, standard library only).

Byte builders for the three live formats written from the format documents (not from the C
code), and small process helpers. Every wait is bounded."""
import os
import socket
import struct
import subprocess
import sys
import tempfile

SKIP = 77  # CTest SKIP_RETURN_CODE


_handed_out = set()


def free_port():
    """A loopback TCP port that was free a moment ago (bound to port 0, then released).

    The kernel may give the same port to two binds in a row once the first is closed, so a
    port handed out earlier in this test process is never handed out again: two free_port()
    calls for one daemon (its listener and its subscriber port) always differ."""
    for _ in range(1000):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p not in _handed_out:
            _handed_out.add(p)
            return p
    raise RuntimeError("no fresh loopback port after 1000 tries")


def gen_pb2(tmp, proto_dir):
    """The Python classes of proto/tlcap.proto, generated with protoc into `tmp` (Google's own
    runtime reads the daemon's messages); exits SKIP when protoc or python3-protobuf is
    missing."""
    import shutil
    protoc = shutil.which("protoc")
    if protoc is None:
        print("SKIP: protoc not installed (apt-get install protobuf-compiler)")
        sys.exit(SKIP)
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        print("SKIP: python3-protobuf not installed")
        sys.exit(SKIP)
    subprocess.check_call([protoc, "--python_out=" + tmp, "-I" + proto_dir,
                           os.path.join(proto_dir, "tlcap.proto")])
    sys.path.insert(0, tmp)
    import tlcap_pb2
    return tlcap_pb2


def bin11(handle, etype, core, data, time_ns, extra_flag_bits=0):
    """One winIDEA v1.1 record: u32 handle, u32 flags (core<<4 | type), u64 data, i64 time."""
    flags = ((core & 0xFF) << 4) | (etype & 0xF) | extra_flag_bits
    return struct.pack("<IIQq", handle, flags, data, time_ns)


def bin10(handle, etype, data, time_ns):
    """One winIDEA v1.0 record: u32 handle, u32 event (type in bits 24-27), u64 data, i64 time."""
    return struct.pack("<IIQq", handle, (etype & 0xF) << 24, data, time_ns)


def evlog_item(tim, thread, event, detail=None, srctim=0.0, obj=0, big_endian=False):
    """One Eina_Evlog_Item with its strings, padded to a multiple of 8 (padding 0xAA: stale)."""
    e = event.encode() + b"\0"
    d = detail.encode() + b"\0" if detail is not None else b""
    event_offset = 40
    detail_offset = 40 + len(e) if detail is not None else 0
    size = 40 + len(e) + len(d)
    event_next = (size + 7) // 8 * 8
    order = ">" if big_endian else "<"
    head = struct.pack(order + "ddQQHHH", tim, srctim, thread, obj, event_offset,
                       detail_offset, event_next) + b"\xaa\xaa"
    body = head + e + d
    return body + b"\xaa" * (event_next - len(body))


def evlog_block(items, overflow=0, header_big_endian=False):
    payload = b"".join(items)
    order = ">" if header_big_endian else "<"
    return struct.pack(order + "III", 0x0FFEE211, len(payload), overflow) + payload


def varint(n):
    """A protobuf base-128 varint (n >= 0)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(buf, i):
    """The varint at buf[i]: (value, index after it); IndexError if buf ends inside it."""
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def run(args, input_bytes=None, timeout=120, env=None):
    p = subprocess.run(args, input=input_bytes, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def eq(got, want, what):
    if got != want:
        raise Failure("%s: got %r, want %r" % (what, got, want))


def main(tests):
    """Runs test functions, prints one line each and the closing 'N passed, N failed' line."""
    passed = failed = 0
    for t in tests:
        try:
            with tempfile.TemporaryDirectory() as d:
                t(d)
            print("PASS", t.__name__)
            passed += 1
        except Failure as e:
            print("FAIL", t.__name__ + ":", e)
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
