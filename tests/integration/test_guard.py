"""The private-address guard, IP literals vs cidr rules, and upstream-side failures."""

from conftest import (RawClient, allow_policy, assert_refusal, closed_port, connect_to_arg, curl)


def test_localhost_allowed_by_policy_is_still_blocked_for_http(broker_factory, upstream):
    b = broker_factory(policy=allow_policy("localhost", ports=[upstream.port]))
    r = curl(f"http://localhost:{upstream.port}/", proxy=b.proxy)
    assert r.returncode == 0, r.stderr
    assert_refusal(r.status, r.headers, r.body, "private_address_blocked", 403,
                   session=b.session, host="localhost")
    assert upstream.connections == 0
    rec = b.wait_for_records(lambda r: r.get("error") == "private_address_blocked")
    assert rec and rec[0]["decision"] == "deny", b.records()


def test_localhost_allowed_by_policy_is_still_blocked_for_connect(broker_factory, upstream):
    b = broker_factory(policy=allow_policy("localhost", ports=[upstream.port], tunnel=True))
    with RawClient(b.port) as c:
        c.send(f"CONNECT localhost:{upstream.port} HTTP/1.1\r\n"
               f"Host: localhost:{upstream.port}\r\n\r\n".encode())
        resp = c.read_response()
    assert_refusal(resp.status, resp.headers, resp.body, "private_address_blocked", 403,
                   session=b.session, host="localhost")
    assert upstream.connections == 0


def test_ip_literal_needs_a_cidr_rule(broker_factory, upstream):
    b = broker_factory(policy=allow_policy("api.example.test", ports=[upstream.port]),
                       connect_to=[connect_to_arg("api.example.test", upstream.port)])
    r = curl(f"http://127.0.0.1:{upstream.port}/", proxy=b.proxy)
    assert_refusal(r.status, r.headers, r.body, "policy_denied", 403, session=b.session,
                   host="127.0.0.1")
    assert upstream.connections == 0


def test_ip_literal_allowed_by_cidr_rule(broker_factory, upstream):
    policy = {"version": 1, "allow": [{"cidr": "127.0.0.0/8", "ports": [upstream.port]}]}
    b = broker_factory(policy=policy)
    r = curl(f"http://127.0.0.1:{upstream.port}/via-cidr", proxy=b.proxy)
    assert r.returncode == 0, r.stderr
    assert r.status == 200
    assert r.json()["path"] == "/via-cidr"
    assert upstream.connections == 1
    rec = b.wait_for_records(lambda r: r.get("event") == "request")
    assert rec and rec[0]["rule"] == "allow[0]" and rec[0]["decision"] == "allow", b.records()


def test_cidr_rule_port_is_enforced(broker_factory, upstream):
    other = closed_port()
    policy = {"version": 1, "allow": [{"cidr": "127.0.0.0/8", "ports": [other]}]}
    b = broker_factory(policy=policy)
    r = curl(f"http://127.0.0.1:{upstream.port}/", proxy=b.proxy)
    assert_refusal(r.status, r.headers, r.body, "policy_denied", 403, session=b.session)
    assert upstream.connections == 0


def test_upstream_down_is_502_upstream_unreachable(broker_factory):
    port = closed_port()
    b = broker_factory(policy=allow_policy("api.example.test", ports=[port], tunnel=True),
                       connect_to=[connect_to_arg("api.example.test", port)])
    r = curl(f"http://api.example.test:{port}/", proxy=b.proxy)
    assert r.returncode == 0, r.stderr
    assert_refusal(r.status, r.headers, r.body, "upstream_unreachable", 502, session=b.session,
                   host="api.example.test")
    with RawClient(b.port) as c:
        c.send(f"CONNECT api.example.test:{port} HTTP/1.1\r\n"
               f"Host: api.example.test:{port}\r\n\r\n".encode())
        resp = c.read_response()
    assert_refusal(resp.status, resp.headers, resp.body, "upstream_unreachable", 502,
                   session=b.session)
    recs = b.wait_for_records(lambda r: r.get("error") == "upstream_unreachable", count=2)
    assert len(recs) == 2, b.records()


def test_unknown_name_is_502_dns_failed(broker_factory):
    b = broker_factory(policy=allow_policy("nonexistent.invalid", ports=[80, 443], tunnel=True))
    r = curl("http://nonexistent.invalid/", proxy=b.proxy)
    assert r.returncode == 0, r.stderr
    assert_refusal(r.status, r.headers, r.body, "dns_failed", 502, session=b.session,
                   host="nonexistent.invalid")
    with RawClient(b.port) as c:
        c.send(b"CONNECT nonexistent.invalid:443 HTTP/1.1\r\nHost: nonexistent.invalid:443\r\n\r\n")
        resp = c.read_response()
    assert_refusal(resp.status, resp.headers, resp.body, "dns_failed", 502, session=b.session)
