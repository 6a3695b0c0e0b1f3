"""Attacks on the broker's HTTP/2 server side (docs/architecture.md), sent by hand: a raw client CONNECTs
through the broker, speaks TLS with ALPN h2 to its intercepting leaf and writes frames built
here (HPACK blocks from the `hpack` module). Each test checks what the client gets back (GOAWAY
ENHANCE_YOUR_CALM for a flood, RST_STREAM REFUSED_STREAM over the concurrency limit, 431 for a
header list too large, a reset for a stream idle past its deadline), then that the broker still
serves: a normal curl --http2 request through it works and the process is alive."""
import json
import socket
import ssl
import struct
import time
from http.server import BaseHTTPRequestHandler

import hpack
import pytest

from conftest import LoopbackHttpServer, RawClient, allow_policy, connect_to_arg, curl
from test_mitm import GITHUB

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = \
    0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x8, 0x9
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
INTERNAL_ERROR, REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM = 0x2, 0x7, 0x8, 0xb
SETTINGS_INITIAL_WINDOW_SIZE = 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def header_frames(stream, block, end_stream=True, size=16000, end_headers=True):
    """A header block as HEADERS then CONTINUATION frames of at most `size` bytes; the last
    one ends the block unless `end_headers` is false."""
    pieces = [block[i:i + size] for i in range(0, len(block), size)] or [b""]
    out = b""
    for i, piece in enumerate(pieces):
        flags = END_HEADERS if end_headers and i == len(pieces) - 1 else 0
        if i == 0:
            out += frame(HEADERS, flags | (END_STREAM if end_stream else 0), stream, piece)
        else:
            out += frame(CONTINUATION, flags, stream, piece)
    return out


