"""Interception (docs/architecture.md, docs/policy.md, docs/cli.md): TLS toward the client with the session CA, the dummy→real
swap on bound hosts only, the canary, the real-secret block, response scrubbing, Host/SNI checks,
upstream verification, plain HTTP after CONNECT and tunnel rules."""

import base64
import json
import re
import socket
import ssl
import zlib
from pathlib import Path

import pytest

from conftest import (RawClient, allow_policy, assert_refusal, connect_to_arg, curl,
                      pattern_bytes, sha256, tls_through_connect)
from websocket_peer import TEXT, Peer, echo, encode_frame

GITHUB = "api.github.com"
OTHER = "other.example.test"
REAL = "ghp_R3alT0kenF0rTestsOnly0123456789abcd"  # shaped like a GitHub classic token


def github_policy(port, *, extra_allow=(), tunnel_other=False):
    allow = [{"host": GITHUB, "ports": [port]}, {"host": OTHER, "ports": [port]}]
    if tunnel_other:
        allow[1]["tunnel"] = True
    allow += list(extra_allow)
    return {
        "version": 1,
        "allow": allow,
        "credentials": {
            "github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB]},
        },
    }


@pytest.fixture
def session(broker_factory, tls_upstream, pki):
    """A broker with a GitHub credential bound to api.github.com, both test hosts mapped onto
    the local HTTPS upstream."""
    b = broker_factory(policy=github_policy(tls_upstream.port),
                       connect_to=[connect_to_arg(GITHUB, tls_upstream.port),
                                   connect_to_arg(OTHER, tls_upstream.port)],
                       upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL}, env_file=True)
    b.dummy = b.session_env()["GITHUB_TOKEN"]
    return b


def url(host, port, path="/"):
    return f"https://{host}:{port}{path}"


def assert_nothing_written_contains(b, *values):
    """No byte the broker wrote (audit log, env file, CA dir, its stderr) holds a real value."""
    files = [p for p in b.dir.rglob("*") if p.is_file() and not p.name.startswith("policy")]
    assert files
    for p in files:
        data = p.read_bytes()
        for v in values:
            assert v.encode() not in data, f"{p} contains a real secret"
            assert base64.b64encode(v.encode()) not in data, f"{p} contains a real secret (b64)"


def test_dummy_has_the_real_shape_and_is_not_the_real_value(session):
    d = session.dummy
    assert d != REAL
    assert d.startswith("ghp_") and len(d) == len(REAL)
    # Only the public shape: GitHub's base62 alphabet, drawn anew at every position.
    assert re.fullmatch(r"ghp_[A-Za-z0-9]+", d), "not a GitHub token's shape"
    env = session.session_env()
    assert env["SSL_CERT_FILE"] == env["REQUESTS_CA_BUNDLE"] == env["GIT_SSL_CAINFO"]
    bundle = Path(env["SSL_CERT_FILE"]).read_text()
    assert session.ca_cert.read_text().strip() in bundle
    assert_nothing_written_contains(session, REAL)


BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # GitHub's digit order


def github_checksum(random):
    """GitHub's published token checksum: the CRC32 of the 30-character random part, in base62,
    zero-padded to 6 characters."""
    crc, digits = zlib.crc32(random.encode()), ""
    for _ in range(6):
        crc, digit = divmod(crc, 62)
        digits = BASE62[digit] + digits
    return digits


