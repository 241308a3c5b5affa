"""Stand-ins for efl_debugd in the integration tests: its framing (docs/efl.md) and a loopback
server whose subclasses script the conversation.

A packet is a little-endian header (u32 size including the 12-byte header, i32 client id,
i32 opcode) and its payload. Opcode 0 registers opcode names: a u64 cookie and NUL-terminated
names, answered with the cookie and one i32 opcode a name (here 20, 21, ... in order)."""
import socket
import struct
import threading

HEADER = struct.Struct("<Iii")


def recv_exact(c, n):
    """Exactly n bytes from socket c; EOFError if the peer closes first."""
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b


def read_packet(c):
    """The next packet on c: (client id, opcode, payload)."""
    size, cid, op = HEADER.unpack(recv_exact(c, HEADER.size))
    return cid, op, recv_exact(c, size - HEADER.size)


def packet(cid, op, payload=b""):
    """One framed packet's bytes."""
    return HEADER.pack(HEADER.size + len(payload), cid, op) + payload


def send_packet(c, cid, op, payload=b""):
    c.sendall(packet(cid, op, payload))


def answer_register(c, payload, ids, cookie=None):
    """Answers a registration (opcode 0) whose payload is `payload`: each name gets the next
    opcode from 20, recorded in `ids` (name -> opcode). The answer carries `cookie` (default:
    the one the client sent)."""
    names = payload[8:].split(b"\0")[:-1]
    for i, n in enumerate(names):
        ids[n.decode()] = 20 + i
    if cookie is None:
        cookie = payload[:8]
    send_packet(c, 0, 0, cookie + b"".join(struct.pack("<i", 20 + i) for i in range(len(names))))


def drain_until_closed(c, timeout=10):
    """Reads and discards until the peer hangs up (or `timeout` seconds pass without a byte)."""
    c.settimeout(timeout)
    try:
        while c.recv(4096):
            pass
    except OSError:
        pass


class Server:
    """A listener on 127.0.0.1:port (0: a free one, then in self.port) and a thread that accepts
    `connections` connections one at a time (None: until closed) and hands each to
    self.conversation(c, k), k counting from 0. An exception other than those in `quiet` ends
    the service and is kept in self.error as its repr, for the test to report."""

    connections = None
    quiet = ()

    def __init__(self, port=0):
        self.error = None
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", port))
        self.ls.listen(4)
        self.port = self.ls.getsockname()[1]
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()

    def conversation(self, c, k):
        raise NotImplementedError

    def _serve(self):
        try:
            k = 0
            while self.connections is None or k < self.connections:
                c, _ = self.ls.accept()
                with c:
                    self.conversation(c, k)
                k += 1
        except self.quiet:
            pass
        except Exception as e:  # reported by the test through self.error
            self.error = repr(e)

    def close(self):
        try:
            self.ls.shutdown(socket.SHUT_RDWR)  # wakes the accept() (Linux): the port is free
        except OSError:
            pass
        self.ls.close()
        self.t.join(10)