class H2Raw:
    """One HTTP/2 connection by hand through the broker's CONNECT. What comes back is parsed as
    it arrives: GOAWAY, RST_STREAM, each stream's header blocks (decoded) and body."""
    opened = []  # closed after each test, before its brokers stop

    def __init__(self, broker, port):
        self.authority = f"{GITHUB}:{port}"
        raw = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        raw.sendall(f"CONNECT {self.authority} HTTP/1.1\r\nHost: {self.authority}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            byte = raw.recv(1)
            assert byte, f"the broker closed after CONNECT: {head!r}"
            head += byte
        assert head.startswith(b"HTTP/1.1 200"), head
        ctx = ssl.create_default_context(cafile=str(broker.ca_cert))
        ctx.set_alpn_protocols(["h2"])
        self.sock = ctx.wrap_socket(raw, server_hostname=GITHUB)
        assert self.sock.selected_alpn_protocol() == "h2"
        self.encoder, self.decoder = hpack.Encoder(), hpack.Decoder()
        self.buf, self.block = b"", None
        self.kinds = []        # the type of every frame received, in order
        self.settings = 0      # SETTINGS frames received (not ACKs)
        self.goaway = None     # (last stream id, error code)
        self.resets = {}       # stream -> error code
        self.heads = {}        # stream -> [decoded header blocks as dicts]
        self.bodies = {}       # stream -> bytes
        self.ended = set()     # streams the broker ended with END_STREAM
        self.closed = False
        H2Raw.opened.append(self)
        # Large windows: responses never wait for a WINDOW_UPDATE from this client.
        self.send(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE,
                                                              1 << 24)),
                  frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))
        # The broker's SETTINGS, acknowledged before anything else: its limits are in force.
        assert self.pump(lambda: self.settings >= 1), self.describe()

    def fields(self, method="GET", path="/user", extra=()):
        return self.encoder.encode([(":method", method), (":scheme", "https"),
                                    (":authority", self.authority), (":path", path), *extra])

    def request(self, stream, method="GET", path="/user", extra=(), end_stream=True):
        return header_frames(stream, self.fields(method, path, extra), end_stream)

    def send(self, *frames):
        try:
            self.sock.sendall(b"".join(frames))
        except OSError:  # the broker may close mid-flood: what it said before is what counts
            pass

    def pump(self, until, timeout=10.0):
        """Reads and parses until `until()` holds, the broker closes, or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while not until() and not self.closed and time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                data = b""
            if not data:
                self.closed = True
            self.buf += data
            while len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + length:
                    break
                kind, flags = self.buf[3], self.buf[4]
                stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                payload, self.buf = self.buf[9:9 + length], self.buf[9 + length:]
                self._on_frame(kind, flags, stream, payload)
        return until()

    def _on_frame(self, kind, flags, stream, payload):
        self.kinds.append(kind)
        if kind in (DATA, HEADERS) and flags & PADDED:
            payload = payload[1:len(payload) - payload[0]]
        if kind == HEADERS and flags & PRIORITY_FLAG:
            payload = payload[5:]
        if kind == SETTINGS and not flags & ACK:
            self.settings += 1
            self.send(frame(SETTINGS, ACK, 0))
        elif kind == GOAWAY:
            self.goaway = struct.unpack(">II", payload[:8])
        elif kind == RST_STREAM:
            self.resets[stream] = struct.unpack(">I", payload)[0]
        elif kind == DATA:
            self.bodies[stream] = self.bodies.get(stream, b"") + payload
        elif kind == HEADERS:
            self.block = [stream, flags, payload]
        elif kind == CONTINUATION:
            self.block[2] += payload
        if kind in (HEADERS, CONTINUATION) and flags & END_HEADERS:
            stream, first_flags, block = self.block
            self.heads.setdefault(stream, []).append(dict(self.decoder.decode(block)))
            flags = first_flags
        if kind in (DATA, HEADERS, CONTINUATION) and flags & END_STREAM:
            self.ended.add(stream)

    def status(self, stream):
        return int(self.heads[stream][0][":status"]) if stream in self.heads else None

    def describe(self):
        return (f"goaway={self.goaway} resets={self.resets} closed={self.closed} "
                f"statuses={ {s: self.status(s) for s in self.heads} } frame types={self.kinds[:40]}")

    def close(self):
        self.sock.close()


def make_session(broker_factory, tls_upstream, pki, args=()):
    policy = {"version": 1, "allow": [{"host": GITHUB, "ports": [tls_upstream.port],
                                       "paths": ["/user", "/repos/*"]}]}
    return broker_factory(policy=policy, connect_to=[connect_to_arg(GITHUB, tls_upstream.port)],
                          upstream_ca=pki.ca_cert, args=args)


@pytest.fixture
def session(broker_factory, tls_upstream, pki):
    return make_session(broker_factory, tls_upstream, pki)


@pytest.fixture(autouse=True)
def _close_connections(broker_factory):
    yield
    while H2Raw.opened:
        H2Raw.opened.pop().close()


def assert_still_serving(broker, upstream):
    r = curl(f"https://{GITHUB}:{upstream.port}/user", proxy=broker.proxy, cacert=broker.ca_cert,
             http="2")
    assert r.status == 200 and r.versions == ["2"], (r.status, r.versions, r.stderr)
    assert broker.alive(), broker.stderr[-2000:]


def assert_calmed_by(broker, upstream, burst):
    """`burst(conn)` is sent in one write, then nothing more: the broker answers GOAWAY
    ENHANCE_YOUR_CALM, goes on serving others, and closes the connection (RFC 9113 §5.4.1:
    after a GOAWAY for an error, the endpoint MUST close the TCP connection)."""
    c = H2Raw(broker, upstream.port)
    c.send(burst(c))
    assert c.pump(lambda: c.goaway is not None), c.describe()
    assert c.goaway[1] == ENHANCE_YOUR_CALM, c.describe()
    # No stream past the GOAWAY's last one went up (client streams are odd: 1, 3, ...).
    assert len(upstream.requests) <= (c.goaway[0] + 1) // 2, (c.goaway, len(upstream.requests))
    assert_still_serving(broker, upstream)
    assert c.pump(lambda: c.closed, timeout=5), \
        f"the connection stayed open after GOAWAY ENHANCE_YOUR_CALM: {c.describe()}"
    c.close()
    return c


def test_rapid_reset_gets_goaway_enhance_your_calm(session, tls_upstream):
    # CVE-2023-44487: each stream opened and cancelled at once, a thousand times.
    assert_calmed_by(session, tls_upstream, lambda c: b"".join(
        c.request(s) + frame(RST_STREAM, 0, s, struct.pack(">I", CANCEL))
        for s in range(1, 2000, 2)))


def test_continuation_flood_gets_goaway_enhance_your_calm(session, tls_upstream):
    # CVE-2024-27316: HEADERS, then 40 CONTINUATION frames of one header block never ended.
    def burst(c):
        block = c.fields("GET", "/user", [(f"x-pad-{i}", "v" * 64) for i in range(41)])
        return header_frames(1, block, size=len(block) // 41 + 1, end_headers=False)
    assert_calmed_by(session, tls_upstream, burst)
    assert not [r for r in tls_upstream.requests if "x-pad-0" in r["headers"]]


def test_ping_flood_gets_goaway_enhance_your_calm(session, tls_upstream):
    c = assert_calmed_by(session, tls_upstream,
                         lambda c: b"".join(frame(PING, 0, 0, struct.pack(">Q", i))
                                            for i in range(1000)))
    assert c.kinds.count(PING) <= 501, c.describe()  # no answer past the budget


def test_settings_flood_gets_goaway_enhance_your_calm(session, tls_upstream):
    assert_calmed_by(session, tls_upstream, lambda c: frame(SETTINGS, 0, 0) * 1000)


def test_empty_data_flood_gets_goaway_enhance_your_calm(session, tls_upstream):
    assert_calmed_by(session, tls_upstream,
                     lambda c: c.request(1, "POST", "/repos/o/r", end_stream=False) +
                     frame(DATA, 0, 1) * 500)


def test_a_client_over_the_100_streams_it_agreed_to_loses_the_connection(session, tls_upstream):
    """100 streams open at once are served; a 101st, after the client acknowledged the limit,
    breaks the protocol (nghttp2 answers a connection error, RFC 9113 allows a stream error too):
    GOAWAY, the connection closed, nothing of the 101st upstream, the broker serving on. (Before
    the acknowledgement the extra streams are refused one by one: unit-tested.)"""
    tls_upstream.server.socket.listen(256)  # a hundred dials at once: no SYN left unanswered
    c = H2Raw(session, tls_upstream.port)
    streams = list(range(1, 201, 2))  # 100 GETs at once: all answered on the connection
    c.send(*[c.request(s, "GET", f"/repos/o/r/{s}") for s in streams])
    assert c.pump(lambda: c.ended >= set(streams), timeout=60), c.describe()
    assert [c.status(s) for s in streams] == [200] * 100, c.describe()
    held = list(range(201, 403, 2))  # 101 POSTs whose bodies have not come
    c.send(*[c.request(s, "POST", f"/repos/o/r/{s}", [("content-length", "5")], end_stream=False)
             for s in held])
    assert c.pump(lambda: c.goaway is not None and c.closed, timeout=30), c.describe()
    assert f"/repos/o/r/{held[-1]}" not in [r["path"] for r in tls_upstream.requests]
    c.close()
    assert_still_serving(session, tls_upstream)


@pytest.mark.parametrize("too_large", ["bytes", "fields"])
def test_a_header_list_over_the_limit_is_answered_431_and_the_next_stream_works(
        session, tls_upstream, too_large):
    c = H2Raw(session, tls_upstream.port)
    if too_large == "bytes":  # 5 fields of 14,000 bytes: over 64 KiB, in 5 frames
        extra = [(f"x-big-{i}", "b" * 14000) for i in range(5)]
    else:  # 101 fields (with the 4 pseudo-header fields), under 4 KiB
        extra = [(f"x-big-{i}", "b") for i in range(97)]
    c.send(header_frames(1, c.fields("GET", "/user", extra)), c.request(3))
    assert c.pump(lambda: {1, 3} <= c.ended), c.describe()
    assert c.status(1) == 431, c.describe()
    assert json.loads(c.bodies[1])["error"] == "header_too_large"
    assert c.status(3) == 200 and c.goaway is None, c.describe()
    assert [r["path"] for r in tls_upstream.requests] == ["/user"]
    assert "x-big-0" not in tls_upstream.requests[0]["headers"]
    c.close()
    assert_still_serving(session, tls_upstream)


def test_a_stream_idle_past_the_body_deadline_is_reset_and_recorded(
        broker_factory, tls_upstream, pki):
    b = make_session(broker_factory, tls_upstream, pki, args=["--timeout", "body=1s"])
    c = H2Raw(b, tls_upstream.port)
    t0 = time.monotonic()
    c.send(c.request(1, "POST", "/repos/o/r/idle", [("content-length", "10")], end_stream=False),
           c.request(3))
    assert c.pump(lambda: 3 in c.ended) and c.status(3) == 200, c.describe()
    assert c.pump(lambda: 1 in c.resets or 1 in c.ended, timeout=15), \
        f"stream 1 neither reset nor answered 15 s into a 1 s body deadline: {c.describe()}"
    elapsed = time.monotonic() - t0
    assert 1 in c.resets and 1 not in c.heads, c.describe()  # reset, never a made-up answer
    assert 0.9 <= elapsed < 8, elapsed
    [rec] = b.wait_for_records(lambda r: r.get("path") == "/repos/o/r/idle")
    assert rec["http"] == "2" and rec["error"] == "timeout", rec
    # The connection goes on: another stream after it.
    c.send(c.request(5))
    assert c.pump(lambda: 5 in c.ended) and c.status(5) == 200, c.describe()
    assert c.goaway is None, c.describe()
    c.close()
    assert_still_serving(b, tls_upstream)


def test_a_stream_whose_upstream_is_silent_gets_504_and_the_others_go_on(
        broker_factory, tls_upstream, pki):
    b = make_session(broker_factory, tls_upstream, pki, args=["--timeout", "upstream=1s"])
    c = H2Raw(b, tls_upstream.port)
    t0 = time.monotonic()
    c.send(c.request(1, path="/repos/o/r/sleep/4"), c.request(3))
    assert c.pump(lambda: 3 in c.ended) and c.status(3) == 200, c.describe()
    assert c.pump(lambda: 1 in c.ended or 1 in c.resets, timeout=15), c.describe()
    elapsed = time.monotonic() - t0
    assert c.status(1) == 504, c.describe()
    assert json.loads(c.bodies[1])["error"] == "upstream_timeout"
    assert 0.9 <= elapsed < 3.5, elapsed  # the deadline, not the upstream's late answer
    [rec] = b.wait_for_records(lambda r: r.get("path") == "/repos/o/r/sleep/4")
    assert rec["http"] == "2" and rec["status"] == 504 and rec["error"] == "upstream_timeout", rec
    c.send(c.request(5))
    assert c.pump(lambda: 5 in c.ended) and c.status(5) == 200, c.describe()
    assert c.goaway is None, c.describe()
    c.close()


def test_the_http2_preface_in_cleartext_gets_no_http2_service(session, tls_upstream):
    with RawClient(session.port) as c:
        c.send(PREFACE + frame(SETTINGS, 0, 0) +
               header_frames(1, hpack.Encoder().encode([
                   (":method", "GET"), (":scheme", "http"), (":path", "/user"),
                   (":authority", f"{GITHUB}:{tls_upstream.port}")])))
        while c._fill():  # until the broker closes (a socket timeout fails the test)
            pass
    assert c.buf == b"" or c.buf.startswith(b"HTTP/1.1 400 "), c.buf[:300]
    assert tls_upstream.requests == []
    assert_still_serving(session, tls_upstream)


class _UpgradingHandler(BaseHTTPRequestHandler):
    """Switches to h2c whenever asked (101, then a SETTINGS frame); otherwise echoes the
    fields it got as JSON."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.seen.append({k.lower(): v for k, v in self.headers.items()})
        if "h2c" in (self.headers.get("Upgrade") or "").lower():
            self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                             b"Upgrade: h2c\r\n\r\n" + frame(SETTINGS, 0, 0))
            self.close_connection = True
            return
        body = json.dumps(self.server.seen[-1]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_an_h2c_upgrade_on_a_forward_request_is_not_upgraded(broker_factory):
    server = LoopbackHttpServer(_UpgradingHandler)
    server.seen = []
    server.start()
    try:
        b = broker_factory(policy=allow_policy("api.example.test", ports=[server.port]),
                           connect_to=[connect_to_arg("api.example.test", server.port)])
        with RawClient(b.port) as c:
            c.send(f"GET http://api.example.test:{server.port}/up HTTP/1.1\r\n"
                   f"Host: api.example.test:{server.port}\r\n"
                   "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                   "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n".encode())
            r = c.read_response()
        assert r.status == 200, (r.status, r.raw_head, r.body[:200])
        seen = r.json()
        assert "upgrade" not in seen and "http2-settings" not in seen, seen
        r = curl(f"http://api.example.test:{server.port}/after", proxy=b.proxy)
        assert r.status == 200 and b.alive()
    finally:
        server.shutdown()
        server.server_close()
