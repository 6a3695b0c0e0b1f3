"""Plain http:// forwarding: absolute-form requests, keep-alive, streamed bodies, policy."""

import os

from conftest import (RawClient, allow_policy, assert_refusal, connect_to_arg, curl,
                      pattern_bytes, raw_exchange, sha256)

HOST = "api.example.test"


def start(broker_factory, upstream, policy=None, hosts=(HOST,)):
    policy = policy or allow_policy(HOST, ports=[upstream.port])
    return broker_factory(policy=policy,
                          connect_to=[connect_to_arg(h, upstream.port) for h in hosts])


def test_plain_forward_reaches_upstream_and_is_audited(broker_factory, upstream):
    b = start(broker_factory, upstream)
    r = curl(f"http://{HOST}:{upstream.port}/hello?x=1", proxy=b.proxy,
             args=["-H", "X-Test: forwarded"])
    assert r.returncode == 0, r.stderr
    assert r.status == 200
    assert r.headers.get("x-upstream") == "echo"  # the upstream's own response header survives
    echo = r.json()
    assert echo["method"] == "GET"
    assert echo["path"] == "/hello?x=1"  # origin-form towards the upstream
    assert echo["headers"]["host"] == f"{HOST}:{upstream.port}"
    assert echo["headers"]["x-test"] == "forwarded"
    assert upstream.connections == 1

    records = b.wait_for_records(lambda r: r.get("event") == "request")
    assert len(records) == 1, b.records()
    rec = records[0]
    assert rec["method"] == "GET"
    assert rec["scheme"] == "http"
    assert rec["host"] == HOST
    assert rec["port"] == upstream.port
    assert rec["status"] == 200
    assert rec["decision"] == "allow"
    assert rec["rule"] == "allow[0]"
    assert rec["session"] == b.session
    assert rec["path"].startswith("/hello")
    assert rec["bytes_in"] >= len(r.body)
    assert rec["bytes_out"] > 0


def test_thirty_requests_share_one_connection_each_side(broker_factory, upstream):
    b = start(broker_factory, upstream)
    urls = [f"http://{HOST}:{upstream.port}/item/{i}" for i in range(30)]
    r = curl(*urls, proxy=b.proxy)
    assert r.returncode == 0, r.stderr
    assert r.statuses == [200] * 30
    # client side: curl opened one connection to the proxy and reused it
    assert sum(r.new_connections) == 1, r.new_connections
    # upstream side: the broker kept its upstream connection alive too
    assert len(upstream.requests) == 30
    assert upstream.connections == 1, upstream.peers

    # each record is written before its response completes (docs/audit-log.md): no waiting needed
    records = [rec for rec in b.records() if rec.get("event") == "request"]
    assert len(records) == 30
    assert sorted(rec["path"] for rec in records) == sorted(f"/item/{i}" for i in range(30))
    assert all(rec["status"] == 200 and rec["decision"] == "allow" for rec in records)


def test_refusal_keeps_the_client_connection_usable(broker_factory, upstream):
    b = start(broker_factory, upstream, hosts=(HOST,))
    r = curl("http://denied.example.test/", f"http://{HOST}:{upstream.port}/after-403",
             proxy=b.proxy)
    assert r.statuses == [403, 200]
    assert sum(r.new_connections) == 1, r.new_connections
    assert [q["path"] for q in upstream.requests] == ["/after-403"]


def test_head_then_get_on_one_connection(broker_factory, upstream):
    b = start(broker_factory, upstream)
    with RawClient(b.port) as c:
        for method in ("HEAD", "GET", "HEAD", "GET"):
            c.send(f"{method} http://{HOST}:{upstream.port}/bytes/1000 HTTP/1.1\r\n"
                   f"Host: {HOST}:{upstream.port}\r\n\r\n".encode())
            resp = c.read_response(head_only=(method == "HEAD"))
            assert resp.status == 200
            assert resp.headers["content-length"] == "1000"
            assert len(resp.body) == (0 if method == "HEAD" else 1000)
    assert upstream.connections == 1


def test_pipelined_requests_are_answered_in_order(broker_factory, upstream):
    b = start(broker_factory, upstream)
    one = "GET http://{h}:{p}/pipe/{i} HTTP/1.1\r\nHost: {h}:{p}\r\n\r\n"
    with RawClient(b.port) as c:
        c.send("".join(one.format(h=HOST, p=upstream.port, i=i) for i in range(3)).encode())
        assert [c.read_response().json()["path"] for _ in range(3)] == [
            "/pipe/0", "/pipe/1", "/pipe/2"]


