"""Gateway replicas sharing state through a real redis-server (docs/gateway.md): a session made on
one replica works on the other with the same dummies; its budgets are spent once across both;
a revoke reaches every replica within a second; Redis down means 503 state_unavailable for
budgeted sessions and recovery when it returns; a replica killed mid-session keeps every record
it wrote and its clients go on through the other."""
import json
import signal
import time
import uuid

import pytest

from conftest import RawClient, assert_refusal, run_broker_cli
from gateway_session import create_session
from redis_server import RedisServer, free_port
from test_budgets import ANTHROPIC, OPENAI, OTHER, llm, llm_pki  # noqa: F401 (fixtures)

REAL = "sk-proj-" + "R3plicaSecretValue" * 3


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path / "redis")
    yield r
    r.stop()


def team_policy():
    return {
        "version": 1,
        "allow": [{"host": OPENAI}, {"host": OTHER}],
        "credentials": {"openai": {"type": "bearer", "env": ["OPENAI_API_KEY"],
                                   "hosts": [OPENAI]}},
    }


def start_replicas(redis, broker_factory, llm, llm_pki, tmp_path, policy, real, args=(),
                   plain_hosts=(OTHER,)):
    """Two gateway replicas ("r1", "r2") on one Redis, one CA, one HOME (the replicas sign
    session ends with the team's one key) and one log dir (each replica its own files), each
    with an admin listener (b.admin: its port); each client trusts the CA and the test CA
    (b.bundle). `real` is the team's OpenAI key."""
    suffix = uuid.uuid4().hex[:8]  # gateway names are control-socket paths: unique per run
    out = []
    for name in ("r1", "r2"):
        admin = free_port()
        b = broker_factory(policy=policy, ca_dir=tmp_path / "ca", session=f"gw-{name}-{suffix}",
                           args=["--gateway", "--redis", redis.url, "--replica", name,
                                 "--admin", f"127.0.0.1:{admin}", *args],
                           upstream_ca=llm_pki.ca_cert,
                           env={"OPENAI_API_KEY": real, "HOME": str(tmp_path / "home")},
                           log_dir=tmp_path / "logs",
                           connect_to=[f"{h}:443:127.0.0.1:{llm.port}" for h in (OPENAI, OTHER)]
                           + [f"{h}:80:127.0.0.1:{llm.plain_port}" for h in plain_hosts])
        b.admin = admin
        out.append(b)
    bundle = tmp_path / "clients-ca.pem"
    bundle.write_bytes(out[0].ca_cert.read_bytes() + llm_pki.ca_cert.read_bytes())
    for b in out:
        b.bundle = bundle
    return out


@pytest.fixture
def replicas(redis, broker_factory, llm, llm_pki, tmp_path):  # noqa: F811
    # redis first: it is torn down after the gateways, which ship their last records to it.
    return start_replicas(redis, broker_factory, llm, llm_pki, tmp_path, team_policy(), REAL,
                          args=["--audit-sink", "redis", "--audit-rotate-size", "4KB"])


def create(gw, *args, name="s"):
    sid, env, _ = create_session(gw, *args, name=name)
    return sid, env


def via(gw, env):
    """The session's proxy URL pointed at replica `gw`."""
    userinfo = env["HTTPS_PROXY"].split("//", 1)[1].rsplit("@", 1)[0]
    return f"http://{userinfo}@127.0.0.1:{gw.port}"


def requests_session(gw, env):
    import requests
    s = requests.Session()
    s.trust_env = False
    s.proxies = {"http": via(gw, env), "https": via(gw, env)}
    s.verify = str(gw.bundle)
    return s


def chat(s, env):
    return s.post(f"https://{OPENAI}/v1/chat/completions", timeout=20,
                  headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
                  json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})


def plain(gw, env, path="/x"):
    import requests
    return requests.get(f"http://{OTHER}{path}", proxies={"http": via(gw, env)}, timeout=20)


def test_a_session_made_on_one_replica_works_on_the_other(replicas):
    r1, r2 = replicas
    sid, env = create(r1)
    assert env["OPENAI_API_KEY"] != REAL
    for gw in (r1, r2):
        with requests_session(gw, env) as s:
            r = chat(s, env)
            assert r.status_code == 200, r.text
    listed = json.loads(run_broker_cli("session", "--gateway", r2.session, "list", "--json").stdout)
    assert [x["id"] for x in listed["sessions"]] == [sid]


