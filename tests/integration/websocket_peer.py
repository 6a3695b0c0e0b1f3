"""A minimal RFC 6455 WebSocket peer for the integration tests (Debian's python3 has no
websockets package): frames written and read over any socket (plain or TLS), the client's
upgrade request, and a TLS upstream that accepts upgrades and runs a handler per connection,
recording the head and every frame it read."""

import base64
import hashlib
import os
import socket
import ssl
import struct
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def encode_frame(opcode, payload=b"", mask=False, fin=True, rsv1=False, length=None) -> bytes:
    """One frame; masked with a random key when `mask` (a client's). `length` overrides the
    length field (to announce more than is sent)."""
    if isinstance(payload, str):
        payload = payload.encode()
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode])
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def close_payload(code: int, reason: str = "") -> bytes:
    return struct.pack("!H", code) + reason.encode()


class Frame:
    def __init__(self, fin, rsv, opcode, masked, payload):
        self.fin, self.rsv, self.opcode, self.masked, self.payload = fin, rsv, opcode, masked, payload

    @property
    def close_code(self):
        return struct.unpack("!H", self.payload[:2])[0] if len(self.payload) >= 2 else None

    @property
    def text(self):
        return self.payload.decode(errors="replace")

    def __repr__(self):
        return f"Frame(op={self.opcode:#x}, fin={self.fin}, masked={self.masked}, {self.payload[:80]!r})"


class Peer:
    """Frames over a connected socket; `buffered` are bytes already read past a head."""

    def __init__(self, sock, buffered=b""):
        self.sock = sock
        self.buf = bytearray(buffered)
        self.raw = bytearray()  # every byte read from the socket, as read

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("the peer closed the connection")
        self.raw += data
        self.buf += data

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def recv_frame(self) -> Frame:
        b0, b1 = self._take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._take(8))[0]
        key = self._take(4) if b1 & 0x80 else None
        payload = self._take(n)
        if key:
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        return Frame(bool(b0 & 0x80), b0 & 0x70, b0 & 0x0F, key is not None, payload)

    def recv_message(self) -> Frame:
        """The next control frame or whole data message (fragments joined; `masked` is the
        first fragment's)."""
        first = self.recv_frame()
        if first.opcode >= 0x8 or first.fin:
            return first
        parts = [first.payload]
        while True:
            f = self.recv_frame()
            if f.opcode >= 0x8:
                raise AssertionError(f"control frame between fragments not expected here: {f}")
            parts.append(f.payload)
            if f.fin:
                return Frame(True, first.rsv, first.opcode, first.masked, b"".join(parts))

    def send(self, data: bytes):
        self.sock.sendall(data)

    def send_frame(self, opcode, payload=b"", **kw):
        self.send(encode_frame(opcode, payload, **kw))

    def closed_by_peer(self, timeout=5.0) -> bool:
        """True when the peer ends the connection (EOF or reset) within `timeout`, reading
        and dropping whatever comes first."""
        self.sock.settimeout(timeout)
        try:
            while True:
                self._fill()
        except (EOFError, ConnectionError, ssl.SSLError):
            return True
        except socket.timeout:
            return False


def upgrade_request(host: str, path="/socket", headers=(), key="dGhlIHNhbXBsZSBub25jZQ==") -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
             "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {key}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_head(sock):
    """An HTTP head, and the bytes read past it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError(f"closed before a whole head: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode(errors="replace") + "\r\n\r\n", rest


class Connection:
    """What the upstream saw on one connection: the upgrade head, the frames, the raw bytes."""

    def __init__(self):
        self.head = ""
        self.frames = []   # every frame read, in order
        self.messages = []  # data messages (fragments joined), in order
        self.raw_after_head = b""
        self.done = threading.Event()


class WebSocketUpstream:
    """A TLS upstream on 127.0.0.1 that answers each upgrade with `status` (101 by default,
    adding `extra_headers`) and then runs `handler(peer, conn)`; the default handler echoes
    data messages, answers pings and closes."""

    def __init__(self, pki, handler=None, status=101, extra_headers=()):
        self.handler = handler or echo
        self.status = status
        self.extra_headers = list(extra_headers)
        self.connections = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(pki.leaf_cert, pki.leaf_key)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw):
        conn = Connection()
        self.connections.append(conn)
        peer = None
        try:
            raw.settimeout(20)
            with self.ctx.wrap_socket(raw, server_side=True) as s:
                head, rest = read_head(s)
                conn.head = head
                if self.status != 101:
                    s.sendall(f"HTTP/1.1 {self.status} No\r\nContent-Length: 0\r\n"
                              "Connection: close\r\n\r\n".encode())
                    peer = RecordingPeer(s, conn, rest)
                    peer.closed_by_peer(2.0)
                    return
                key = next(line.split(":", 1)[1].strip() for line in head.split("\r\n")
                           if line.lower().startswith("sec-websocket-key:"))
                s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept_key(key)}\r\n"
                           + "".join(h + "\r\n" for h in self.extra_headers) + "\r\n").encode())
                peer = RecordingPeer(s, conn, rest)
                self.handler(peer, conn)
        except (EOFError, OSError, ssl.SSLError):
            pass
        finally:
            if peer is not None:
                conn.raw_after_head = bytes(peer.raw_all)
            conn.done.set()

    def wait(self, index=0, timeout=10.0) -> Connection:
        """The `index`th connection, once its handler has finished."""
        for _ in range(int(timeout * 20)):
            if len(self.connections) > index:
                break
            threading.Event().wait(0.05)
        conn = self.connections[index]
        assert conn.done.wait(timeout), "the upstream's connection did not end"
        return conn

    def close(self):
        self.sock.close()


class RecordingPeer(Peer):
    """A Peer that notes every frame and message it reads into its Connection."""

    def __init__(self, sock, conn, buffered=b""):
        super().__init__(sock, buffered)
        self.conn = conn
        self.raw_all = bytearray(buffered)

    def _fill(self):
        before = len(self.raw)
        super()._fill()
        self.raw_all += self.raw[before:]

    def recv_frame(self):
        f = super().recv_frame()
        self.conn.frames.append(f)
        return f

    def recv_message(self):
        f = Peer.recv_message(self)
        if f.opcode in (TEXT, BINARY):
            self.conn.messages.append(f)
        return f


def echo(peer, conn):
    """Echoes data messages (one frame each), answers pings, returns the close and ends."""
    while True:
        f = peer.recv_message()
        if f.opcode == PING:
            peer.send_frame(PONG, f.payload)
        elif f.opcode == CLOSE:
            peer.send_frame(CLOSE, f.payload)
            return
        elif f.opcode in (TEXT, BINARY):
            peer.send_frame(f.opcode, f.payload)


class Client(Peer):
    """The client side, through the broker: `connect(b, host, port, ca)` CONNECTs, speaks TLS
    with the broker's leaf and sends the upgrade (with `extra` bytes in the same write)."""

    @classmethod
    def connect(cls, broker_port, host, port, ca, headers=(), extra=b"", path="/socket"):
        raw = socket.create_connection(("127.0.0.1", broker_port), timeout=10)
        target = f"{host}:{port}"
        raw.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head, _ = read_head(raw)
        assert head.startswith("HTTP/1.1 200"), head
        ctx = ssl.create_default_context(cafile=str(ca))
        s = ctx.wrap_socket(raw, server_hostname=host)
        s.sendall(upgrade_request(target, path, headers) + extra)
        head, rest = read_head(s)
        c = cls(s, rest)
        c.head = head
        return c

    def send_message(self, opcode, payload):
        self.send_frame(opcode, payload, mask=True)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
