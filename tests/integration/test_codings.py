"""Transfer and content codings the broker cannot see through are refused, so that nothing is
smuggled past its parser (a request body read as the next request) or past its response
scrubber (a real value inside a compressed body)."""

import gzip
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import (LoopbackHttpServer, RawClient, Upstream, allow_policy, assert_refusal,
                      connect_to_arg, curl, raw_exchange, tls_server_context)

HOST = "api.example.test"
GITHUB = "api.github.com"
REAL = "ghp_R3alT0kenF0rTestsOnly0123456789abcd"


@pytest.fixture(scope="module")
def upstream_m():
    u = Upstream()
    yield u
    u.close()


@pytest.fixture(scope="module")
def broker_m(tmp_path_factory, upstream_m):
    from conftest import Broker
    b = Broker(tmp_path_factory.mktemp("codings"),
               policy=allow_policy(HOST, ports=[upstream_m.port]),
               connect_to=[connect_to_arg(HOST, upstream_m.port)])
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc!r}: {b.stderr[-2000:]}"


SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\n\r\n"


@pytest.mark.parametrize("codings", [
    ["xchunked"],                # not chunked at all: RFC 9112 §6.1 says 400
    ["chunked, identity"],       # chunked, but not the final coding
    ["chunked", "identity"],     # the same over two fields
    ["gzip, chunked"],           # a coding the broker's body checks cannot see through
])
def test_request_transfer_coding_other_than_chunked_is_400(broker_m, upstream_m, codings):
    head = (f"POST http://{HOST}:{upstream_m.port}/te HTTP/1.1\r\n"
            f"Host: {HOST}:{upstream_m.port}\r\n"
            + "".join(f"Transfer-Encoding: {c}\r\n" for c in codings)
            + "\r\n").encode()
    with RawClient(broker_m.port) as c:
        c.send(head + SMUGGLED)
        resp = c.read_response()
        assert_refusal(resp.status, resp.headers, resp.body, "bad_request", 400,
                       session=broker_m.session)
        assert "Transfer-Encoding" in resp.json()["message"]
        assert c.is_closed_by_peer()
    paths = [r["path"] for r in upstream_m.requests]
    assert "/te" not in paths and "/smuggled" not in paths


def test_chunked_request_still_passes(broker_m, upstream_m):
    head = (f"POST http://{HOST}:{upstream_m.port}/chunked-ok HTTP/1.1\r\n"
            f"Host: {HOST}:{upstream_m.port}\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5\r\nhello\r\n0\r\n\r\n").encode()
    resp = raw_exchange(broker_m.port, head)
    assert resp.status == 200
    assert resp.json()["body_length"] == 5


# ---- responses: a session with a credential scrubs responses, so it must see their bytes ----


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


RESPONSES = {
    # The second Content-Encoding field names gzip; the first one says identity.
    "/ce-twice": (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: identity\r\n"
                  b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"),
    # One field listing identity and then gzip.
    "/ce-list": (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                 b"Content-Encoding: identity, gzip\r\nContent-Length: %d\r\n\r\n"),
    # A transfer coding under the chunked one: the dechunked bytes are still gzip.
    "/te-gzip": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    # Over two fields.
    "/te-twice": (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: gzip\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n"),
}


class _RawHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = gzip.compress(b"the upstream echoes the token " + REAL.encode())
        head = RESPONSES[self.path]
        if b"Content-Length" in head:
            self.wfile.write(head % len(body) + body)
        else:
            self.wfile.write(head + _chunked(body))
        self.close_connection = True


@pytest.fixture
def raw_tls_upstream(pki):
    server = LoopbackHttpServer(_RawHandler, tls_server_context(pki)).start()
    yield server
    server.shutdown()
    server.server_close()


def _session(broker_factory, port, pki, credential=True):
    policy = {"version": 1, "allow": [{"host": GITHUB, "ports": [port]}]}
    env = {}
    if credential:
        policy["credentials"] = {"github": {"type": "github", "env": ["GITHUB_TOKEN"],
                                            "hosts": [GITHUB]}}
        env = {"GITHUB_TOKEN": REAL}
    return broker_factory(policy=policy, connect_to=[connect_to_arg(GITHUB, port)],
                          upstream_ca=pki.ca_cert, env=env)


@pytest.mark.parametrize("path", sorted(RESPONSES))
def test_coded_responses_cannot_pass_the_scrubber(broker_factory, raw_tls_upstream, pki, path):
    b = _session(broker_factory, raw_tls_upstream.port, pki)
    r = curl(f"https://{GITHUB}:{raw_tls_upstream.port}{path}", proxy=b.proxy, cacert=b.ca_cert)
    doc = assert_refusal(r.status, r.headers, r.body, "upstream_unreachable", 502)
    assert "coding" in doc["message"] or "compressed" in doc["message"]
    assert gzip.compress(REAL.encode())[10:20] not in r.body


def test_coded_responses_pass_unchanged_without_credentials(broker_factory, raw_tls_upstream,
                                                           pki):
    # Nothing to scrub: the broker relays what the upstream sent, as any proxy does.
    b = _session(broker_factory, raw_tls_upstream.port, pki, credential=False)
    r = curl(f"https://{GITHUB}:{raw_tls_upstream.port}/ce-list", proxy=b.proxy,
             cacert=b.ca_cert, args=["--raw"])
    assert r.status == 200
    assert r.headers["content-encoding"] == "identity, gzip"
