"""A minimal RFC 6455 WebSocket server side, for the fake OpenAI Responses endpoint that Codex
reaches over `wss://api.openai.com/v1/responses` (pure stdlib).

Used from inside a `BaseHTTPRequestHandler` that received a GET with `Upgrade: websocket`:
`accept(handler)` answers 101, then `WebSocket(handler.rfile, handler.wfile)` reads the client's
(masked) frames and writes unmasked server frames. Text and binary messages, fragmentation,
ping/pong and close are handled; permessage-deflate is never negotiated (the server does not
answer the offer, so the client must not compress).
"""

import base64
import hashlib
import struct

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA

MAX_MESSAGE = 64 << 20


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.strip().encode() + GUID).digest()).decode()


def is_upgrade(headers) -> bool:
    """True when an HTTP request's headers ask for a WebSocket."""
    connection = (headers.get("Connection") or "").lower()
    return "upgrade" in [t.strip() for t in connection.split(",")] and \
        (headers.get("Upgrade") or "").lower() == "websocket"


def accept(handler, extra_headers=()):
    """Answers the handler's upgrade request with 101 Switching Protocols."""
    key = handler.headers.get("Sec-WebSocket-Key") or ""
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Accept: {accept_key(key)}"]
    lines += [f"{k}: {v}" for k, v in extra_headers]
    handler.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    handler.wfile.flush()
    handler.close_connection = True


class Closed(Exception):
    """The peer closed (a close frame, or EOF); `.code` is its close code when it sent one."""

    def __init__(self, code=None, reason=""):
        super().__init__(f"websocket closed ({code} {reason})")
        self.code, self.reason = code, reason


class WebSocket:
    def __init__(self, rfile, wfile):
        self.rfile, self.wfile = rfile, wfile
        self.closed = False
        self.close_code = None

    def _read_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            piece = self.rfile.read(n - len(out))
            if not piece:
                raise Closed(None, "EOF")
            out += piece
        return out

    def _read_frame(self):
        b0, b1 = self._read_exact(2)
        fin, opcode = bool(b0 & 0x80), b0 & 0x0F
        if b0 & 0x70:
            raise ValueError("reserved bits set (no extension was negotiated)")
        masked, length = bool(b1 & 0x80), b1 & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._read_exact(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._read_exact(8))
        if length > MAX_MESSAGE:
            raise ValueError("frame too large")
        mask = self._read_exact(4) if masked else None
        payload = self._read_exact(length)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return fin, opcode, payload

    def send_frame(self, opcode: int, payload: bytes):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([n])
        elif n < 1 << 16:
            head += bytes([126]) + struct.pack("!H", n)
        else:
            head += bytes([127]) + struct.pack("!Q", n)
        self.wfile.write(head + payload)
        self.wfile.flush()

    def send_text(self, text: str):
        self.send_frame(OP_TEXT, text.encode())

    def close(self, code=1000, reason=""):
        if not self.closed:
            self.closed = True
            try:
                self.send_frame(OP_CLOSE, struct.pack("!H", code) + reason.encode())
            except OSError:
                pass

    def receive(self):
        """The next data message (str for text, bytes for binary); answers pings; raises Closed
        when the peer closes or goes away."""
        parts, kind = [], None
        while True:
            fin, opcode, payload = self._read_frame()
            if opcode == OP_PING:
                self.send_frame(OP_PONG, payload)
                continue
            if opcode == OP_PONG:
                continue
            if opcode == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                self.close_code = code
                self.close(code or 1000)
                raise Closed(code, payload[2:].decode(errors="replace"))
            if opcode in (OP_TEXT, OP_BINARY):
                kind, parts = opcode, [payload]
            elif opcode == OP_CONT:
                parts.append(payload)
            else:
                raise ValueError(f"unknown opcode {opcode}")
            if fin:
                data = b"".join(parts)
                return data.decode() if kind == OP_TEXT else data
