"""The team gateway (docs/gateway.md): `broker serve --gateway` holds many sessions made by
`broker session create`; each client authenticates with its session's proxy credential, gets
its own dummies, policy layers, budgets and log, and a revoked session is refused at once."""
import base64
import json
import time
from pathlib import Path

import pytest

from conftest import (RawClient, assert_refusal, connect_to_arg, curl, raw_exchange,
                      run_broker_cli)
from gateway_session import create_session
from test_mitm import assert_nothing_written_contains

GITHUB = "api.github.com"
OTHER = "other.example.test"
REAL = "ghp_" + "R3alGateWayT0ken" * 2 + "abcd"


def team_policy(port, plain_port):
    return {
        "version": 1,
        "allow": [{"host": GITHUB, "ports": [port]}, {"host": OTHER, "ports": [plain_port]}],
        "credentials": {
            "github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB]},
        },
    }


@pytest.fixture
def gateway(broker_factory, tls_upstream, upstream, pki):
    """A gateway with GitHub's credential; api.github.com is the HTTPS upstream, OTHER the
    plain one."""
    gw = broker_factory(policy=team_policy(tls_upstream.port, upstream.port), args=["--gateway"],
                        connect_to=[connect_to_arg(GITHUB, tls_upstream.port),
                                    connect_to_arg(OTHER, upstream.port)],
                        upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL})
    gw.plain = upstream.port
    return gw


def create(gw, *args, name="s"):
    return create_session(gw, *args, name=name)


def session_log(gw, session_id):
    """The session's records on every replica, merged by `broker log SESSION --json`."""
    r = run_broker_cli("log", session_id, "--json", "--log-dir", gw.log_dir)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def github(gw, env, path="/user", token=None, tls_port=None):
    return curl(f"https://{GITHUB}:{tls_port}{path}", proxy=env["HTTPS_PROXY"], cacert=gw.ca_cert,
                args=["-H", f"Authorization: token {token or env['GITHUB_TOKEN']}"])


def test_a_client_without_a_session_credential_is_refused_407(gateway, tls_upstream):
    r = raw_exchange(gateway.port, f"CONNECT {GITHUB}:{tls_upstream.port} HTTP/1.1\r\n"
                                   f"Host: {GITHUB}:{tls_upstream.port}\r\n\r\n".encode())
    doc = assert_refusal(r.status, r.headers, r.body, "proxy_auth_required", 407,
                         session=gateway.session, host=GITHUB)
    assert "session create" in doc["message"]
    assert r.headers["proxy-authenticate"].startswith("Basic")
    # A plain request too, and the connection stays usable for a retry with credentials.
    with RawClient(gateway.port) as c:
        c.send(f"GET http://{OTHER}:{gateway.plain}/ HTTP/1.1\r\nHost: {OTHER}\r\n\r\n".encode())
        first = c.read_response()
        assert first.status == 407
        c.send(f"GET http://{OTHER}:{gateway.plain}/ HTTP/1.1\r\nHost: {OTHER}\r\n"
               f"Proxy-Authorization: Basic {base64.b64encode(b'g-nobody:nothing').decode()}\r\n"
               f"\r\n".encode())
        second = c.read_response()
        assert_refusal(second.status, second.headers, second.body, "proxy_auth_required", 407)
    refused = gateway.wait_for_records(lambda x: x.get("error") == "proxy_auth_required", count=3)
    assert len(refused) == 3 and all(x["status"] == 407 for x in refused)
    assert upstream_untouched(tls_upstream)


def upstream_untouched(upstream):
    return upstream.requests == []