def test_a_requests_budget_is_spent_once_across_replicas(replicas, tmp_path):
    r1, r2 = replicas
    policy = tmp_path / "six.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"requests": 6}}))
    sid, env = create(r1, "--policy", policy)
    statuses = [plain(gw, env).status_code for _ in range(5) for gw in (r1, r2)]
    assert statuses.count(200) == 6, statuses
    assert statuses[6:] == [429] * 4, statuses
    doc = plain(r2, env).json()
    assert doc["error"] == "budget_exhausted" and doc["budget"] == "requests"


def test_llm_tokens_spent_on_one_replica_stop_the_session_on_the_other(replicas, redis, tmp_path):
    r1, r2 = replicas
    policy = tmp_path / "tokens.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"llm_tokens": 250}}))
    sid, env = create(r1, "--policy", policy)
    with requests_session(r1, env) as s1, requests_session(r2, env) as s2:
        assert chat(s1, env).status_code == 200  # 150 tokens
        assert chat(s2, env).status_code == 200  # 300: now spent
        time.sleep(0.3)  # the usage goes out once the response is recorded, off its path
        refused = chat(s1, env)
        assert refused.status_code == 429, refused.text
        assert refused.json()["budget"] == "llm_tokens"
        assert chat(s2, env).status_code == 429
    # What each replica shared is one field per replica process, not a key per batch: the keys
    # are the session, the set of sessions, its usage and the audit stream, and for the asks
    # (ask_relay) each replica's list (empty) and the set naming the replicas.
    assert redis.command("DBSIZE") == ":7", redis.command("DBSIZE")


def test_bytes_one_replica_sent_stop_the_session_on_the_other(replicas, tmp_path):
    import requests
    r1, r2 = replicas
    policy = tmp_path / "bytes.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"bytes_out": "4KB"}}))
    sid, env = create(r1, "--policy", policy)
    assert plain(r1, env).status_code == 200  # r1 holds a lease from here
    r = requests.post(f"http://{OTHER}/upload", data=b"x" * 8192,
                      proxies={"http": via(r2, env)}, timeout=20)
    assert r.status_code == 200
    # r2 goes quiet: what it sent still reaches Redis (with its unused lease), and r1 hears of it.
    deadline = time.monotonic() + 2
    while (refused := plain(r1, env)).status_code != 429:
        assert time.monotonic() < deadline, "r1 never heard of the bytes r2 sent"
        time.sleep(0.1)
    assert refused.json()["budget"] == "bytes_out" and "all replicas" in refused.json()["used"]


def test_revoke_on_one_replica_reaches_the_other_within_a_second(replicas):
    r1, r2 = replicas
    sid, env = create(r1)
    assert plain(r2, env).status_code == 200
    r = run_broker_cli("session", "--gateway", r1.session, "revoke", sid)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 1.0
    while plain(r2, env).status_code != 407:
        assert time.monotonic() < deadline, "the other replica still serves a revoked session"
        time.sleep(0.05)
    doc = plain(r2, env).json()
    assert doc["error"] == "proxy_auth_required" and "revoked" in doc["message"]


def test_redis_down_refuses_budgeted_sessions_until_it_returns(replicas, redis, tmp_path):
    r1, r2 = replicas
    policy = tmp_path / "budget.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"requests": 100}}))
    sid, env = create(r1, "--policy", policy, name="budgeted")
    free, env_free = create(r1, name="free")
    assert plain(r1, env).status_code == 200 and plain(r1, env_free).status_code == 200
    redis.stop()
    # The replica's poll finds Redis gone within a moment and says so once, in its log; from
    # then on the lease it holds is not used, and every budgeted request asks Redis and fails.
    deadline = time.monotonic() + 2
    while "unreachable" not in r1.stderr:
        assert time.monotonic() < deadline, r1.stderr
        time.sleep(0.05)
    for _ in range(3):
        r = plain(r1, env)
        assert r.status_code == 503 and r.json()["error"] == "state_unavailable", r.text
    # A session without budgets has nothing to check there: it goes on.
    assert plain(r1, env_free).status_code == 200
    redis.start()
    deadline = time.monotonic() + 5
    while plain(r1, env).status_code != 200:
        assert time.monotonic() < deadline, "no recovery after Redis returned"
        time.sleep(0.1)
    assert plain(r2, env).status_code == 200
    deadline = time.monotonic() + 2
    while "reachable again" not in r1.stderr:
        assert time.monotonic() < deadline, r1.stderr
        time.sleep(0.05)


