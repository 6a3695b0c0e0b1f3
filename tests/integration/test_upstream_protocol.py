"""An upstream that answers outside what the broker can relay safely gets the client a 502
upstream_protocol_error (docs/cli.md), audited with that code: a malformed response, more interim
responses than the limit, and a 101 to a request that asked for no upgrade. An upstream that
cannot be reached stays upstream_unreachable (test_guard.py). Bytes an upstream sends after its
response are never read as the answer to the next request on that connection."""

import socket
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import (LoopbackHttpServer, assert_refusal, connect_to_arg, curl,
                      tls_server_context)

HOST = "api.example.test"

ANSWERS = {
    "/malformed": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
    "/interim": b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" * 40
    + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "/upgrade": b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.wfile.write(ANSWERS[self.path])
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture
def upstream(pki):
    server = LoopbackHttpServer(_Handler, tls_server_context(pki)).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path,why", [("/malformed", "malformed response"),
                                      ("/interim", "too many interim responses"),
                                      ("/upgrade", "upgrade that was not asked for")])
def test_an_answer_outside_the_protocol_is_502_upstream_protocol_error(broker_factory, upstream,
                                                                        pki, path, why):
    policy = {"version": 1, "allow": [{"host": HOST, "ports": [upstream.port]}]}
    b = broker_factory(policy=policy, connect_to=[connect_to_arg(HOST, upstream.port)],
                       upstream_ca=pki.ca_cert)
    r = curl(f"https://{HOST}:{upstream.port}{path}", proxy=b.proxy, cacert=b.ca_cert)
    doc = assert_refusal(r.status, r.headers, r.body, "upstream_protocol_error", 502,
                         session=b.session)
    assert why in doc["message"], doc
    rec = b.wait_for_records(lambda rec: rec.get("path") == path)[0]
    assert (rec["status"], rec["error"]) == (502, "upstream_protocol_error"), rec


class _Smuggler(BaseHTTPRequestHandler):
    """Answers /first, then at once, in a TLS record of its own but the same TCP segment, a
    second response nobody asked for; keeps the connection open for the next request."""
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/first":
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
            self.wfile.flush()
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled")
            self.wfile.flush()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        else:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
            self.wfile.flush()


def test_bytes_after_a_response_are_never_the_next_response(broker_factory, pki):
    # The broker reads TLS ahead, so the unasked-for response may already sit decrypted-to-be in
    # its TLS layer, not on the socket, when the connection goes back to the pool.
    server = LoopbackHttpServer(_Smuggler, tls_server_context(pki)).start()
    try:
        policy = {"version": 1, "allow": [{"host": HOST, "ports": [server.port]}]}
        b = broker_factory(policy=policy, connect_to=[connect_to_arg(HOST, server.port)],
                           upstream_ca=pki.ca_cert)
        for _ in range(3):
            r = curl(f"https://{HOST}:{server.port}/first", f"https://{HOST}:{server.port}/next",
                     proxy=b.proxy, cacert=b.ca_cert)
            assert r.statuses == [200, 200], r.stderr
            assert r.headers["content-length"] == "6"  # "second", not "smuggled"
    finally:
        server.shutdown()
        server.server_close()
