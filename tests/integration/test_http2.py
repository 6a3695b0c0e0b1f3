"""HTTP/2 through interception (docs/architecture.md): a client that offers h2 gets it, and each stream is
one exchange with every protection of an HTTP/1.1 request: policy per request, the dummy swapped
for the real value in a header field, a real secret in DATA refused, the response scrubbed, one
record per stream with "http": "2". A refusal is that stream's JSON response; the connection's
other streams go on. (The upstream here speaks HTTP/1.1 only: test_http2_upstream.py has h2 ones.)"""
import json
import os

import pytest

from conftest import assert_refusal, connect_to_arg, curl
from test_mitm import GITHUB, REAL, assert_nothing_written_contains


@pytest.fixture
def session(broker_factory, tls_upstream, pki):
    policy = {
        "version": 1,
        "allow": [{"host": GITHUB, "ports": [tls_upstream.port], "paths": ["/user", "/repos/*", "/chunked/*"]}],
        "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB]}},
    }
    b = broker_factory(policy=policy, connect_to=[connect_to_arg(GITHUB, tls_upstream.port)],
                       upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL}, env_file=True)
    b.dummy = b.session_env()["GITHUB_TOKEN"]
    return b


def url(port, path):
    return f"https://{GITHUB}:{port}{path}"


def test_curl_speaks_http2_end_to_end_and_the_dummy_becomes_real(session, tls_upstream):
    r = curl(url(tls_upstream.port, "/user"), proxy=session.proxy, cacert=session.ca_cert,
             http="2", args=["-H", f"Authorization: token {session.dummy}"])
    assert r.returncode == 0, r.stderr
    assert r.status == 200 and r.versions == ["2"], (r.versions, r.stderr)
    # Field names arrive lower-case, as HTTP/2 carries them (HTTP/1.1 names are case-insensitive).
    seen = {k.lower(): v for k, v in tls_upstream.requests[-1]["headers"].items()}
    assert seen["authorization"] == f"token {REAL}"
    # The upstream's echo of the real value came back as the dummy.
    assert r.json()["headers"]["authorization"] == f"token {session.dummy}"
    [rec] = session.wait_for_records(lambda x: x.get("event") == "request")
    assert rec["http"] == "2" and rec["status"] == 200 and rec["credential"] == "github"
    assert rec["path"] == "/user" and rec["method"] == "GET"
    session.stop()
    assert_nothing_written_contains(session, REAL)


def test_a_refused_stream_leaves_the_others_on_the_connection(session, tls_upstream):
    allowed = url(tls_upstream.port, "/repos/o/r")
    denied = url(tls_upstream.port, "/admin/keys")
    r = curl(allowed, denied, allowed, proxy=session.proxy, cacert=session.ca_cert, http="2")
    assert r.statuses == [200, 403, 200], r.stderr
    assert r.versions == ["2", "2", "2"]
    assert sum(r.new_connections) == 1  # one connection: the refusal did not end it
    records = session.wait_for_records(lambda x: x.get("http") == "2", count=3)
    assert [x["status"] for x in records] == [200, 403, 200]
    assert records[1]["error"] == "policy_denied"


def test_a_refusal_on_a_stream_is_the_json_of_design_6(session, tls_upstream):
    r = curl(url(tls_upstream.port, "/admin/keys"), proxy=session.proxy, cacert=session.ca_cert,
             http="2")
    assert r.versions == ["2"]
    doc = assert_refusal(r.status, r.headers, r.body, "policy_denied", 403, host=GITHUB)
    assert doc["session"] == session.session


def test_a_real_secret_in_a_streams_body_is_refused(session, tls_upstream, tmp_path):
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"note": f"leaked {REAL} here", "pad": "x" * 50000}))
    r = curl(url(tls_upstream.port, "/repos/o/r/issues"), proxy=session.proxy,
             cacert=session.ca_cert, http="2", data_file=body,
             args=["-H", "Content-Type: application/json"])
    assert r.versions == ["2"]
    assert_refusal(r.status, r.headers, r.body, "real_secret_blocked", 403)
    assert all(REAL not in json.dumps(x) for x in tls_upstream.requests)


def test_a_large_body_goes_up_and_a_large_response_comes_down(session, tls_upstream, tmp_path):
    import hashlib
    data = bytes(range(256)) * 4096  # 1 MiB: many flow-control windows
    body = tmp_path / "big.bin"
    body.write_bytes(data)
    r = curl(url(tls_upstream.port, "/repos/o/r/blob"), proxy=session.proxy,
             cacert=session.ca_cert, http="2", data_file=body)
    assert r.status == 200 and r.versions == ["2"], r.stderr
    assert r.json()["body_sha256"] == hashlib.sha256(data).hexdigest()
    # Down: 8 MiB, chunked by the upstream, framed as DATA by the broker.
    r = curl(url(tls_upstream.port, "/chunked/8388608"), proxy=session.proxy,
             cacert=session.ca_cert, http="2")
    assert r.status == 200 and len(r.body) == 8388608, r.stderr