def test_host_header_matching_is_case_insensitive(broker_factory, upstream):
    b = start(broker_factory, upstream)
    req = (f"GET http://{HOST}:{upstream.port}/case HTTP/1.1\r\n"
           f"Host: API.Example.TEST:{upstream.port}\r\n\r\n").encode()
    resp = raw_exchange(b.port, req)
    assert resp.status == 200
    assert resp.json()["path"] == "/case"


def test_post_with_content_length_streams_5mb_intact(broker_factory, upstream, tmp_path):
    b = start(broker_factory, upstream)
    payload = os.urandom(5 * 1024 * 1024)
    body = tmp_path / "body.bin"
    body.write_bytes(payload)
    r = curl(f"http://{HOST}:{upstream.port}/upload", proxy=b.proxy, data_file=body,
             args=["-H", "Content-Type: application/octet-stream", "-H", "Expect:"])
    assert r.returncode == 0, r.stderr
    assert r.status == 200
    echo = r.json()
    assert echo["method"] == "POST"
    assert echo["headers"].get("content-length") == str(len(payload))
    assert echo["body_length"] == len(payload)
    assert echo["body_sha256"] == sha256(payload)
    rec = b.wait_for_records(lambda r: r.get("event") == "request")[0]
    assert rec["bytes_out"] >= len(payload)


def test_post_chunked_streams_5mb_intact(broker_factory, upstream, tmp_path):
    b = start(broker_factory, upstream)
    payload = os.urandom(5 * 1024 * 1024 + 17)
    body = tmp_path / "body.bin"
    body.write_bytes(payload)
    r = curl(f"http://{HOST}:{upstream.port}/upload", proxy=b.proxy, data_file=body,
             args=["-H", "Transfer-Encoding: chunked", "-H", "Expect:",
                   "-H", "Content-Type: application/octet-stream"])
    assert r.returncode == 0, r.stderr
    assert r.status == 200
    echo = r.json()
    assert "chunked" in echo["headers"].get("transfer-encoding", "").lower()
    assert echo["body_length"] == len(payload)
    assert echo["body_sha256"] == sha256(payload)


def test_denied_host_gets_403_json_with_every_field(broker_factory, upstream):
    b = start(broker_factory, upstream, hosts=(HOST, "denied.example.test"))
    r = curl(f"http://denied.example.test:{upstream.port}/secret", proxy=b.proxy)
    assert r.returncode == 0, r.stderr
    doc = assert_refusal(r.status, r.headers, r.body, "policy_denied", 403,
                         session=b.session, host="denied.example.test")
    assert doc["rule"] == "default_deny"
    assert upstream.connections == 0  # nothing was dialed

    rec = b.wait_for_records(lambda r: r.get("host") == "denied.example.test")
    assert rec, b.records()
    assert rec[0]["decision"] == "deny"
    assert rec[0]["status"] == 403
    assert rec[0]["error"] == "policy_denied"
    assert rec[0]["rule"] == "default_deny"


def test_deny_rule_beats_allow_rule(broker_factory, upstream):
    policy = {"version": 1,
              "allow": [{"host": "*.example.test", "ports": [upstream.port]}],
              "deny": [{"host": HOST, "ports": [upstream.port]}]}
    b = start(broker_factory, upstream, policy=policy, hosts=(HOST, "other.example.test"))
    denied = curl(f"http://{HOST}:{upstream.port}/", proxy=b.proxy)
    doc = assert_refusal(denied.status, denied.headers, denied.body, "policy_denied", 403,
                         session=b.session, host=HOST)
    assert doc["rule"] == "deny[0]"
    # the same wildcard allow rule still lets a sibling through
    ok = curl(f"http://other.example.test:{upstream.port}/", proxy=b.proxy)
    assert ok.status == 200
    assert ok.json()["headers"]["host"] == f"other.example.test:{upstream.port}"
    assert [r["path"] for r in upstream.requests] == ["/"]