def test_a_github_tokens_dummy_has_a_valid_checksum_of_its_own(broker_factory, tls_upstream, pki):
    random = "".join(BASE62[(i * 7 + 3) % 62] for i in range(30))  # built: no literal token
    real = "ghp_" + random + github_checksum(random)
    b = broker_factory(policy=github_policy(tls_upstream.port),
                       connect_to=[connect_to_arg(GITHUB, tls_upstream.port)],
                       upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": real}, env_file=True)
    d = b.session_env()["GITHUB_TOKEN"]
    assert re.fullmatch(r"ghp_[A-Za-z0-9]{36}", d), "not a GitHub token's shape"
    assert d[4:34] != random
    assert d[34:] == github_checksum(d[4:34]), "the dummy's checksum is not GitHub's"
    r = curl(url(GITHUB, tls_upstream.port, "/user"), proxy=b.proxy, cacert=b.ca_cert,
             args=["-H", f"Authorization: token {d}"])
    assert r.returncode == 0, r.stderr
    assert tls_upstream.requests[-1]["headers"]["Authorization"] == f"token {real}"
    b.stop()
    assert_nothing_written_contains(b, real)


def test_dummy_becomes_real_on_the_bound_host(session, tls_upstream):
    r = curl(url(GITHUB, tls_upstream.port, "/user"), proxy=session.proxy,
             cacert=session.ca_cert, args=["-H", f"Authorization: token {session.dummy}"])
    assert r.returncode == 0, r.stderr
    assert r.status == 200
    seen = tls_upstream.requests[-1]["headers"]
    assert seen["Authorization"] == f"token {REAL}"
    # no compressed body can carry a real value past the scrubber
    assert seen["Accept-Encoding"] == "identity"
    # the echo of the real value came back scrubbed to the dummy
    assert r.json()["headers"]["authorization"] == f"token {session.dummy}"
    rec = session.wait_for_records(lambda x: x.get("event") == "request")
    assert rec and rec[-1]["credential"] == "github"
    assert rec[-1]["scheme"] == "https" and rec[-1]["method"] == "GET"
    assert rec[-1]["path"] == "/user" and rec[-1]["status"] == 200
    session.stop()
    assert_nothing_written_contains(session, REAL)


def test_basic_credentials_as_git_sends_them(session, tls_upstream):
    for user, password in (("x-access-token", session.dummy), (session.dummy, "x-oauth-basic")):
        r = curl(url(GITHUB, tls_upstream.port, "/repo.git/info/refs"), proxy=session.proxy,
                 cacert=session.ca_cert, args=["-u", f"{user}:{password}"])
        assert r.status == 200, r.stderr
        sent = tls_upstream.requests[-1]["headers"]["Authorization"]
        decoded = base64.b64decode(sent.split()[1]).decode()
        assert decoded == f"{user}:{password}".replace(session.dummy, REAL)


def test_dummy_to_an_unbound_host_is_blocked_and_recorded(session, tls_upstream):
    r = curl(url(OTHER, tls_upstream.port, "/collect"), proxy=session.proxy,
             cacert=session.ca_cert, args=["-H", f"Authorization: Bearer {session.dummy}"])
    assert_refusal(r.status, r.headers, r.body, "credential_not_bound", 403,
                   session=session.session, host=OTHER)
    assert tls_upstream.requests == []
    rec = session.wait_for_records(lambda x: x.get("event") == "exfiltration_blocked")
    assert len(rec) == 1
    assert rec[0]["credential"] == "github" and rec[0]["host"] == OTHER
    assert rec[0]["decision"] == "deny"
    # ...also in a query parameter or a request body
    r = curl(url(OTHER, tls_upstream.port, f"/c?token={session.dummy}"), proxy=session.proxy,
             cacert=session.ca_cert)
    assert r.status == 403 and r.headers["x-broker-error"] == "credential_not_bound"
    r = curl(url(OTHER, tls_upstream.port, "/c"), proxy=session.proxy, cacert=session.ca_cert,
             args=["--data-binary", "x" * 70000 + session.dummy + "y" * 10])
    assert r.status == 403 and r.headers["x-broker-error"] == "credential_not_bound"
    assert all(req["body_length"] != 70000 + len(session.dummy) + 10
               for req in tls_upstream.requests if "body_length" in req)


@pytest.mark.parametrize("where", ["header", "query", "body-length", "body-chunked", "basic"])
def test_real_value_in_a_request_is_blocked(session, tls_upstream, where, tmp_path):
    args = []
    path = "/x"
    if where == "header":
        args = ["-H", f"X-Leak: a{REAL}b"]
    elif where == "query":
        path = f"/x?q={REAL}"
    elif where == "basic":
        args = ["-u", f"x-access-token:{REAL}"]
    else:
        body = tmp_path / "body"
        body.write_bytes(b"a" * 100000 + REAL.encode() + b"b" * 5)
        args = ["--data-binary", f"@{body}"]
        if where == "body-chunked":
            args += ["-H", "Transfer-Encoding: chunked"]
    r = curl(url(GITHUB, tls_upstream.port, path), proxy=session.proxy, cacert=session.ca_cert,
             args=args)
    doc = assert_refusal(r.status, r.headers, r.body, "real_secret_blocked", 403,
                         session=session.session)
    assert REAL not in json.dumps(doc)
    # the upstream never received a request carrying it
    assert all(req["headers"].get("X-Leak") is None for req in tls_upstream.requests)
    assert not any(REAL in req["path"] for req in tls_upstream.requests)
    session.stop()
    assert_nothing_written_contains(session, REAL)


@pytest.mark.parametrize("path", ["/reflect/chunked/1", "/reflect/chunked/5",
                                  "/reflect/chunked/17", "/reflect/length/0"])
def test_real_values_in_responses_become_dummies(session, tls_upstream, path):
    r = curl(url(GITHUB, tls_upstream.port, path), proxy=session.proxy, cacert=session.ca_cert,
             args=["-H", f"Authorization: Bearer {session.dummy}"])
    assert r.status == 200, r.stderr
    assert tls_upstream.requests[-1]["headers"]["Authorization"] == f"Bearer {REAL}"
    assert REAL.encode() not in r.body
    assert r.body.count(session.dummy.encode()) == 4
    assert r.headers["x-seen-authorization"] == f"Bearer {session.dummy}"


def test_large_bodies_stream_through_interception(session, tls_upstream, tmp_path):
    n = 8 * 1024 * 1024
    r = curl(url(GITHUB, tls_upstream.port, f"/chunked/{n}"), proxy=session.proxy,
             cacert=session.ca_cert)
    assert r.status == 200 and sha256(r.body) == sha256(pattern_bytes(n))
    r = curl(url(GITHUB, tls_upstream.port, f"/bytes/{n}"), proxy=session.proxy,
             cacert=session.ca_cert)
    assert r.status == 200 and sha256(r.body) == sha256(pattern_bytes(n))
    upload = tmp_path / "up"
    upload.write_bytes(pattern_bytes(3 * 1024 * 1024))
    r = curl(url(GITHUB, tls_upstream.port, "/up"), proxy=session.proxy, cacert=session.ca_cert,
             args=["-H", "Transfer-Encoding: chunked", "--data-binary", f"@{upload}"])
    assert r.status == 200
    assert r.json()["body_sha256"] == sha256(upload.read_bytes())


def test_keep_alive_inside_the_intercepted_connection(session, tls_upstream):
    urls = [url(GITHUB, tls_upstream.port, f"/item/{i}") for i in range(20)]
    r = curl(*urls, proxy=session.proxy, cacert=session.ca_cert)
    assert r.statuses == [200] * 20
    assert sum(r.new_connections) == 1
    assert tls_upstream.connections == 1  # one pooled upstream connection served them all
    recs = session.wait_for_records(lambda x: x.get("event") == "request", count=20)
    assert [x["path"] for x in recs] == [f"/item/{i}" for i in range(20)]


def test_pooled_upstream_serves_new_client_connections(session, tls_upstream):
    for i in range(5):
        r = curl(url(GITHUB, tls_upstream.port, f"/n/{i}"), proxy=session.proxy,
                 cacert=session.ca_cert)
        assert r.status == 200
    assert tls_upstream.connections <= 2  # two worker threads, one pool each


def test_denied_connect_is_answered_inside_tls(session, tls_upstream):
    r = curl("https://denied.example.test/", proxy=session.proxy, cacert=session.ca_cert)
    assert r.returncode == 0, r.stderr
    doc = assert_refusal(r.status, r.headers, r.body, "policy_denied", 403,
                         session=session.session, host="denied.example.test")
    assert doc["rule"] == "default_deny"
    recs = session.wait_for_records(lambda x: x.get("method") == "CONNECT")
    assert recs[0]["event"] == "refused" and recs[0]["decision"] == "deny"


def test_host_header_must_match_the_connect_target(session, tls_upstream):
    r = curl(url(GITHUB, tls_upstream.port), proxy=session.proxy, cacert=session.ca_cert,
             args=["-H", f"Host: {OTHER}:{tls_upstream.port}"])
    assert_refusal(r.status, r.headers, r.body, "host_mismatch", 421)
    assert tls_upstream.requests == []


def test_sni_must_match_the_connect_target(session, tls_upstream):
    target = f"{GITHUB}:{tls_upstream.port}"
    s = tls_through_connect(session, target, OTHER, session.ca_cert)
    s.sendall(f"GET / HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    data = s.recv(65536)
    assert data.startswith(b"HTTP/1.1 421"), data
    assert b'"host_mismatch"' in data
    s.close()
    assert tls_upstream.requests == []


def test_leaf_names_the_connect_host(session, tls_upstream):
    s = tls_through_connect(session, f"{GITHUB}:{tls_upstream.port}", GITHUB, session.ca_cert)
    cert = s.getpeercert()
    assert ("DNS", GITHUB) in cert["subjectAltName"]
    assert s.selected_alpn_protocol() in (None, "http/1.1")
    s.close()


def test_unverifiable_upstream_is_a_502_never_a_downgrade(broker_factory, tls_upstream):
    b = broker_factory(policy=allow_policy(GITHUB, ports=[tls_upstream.port]),
                       connect_to=[connect_to_arg(GITHUB, tls_upstream.port)])
    r = curl(url(GITHUB, tls_upstream.port), proxy=b.proxy, cacert=b.ca_cert)
    doc = assert_refusal(r.status, r.headers, r.body, "upstream_tls_failed", 502)
    assert "verif" in doc["message"]
    assert tls_upstream.requests == []


def test_upstream_name_is_verified_even_through_connect_to(broker_factory, tls_upstream, pki):
    # The test leaf does not name evil.example.test: mapping it onto the upstream must fail.
    b = broker_factory(policy=allow_policy("evil.example.test", ports=[tls_upstream.port]),
                       connect_to=[connect_to_arg("evil.example.test", tls_upstream.port)],
                       upstream_ca=pki.ca_cert)
    r = curl(url("evil.example.test", tls_upstream.port), proxy=b.proxy, cacert=b.ca_cert)
    assert_refusal(r.status, r.headers, r.body, "upstream_tls_failed", 502)


def plain_bytes_after_connect(broker_factory, upstream, payload):
    """CONNECT to the plain upstream, then `payload` instead of a TLS handshake."""
    b = broker_factory(policy=allow_policy(GITHUB, ports=[upstream.port]),
                       connect_to=[connect_to_arg(GITHUB, upstream.port)])
    with RawClient(b.port) as c:
        target = f"{GITHUB}:{upstream.port}"
        c.send(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        assert c.read_response(head_only=True).status == 200
        c.send(payload.replace(b"TARGET", target.encode()))
        return b, c.read_response()


def test_plain_http_after_connect_is_served_as_http(broker_factory, upstream):
    b, resp = plain_bytes_after_connect(broker_factory, upstream,
                                        b"GET /plain HTTP/1.1\r\nHost: TARGET\r\n\r\n")
    assert resp.status == 200
    assert json.loads(resp.body)["path"] == "/plain"
    rec = b.wait_for_records(lambda x: x.get("event") == "request")
    assert rec[0]["scheme"] == "http" and rec[0]["path"] == "/plain"


def test_non_http_bytes_after_connect_are_refused(broker_factory, upstream):
    _, resp = plain_bytes_after_connect(broker_factory, upstream,
                                        b"SSH-2.0-OpenSSH_9.2\r\n\x00\x01\x02\r\n\r\n")
    assert_refusal(resp.status, resp.headers, resp.body, "bad_request", 400)
    assert upstream.requests == []


def test_tunnel_rule_is_not_intercepted(broker_factory, tls_upstream, pki):
    b = broker_factory(policy=allow_policy(OTHER, ports=[tls_upstream.port], tunnel=True),
                       connect_to=[connect_to_arg(OTHER, tls_upstream.port)])
    # The client verifies the upstream's own certificate: nothing in between.
    r = curl(url(OTHER, tls_upstream.port, "/t"), proxy=b.proxy, cacert=pki.ca_cert)
    assert r.status == 200, r.stderr
    rec = b.wait_for_records(lambda x: x.get("event") == "tunnel")
    assert rec[0]["method"] == "CONNECT" and rec[0]["status"] == 200


def test_policy_methods_and_paths_apply_inside_interception(broker_factory, tls_upstream, pki):
    policy = {"version": 1, "allow": [{"host": GITHUB, "ports": [tls_upstream.port],
                                        "methods": ["GET"], "paths": ["/repos/*"]}]}
    b = broker_factory(policy=policy, connect_to=[connect_to_arg(GITHUB, tls_upstream.port)],
                       upstream_ca=pki.ca_cert)
    ok = curl(url(GITHUB, tls_upstream.port, "/repos/o/r"), proxy=b.proxy, cacert=b.ca_cert)
    assert ok.status == 200
    for args, path in ((["-X", "DELETE"], "/repos/o/r"), ([], "/user")):
        r = curl(url(GITHUB, tls_upstream.port, path), proxy=b.proxy, cacert=b.ca_cert,
                 args=args)
        assert_refusal(r.status, r.headers, r.body, "policy_denied", 403)
    assert [req["path"] for req in tls_upstream.requests] == ["/repos/o/r"]


def test_private_address_refusal_is_answered_inside_tls(broker_factory, tls_upstream):
    b = broker_factory(policy=allow_policy("localhost", ports=[tls_upstream.port]))
    r = curl(f"https://localhost:{tls_upstream.port}/", proxy=b.proxy, cacert=b.ca_cert)
    assert r.returncode == 0, r.stderr
    assert_refusal(r.status, r.headers, r.body, "private_address_blocked", 403,
                   session=b.session, host="localhost")
    assert tls_upstream.connections == 0


class WebSocketEcho:
    """An HTTPS upstream that accepts one WebSocket upgrade (checking the credential it
    carries) and then echoes messages."""

    def __init__(self, pki, expect_auth):
        import hashlib
        import threading
        self.expect_auth = expect_auth
        self.request = b""
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(pki.leaf_cert, pki.leaf_key)
        self._hashlib = hashlib
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        raw, _ = self.sock.accept()
        with self.ctx.wrap_socket(raw, server_side=True) as conn:
            while b"\r\n\r\n" not in self.request:
                self.request += conn.recv(4096)
            head = self.request.decode()
            key = next(line.split(":", 1)[1].strip() for line in head.split("\r\n")
                       if line.lower().startswith("sec-websocket-key:"))
            accept = base64.b64encode(self._hashlib.sha1(
                (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            if f"authorization: bearer {self.expect_auth}" not in head.lower():
                conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
                return
            conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n")
                         .encode())
            try:
                echo(Peer(conn), None)
            except (EOFError, OSError):
                pass

    def close(self):
        self.sock.close()


def test_websocket_upgrade_is_relayed_after_the_brokers(broker_factory, pki):
    ws = WebSocketEcho(pki, REAL.lower())
    try:
        b = broker_factory(policy=github_policy(ws.port),
                           connect_to=[connect_to_arg(GITHUB, ws.port)],
                           upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL}, env_file=True)
        dummy = b.session_env()["GITHUB_TOKEN"]
        target = f"{GITHUB}:{ws.port}"
        s = tls_through_connect(b, target, GITHUB, b.ca_cert)
        s.sendall((f"GET /socket HTTP/1.1\r\nHost: {target}\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   f"Authorization: Bearer {dummy}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head
        s.sendall(encode_frame(TEXT, b"hello", mask=True))  # a client's frames are masked
        got = b""
        while len(got) < 7:
            got += s.recv(64)
        assert got == b"\x81\x05hello"
        s.close()
        assert REAL.encode() in ws.request and dummy.encode() not in ws.request
        rec = b.wait_for_records(lambda x: x.get("status") == 101)
        assert rec and rec[0]["credential"] == "github" and rec[0]["bytes_out"] >= 7
    finally:
        ws.close()


def test_ip_literal_targets_get_a_leaf_with_an_ip_san(broker_factory, tls_upstream, pki):
    b = broker_factory(policy={"version": 1, "allow": [{"cidr": "127.0.0.1/32",
                                                         "ports": [tls_upstream.port]}]},
                       upstream_ca=pki.ca_cert)
    # curl accepts the broker's leaf for 127.0.0.1 (it checks the IP SAN) and reads the JSON;
    # the upstream's own certificate names no IP, so broker's verification of it fails.
    r = curl(f"https://127.0.0.1:{tls_upstream.port}/", proxy=b.proxy, cacert=b.ca_cert)
    assert r.returncode == 0, r.stderr
    assert_refusal(r.status, r.headers, r.body, "upstream_tls_failed", 502)


def test_echoed_basic_credentials_come_back_in_the_clients_form(session, tls_upstream):
    r = curl(url(GITHUB, tls_upstream.port, "/reflect/chunked/3"), proxy=session.proxy,
             cacert=session.ca_cert, args=["-u", f"x-access-token:{session.dummy}"])
    assert r.status == 200
    sent = base64.b64encode(f"x-access-token:{REAL}".encode())
    mine = base64.b64encode(f"x-access-token:{session.dummy}".encode())
    assert tls_upstream.requests[-1]["headers"]["Authorization"] == "Basic " + sent.decode()
    assert sent not in r.body and r.body.count(mine) == 4
    assert r.headers["x-seen-authorization"] == "Basic " + mine.decode()


def test_compressed_response_cannot_pass_the_scrubber(session, tls_upstream):
    r = curl(url(GITHUB, tls_upstream.port, "/gzip"), proxy=session.proxy,
             cacert=session.ca_cert)
    doc = assert_refusal(r.status, r.headers, r.body, "upstream_protocol_error", 502)
    assert "compressed" in doc["message"]


def test_header_names_are_searched_too(session, tls_upstream):
    r = curl(url(OTHER, tls_upstream.port, "/h"), proxy=session.proxy, cacert=session.ca_cert,
             args=["-H", f"X-{session.dummy}: 1"])
    assert_refusal(r.status, r.headers, r.body, "credential_not_bound", 403)
    r = curl(url(GITHUB, tls_upstream.port, "/h"), proxy=session.proxy, cacert=session.ca_cert,
             args=["-H", f"X-{REAL}: 1"])
    assert_refusal(r.status, r.headers, r.body, "real_secret_blocked", 403)
    assert tls_upstream.requests == []
    session.stop()
    assert_nothing_written_contains(session, REAL)


def test_two_host_headers_are_refused(session, tls_upstream):
    target = f"{GITHUB}:{tls_upstream.port}"
    s = tls_through_connect(session, target, GITHUB, session.ca_cert)
    s.sendall((f"GET / HTTP/1.1\r\nHost: {target}\r\nHost: attacker.example\r\n"
               f"Authorization: Bearer {session.dummy}\r\n\r\n").encode())
    data = s.recv(65536)
    assert data.startswith(b"HTTP/1.1 400"), data
    s.close()
    assert tls_upstream.requests == []


def test_the_real_value_is_gone_from_the_brokers_environment(session):
    environ = Path(f"/proc/{session.proc.pid}/environ").read_bytes()
    assert REAL.encode() not in environ
    status = Path(f"/proc/{session.proc.pid}/status").read_text()
    assert REAL not in status


class EarlyAnswer:
    """An HTTPS upstream that answers 413 and closes as soon as it has a request head, without
    reading the body - while the broker is still sending it."""

    def __init__(self, pki):
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(pki.leaf_cert, pki.leaf_key)
        self.heads = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.ctx.wrap_socket(raw, server_side=True) as conn:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(4096)
                    self.heads += 1
                    conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\n"
                                 b"Connection: close\r\n\r\nbig!")
            except (OSError, ssl.SSLError):
                pass

    def close(self):
        self.sock.close()


def test_an_upstream_answering_before_the_body_is_through(broker_factory, pki, tmp_path):
    early = EarlyAnswer(pki)
    try:
        b = broker_factory(policy=github_policy(early.port),
                           connect_to=[connect_to_arg(GITHUB, early.port)],
                           upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL})
        body = tmp_path / "big"
        body.write_bytes(b"z" * (20 * 1024 * 1024))
        for chunked in (False, True):
            args = ["--data-binary", f"@{body}"]
            if chunked:
                args += ["-H", "Transfer-Encoding: chunked"]
            r = curl(url(GITHUB, early.port, "/upload"), proxy=b.proxy, cacert=b.ca_cert,
                     args=args)
            assert r.status in (413, 0), r.stderr  # the answer, or a cut connection
            assert b.alive()
        r = curl(url(GITHUB, early.port, "/after"), proxy=b.proxy, cacert=b.ca_cert)
        assert r.status == 413 and r.body == b"big!"
    finally:
        early.close()


def test_pipelined_requests_inside_tls(session, tls_upstream):
    target = f"{GITHUB}:{tls_upstream.port}"
    s = tls_through_connect(session, target, GITHUB, session.ca_cert)
    s.sendall("".join(f"GET /p/{i} HTTP/1.1\r\nHost: {target}\r\n"
                      f"Authorization: Bearer {session.dummy}\r\n\r\n" for i in range(3)).encode())
    data = b""
    while data.count(b"HTTP/1.1 200") < 3 or not data.endswith(b"}"):
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    s.close()
    assert [r["path"] for r in tls_upstream.requests] == ["/p/0", "/p/1", "/p/2"]
    assert all(r["headers"]["Authorization"] == f"Bearer {REAL}" for r in tls_upstream.requests)


def test_opted_in_query_parameters_are_swapped(broker_factory, tls_upstream, pki):
    policy = github_policy(tls_upstream.port)
    policy["credentials"]["github"]["query"] = ["access_token"]
    b = broker_factory(policy=policy,
                       connect_to=[connect_to_arg(GITHUB, tls_upstream.port),
                                   connect_to_arg(OTHER, tls_upstream.port)],
                       upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL}, env_file=True)
    dummy = b.session_env()["GITHUB_TOKEN"]
    r = curl(url(GITHUB, tls_upstream.port, f"/q?page=2&access_token={dummy}"), proxy=b.proxy,
             cacert=b.ca_cert)
    assert r.status == 200
    assert tls_upstream.requests[-1]["path"] == f"/q?page=2&access_token={REAL}"
    rec = b.wait_for_records(lambda x: x.get("path", "") and x["path"].startswith("/q"))
    assert rec[0]["path"] == "/q?page=<redacted>&access_token=<redacted>"
    r = curl(url(OTHER, tls_upstream.port, f"/q?access_token={dummy}"), proxy=b.proxy,
             cacert=b.ca_cert)
    assert_refusal(r.status, r.headers, r.body, "credential_not_bound", 403)
    b.stop()
    assert_nothing_written_contains(b, REAL)