def test_a_body_of_unknown_length_goes_up_chunked(session, tls_upstream, tmp_path):
    """An h2 request body may come without Content-Length (curl -T from a pipe); an HTTP/1.1
    upstream gets it chunked, whole."""
    import hashlib
    import os
    import threading
    data = os.urandom(300 * 1024)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)

    def feed():
        with open(pipe, "wb") as f:
            f.write(data)
    writer = threading.Thread(target=feed)
    writer.start()
    r = curl(url(tls_upstream.port, "/repos/o/r/blob"), proxy=session.proxy,
             cacert=session.ca_cert, http="2", args=["-T", str(pipe)])
    writer.join()
    assert r.status == 200 and r.versions == ["2"], r.stderr
    assert r.json()["body_sha256"] == hashlib.sha256(data).hexdigest()
    seen = tls_upstream.requests[-1]["headers"]
    assert seen.get("transfer-encoding") == "chunked" and "content-length" not in seen


def test_a_client_offering_only_http11_stays_on_it(session, tls_upstream):
    r = curl(url(tls_upstream.port, "/user"), proxy=session.proxy, cacert=session.ca_cert)
    assert r.status == 200 and r.versions == ["1.1"]
    [rec] = session.wait_for_records(lambda x: x.get("event") == "request")
    assert "http" not in rec


def test_head_and_a_bodyless_answer_end_their_streams(session, tls_upstream):
    r = curl(url(tls_upstream.port, "/user"), proxy=session.proxy, cacert=session.ca_cert,
             http="2", args=["-I"])
    assert r.status == 200 and r.versions == ["2"], r.stderr
    assert int(r.headers["content-length"]) > 0  # what a GET would have had; no DATA came
    [rec] = session.wait_for_records(lambda x: x.get("event") == "request")
    assert rec["method"] == "HEAD" and rec["status"] == 200


def test_a_rule_saying_http2_false_keeps_its_host_on_http11(broker_factory, tls_upstream, pki):
    policy = {"version": 1,
              "allow": [{"host": GITHUB, "ports": [tls_upstream.port], "http2": False}]}
    b = broker_factory(policy=policy, connect_to=[connect_to_arg(GITHUB, tls_upstream.port)],
                       upstream_ca=pki.ca_cert)
    r = curl(url(tls_upstream.port, "/user"), proxy=b.proxy, cacert=b.ca_cert, http="2")
    assert r.status == 200 and r.versions == ["1.1"], r.stderr


def test_each_streams_record_is_in_the_log_when_its_response_ends(session, tls_upstream):
    """docs/audit-log.md on HTTP/2: the records of streams that end together are written in one go, but
    before the client hears any of those ends, with the connection still open."""
    from test_http2_attacks import H2Raw
    c = H2Raw(session, tls_upstream.port)
    try:
        c.send(*(c.request(stream, path=path) for stream, path in
                 ((1, "/user"), (3, "/repos/o/r"), (5, "/admin/keys"))))
        assert c.pump(lambda: c.ended >= {1, 3, 5}), c.describe()
        records = [x for x in session.records() if x.get("http") == "2"]  # no waiting
        assert sorted((x["path"], x["status"]) for x in records) == \
            [("/admin/keys", 403), ("/repos/o/r", 200), ("/user", 200)]
        assert not c.closed
    finally:
        c.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs for the log")
def test_when_the_log_fills_up_open_http2_connections_fail_closed_with_503(
        broker_factory, tls_upstream, pki, tmp_path):
    """docs/audit-log.md on HTTP/2, with the log failing mid-session: the connection whose records could
    not be written ends without the responses they describe; another connection already open
    gets 503 audit_unavailable on its next stream (the JSON of docs/cli.md, not a dropped
    connection), and nothing more goes up."""
    import subprocess
    from test_http2_attacks import H2Raw
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(log_dir)], check=True)
    try:
        policy = {"version": 1, "allow": [{"host": GITHUB, "ports": [tls_upstream.port]}]}
        b = broker_factory(policy=policy, connect_to=[connect_to_arg(GITHUB, tls_upstream.port)],
                           upstream_ca=pki.ca_cert, log_dir=log_dir)
        first, second = H2Raw(b, tls_upstream.port), H2Raw(b, tls_upstream.port)
        try:
            for c in (first, second):
                c.send(c.request(1))
                assert c.pump(lambda: 1 in c.ended) and c.status(1) == 200, c.describe()
            fd = os.open(log_dir / "filler", os.O_WRONLY | os.O_CREAT)  # the rest of the tmpfs
            try:
                while os.write(fd, b"x" * 4096):
                    pass
            except OSError:
                pass
            os.close(fd)
            # The log file's last page still takes a few records; then one does not fit.
            for stream in range(3, 203, 2):
                first.send(first.request(stream))
                assert first.pump(lambda: stream in first.ended or first.closed), first.describe()
                if first.closed:
                    break
            assert first.closed, first.describe()
            assert stream not in first.ended, first.describe()  # no response without its record
            seen = len(tls_upstream.requests)
            second.send(second.request(3))
            assert second.pump(lambda: 3 in second.ended), second.describe()
            assert second.status(3) == 503, second.describe()
            assert json.loads(second.bodies[3])["error"] == "audit_unavailable"
            assert len(tls_upstream.requests) == seen
        finally:
            first.close()
            second.close()
            b.stop()
    finally:
        subprocess.run(["umount", "-l", str(log_dir)], check=False)
