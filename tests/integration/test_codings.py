"""Transfer and content codings the broker cannot see through are refused, so that nothing is
smuggled past its parser (a request body read as the next request) or past its response
scrubber (a real value inside a compressed body). Request bodies under a Content-Encoding the
broker reads (gzip, deflate, br, zstd, lists of them) are searched through it, while their coded
bytes go up unchanged (docs/security-model.md)."""

import base64
import gzip
import hashlib
import json
import subprocess
import zlib
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import (LoopbackHttpServer, RawClient, Upstream, allow_policy, assert_refusal,
                      connect_to_arg, curl, raw_exchange, tls_server_context)
from test_canary_encodings import (BOUND, OTHER, REAL as SVC_REAL, recorder,  # noqa: F401
                                   session)

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
    doc = assert_refusal(r.status, r.headers, r.body, "upstream_protocol_error", 502)
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


# ---- request bodies under a Content-Encoding: searched through it (docs/security-model.md) ----



def _zstd(data: bytes) -> bytes:
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True,
                          check=True).stdout


def _br(data: bytes) -> bytes:
    return subprocess.run(["brotli", "-c"], input=data, capture_output=True, check=True).stdout


CODERS = {"gzip": lambda d: gzip.compress(d, mtime=0), "x-gzip": lambda d: gzip.compress(d),
          "deflate": zlib.compress, "br": _br, "zstd": _zstd}


def code(data: bytes, codings: str) -> bytes:
    """`data` under a Content-Encoding list, applied in the order it names them."""
    for c in [c.strip() for c in codings.split(",")]:
        data = CODERS[c](data)
    return data


def turn(note: str) -> bytes:
    """A request body shaped like an LLM turn carrying `note` (a few KiB: one read)."""
    return json.dumps({"model": "m", "input": [{"role": "user", "content": f"line {i}"}
                                               for i in range(60)] + [{"note": note}]}).encode()


@pytest.fixture
def svc(session):
    """test_canary_encodings' broker: a bearer credential bound to BOUND; BOUND and OTHER both
    map onto the recorder."""
    return session


def post(b, host, port, body: bytes, encodings, tmp_path, extra=()):
    """curl --data-binary @file with one Content-Encoding header per element of `encodings`."""
    f = tmp_path / "body.bin"
    f.write_bytes(body)
    args = ["-H", "Content-Type: application/json"]
    for e in encodings:
        args += ["-H", f"Content-Encoding: {e}"]
    return curl(f"https://{host}:{port}/v1/responses", proxy=b.proxy, cacert=b.ca_cert,
                data_file=f, args=[*args, *extra])


def body_received(recorder) -> bytes:
    """What the upstream read after the request head (the refused request's head goes up
    before its body is read)."""
    return recorder.received.partition(b"\r\n\r\n")[2]


def assert_nothing_written_contains(b, value: str):
    b.stop()
    forms = [value.encode(), base64.b64encode(value.encode())]
    for p in [p for p in b.dir.rglob("*") if p.is_file() and not p.name.startswith("policy")]:
        data = p.read_bytes()
        assert not any(f in data for f in forms), f"{p} holds the real value"


CODED_CASES = [(["gzip"], "gzip"), (["x-gzip"], "x-gzip"), (["deflate"], "deflate"), (["br"], "br"),
               (["zstd"], "zstd"), (["gzip, br"], "gzip, br"), (["identity", "zstd, gzip"], "zstd, gzip"),
               (["gzip", "deflate"], "gzip, deflate")]


@pytest.mark.parametrize("fields,codings", CODED_CASES, ids=[c for _, c in CODED_CASES])
def test_a_coded_dummy_to_an_unbound_host_is_refused(svc, recorder, tmp_path, fields, codings):
    r = post(svc, OTHER, recorder.port, code(turn(svc.dummy), codings), fields, tmp_path)
    doc = assert_refusal(r.status, r.headers, r.body, "credential_not_bound", 403,
                         session=svc.session, host=OTHER)
    assert svc.dummy not in json.dumps(doc)
    assert body_received(recorder) == b"", "bytes of the coded body reached the upstream"
    assert svc.dummy.encode() not in recorder.received
    rec = svc.wait_for_records(lambda x: x.get("event") == "exfiltration_blocked")
    assert len(rec) == 1 and rec[0]["credential"] == "svc" and rec[0]["host"] == OTHER


