"""One admission for HTTP/1.1 and HTTP/2 (proxy/interception.cpp): a request inside an
intercepted CONNECT is held to the CONNECT's target by the same checks on either protocol. Each
case is sent twice through the broker, once on an HTTP/1.1 connection inside TLS (by hand, so that
the request line and Host say what the case says) and once as an HTTP/2 stream (frames by hand,
so that :scheme, :authority and Host do); both must get the same status and error code, and no
refused request may reach the upstream."""
import json

import pytest

from conftest import tls_through_connect
from test_http2_attacks import H2Raw, header_frames, make_session
from test_mitm import GITHUB

OTHER = "evil.example.test"


@pytest.fixture
def session(broker_factory, tls_upstream, pki):
    return make_session(broker_factory, tls_upstream, pki)


def h1_answer(b, port, method, target, host):
    s = tls_through_connect(b, f"{GITHUB}:{port}", GITHUB, b.ca_cert)
    head = f"{method} {target} HTTP/1.1\r\n" + (f"Host: {host}\r\n" if host else "")
    s.sendall((head + "Connection: close\r\n\r\n").encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, (json.loads(body)["error"] if status >= 400 else "")


def h2_answer(b, port, fields):
    c = H2Raw(b, port)
    c.send(header_frames(1, c.encoder.encode(fields)))
    assert c.pump(lambda: 1 in c.ended or 1 in c.resets), c.describe()
    assert 1 not in c.resets, f"reset, not answered: {c.describe()}"
    status = c.status(1)
    error = json.loads(c.bodies[1])["error"] if status >= 400 else ""
    c.close()
    return status, error


def test_http1_and_http2_refuse_the_same_inner_requests_with_the_same_codes(session, tls_upstream):
    port = tls_upstream.port
    target, other = f"{GITHUB}:{port}", f"{OTHER}:{port}"
    # (what the case is, HTTP/1.1 method / target / Host, HTTP/2 fields, the answer both get)
    cases = [
        ("allowed", ("GET", "/user", target),
         [(":method", "GET"), (":scheme", "https"), (":authority", target), (":path", "/user")],
         (200, "")),
        ("Host names another host", ("GET", "/user", other),
         [(":method", "GET"), (":scheme", "https"), (":authority", other), (":path", "/user")],
         (421, "host_mismatch")),
        ("the authority names another host", ("GET", f"https://{other}/user", target),
         [(":method", "GET"), (":scheme", "https"), (":authority", other), (":path", "/user"),
          ("host", target)],
         (421, "host_mismatch")),
        ("the scheme is not the connection's", ("GET", f"http://{target}/user", target),
         [(":method", "GET"), (":scheme", "http"), (":authority", target), (":path", "/user")],
         (421, "host_mismatch")),
        ("a CONNECT inside", ("CONNECT", target, target),
         [(":method", "CONNECT"), (":authority", target)],
         (400, "bad_request")),
    ]
    for name, (method, h1_target, host), fields, expected in cases:
        seen = len(tls_upstream.requests)
        assert h1_answer(session, port, method, h1_target, host) == expected, f"HTTP/1.1: {name}"
        assert h2_answer(session, port, fields) == expected, f"HTTP/2: {name}"
        reached = len(tls_upstream.requests) - seen
        assert reached == (2 if expected[0] == 200 else 0), (name, reached)
    # Each refusal is recorded, on either protocol.
    records = session.wait_for_records(lambda r: r.get("status") == 421, count=6)
    assert len([r for r in records if r.get("http") == "2"]) == 3, records