def test_a_session_swaps_its_own_dummy_and_logs_apart(gateway, tls_upstream):
    sid, env, env_file = create(gateway, "--user", "alice", "--label", "team=infra")
    assert (env_file.stat().st_mode & 0o777) == 0o600
    dummy = env["GITHUB_TOKEN"]
    assert dummy != REAL and dummy.startswith("ghp_") and len(dummy) == len(REAL)
    r = github(gateway, env, tls_port=tls_upstream.port)
    assert r.returncode == 0 and r.status == 200, r.stderr
    assert tls_upstream.requests[-1]["headers"]["Authorization"] == f"token {REAL}"
    assert "Proxy-Authorization" not in tls_upstream.requests[-1]["headers"]
    assert r.json()["headers"]["authorization"] == f"token {dummy}"
    records = session_log(gateway, sid)
    assert records[0]["event"] == "session_start" and records[0]["user"] == "alice"
    assert records[0]["labels"] == {"team": "infra"}
    req = [x for x in records if x.get("event") == "request"]
    assert req and req[-1]["credential"] == "github" and req[-1]["session"] == sid
    # Nothing of the session's traffic went into the gateway's own log.
    assert not [x for x in gateway.records() if x.get("event") == "request"]
    listed = run_broker_cli("session", "--gateway", gateway.session, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)["sessions"]
    assert entry["id"] == sid and entry["state"] == "active" and entry["user"] == "alice"
    assert "token" not in listed.stdout and env["HTTPS_PROXY"].split(":")[2].split("@")[0] not in listed.stdout
    shown = run_broker_cli("session", "--gateway", gateway.session, "show", sid, "--json")
    assert json.loads(shown.stdout)["here"]["requests"] == 1
    gateway.stop()
    assert_nothing_written_contains(gateway, REAL)


def test_two_sessions_never_use_each_others_dummies(gateway, tls_upstream):
    a, env_a, _ = create(gateway, name="a")
    b, env_b, _ = create(gateway, name="b")
    assert a != b
    assert env_a["GITHUB_TOKEN"] != env_b["GITHUB_TOKEN"]
    # B's credential with A's dummy: B's session does not know it, so it is not made real.
    r = github(gateway, env_b, token=env_a["GITHUB_TOKEN"], tls_port=tls_upstream.port)
    assert REAL not in json.dumps(tls_upstream.requests[-1]["headers"]) if tls_upstream.requests else True
    # Each one's own dummy works.
    for env in (env_a, env_b):
        r = github(gateway, env, tls_port=tls_upstream.port)
        assert r.status == 200, r.stderr
        assert tls_upstream.requests[-1]["headers"]["Authorization"] == f"token {REAL}"
    gateway.stop()
    assert_nothing_written_contains(gateway, REAL)


def test_a_wrong_token_for_a_real_session_is_refused(gateway, tls_upstream):
    sid, env, _ = create(gateway)
    wrong = f"http://{sid}:not-the-token@127.0.0.1:{gateway.port}"
    r = curl(f"https://{GITHUB}:{tls_upstream.port}/user", proxy=wrong, cacert=gateway.ca_cert)
    assert r.returncode != 0 or r.status == 407
    assert upstream_untouched(tls_upstream)
    assert gateway.wait_for_records(lambda x: x.get("error") == "proxy_auth_required")


def test_revoke_refuses_the_next_request_even_on_an_open_connection(gateway, tls_upstream):
    sid, env, _ = create(gateway)
    other, env_other, _ = create(gateway, name="other")
    auth = base64.b64encode(env["HTTPS_PROXY"].split("//", 1)[1].rsplit("@", 1)[0].encode()).decode()
    with RawClient(gateway.port) as c:
        get = (f"GET http://{OTHER}:{gateway.plain}/x HTTP/1.1\r\n"
               f"Host: {OTHER}:{gateway.plain}\r\n"
               f"Proxy-Authorization: Basic {auth}\r\n\r\n").encode()
        c.send(get)
        assert c.read_response().status == 200
        r = run_broker_cli("session", "--gateway", gateway.session, "revoke", sid)
        assert r.returncode == 0, r.stderr
        c.send(get)
        after = c.read_response()
        doc = assert_refusal(after.status, after.headers, after.body, "proxy_auth_required", 407,
                             session=sid)
        assert "revoked" in doc["message"]
    assert github(gateway, env, tls_port=tls_upstream.port).status in (0, 407)
    # The other session goes on.
    assert github(gateway, env_other, tls_port=tls_upstream.port).status == 200
    listed = json.loads(run_broker_cli("session", "--gateway", gateway.session, "list",
                                       "--json").stdout)["sessions"]
    assert {s["id"]: s["state"] for s in listed} == {sid: "revoked", other: "active"}