@pytest.mark.parametrize("codings", ["zstd", "gzip", "br, deflate"])
@pytest.mark.parametrize("host", [OTHER, BOUND])
def test_a_coded_real_value_is_refused_anywhere(svc, recorder, tmp_path, codings, host):
    r = post(svc, host, recorder.port, code(turn(SVC_REAL), codings), [codings], tmp_path)
    doc = assert_refusal(r.status, r.headers, r.body, "real_secret_blocked", 403,
                         session=svc.session, host=host)
    assert SVC_REAL not in json.dumps(doc)
    assert body_received(recorder) == b""
    rec = svc.wait_for_records(lambda x: x.get("error") == "real_secret_blocked")
    assert len(rec) == 1 and rec[0]["event"] == "refused"
    assert_nothing_written_contains(svc, SVC_REAL)


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
@pytest.mark.parametrize("codings", ["gzip", "deflate", "br", "zstd", "gzip, zstd"])
def test_a_clean_coded_body_goes_up_as_it_was_sent(svc, recorder, tmp_path, codings, chunked):
    # Large enough to take many reads; the dummy of another credential would have been found.
    body = code(turn("nothing secret") * 300, codings)
    extra = ["-H", "Transfer-Encoding: chunked"] if chunked else []
    r = post(svc, OTHER, recorder.port, body, [codings], tmp_path, extra)
    assert r.status == 200, r.body
    seen = r.json()
    assert seen["body_length"] == len(body)
    assert seen["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert seen["headers"]["content-encoding"] == codings


def test_a_python_client_sends_zstd_turns(svc, recorder):
    import requests
    proxies = {"https": svc.proxy}
    clean = _zstd(turn("hello"))
    r = requests.post(f"https://{OTHER}:{recorder.port}/v1/responses", data=clean,
                      headers={"Content-Encoding": "zstd"}, proxies=proxies,
                      verify=str(svc.ca_cert), timeout=30)
    assert r.status_code == 200
    assert r.json()["body_sha256"] == hashlib.sha256(clean).hexdigest()
    r = requests.post(f"https://{OTHER}:{recorder.port}/v1/responses",
                      data=_zstd(turn(svc.dummy)), headers={"Content-Encoding": "zstd"},
                      proxies=proxies, verify=str(svc.ca_cert), timeout=30)
    assert r.status_code == 403 and r.headers["X-Broker-Error"] == "credential_not_bound"


@pytest.mark.parametrize("codings,bomb", [
    ("zstd", lambda: _zstd(b"\0" * (80 << 20))),                    # ~2.6 KiB → 80 MiB
    ("gzip", lambda: gzip.compress(b"{" + b" " * (70 << 20) + b"}")),  # ~70 KiB → 70 MiB
    ("gzip, gzip", lambda: gzip.compress(gzip.compress(b"\0" * (80 << 20)))),
])
def test_a_decompression_bomb_is_413(svc, recorder, tmp_path, codings, bomb):
    r = post(svc, OTHER, recorder.port, bomb(), [codings], tmp_path)
    doc = assert_refusal(r.status, r.headers, r.body, "body_too_large", 413, session=svc.session)
    assert "decodes to more than" in doc["message"]
    rec = svc.wait_for_records(lambda x: x.get("error") == "body_too_large")
    assert len(rec) == 1 and rec[0]["status"] == 413 and rec[0]["event"] == "refused"
    assert svc.alive()


@pytest.mark.parametrize("fields", [["compress"], ["x-compress"], ["exi"], ["gzip, snappy"],
                                    ["gzip", "aws-chunked"], ["br, br, br, br, br"]])
def test_a_coding_the_broker_cannot_read_is_415(svc, recorder, tmp_path, fields):
    r = post(svc, OTHER, recorder.port, b"\x1f\x9d\x90 whatever the coding made", fields,
             tmp_path)
    doc = assert_refusal(r.status, r.headers, r.body, "unsupported_encoding", 415,
                         session=svc.session, host=OTHER)
    assert "Content-Encoding" in doc["message"]
    assert recorder.received == b"", "a body the broker cannot search was sent on"
    rec = svc.wait_for_records(lambda x: x.get("error") == "unsupported_encoding")
    assert len(rec) == 1 and rec[0]["status"] == 415 and rec[0]["event"] == "refused"


def test_corrupt_data_under_a_known_coding_is_400(svc, recorder, tmp_path):
    coded = bytearray(gzip.compress(turn("x") * 20))
    coded[len(coded) // 2] ^= 0xFF
    r = post(svc, OTHER, recorder.port, bytes(coded), ["gzip"], tmp_path)
    doc = assert_refusal(r.status, r.headers, r.body, "bad_request", 400, session=svc.session)
    assert "gzip data is corrupt" in doc["message"] or "gzip data is cut short" in doc["message"]
    assert svc.wait_for_records(lambda x: x.get("error") == "bad_request")
    r = post(svc, OTHER, recorder.port, gzip.compress(turn("x"))[:-4], ["gzip"], tmp_path)
    assert_refusal(r.status, r.headers, r.body, "bad_request", 400)


def test_plain_http_coded_bodies_are_searched_too(broker_factory, upstream, tmp_path):
    policy = {"version": 1, "allow": [{"host": OTHER, "ports": [upstream.port]}],
              "credentials": {"svc": {"type": "bearer", "env": ["SVC_TOKEN"], "hosts": [BOUND]}}}
    b = broker_factory(policy=policy, connect_to=[connect_to_arg(OTHER, upstream.port)],
                       env={"SVC_TOKEN": SVC_REAL}, env_file=True)
    dummy = b.session_env()["SVC_TOKEN"]
    f = tmp_path / "body"
    url = f"http://{OTHER}:{upstream.port}/in"
    f.write_bytes(b"x")
    r = curl(url, proxy=b.proxy, data_file=f, args=["-H", "Content-Encoding: compress"])
    assert_refusal(r.status, r.headers, r.body, "unsupported_encoding", 415)
    f.write_bytes(_br(turn(dummy)))
    r = curl(url, proxy=b.proxy, data_file=f, args=["-H", "Content-Encoding: br"])
    assert_refusal(r.status, r.headers, r.body, "credential_not_bound", 403)
    f.write_bytes(_br(turn("fine")))
    r = curl(url, proxy=b.proxy, data_file=f, args=["-H", "Content-Encoding: br"])
    assert r.status == 200 and r.json()["body_sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert [u["path"] for u in upstream.requests] == ["/in"]


def test_without_credentials_coded_bodies_pass_unread(broker_m, upstream_m, tmp_path):
    # Nothing to search for: the broker relays what the client sent, as any proxy does.
    f = tmp_path / "body"
    f.write_bytes(b"\x1f\x9d\x90 an LZW body")
    r = curl(f"http://{HOST}:{upstream_m.port}/lzw", proxy=broker_m.proxy, data_file=f,
             args=["-H", "Content-Encoding: compress"])
    assert r.status == 200 and r.json()["body_length"] == f.stat().st_size
