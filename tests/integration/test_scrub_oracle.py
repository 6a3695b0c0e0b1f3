"""The response scrubber is no oracle (docs/policy.md): what it holds back of a response while the
upstream pauses never depends on whether the bytes begin a real value. The attack: an allowed
upstream echoes what the child sends and pauses; the child sends "ghp_" plus a guess and looks
at which guesses come back held. Streams of events stay streams: nothing of an event that ends
in a line break waits for the next one."""

import select
import socket
import ssl
import string
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote

import pytest

from conftest import LoopbackHttpServer, connect_to_arg, tls_server_context

GITHUB = "api.github.com"
ECHO = "other.example.test"
REAL = "ghp_R3alT0kenF0rTestsOnly0123456789abcd"  # shaped like a GitHub classic token
ALPHABET = string.ascii_letters + string.digits
PAUSE_WAIT = 0.02  # how long the child looks at what came while the upstream pauses
RELEASED = b'{"echo": "'  # the part of every echo before the child's text


class _PausingEcho(BaseHTTPRequestHandler):
    """GET /echo/TEXT: a chunked response whose first chunk is `{"echo": "TEXT`, then a pause
    until the test releases it, then `"}`. GET /events/N: N server-sent events, each its own
    chunk, each waiting for a release."""
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def _chunk(self, data: bytes):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _pause(self):
        self.server.paused.set()
        if not self.server.release.wait(10):
            raise TimeoutError("the test never released the pause")
        self.server.release.clear()

    def do_GET(self):
        kind, _, arg = self.path.lstrip("/").partition("/")
        content_type = b"text/event-stream" if kind == "events" else b"application/json"
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type +
                         b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        if kind == "echo":
            self._chunk(b'{"echo": "' + unquote(arg).encode())
            self._pause()
            self._chunk(b'"}')
        else:
            for i in range(int(arg)):
                self._chunk(b'data: {"token": "ghp_%d"}\n\n' % i)
                self._pause()
        self._chunk(b"")


class PausingUpstream:
    def __init__(self, pki):
        self.server = LoopbackHttpServer(_PausingEcho, tls_server_context(pki))
        self.server.paused = threading.Event()
        self.server.release = threading.Event()
        self.server.start()
        self.port = self.server.port

    def wait_paused(self):
        assert self.server.paused.wait(10), "the upstream never paused"
        self.server.paused.clear()

    def release(self):
        self.server.release.set()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def echo(pki):
    u = PausingUpstream(pki)
    yield u
    u.close()


@pytest.fixture
def session(broker_factory, echo, pki):
    """A GitHub credential whose real value the scrubber hides in every response, and an
    allowed echo host that is not its bound host."""
    policy = {
        "version": 1,
        "allow": [{"host": ECHO, "ports": [echo.port]}],
        "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"],
                                   "hosts": [GITHUB]}},
    }
    return broker_factory(policy=policy, connect_to=[connect_to_arg(ECHO, echo.port)],
                          upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL})


class Child:
    """One keep-alive TLS connection through the broker to the echo host, as a child makes it."""

    def __init__(self, session, echo):
        self.echo = echo
        raw = socket.create_connection(("127.0.0.1", session.port), timeout=10)
        target = self.host = f"{ECHO}:{echo.port}"
        raw.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            piece = raw.recv(4096)
            assert piece, "the broker closed the CONNECT"
            head += piece
        assert head.startswith(b"HTTP/1.1 200"), head
        ctx = ssl.create_default_context(cafile=str(session.ca_cert))
        self.sock = ctx.wrap_socket(raw, server_hostname=ECHO)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _read_for(self, seconds: float) -> bytes:
        """What arrives within `seconds`."""
        got = b""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if not self.sock.pending() and not select.select([self.sock], [], [], left)[0]:
                break
            piece = self.sock.recv(65536)
            assert piece, "the broker closed the connection"
            got += piece
        return got

    def _read_until(self, end: bytes, have: bytes) -> bytes:
        self.sock.settimeout(10)
        while not have.endswith(end):
            piece = self.sock.recv(65536)
            assert piece, "the broker closed the connection"
            have += piece
        return have

    def get(self, path: str):
        """(bytes that came while the upstream paused, the whole response)."""
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        self.echo.wait_paused()
        # What the broker always releases (the JSON up to the echoed text) is waited for, so a
        # busy machine does not pass for a hold; then whatever else comes within PAUSE_WAIT.
        during = b""
        deadline = time.monotonic() + 5
        while not body_of(during).startswith(RELEASED) and time.monotonic() < deadline:
            during += self._read_for(0.05)
        during += self._read_for(PAUSE_WAIT)
        self.echo.release()
        return during, self._read_until(b"0\r\n\r\n", during)

    def close(self):
        self.sock.close()


def body_of(response: bytes) -> bytes:
    """The de-chunked body of a whole response (or of the part of one that came)."""
    head, _, rest = response.partition(b"\r\n\r\n")
    body = b""
    while rest:
        size_line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line, 16)
        body += rest[:size]
        rest = rest[size + 2:]
    return body


def test_what_is_held_back_is_the_same_for_a_right_and_a_wrong_guess(session, echo):
    """1,000 guesses: at each of 16 positions past "ghp_", the real prefix and one more
    character, each of the 62. The child sees the same bytes during the pause for every guess,
    so it recovers no character."""
    child = Child(session, echo)
    seen = {}  # bytes of the body that came during the pause → guesses
    recovered = 0
    tries = 0
    try:
        for k in range(4, 20):
            held_at_k = {}
            for c in ALPHABET:
                guess = REAL[:k] + c
                during, whole = child.get("/echo/" + guess)
                tries += 1
                # The guess always comes back whole, after the pause.
                assert body_of(whole) == b'{"echo": "' + guess.encode() + b'"}'
                released = body_of(during)
                seen.setdefault(released, []).append(guess)
                held_at_k.setdefault(len(released), []).append(c)
            right = REAL[k]
            if any(cs == [right] for cs in held_at_k.values()):
                recovered += 1
        for c in ALPHABET[:8]:  # and 8 that do not begin with the prefix at all, to make 1,000
            during, _ = child.get("/echo/x" + c)
            tries += 1
            seen.setdefault(body_of(during), []).append("x" + c)
    finally:
        child.close()
    assert tries == 1000
    assert recovered == 0
    # One answer for every guess: the JSON up to the token, nothing of the token.
    assert list(seen) == [RELEASED], {k: v[:3] for k, v in seen.items()}


def test_events_are_not_held_for_the_next_one(session, echo):
    """An event that ends in a line break reaches the child while the upstream pauses, even
    when it carries something shaped like a token."""
    child = Child(session, echo)
    try:
        child.sock.sendall(f"GET /events/5 HTTP/1.1\r\nHost: {child.host}\r\n\r\n".encode())
        got = b""
        for i in range(5):
            echo.wait_paused()
            event = b'data: {"token": "ghp_%d"}\n\n' % i
            deadline = time.monotonic() + 5
            while not body_of(got).endswith(event) and time.monotonic() < deadline:
                got += child._read_for(0.05)
            assert body_of(got).endswith(event), f"event {i} was held back: {body_of(got)!r}"
            echo.release()
        child._read_until(b"0\r\n\r\n", got)
    finally:
        child.close()