def test_a_session_expires_after_its_ttl(gateway, tls_upstream):
    sid, env, _ = create(gateway, "--ttl", "1s")
    assert github(gateway, env, tls_port=tls_upstream.port).status == 200
    time.sleep(1.2)
    r = curl(f"http://{OTHER}:{gateway.plain}/", proxy=env["HTTPS_PROXY"])
    assert r.status == 407
    assert "expired" in r.body.decode()


def test_a_session_policy_narrows_and_its_budget_is_its_own(gateway, tls_upstream):
    narrow = gateway.dir / "narrow.json"
    narrow.write_text(json.dumps({"version": 1,
                                  "allow": [{"host": GITHUB, "ports": [tls_upstream.port]}],
                                  "budgets": {"requests": 2}}))
    sid, env, _ = create(gateway, "--policy", narrow, name="narrow")
    free, env_free, _ = create(gateway, name="free")
    r = curl(f"http://{OTHER}:{gateway.plain}/", proxy=env["HTTPS_PROXY"])
    assert r.status == 403 and json.loads(r.body)["error"] == "policy_denied"
    statuses = [github(gateway, env, tls_port=tls_upstream.port).status for _ in range(3)]
    assert statuses == [200, 200, 429]
    # The other session has neither the narrowing nor the spent budget.
    assert curl(f"http://{OTHER}:{gateway.plain}/", proxy=env_free["HTTPS_PROXY"]).status == 200
    assert [github(gateway, env_free, tls_port=tls_upstream.port).status for _ in range(3)] == [200] * 3


def test_a_session_policy_narrows_a_team_credentials_scope_never_widens_it(gateway, tls_upstream,
                                                                          tmp_path):
    narrow = tmp_path / "scope.json"
    narrow.write_text(json.dumps({"version": 1, "credentials": {"github": {
        "type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB],
        "scope": {"repos": ["org/web"]}}}}))
    sid, env, _ = create(gateway, "--policy", narrow, name="scoped")
    free, env_free, _ = create(gateway, name="unscoped")
    port = tls_upstream.port
    assert github(gateway, env, "/repos/org/web/issues", tls_port=port).status == 200
    r = github(gateway, env, "/repos/org/other/issues", tls_port=port)
    doc = assert_refusal(r.status, r.headers, r.body, "credential_out_of_scope", 403, session=sid)
    assert "org/other" in doc["message"]
    # The other session keeps the team's scope (none).
    assert github(gateway, env_free, "/repos/org/other/issues", tls_port=port).status == 200
    refused = [q for q in session_log(gateway, sid) if q.get("error") == "credential_out_of_scope"]
    assert refused and refused[0]["rule"] == "credentials.github.scope.repos", refused
    # A session layer cannot change a team credential's family.
    other_type = tmp_path / "other-type.json"
    other_type.write_text(json.dumps({"version": 1, "credentials": {"github": {
        "type": "bearer", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB]}}}))
    r = run_broker_cli("session", "--gateway", gateway.session, "create", "--policy", other_type)
    assert r.returncode != 0 and "credentials.github: type \"bearer\"" in r.stderr, r.stderr


def test_a_session_policy_cannot_add_credentials(gateway, tmp_path):
    bad = tmp_path / "creds.json"
    bad.write_text(json.dumps({"version": 1, "credentials": {
        "x": {"type": "bearer", "env": ["X"], "hosts": ["x.example.test"]}}}))
    r = run_broker_cli("session", "--gateway", gateway.session, "create", "--policy", bad)
    assert r.returncode != 0
    assert "cannot add credentials" in r.stderr and str(bad) in r.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 1, "allow": [{"hots": "x"}]}')
    r = run_broker_cli("session", "--gateway", gateway.session, "create", "--policy", broken)
    assert r.returncode != 0 and str(broken) in r.stderr and "hots" in r.stderr
