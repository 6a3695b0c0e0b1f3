"""Malformed and oversized requests on raw sockets: each gets a JSON refusal, nothing is
smuggled to the upstream, and the broker keeps serving."""

import pytest

from conftest import (Broker, RawClient, Upstream, allow_policy, assert_refusal, connect_to_arg,
                      raw_exchange)

HOST = "api.example.test"


@pytest.fixture(scope="module")
def upstream_m():
    u = Upstream()
    yield u
    u.close()


@pytest.fixture(scope="module")
def broker_m(tmp_path_factory, upstream_m):
    b = Broker(tmp_path_factory.mktemp("parsing"),
               policy=allow_policy(HOST, ports=[upstream_m.port]),
               connect_to=[connect_to_arg(HOST, upstream_m.port)])
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc!r}: {b.stderr[-2000:]}"


def request_line(upstream, method="GET", path="/"):
    return f"{method} http://{HOST}:{upstream.port}{path} HTTP/1.1\r\nHost: {HOST}:{upstream.port}\r\n"


def upstream_paths(upstream):
    return [r["path"] for r in upstream.requests]


def test_normal_request_with_50_fields_passes(broker_m, upstream_m):
    head = request_line(upstream_m, path="/fifty") + "".join(f"X-F{i}: v\r\n" for i in range(49))
    resp = raw_exchange(broker_m.port, (head + "\r\n").encode())
    assert resp.status == 200
    assert resp.json()["headers"]["x-f48"] == "v"


def test_70kib_header_is_431(broker_m, upstream_m):
    head = request_line(upstream_m, path="/big") + "X-Big: " + "a" * (70 * 1024) + "\r\n\r\n"
    resp = raw_exchange(broker_m.port, head.encode())
    assert_refusal(resp.status, resp.headers, resp.body, "header_too_large", 431,
                   session=broker_m.session)
    assert "/big" not in upstream_paths(upstream_m)


def test_101_header_fields_is_431(broker_m, upstream_m):
    # Host + 100 more = 101 fields, one over the limit
    head = request_line(upstream_m, path="/many") + "".join(f"X-F{i}: v\r\n" for i in range(100))
    resp = raw_exchange(broker_m.port, (head + "\r\n").encode())
    assert_refusal(resp.status, resp.headers, resp.body, "header_too_large", 431,
                   session=broker_m.session)
    assert "/many" not in upstream_paths(upstream_m)


def test_content_length_with_transfer_encoding_is_400(broker_m, upstream_m):
    req = (request_line(upstream_m, "POST", "/smuggle") +
           "Content-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n"
           "0\r\n\r\n"
           f"GET /smuggled HTTP/1.1\r\nHost: {HOST}\r\n\r\n")
    resp = raw_exchange(broker_m.port, req.encode())
    assert_refusal(resp.status, resp.headers, resp.body, "bad_request", 400,
                   session=broker_m.session)
    assert "/smuggle" not in upstream_paths(upstream_m)
    assert "/smuggled" not in upstream_paths(upstream_m)


def test_obs_fold_header_is_400(broker_m, upstream_m):
    req = request_line(upstream_m, path="/folded") + "X-Folded: first\r\n  second\r\n\r\n"
    resp = raw_exchange(broker_m.port, req.encode())
    assert_refusal(resp.status, resp.headers, resp.body, "bad_request", 400,
                   session=broker_m.session)
    assert "/folded" not in upstream_paths(upstream_m)


def test_bad_chunk_size_is_400(broker_m, upstream_m):
    req = (request_line(upstream_m, "POST", "/badchunk") +
           "Transfer-Encoding: chunked\r\n\r\n"
           "ZZ\r\nhello\r\n0\r\n\r\n")
    resp = raw_exchange(broker_m.port, req.encode(), timeout=5)
    assert_refusal(resp.status, resp.headers, resp.body, "bad_request", 400,
                   session=broker_m.session)
    # the upstream never got a complete request out of it
    assert "/badchunk" not in upstream_paths(upstream_m)
    recs = broker_m.wait_for_records(lambda r: r.get("path") == "/badchunk")
    assert recs and recs[0]["status"] == 400, broker_m.records()


def test_garbage_request_line_is_400(broker_m):
    resp = raw_exchange(broker_m.port, b"HELLO THERE\x01\r\n\r\n")
    assert_refusal(resp.status, resp.headers, resp.body, "bad_request", 400,
                   session=broker_m.session)


def test_refusals_are_audited(broker_m):
    # the head-level refusals above: 70 KiB, 101 fields, CL+TE, obs-fold, garbage
    records = [r for r in broker_m.records() if r.get("path") != "/badchunk"]
    errors = [r.get("error") for r in records]
    assert errors.count("header_too_large") >= 2, records
    assert errors.count("bad_request") >= 3, records
    assert all(r["decision"] == "deny" for r in records if r.get("error")), records


def test_broker_still_serving_after_all_of_the_above(broker_m, upstream_m):
    assert broker_m.alive()
    with RawClient(broker_m.port) as c:
        for i in range(3):  # keep-alive on one connection still works
            c.send((request_line(upstream_m, path=f"/after/{i}") + "\r\n").encode())
            resp = c.read_response()
            assert resp.status == 200
            assert resp.json()["path"] == f"/after/{i}"