def test_a_killed_replica_keeps_its_records_and_clients_go_on_through_the_other(replicas):
    r1, r2 = replicas
    sid, env = create(r1)
    for _ in range(3):
        assert plain(r1, env).status_code == 200
    r1.proc.send_signal(signal.SIGKILL)
    r1.proc.wait()
    r1.returncode = 0  # killed on purpose
    [log] = (r1.log_dir / sid).glob("r1.*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    # Every request answered was recorded first (docs/audit-log.md): none is lost with the process.
    assert [x["event"] for x in records].count("request") == 3
    assert plain(r2, env).status_code == 200
    v = run_broker_cli("log", sid, "--verify", "--log-dir", r1.log_dir)
    # The chain holds; only the end is missing, as after any killed broker.
    assert v.returncode != 0 and "incomplete" in v.stdout + v.stderr, v.stdout + v.stderr
    assert "tampered" not in v.stdout + v.stderr


def metrics(gw):
    import requests
    r = requests.get(f"http://127.0.0.1:{gw.admin}/metrics", timeout=5)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_metrics_count_each_session_and_redis_round_trips(replicas, tmp_path):
    r1, r2 = replicas
    policy = tmp_path / "budget.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"requests": 1000}}))
    sid, env = create(r1, "--policy", policy)
    before = metrics(r1)
    for _ in range(20):
        assert plain(r1, env).status_code == 200
    with RawClient(r1.port) as c:  # no credential: a 407 in the gateway's own counts
        c.send(f"GET http://{OTHER}/ HTTP/1.1\r\nHost: {OTHER}\r\n\r\n".encode())
        assert c.read_response().status == 407
    after = metrics(r1)
    assert after[f'broker_requests_total{{session="{sid}",event="request"}}'] == 20
    assert after[f'broker_refusals_total{{session="{r1.session}",code="proxy_auth_required"}}'] == 1
    assert after[f'broker_bytes_total{{session="{sid}",direction="in"}}'] > 0
    key = 'broker_redis_round_trips_total{path="request"}'
    trips = after[key] - before.get(key, 0)
    # The session lookup, then one admission that leases what follows: far from its limit, a
    # session's requests go without waiting for Redis (refills run off their path).
    assert 2 <= trips <= 4, trips
    background = 'broker_redis_round_trips_total{path="background"}'
    assert after[background] > before.get(background, 0)
    assert after['broker_redis_round_trip_seconds_count'] >= trips
    assert "broker_open_connections" in after and "broker_gateway_sessions" in after


def test_the_audit_sink_ships_every_record_of_both_replicas_to_a_stream(replicas, redis):
    import subprocess
    r1, r2 = replicas
    sid, env = create(r1)
    for gw in (r1, r2, r1):
        assert plain(gw, env).status_code == 200
    r1.stop()
    r2.stop()
    raw = subprocess.run(["redis-cli", "-p", str(redis.port), "--raw", "XRANGE", "broker:audit",
                          "-", "+"], capture_output=True, text=True, check=True).stdout.splitlines()
    entries, i = [], 0
    while i + 6 < len(raw) + 1 and i < len(raw):
        fields = dict(zip(raw[i + 1:i + 7:2], raw[i + 2:i + 7:2]))
        entries.append(fields)
        i += 7
    shipped = [e for e in entries if e.get("session") == sid]
    files = {}
    for gw, name in ((r1, "r1"), (r2, "r2")):
        for f in sorted((gw.log_dir / sid).glob(f"{name}.*.jsonl")):
            files.setdefault(name, []).extend(f.read_text().splitlines())
    for name, lines in files.items():
        assert [e["record"] for e in shipped if e["replica"] == name] == lines
    assert sum(1 for e in shipped if '"event":"request"' in e["record"]) == 3


def test_concurrent_requests_on_both_replicas_never_overspend(replicas, tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    r1, r2 = replicas
    policy = tmp_path / "ten.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"requests": 10}}))
    sid, env = create(r1, "--policy", policy)
    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda i: plain((r1, r2)[i % 2], env, f"/n{i}").status_code,
                                 range(40)))
    assert statuses.count(200) == 10, statuses
    assert statuses.count(429) == 30, statuses


