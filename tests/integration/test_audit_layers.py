"""Audit-only layers (docs/policy.md): a layer that says "enforcement": "audit" refuses nothing. A
request the enforcing layers allow goes through even when the audit layer would refuse it, and
its record says so (decision "would_deny", the audit layer's rule, and the rule that allowed it);
what the enforcing layers refuse stays refused."""

from conftest import allow_policy, assert_refusal, connect_to_arg, curl, run_broker_cli

HOST = "api.example.test"
OTHER = "other.example.test"


def start(broker_factory, upstream):
    enforcing = allow_policy(HOST, OTHER, ports=[upstream.port])
    # What the team means to enforce next: HOST without its /private/ paths, and nothing of OTHER.
    audit = {"version": 1, "enforcement": "audit",
             "allow": [{"host": HOST, "ports": [upstream.port]}],
             "deny": [{"host": HOST, "paths": ["/private/*"]}]}
    return broker_factory(policies=[enforcing, audit],
                          connect_to=[connect_to_arg(h, upstream.port) for h in (HOST, OTHER)])


def test_an_audit_layer_records_what_it_would_refuse_and_lets_it_go(broker_factory, upstream):
    b = start(broker_factory, upstream)
    for path in ("/private/report", "/public"):
        r = curl(f"http://{HOST}:{upstream.port}{path}", proxy=b.proxy)
        assert r.status == 200, r.stderr
    r = curl(f"http://{OTHER}:{upstream.port}/x", proxy=b.proxy)
    assert r.status == 200, r.stderr

    records = b.wait_for_records(lambda x: x.get("event") == "request", count=3)
    by_path = {(x["host"], x["path"]): x for x in records}
    private = by_path[(HOST, "/private/report")]
    assert private["status"] == 200
    assert private["decision"] == "would_deny"
    assert private["rule"].endswith("policy1.json#deny[0]"), private
    assert private["allowed_by"].endswith("policy0.json#allow[0]"), private
    public = by_path[(HOST, "/public")]
    assert public["decision"] == "allow" and "allowed_by" not in public, public
    other = by_path[(OTHER, "/x")]
    assert other["decision"] == "would_deny"
    assert other["rule"].endswith("policy1.json#default_deny"), other

    # The counts: in the session's last record, `broker log` and `broker sessions`.
    assert b.stop() == 0
    end = [x for x in b.records() if x["event"] == "session_end"][0]
    assert (end["requests"], end["denied"], end["would_deny"]) == (3, 0, 2), end
    log = run_broker_cli("log", "--log-dir", b.log_dir, b.session)
    assert log.returncode == 0, log.stderr
    assert sum(" would_deny " in line for line in log.stdout.splitlines()) == 2, log.stdout
    assert "would_deny=2" in log.stdout, log.stdout
    listed = run_broker_cli("sessions", "--log-dir", b.log_dir)
    header = listed.stdout.splitlines()[0].split()
    row = dict(zip(header, next(line.split() for line in listed.stdout.splitlines()
                                if b.session in line)))
    assert (row["REQUESTS"], row["DENIED"], row["WOULD-DENY"]) == ("3", "0", "2"), listed.stdout


def test_what_the_enforcing_layers_refuse_stays_refused(broker_factory, upstream):
    b = start(broker_factory, upstream)
    r = curl(f"http://denied.example.test:{upstream.port}/", proxy=b.proxy)
    assert_refusal(r.status, r.headers, r.body, "policy_denied", 403)
    rec = b.wait_for_records(lambda x: x.get("event") == "refused")[0]
    assert rec["decision"] == "deny"
