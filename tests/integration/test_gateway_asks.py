"""A team gateway's asks (docs/policy.md, docs/gateway.md): a gateway session whose layers ask holds what they
refuse while an operator decides through the admin JSON API, behind an admin token made with
`broker admin-token create` (never the proxy's session tokens). A request without a valid token
gets 401 and a record in the gateway's log; a decision applies to that session at once and names
the operator in the session's records."""
import json
import signal
import subprocess
import time

import requests

from conftest import BROKER_BIN, allow_policy, assert_refusal, clean_env, connect_to_arg, curl
from redis_server import free_port
from test_ask import in_background
from test_mitm import assert_nothing_written_contains

ALLOWED = "api.example.test"
ASKED = "docs.example.test"


def start(broker_factory, tmp_path, upstream):
    run = tmp_path / "run"  # its own runtime dir: the only gateway the CLI finds there
    run.mkdir(mode=0o700)
    admin = free_port()
    gw = broker_factory(policy=allow_policy(ALLOWED, ports=[upstream.port], on_deny="ask"),
                        args=["--gateway", "--admin", f"127.0.0.1:{admin}"],
                        env={"XDG_RUNTIME_DIR": str(run)},
                        connect_to=[connect_to_arg(h, upstream.port) for h in (ALLOWED, ASKED)])
    gw.admin = f"http://127.0.0.1:{admin}"
    return gw


def cli(gw, *args):
    return subprocess.run([BROKER_BIN, *map(str, args)], capture_output=True, text=True,
                          timeout=30, env=clean_env(gw.env))


def new_session(gw, name):
    env_file = gw.dir / f"{name}.env"
    r = cli(gw, "session", "create", "--env-file", env_file)
    assert r.returncode == 0, r.stderr
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if line)
    return env["HTTPS_PROXY"].split("//", 1)[1].split(":", 1)[0], env


def api(gw, method, path, token=None, **kw):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.request(method, gw.admin + path, headers=headers, timeout=10, **kw)


