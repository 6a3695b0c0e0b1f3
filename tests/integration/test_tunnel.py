"""HTTPS through CONNECT: end-to-end TLS with the upstream, keep-alive, refusals, audit."""

from conftest import (RawClient, allow_policy, assert_refusal, connect_to_arg, curl,
                      pattern_bytes, sha256)

HOST = "api.example.test"


def start(broker_factory, tls_upstream):
    return broker_factory(policy=allow_policy(HOST, ports=[tls_upstream.port], tunnel=True),
                          connect_to=[connect_to_arg(HOST, tls_upstream.port)])


def test_https_keep_alive_through_one_tunnel(broker_factory, tls_upstream, pki):
    b = start(broker_factory, tls_upstream)
    urls = [f"https://{HOST}:{tls_upstream.port}/item/{i}" for i in range(30)]
    r = curl(*urls, proxy=b.proxy, cacert=pki.ca_cert)
    assert r.returncode == 0, r.stderr
    assert r.statuses == [200] * 30
    assert sum(r.new_connections) == 1, r.new_connections
    assert len(tls_upstream.requests) == 30
    assert tls_upstream.connections == 1
    # the upstream saw the requests as the client sent them, Host and all
    assert all(req["headers"]["Host"] == f"{HOST}:{tls_upstream.port}"
               for req in tls_upstream.requests)

    tunnels = b.wait_for_records(lambda r: r.get("event") == "tunnel")
    assert len(tunnels) == 1, b.records()
    t = tunnels[0]
    assert t["method"] == "CONNECT"
    assert t["host"] == HOST
    assert t["port"] == tls_upstream.port
    assert t["status"] == 200
    assert t["decision"] == "allow"
    assert t["rule"] == "allow[0]"
    assert t["bytes_out"] > 30 * 40   # 30 encrypted requests went up
    assert t["bytes_in"] > 30 * 100   # 30 encrypted responses came back


def test_https_single_request_response_is_the_upstreams(broker_factory, tls_upstream, pki):
    b = start(broker_factory, tls_upstream)
    r = curl(f"https://{HOST}:{tls_upstream.port}/path?q=1", proxy=b.proxy, cacert=pki.ca_cert,
             args=["-X", "PUT", "-d", "payload"])
    assert r.returncode == 0, r.stderr
    assert r.status == 200
    echo = r.json()
    assert echo["method"] == "PUT"
    assert echo["path"] == "/path?q=1"
    assert echo["body_sha256"] == sha256(b"payload")


