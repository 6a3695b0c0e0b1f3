"""Path rules against paths that upstream servers read differently (README "Policy"): merged
slashes, encoded '/' and '\\', Tomcat's "..;", double encoding. Each attack is sent as exact bytes
on a raw socket, as plain http:// absolute-form and inside an intercepted CONNECT, and must be
refused (403 when the normalized path matches a deny rule or misses the allow rule, 400 when its
meaning is ambiguous) without the upstream ever seeing it; legitimate paths still pass."""

import socket
import ssl

import pytest

from conftest import Broker, Upstream, assert_refusal, connect_to_arg, raw_exchange

HOST = "api.example.test"


@pytest.fixture(scope="module")
def upstreams(pki):
    plain, tls = Upstream(), Upstream(tls=pki)
    yield plain, tls
    plain.close()
    tls.close()


def start_broker(directory, upstreams, pki, rule):
    plain, tls = upstreams
    ports = [plain.port, tls.port]
    policy = {"version": 1, **rule(ports)}
    return Broker(directory, policy=policy, upstream_ca=pki.ca_cert,
                  connect_to=[connect_to_arg(HOST, plain.port), connect_to_arg(HOST, tls.port)])


POLICIES = {
    # Everything on the host except /denied/*.
    "deny": lambda ports: {"allow": [{"host": HOST, "ports": ports}],
                           "deny": [{"host": HOST, "paths": ["/denied/*"]}]},
    # Only /ok/* on the host.
    "allow": lambda ports: {"allow": [{"host": HOST, "ports": ports, "paths": ["/ok/*"]}]},
}


@pytest.fixture(scope="module", params=sorted(POLICIES))
def broker(request, tmp_path_factory, upstreams, pki):
    b = start_broker(tmp_path_factory.mktemp(f"paths-{request.param}"), upstreams, pki,
                     POLICIES[request.param])
    b.kind = request.param
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc!r}: {b.stderr[-2000:]}"


def send_plain(b, upstream, path):
    """GET http://HOST:port<path> as absolute-form, exactly these bytes."""
    authority = f"{HOST}:{upstream.port}"
    return raw_exchange(b.port, f"GET http://{authority}{path} HTTP/1.1\r\nHost: {authority}\r\n"
                                "Connection: close\r\n\r\n".encode())


class _TlsResponse:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body


def send_intercepted(b, upstream, path):
    """CONNECT HOST:port, TLS with the broker's leaf, then GET <path> in origin-form."""
    authority = f"{HOST}:{upstream.port}"
    raw = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    raw.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = raw.recv(1)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    ctx = ssl.create_default_context(cafile=str(b.ca_cert))
    with ctx.wrap_socket(raw, server_hostname=HOST) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
                  .encode())
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ssl.SSLEOFError, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = body[:int(headers["content-length"])]
    return _TlsResponse(int(lines[0].split(" ")[1]), headers, body)


TRANSPORTS = {"http": (send_plain, 0), "https": (send_intercepted, 1)}

# (path as sent, expected status under the deny policy, under the allow policy)
ATTACKS = [
    ("//denied/x", 403, 403),           # merged: /denied/x
    ("/denied%2fx", 400, 400),          # an encoded '/'
    ("/x/..;/denied/x", 400, 400),      # ".." to Tomcat and Jetty
    ("/x/..%5cdenied/x", 400, 400),     # '\' is '/' to IIS-style servers
    ("/denied%252fx", 400, 400),        # '/' after two decodings
    ("/ok/..;/secret", 400, 400),       # Tomcat serves /secret
    ("/ok//../secret", 400, 400),       # nginx merges first: /secret
    ("/x/..\\denied/x", 400, 400),      # a raw '\'
    ("/denied;v=1/x", 403, 403),        # Tomcat drops ";v=1": /denied/x
    ("/denied/%00x", 400, 400),         # an encoded control byte
]

# Allowed by both policies ("/ok/x/../y" is /ok/y, "/ok//z" is /ok/z). (A leading "//" would do
# too, but Python's http.server turns it into "/" itself.)
LEGITIMATE = ["/ok/a%20b", "/ok/a;b=c", "/ok/%41", "/ok/x?q=%2F..%2Fsecret%5C", "/ok/x/../y",
              "/ok//z"]


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize("path,deny_status,allow_status", ATTACKS)
def test_attack_is_refused_and_never_reaches_the_upstream(broker, upstreams, transport, path,
                                                          deny_status, allow_status):
    send, which = TRANSPORTS[transport]
    upstream = upstreams[which]
    before = len(upstream.requests)
    expected = deny_status if broker.kind == "deny" else allow_status
    resp = send(broker, upstream, path)
    code = "bad_request" if expected == 400 else "policy_denied"
    doc = assert_refusal(resp.status, resp.headers, resp.body, code, expected,
                         session=broker.session, host=HOST)
    if expected == 400:
        assert "ambiguous on a host with path rules" in doc["message"], doc
    assert len(upstream.requests) == before, upstream.requests[before:]
    recs = broker.wait_for_records(
        lambda r: r.get("path") == path and r.get("scheme") == transport and r.get("error") == code)
    assert recs, broker.records()[-5:]
    assert recs[-1]["decision"] == "deny" and recs[-1]["status"] == expected, recs[-1]
    # A 400 names the path rule that makes the path matter; a 403 the rule that refused.
    expected_rule = {"deny": "deny[0]", "allow": "allow[0]" if expected == 400 else "default_deny"}
    assert recs[-1]["rule"] == expected_rule[broker.kind], recs[-1]


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize("path", LEGITIMATE)
def test_legitimate_paths_pass_unchanged(broker, upstreams, transport, path):
    send, which = TRANSPORTS[transport]
    upstream = upstreams[which]
    resp = send(broker, upstream, path)
    assert resp.status == 200, resp.body[:500]
    # What the client sent is what the upstream gets: the broker decides, it does not rewrite.
    assert upstream.requests[-1]["path"] == path


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_other_paths_follow_the_policy(broker, upstreams, transport):
    send, which = TRANSPORTS[transport]
    resp = send(broker, upstreams[which], "/elsewhere/x")
    if broker.kind == "deny":
        assert resp.status == 200
    else:
        assert_refusal(resp.status, resp.headers, resp.body, "policy_denied", 403, host=HOST)


def test_hosts_without_path_rules_pass_such_paths(tmp_path, upstreams, pki):
    """Only a host with path rules refuses ambiguous paths; elsewhere they pass as before."""
    b = start_broker(tmp_path, upstreams, pki,
                     lambda ports: {"allow": [{"host": HOST, "ports": ports}]})
    try:
        for send, upstream in ((send_plain, upstreams[0]), (send_intercepted, upstreams[1])):
            for path in ("/denied%2fx", "/x/..;/denied/x", "/denied%252fx"):
                resp = send(b, upstream, path)
                assert resp.status == 200, resp.body[:500]
                assert upstream.requests[-1]["path"] == path
    finally:
        assert b.stop() == 0, b.stderr[-2000:]