def test_a_lease_one_replica_leaves_unused_goes_back_to_the_others(replicas, tmp_path):
    r1, r2 = replicas
    policy = tmp_path / "forty.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"requests": 40}}))
    sid, env = create(r1, "--policy", policy)
    assert plain(r1, env).status_code == 200  # r1 leases a few more than this one
    time.sleep(0.6)  # unused, the lease goes stale and back
    statuses = [plain(r2, env, f"/n{i}").status_code for i in range(40)]
    assert statuses == [200] * 39 + [429], statuses
    assert plain(r1, env).status_code == 429


def test_rotation_under_load_keeps_both_replicas_chains_verifiable(replicas):
    from concurrent.futures import ThreadPoolExecutor
    r1, r2 = replicas
    sid, env = create(r1)
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda i: plain((r1, r2)[i % 2], env, f"/p{i}").status_code,
                                 range(120)))
    assert statuses == [200] * 120
    r1.stop()
    r2.stop()
    files = sorted(p.name for p in (r1.log_dir / sid).iterdir())
    assert sum(f.startswith("r1.") for f in files) >= 3 and sum(f.startswith("r2.") for f in files) >= 3
    v = run_broker_cli("log", sid, "--verify", "--log-dir", r1.log_dir,
                       "--key", r1.dir.parent / "home/.config/broker/audit-key")
    assert v.returncode == 0, v.stdout + v.stderr
    assert "replica r1: ok" in v.stdout and "replica r2: ok" in v.stdout, v.stdout
    merged = run_broker_cli("log", sid, "--json", "--log-dir", r1.log_dir)
    records = [json.loads(line) for line in merged.stdout.splitlines()]
    assert sum(x["event"] == "request" for x in records) == 120
    stamps = [x["ts"] for x in records]
    assert stamps == sorted(stamps)


def test_a_rate_limit_is_shared_by_the_replicas(replicas, tmp_path):
    r1, r2 = replicas
    policy = tmp_path / "rate.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"rate": "4/m"}}))
    sid, env = create(r1, "--policy", policy)
    statuses = [plain(gw, env).status_code for _ in range(3) for gw in (r1, r2)]
    # A bucket of 4 for the session, not 4 per replica.
    assert statuses == [200, 200, 200, 200, 429, 429], statuses
    refused = plain(r1, env)
    assert refused.json()["budget"] == "rate" and int(refused.headers["retry-after"]) >= 1


def test_a_policy_may_let_budgeted_requests_go_while_redis_is_away(replicas, redis, tmp_path):
    r1, _ = replicas
    policy = tmp_path / "open.json"
    policy.write_text(json.dumps({"version": 1, "budgets": {"requests": 100,
                                                            "on_state_unavailable": "allow"}}))
    sid, env = create(r1, "--policy", policy)
    assert plain(r1, env).status_code == 200
    redis.stop()
    assert plain(r1, env).status_code == 200  # counted on this replica only
    redis.start()


def test_an_admin_token_made_on_one_replica_opens_the_others_admin_api(replicas):
    import requests
    r1, r2 = replicas
    made = run_broker_cli("admin-token", "--gateway", r1.session, "create", "--name", "ops")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()

    def sessions(gw):
        return requests.get(f"http://127.0.0.1:{gw.admin}/api/sessions", timeout=5,
                            headers={"Authorization": f"Bearer {token}"})
    sid, _ = create(r1)
    for gw in (r1, r2):
        r = sessions(gw)
        assert r.status_code == 200, r.text
        assert [s["id"] for s in r.json()["sessions"]] == [sid]
    listed = run_broker_cli("admin-token", "--gateway", r2.session, "list", "--json")
    assert [t["name"] for t in json.loads(listed.stdout)["tokens"]] == ["ops"]
    assert token not in listed.stdout
    assert run_broker_cli("admin-token", "--gateway", r2.session, "revoke", "ops").returncode == 0
    assert sessions(r2).status_code == 401  # at once where it was revoked
    deadline = time.monotonic() + 3  # within a second on the other replica
    while sessions(r1).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sessions(r1).status_code == 401