def refused_inside(port, target):
    """CONNECT, then a plain request inside: a CONNECT-time refusal answers that request
    (docs/cli.md), since clients hide a failed CONNECT's body."""
    with RawClient(port) as c:
        c.send(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        assert c.read_response(head_only=True).status == 200
        c.send(f"GET / HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        return c.read_response()


def test_denied_connect_is_answered_with_403_json(broker_factory, tls_upstream):
    b = start(broker_factory, tls_upstream)
    resp = refused_inside(b.port, "denied.example.test:443")
    doc = assert_refusal(resp.status, resp.headers, resp.body, "policy_denied", 403,
                         session=b.session, host="denied.example.test")
    assert doc["rule"] == "default_deny"
    assert tls_upstream.connections == 0

    rec = b.wait_for_records(lambda r: r.get("host") == "denied.example.test")
    assert rec, b.records()
    assert rec[0]["method"] == "CONNECT"
    assert rec[0]["decision"] == "deny"
    assert rec[0]["error"] == "policy_denied"


def test_denied_connect_shows_curl_the_json_refusal(broker_factory, tls_upstream):
    b = start(broker_factory, tls_upstream)
    r = curl("https://denied.example.test/", proxy=b.proxy, cacert=b.ca_cert)
    assert r.returncode == 0, r.stderr
    assert_refusal(r.status, r.headers, r.body, "policy_denied", 403, session=b.session)


def test_connect_to_port_outside_rule_is_denied(broker_factory, tls_upstream):
    b = start(broker_factory, tls_upstream)
    resp = refused_inside(b.port, f"{HOST}:443")
    assert_refusal(resp.status, resp.headers, resp.body, "policy_denied", 403, session=b.session)


def test_bulk_download_20mb_intact(broker_factory, tls_upstream, pki):
    b = start(broker_factory, tls_upstream)
    n = 20 * 1000 * 1000
    r = curl(f"https://{HOST}:{tls_upstream.port}/bytes/{n}", proxy=b.proxy, cacert=pki.ca_cert,
             timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.status == 200
    assert len(r.body) == n
    assert sha256(r.body) == sha256(pattern_bytes(n))

    tunnels = b.wait_for_records(lambda r: r.get("event") == "tunnel")
    assert len(tunnels) == 1, b.records()
    assert tunnels[0]["bytes_in"] >= n
    assert tunnels[0]["bytes_out"] > 0


class LineEchoServer:
    """Echoes every byte back; when the client half-closes, sends b"bye" and closes."""

    def __init__(self):
        import socket
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conn, _ = self.sock.accept()
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    conn.sendall(b"bye")
                    return
                self.received += data
                conn.sendall(data)

    def close(self):
        self.sock.close()


def test_bytes_behind_the_connect_head_and_half_close_pass_through(broker_factory):
    echo = LineEchoServer()
    try:
        b = broker_factory(policy=allow_policy(HOST, ports=[echo.port], tunnel=True),
                           connect_to=[connect_to_arg(HOST, echo.port)])
        with RawClient(b.port) as c:
            # The first payload rides in the same write as the CONNECT head.
            c.send(f"CONNECT {HOST}:{echo.port} HTTP/1.1\r\nHost: {HOST}:{echo.port}\r\n\r\n"
                   "early-bytes".encode())
            assert c.read_response(head_only=True).status == 200
            while len(c.buf) < len(b"early-bytes"):
                assert c._fill()
            assert c.buf == b"early-bytes"
            c.buf = b""
            # Half-close: the upstream sees EOF but its answer still comes back.
            import socket
            c.sock.shutdown(socket.SHUT_WR)
            while c._fill():
                pass
            assert c.buf == b"bye"
        assert echo.received == b"early-bytes"
        rec = b.wait_for_records(lambda r: r.get("event") == "tunnel")
        assert rec and rec[0]["bytes_out"] == len(b"early-bytes"), b.records()
        assert rec[0]["bytes_in"] == len(b"early-bytes") + len(b"bye")
    finally:
        echo.close()


def test_a_spent_byte_budget_closes_an_open_tunnel(broker_factory, tls_upstream, pki):
    import time
    b = broker_factory(policy=allow_policy(HOST, ports=[tls_upstream.port], tunnel=True,
                                           budgets={"bytes_in": "1MB"}),
                       connect_to=[connect_to_arg(HOST, tls_upstream.port)])
    n = 20 * 1000 * 1000
    t0 = time.monotonic()
    r = curl(f"https://{HOST}:{tls_upstream.port}/bytes/{n}", proxy=b.proxy, cacert=pki.ca_cert,
             args=["--limit-rate", "2M"], timeout=30)
    assert r.returncode != 0 and len(r.body) < n  # cut, not completed
    assert time.monotonic() - t0 < 10
    rec = b.wait_for_records(lambda x: x.get("event") == "tunnel")
    assert rec and rec[0]["error"] == "budget_exhausted" and rec[0]["bytes_in"] >= 1_000_000
    # and the next one is refused at CONNECT
    with RawClient(b.port) as c:
        c.send(f"CONNECT {HOST}:{tls_upstream.port} HTTP/1.1\r\n"
               f"Host: {HOST}:{tls_upstream.port}\r\n\r\n".encode())
        resp = c.read_response()
    doc = assert_refusal(resp.status, resp.headers, resp.body, "budget_exhausted", 429)
    assert doc["budget"] == "bytes_in"