def test_deny_rule_without_ports_denies_every_port(broker_factory, upstream):
    # "deny": [{"host": X}] reads as "never X"; an allow rule opening a non-default port of a
    # wildcard must not slip past it.
    policy = {"version": 1,
              "allow": [{"host": "*.example.test", "ports": [upstream.port]}],
              "deny": [{"host": HOST}]}
    b = start(broker_factory, upstream, policy=policy, hosts=(HOST,))
    denied = curl(f"http://{HOST}:{upstream.port}/", proxy=b.proxy)
    doc = assert_refusal(denied.status, denied.headers, denied.body, "policy_denied", 403,
                         session=b.session, host=HOST)
    assert doc["rule"] == "deny[0]"
    assert upstream.requests == []


def test_host_header_differing_from_uri_authority_is_421(broker_factory, upstream):
    b = start(broker_factory, upstream)
    req = (f"GET http://{HOST}:{upstream.port}/x HTTP/1.1\r\n"
           f"Host: evil.example.test\r\n\r\n").encode()
    resp = raw_exchange(b.port, req)
    assert_refusal(resp.status, resp.headers, resp.body, "host_mismatch", 421, session=b.session)
    assert upstream.requests == []


def test_origin_form_request_to_the_proxy_is_400(broker_factory, upstream):
    b = start(broker_factory, upstream)
    req = f"GET /x HTTP/1.1\r\nHost: {HOST}:{upstream.port}\r\n\r\n".encode()
    resp = raw_exchange(b.port, req)
    assert_refusal(resp.status, resp.headers, resp.body, "bad_request", 400, session=b.session)
    assert upstream.requests == []


def test_methods_and_paths_rules_are_enforced(broker_factory, upstream):
    policy = {"version": 1, "allow": [
        {"host": HOST, "ports": [upstream.port], "methods": ["POST"], "paths": ["/v1/*"]},
        {"host": HOST, "ports": [upstream.port], "methods": ["GET"]},
    ]}
    b = start(broker_factory, upstream, policy=policy)
    base = f"http://{HOST}:{upstream.port}"

    ok = curl(f"{base}/v1/chat", proxy=b.proxy, args=["-X", "POST", "-d", "hi"])
    assert ok.status == 200
    assert ok.json()["method"] == "POST"

    wrong_path = curl(f"{base}/v2/chat", proxy=b.proxy, args=["-X", "POST", "-d", "hi"])
    assert_refusal(wrong_path.status, wrong_path.headers, wrong_path.body, "policy_denied", 403,
                   session=b.session)

    wrong_method = curl(f"{base}/v1/chat", proxy=b.proxy, args=["-X", "DELETE"])
    assert_refusal(wrong_method.status, wrong_method.headers, wrong_method.body,
                   "policy_denied", 403, session=b.session)

    get_anywhere = curl(f"{base}/v2/chat", proxy=b.proxy)
    assert get_anywhere.status == 200

    assert [(r["method"], r["path"]) for r in upstream.requests] == [
        ("POST", "/v1/chat"), ("GET", "/v2/chat")]
    by_path = {(r.get("method"), r.get("status")): r for r in
               b.wait_for_records(lambda r: r.get("event") in ("request", "refused"), count=4)}
    assert by_path[("POST", 200)]["rule"] == "allow[0]"
    assert by_path[("GET", 200)]["rule"] == "allow[1]"
    assert by_path[("DELETE", 403)]["decision"] == "deny"


def test_chunked_response_passes_through_and_http10_clients_get_a_readable_body(broker_factory,
                                                                                upstream):
    b = start(broker_factory, upstream)
    url = f"http://{HOST}:{upstream.port}/chunked/5000"
    r11 = curl(url, proxy=b.proxy)
    assert r11.status == 200 and r11.body == pattern_bytes(5000)
    assert "chunked" in r11.headers.get("transfer-encoding", "")
    # An HTTP/1.0 client cannot read chunked coding: its request must go up as 1.0.
    r10 = curl(url, proxy=b.proxy, args=["--http1.0"])
    assert r10.returncode == 0, r10.stderr
    assert r10.status == 200 and r10.body == pattern_bytes(5000)
    assert "transfer-encoding" not in r10.headers
    assert upstream.requests[-1]["path"] == "/chunked/5000"
    rec = b.wait_for_records(lambda r: r.get("event") == "request", count=2)
    assert [r["status"] for r in rec] == [200, 200], b.records()
