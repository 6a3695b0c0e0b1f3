"""HTTP/2 toward upstreams (docs/architecture.md): an upstream that offers h2 gets it, one pooled connection
per host:port with the streams of every client multiplexed on it, whether the clients speak
HTTP/1.1 or HTTP/2. Every protection holds per stream: the dummy becomes real only there, what
comes back (fields, body, trailers) is scrubbed, an upstream's reset reaches the client as a
failure, never as a whole response."""
import pytest

from conftest import connect_to_arg, curl
from h2_upstream import H2Upstream
from test_mitm import GITHUB, REAL, assert_nothing_written_contains


@pytest.fixture
def h2_upstream(pki):
    u = H2Upstream(pki)
    yield u
    u.close()


@pytest.fixture
def session(broker_factory, h2_upstream, pki):
    policy = {
        "version": 1,
        "allow": [{"host": GITHUB, "ports": [h2_upstream.port]}],
        "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB]}},
    }
    b = broker_factory(policy=policy, connect_to=[connect_to_arg(GITHUB, h2_upstream.port)],
                       upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL}, env_file=True)
    b.dummy = b.session_env()["GITHUB_TOKEN"]
    return b


def url(port, path):
    return f"https://{GITHUB}:{port}{path}"


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_a_request_goes_up_on_http2_with_the_real_value_and_comes_back_scrubbed(
        session, h2_upstream, http):
    r = curl(url(h2_upstream.port, "/user"), proxy=session.proxy, cacert=session.ca_cert,
             http=http, args=["-H", f"Authorization: token {session.dummy}"])
    assert r.status == 200, r.stderr
    assert r.versions == [http]
    [seen] = h2_upstream.requests
    assert seen["headers"]["authorization"] == f"token {REAL}"
    assert seen["headers"][":authority"] == f"{GITHUB}:{h2_upstream.port}"
    # Its echo of the real value came back as the dummy.
    assert r.json()["headers"]["authorization"] == f"token {session.dummy}"
    records = session.wait_for_records(lambda x: x.get("event") == "request")
    assert records[-1]["status"] == 200 and records[-1]["credential"] == "github"
    session.stop()
    assert_nothing_written_contains(session, REAL)


def test_a_real_value_in_a_response_field_body_and_trailer_comes_back_as_the_dummy(
        session, h2_upstream, tmp_path):
    auth = f"token {session.dummy}"
    # HTTP/1.1 client: the body without a length of its own comes chunked; trailers are dropped.
    r = curl(url(h2_upstream.port, "/reflect"), proxy=session.proxy, cacert=session.ca_cert,
             args=["-H", f"Authorization: {auth}"])
    assert r.status == 200, r.stderr
    assert r.headers["x-seen-authorization"] == auth
    assert r.body == auth.encode()
    assert r.headers.get("transfer-encoding") == "chunked"
    # HTTP/2 client: the trailer too (curl writes trailers among the headers it dumps).
    r = curl(url(h2_upstream.port, "/reflect"), proxy=session.proxy, cacert=session.ca_cert,
             http="2", args=["-H", f"Authorization: {auth}"], tmp=tmp_path)
    assert r.status == 200 and r.body == auth.encode(), r.stderr
    dumped = (tmp_path / "headers").read_text().lower()
    assert f"x-seen-authorization: {auth}".lower() in dumped
    assert f"x-trailer-authorization: {auth}".lower() in dumped
    session.stop()
    assert_nothing_written_contains(session, REAL)


def test_streams_of_many_clients_share_one_upstream_connection(session, h2_upstream):
    # Twenty streams at once from one HTTP/2 client, then four HTTP/1.1 connections. Each worker
    # thread of the broker keeps its own pool (a socket belongs to its thread): two at most.
    urls = [url(h2_upstream.port, f"/repos/o/r/{i}") for i in range(20)]
    r = curl(*urls, proxy=session.proxy, cacert=session.ca_cert, http="2",
             args=["--parallel", "--parallel-max", "20"])
    assert r.statuses == [200] * 20, r.stderr
    for i in range(4):
        r = curl(url(h2_upstream.port, f"/one/{i}"), proxy=session.proxy,
                 cacert=session.ca_cert)
        assert r.status == 200, r.stderr
    assert len(h2_upstream.requests) == 24
    assert h2_upstream.connections <= 2
    # The twenty streams' burst shared what its worker dialed.
    on = {}
    for req in h2_upstream.requests[:20]:
        on[req["connection"]] = on.get(req["connection"], 0) + 1
    assert len(on) == 1 and sum(on.values()) == 20


def test_a_long_body_without_length_streams_down_whole(session, h2_upstream):
    size = 3 * 1024 * 1024 + 7
    for http in ("1.1", "2"):
        r = curl(url(h2_upstream.port, f"/stream/{size}"), proxy=session.proxy,
                 cacert=session.ca_cert, http=http)
        assert r.status == 200 and len(r.body) == size, r.stderr


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_an_upstream_reset_is_a_failure_at_the_client_never_a_whole_response(
        session, h2_upstream, http):
    r = curl(url(h2_upstream.port, "/reset"), proxy=session.proxy, cacert=session.ca_cert,
             http=http)
    assert r.returncode != 0, (r.status, r.body)
    # The connection to the client survives on HTTP/2: the next stream is fine.
    r = curl(url(h2_upstream.port, "/reset"), url(h2_upstream.port, "/after"),
             proxy=session.proxy, cacert=session.ca_cert, http=http)
    assert r.statuses[-1] == 200


def test_an_interim_response_reaches_an_http11_client_without_body_framing(session, h2_upstream,
                                                                           tmp_path):
    r = curl(url(h2_upstream.port, "/interim"), proxy=session.proxy, cacert=session.ca_cert,
             tmp=tmp_path)
    assert r.status == 200 and r.body == b"after 100", r.stderr
    blocks = (tmp_path / "headers").read_bytes().decode().lower().split("\r\n\r\n")
    interim = [b for b in blocks if b.startswith("http/1.1 100 continue")]
    assert interim and "transfer-encoding" not in interim[0], blocks
    assert r.headers.get("transfer-encoding") == "chunked"
