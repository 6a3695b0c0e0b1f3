"""The canary and the real-value block (docs/policy.md) against a child that encodes what it sends:
base64 (both RFC 4648 alphabets, inside a longer blob, padded or not), percent-encoding (either
hex case) and a value split over two header fields (RFC 9110 §5.3), in a header, the query and a
POST body. Each is refused before anything of it reaches the upstream, and audited; nothing the
broker writes holds the real value."""

import base64
import json

import pytest

from conftest import (LoopbackHttpServer, _EchoHandler, assert_refusal, connect_to_arg, curl,
                      tls_server_context)

BOUND = "api.example.test"  # the credential's host
OTHER = "other.example.test"  # allowed, but not bound
REAL = "sk-svc-R3alT0kenF0rCanaryTests0nly0123456789abcdefXY"


# --------------------------------------------------------------------------------------------
# An upstream that records every byte it reads
# --------------------------------------------------------------------------------------------


class _Tee:
    """A request stream that also hands every byte read to `sink`."""

    def __init__(self, stream, sink):
        self._stream, self._sink = stream, sink

    def read(self, *args):
        data = self._stream.read(*args)
        self._sink(data)
        return data

    def readline(self, *args):
        data = self._stream.readline(*args)
        self._sink(data)
        return data

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _RecordingHandler(_EchoHandler):
    """The echo upstream, keeping the raw bytes of everything it was sent (also of a request
    whose body never ends)."""

    def setup(self):
        super().setup()
        self.rfile = _Tee(self.rfile, self._record)

    def _record(self, data):
        with self.server.lock:
            self.server.received += data