def held(gw, token, count=1, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        r = api(gw, "GET", "/api/asks", token)
        assert r.status_code == 200, r.text
        asks = r.json()["asks"]
        if len(asks) >= count or time.monotonic() > deadline:
            assert len(asks) >= count, asks
            return asks
        time.sleep(0.1)


def records(gw, session):
    r = cli(gw, "log", session, "--json", "--log-dir", gw.log_dir)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_an_operator_decides_a_sessions_asks_through_the_admin_api(broker_factory, tmp_path,
                                                                   upstream):
    gw = start(broker_factory, tmp_path, upstream)
    made = cli(gw, "admin-token", "create", "--name", "ana")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("bka_") and "shown this once" in made.stderr
    listed = cli(gw, "admin-token", "list")
    assert "ana" in listed.stdout and token not in listed.stdout + listed.stderr

    sid, env = new_session(gw, "one")
    proxy = env["HTTP_PROXY"]
    url = f"http://{ASKED}:{upstream.port}/guide/start"
    waiting = in_background(lambda: curl(url, proxy=proxy, timeout=60))

    # Nobody without the admin token sees or decides anything: not the session's own token.
    session_token = proxy.split("//", 1)[1].split("@", 1)[0].split(":", 1)[1]
    for wrong in (None, "bka_" + "A" * 43, session_token):
        r = api(gw, "GET", "/api/asks", wrong)
        assert r.status_code == 401, r.text
        assert r.json()["error"] == "admin_auth_required"
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
    r = requests.get(gw.admin + "/api/asks", headers={"Authorization": f"Basic {token}"},
                     timeout=10)
    assert r.status_code == 401
    assert api(gw, "GET", "/api/sessions").status_code == 401
    r = api(gw, "GET", "/api/sessions", token)
    assert r.status_code == 200 and [x["id"] for x in r.json()["sessions"]] == [sid], r.text
    assert api(gw, "GET", "/healthz").status_code == 200  # /metrics and /healthz stay open

    [ask] = held(gw, token)
    assert ask["id"].startswith(sid + "-") and ask["session"] == sid, ask
    assert ask["url"] == url and ask["method"] == "GET" and ask["rule"] == "default_deny"
    assert upstream.requests == []
    r = api(gw, "POST", f"/api/asks/{ask['id']}/approve", "bka_" + "B" * 43,
            json={"scope": "session"})
    assert r.status_code == 401  # a decision needs the token too
    r = api(gw, "POST", f"/api/asks/{ask['id']}/approve", token, json={"scope": "always"})
    assert r.status_code == 400 and "once" in r.json()["message"], r.text
    r = api(gw, "POST", f"/api/asks/{ask['id']}/approve", token,
            json={"scope": "session", "path": "/guide/"})
    assert r.status_code == 200, r.text
    assert r.json()["released"] == [ask["id"]] and r.json()["scope"] == "session"
    assert waiting().status == 200
    # The session's policy grew at once: the next request under the prefix is not asked.
    assert curl(f"http://{ASKED}:{upstream.port}/guide/next", proxy=proxy, timeout=20).status == 200
    r = api(gw, "POST", f"/api/asks/{ask['id']}/deny", token)
    assert r.status_code == 404 and r.json()["error"] == "not_found"

    # Another session did not get that approval: its request is asked, and denied.
    sid2, env2 = new_session(gw, "two")
    other = in_background(lambda: curl(url, proxy=env2["HTTP_PROXY"], timeout=60))
    [ask2] = held(gw, token)
    assert ask2["session"] == sid2
    r = api(gw, "POST", f"/api/asks/{ask2['id']}/deny", token)
    assert r.status_code == 200 and r.json()["decision"] == "deny", r.text
    r = other()
    assert_refusal(r.status, r.headers, r.body, "approval_denied", 403, host=ASKED)

    decided = [x for x in records(gw, sid) if x["event"] == "approval"]
    assert len(decided) == 1 and decided[0]["decision"] == "approve"
    assert decided[0]["who"].startswith("admin-token ana (a-")
    assert " from 127.0.0.1:" in decided[0]["who"] and decided[0]["path_prefix"] == "/guide/"
    [denied] = [x for x in records(gw, sid2) if x["event"] == "approval"]
    assert denied["decision"] == "deny" and denied["who"].startswith("admin-token ana")

    # A revoked token opens nothing from then on.
    revoked = cli(gw, "admin-token", "revoke", "ana")
    assert revoked.returncode == 0 and "revoked" in revoked.stdout, revoked.stderr
    assert api(gw, "GET", "/api/asks", token).status_code == 401
    assert cli(gw, "admin-token", "revoke", "ana").returncode == 1

    own = [x for x in records(gw, gw.session) if x["event"] == "admin"]
    refused = [x for x in own if x["decision"] == "deny"]
    assert len(refused) == 7 and all(x["status"] == 401 for x in refused), own
    assert {x["reason"] for x in refused} == {
        "no Authorization field and no console login", "unknown or revoked admin token",
        "Authorization is not a Bearer token"}
    assert refused[0]["path"] == "/api/asks" and refused[0]["peer"].startswith("127.0.0.1:")
    assert [x["decision"] for x in own if x["decision"] != "deny"] == ["token_create",
                                                                       "token_revoke"]
    assert all(x["name"] == "ana" for x in own if x["decision"] != "deny")
    assert gw.stop() == 0
    verified = cli(gw, "log", gw.session, "--verify", "--log-dir", gw.log_dir)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert_nothing_written_contains(gw, token)


def test_broker_pending_and_approve_reach_a_gateways_sessions(broker_factory, tmp_path,
                                                             upstream):
    gw = start(broker_factory, tmp_path, upstream)
    sid, env = new_session(gw, "one")
    waiting = in_background(lambda: curl(f"http://{ASKED}:{upstream.port}/x",
                                         proxy=env["HTTP_PROXY"], timeout=60))
    deadline = time.monotonic() + 15
    while True:
        p = cli(gw, "pending", "--json")
        assert p.returncode == 0, p.stderr
        asks = json.loads(p.stdout)
        if asks or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    [ask] = asks
    assert ask["session"] == sid
    r = cli(gw, "approve", ask["id"], "--always")
    assert r.returncode == 1 and "approve it for the session" in r.stderr, r.stderr
    r = cli(gw, "approve", ask["id"], "--once", "--gateway", gw.session)
    assert r.returncode == 0, r.stderr
    assert waiting().status == 200
    [decided] = [x for x in records(gw, sid) if x["event"] == "approval"]
    assert decided["scope"] == "once" and decided["who"].startswith("uid ")

    # `pending SESSION` names a gateway's session; another session's asks are not in it.
    _, env2 = new_session(gw, "two")
    second = in_background(lambda: curl(f"http://{ASKED}:{upstream.port}/y",
                                        proxy=env2["HTTP_PROXY"], timeout=60))
    deadline = time.monotonic() + 15
    while not json.loads(cli(gw, "pending", "--json").stdout) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert json.loads(cli(gw, "pending", sid, "--json").stdout) == []
    [other] = json.loads(cli(gw, "pending", "--json").stdout)
    assert cli(gw, "deny", other["id"]).returncode == 0
    assert second().status == 403


def test_an_approval_outlives_a_reload_of_the_team_policy(broker_factory, tmp_path, upstream):
    gw = start(broker_factory, tmp_path, upstream)
    token = cli(gw, "admin-token", "create", "--name", "ana").stdout.strip()
    _, env = new_session(gw, "one")
    url = f"http://{ASKED}:{upstream.port}/a"
    waiting = in_background(lambda: curl(url, proxy=env["HTTP_PROXY"], timeout=60))
    [ask] = held(gw, token)
    assert api(gw, "POST", f"/api/asks/{ask['id']}/approve", token).status_code == 200
    assert waiting().status == 200
    gw.proc.send_signal(signal.SIGHUP)
    assert gw.wait_for_records(lambda r: r.get("event") == "policy_reload", timeout=10)
    # Still approved: not asked again.
    assert curl(url, proxy=env["HTTP_PROXY"], timeout=20).status == 200
    assert api(gw, "GET", "/api/asks", token).json()["asks"] == []


def test_a_flood_of_bad_admin_requests_is_recorded_in_bounded_lines(broker_factory, tmp_path,
                                                                   upstream):
    gw = start(broker_factory, tmp_path, upstream)
    with requests.Session() as s:
        for _ in range(60):
            assert s.get(gw.admin + "/api/asks", timeout=10).status_code == 401
        time.sleep(1.2)
        assert s.get(gw.admin + "/api/asks", timeout=10).status_code == 401
    assert gw.stop() == 0
    refused = [x for x in records(gw, gw.session) if x["event"] == "admin"]
    assert len(refused) < 61
    assert len(refused) + sum(x.get("suppressed", 0) for x in refused) == 61, refused
    assert "suppressed" in refused[-1]