class RecordingUpstream:
    def __init__(self, pki):
        self.server = LoopbackHttpServer(_RecordingHandler, tls_server_context(pki))
        self.server.peers, self.server.requests, self.server.received = [], [], bytearray()
        self.server.start()
        self.port = self.server.port

    @property
    def received(self) -> bytes:
        with self.server.lock:
            return bytes(self.server.received)

    @property
    def requests(self):
        with self.server.lock:
            return list(self.server.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder(pki):
    u = RecordingUpstream(pki)
    yield u
    u.close()


@pytest.fixture
def session(broker_factory, recorder, pki):
    """A broker with a bearer credential bound to BOUND; BOUND and OTHER both map onto the
    recording upstream."""
    policy = {
        "version": 1,
        "allow": [{"host": BOUND, "ports": [recorder.port]},
                  {"host": OTHER, "ports": [recorder.port]}],
        "credentials": {"svc": {"type": "bearer", "env": ["SVC_TOKEN"], "hosts": [BOUND]}},
    }
    b = broker_factory(policy=policy,
                       connect_to=[connect_to_arg(BOUND, recorder.port),
                                   connect_to_arg(OTHER, recorder.port)],
                       upstream_ca=pki.ca_cert, env={"SVC_TOKEN": REAL}, env_file=True)
    b.dummy = b.session_env()["SVC_TOKEN"]
    assert b.dummy != REAL and len(b.dummy) == len(REAL)
    return b


# --------------------------------------------------------------------------------------------
# Encodings
# --------------------------------------------------------------------------------------------


def b64(data: str, url=False, pad=True) -> str:
    out = (base64.urlsafe_b64encode if url else base64.b64encode)(data.encode()).decode()
    return out if pad else out.rstrip("=")


def pct(value: str, lower=False) -> str:
    return "".join(("%%%02x" if lower else "%%%02X") % b for b in value.encode())


# name -> (value -> what the child sends instead of it)
ENCODINGS = {
    "base64": lambda v: b64("token=" + v + "&x=1"),
    "base64-aligned": lambda v: b64(v),
    "base64url-nopad": lambda v: b64("id:" + v + ";", url=True, pad=False),
    "base64url-offset2": lambda v: b64("t=" + v, url=True),
    "percent-upper": lambda v: pct(v),
    "percent-lower": lambda v: pct(v, lower=True),
}


def all_forms(value: str):
    """What any of the requests below carries of `value`."""
    return [value] + [encode(value) for encode in ENCODINGS.values()]


def send(session, recorder, host, place, encoding, value, tmp_path):
    """A curl request to `host` carrying `value` (the dummy or the real value) in `place`
    ("header", "query", "body") with `encoding` ("plain", one of ENCODINGS, or "split": two
    header fields of one name, each with half of the value)."""
    url = f"https://{host}:{recorder.port}/collect"
    args = ["-g"]  # the URL as it is: no globbing of brackets
    if encoding == "split":
        assert place == "header"
        half = len(value) // 2
        args += ["-H", f"X-Note: {value[:half]}", "-H", f"X-Note: {value[half:]}"]
    else:
        carried = value if encoding == "plain" else ENCODINGS[encoding](value)
        if place == "header":
            args += ["-H", f"X-Note: {carried}"]
        elif place == "query":
            url += f"?note={carried}&v=1"
        else:
            body = tmp_path / "body"
            body.write_bytes(b'{"padding":"' + b"p" * 5000 + b'","note":"' + carried.encode() +
                             b'"}')
            args += ["--data-binary", f"@{body}", "-H", "Content-Type: application/json"]
    return curl(url, proxy=session.proxy, cacert=session.ca_cert, args=args)


CASES = ([("header", e) for e in [*ENCODINGS, "split"]] +
         [("query", e) for e in ENCODINGS] +
         [("body", e) for e in ENCODINGS])


def assert_upstream_never_saw(recorder, place, value):
    """Nothing of the value, in any form, reached the upstream; a refused head sent nothing."""
    received = recorder.received
    if place != "body":
        assert received == b"", "the refused request reached the upstream"
    for form in all_forms(value):
        assert form.encode() not in received, "the upstream received the value"


def assert_nothing_written_contains(b):
    """No byte the broker wrote (audit log, env file, CA dir, its stderr) holds the real value,
    as sent or encoded."""
    files = [p for p in b.dir.rglob("*") if p.is_file() and not p.name.startswith("policy")]
    assert any(p.suffix == ".jsonl" for p in files)
    for p in files:
        data = p.read_bytes()
        for form in all_forms(REAL):
            assert form.encode() not in data, f"{p} contains the real value ({form[:6]}...)"


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("place,encoding", CASES)
def test_encoded_dummy_to_an_unbound_host_is_refused(session, recorder, place, encoding,
                                                     tmp_path):
    r = send(session, recorder, OTHER, place, encoding, session.dummy, tmp_path)
    doc = assert_refusal(r.status, r.headers, r.body, "credential_not_bound", 403,
                         session=session.session, host=OTHER)
    for form in all_forms(session.dummy):
        assert form not in json.dumps(doc)
    assert_upstream_never_saw(recorder, place, session.dummy)
    rec = session.wait_for_records(lambda x: x.get("event") == "exfiltration_blocked")
    assert len(rec) == 1
    assert rec[0]["credential"] == "svc" and rec[0]["host"] == OTHER
    assert rec[0]["decision"] == "deny"
    session.stop()
    assert_nothing_written_contains(session)


@pytest.mark.parametrize("host", [OTHER, BOUND])
@pytest.mark.parametrize("place,encoding", CASES)
def test_encoded_real_value_is_refused_anywhere(session, recorder, host, place, encoding,
                                                tmp_path):
    r = send(session, recorder, host, place, encoding, REAL, tmp_path)
    doc = assert_refusal(r.status, r.headers, r.body, "real_secret_blocked", 403,
                         session=session.session, host=host)
    for form in all_forms(REAL):
        assert form not in json.dumps(doc)
    assert_upstream_never_saw(recorder, place, REAL)
    rec = session.wait_for_records(lambda x: x.get("error") == "real_secret_blocked")
    assert len(rec) == 1
    assert rec[0]["credential"] == "svc" and rec[0]["host"] == host
    assert rec[0]["decision"] == "deny"
    session.stop()
    assert_nothing_written_contains(session)


@pytest.mark.parametrize("place", ["header", "query", "body"])
def test_plain_dummy_to_an_unbound_host_is_refused(session, recorder, place, tmp_path):
    """The unencoded canary, for comparison: refused by every broker."""
    r = send(session, recorder, OTHER, place, "plain", session.dummy, tmp_path)
    assert_refusal(r.status, r.headers, r.body, "credential_not_bound", 403)
    assert_upstream_never_saw(recorder, place, session.dummy)


def test_the_bound_host_still_gets_the_real_value(session, recorder):
    r = curl(f"https://{BOUND}:{recorder.port}/user", proxy=session.proxy,
             cacert=session.ca_cert,
             args=["-H", f"Authorization: Bearer {session.dummy}",
                   "-H", f"X-Trace: {b64('trace=' + session.dummy)}"])  # its own host: no canary
    assert r.status == 200, r.body
    assert recorder.requests[-1]["headers"]["Authorization"] == f"Bearer {REAL}"
    session.stop()
    assert_nothing_written_contains(session)


def test_ordinary_encoded_requests_pass(session, recorder, tmp_path):
    blob = b64("an ordinary payload without any credential in it, " * 3)
    body = tmp_path / "body"
    body.write_text(json.dumps({"data": blob, "q": pct("a b/c?d")}))
    r = curl(f"https://{OTHER}:{recorder.port}/upload?sig={b64('x' * 40, url=True)}&q=%41%42",
             proxy=session.proxy, cacert=session.ca_cert,
             args=["-g", "-H", f"X-Blob: {blob}", "-H", "X-Escaped: %2Fpath%2Fto",
                   "-H", "Accept: text/html", "-H", "Accept: application/json",
                   "--data-binary", f"@{body}"])
    assert r.status == 200, r.body
    assert r.json()["body_length"] == body.stat().st_size
