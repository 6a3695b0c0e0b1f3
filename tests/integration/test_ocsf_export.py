"""`broker log --format ocsf` (docs/gateway.md): one OCSF 1.8.0 HTTP Activity event per audit record,
each checked against the field list derived from the OCSF schema (ocsf/http_activity-1.8.0.json,
its source named inside and in ocsf/derive_fields.py)."""
import json
import signal
from datetime import datetime

from conftest import connect_to_arg, curl, run_broker_cli
from ocsf import validate

GITHUB = "api.github.com"
OTHER = "other.example.test"
PINNED = "api.example.test"  # a tunnel: its TLS is the upstream's own
REAL = "ghp_R3alT0kenF0rTestsOnly0123456789abcd"


def policy(port):
    return {
        "version": 1,
        "allow": [{"host": GITHUB, "ports": [port]}, {"host": OTHER, "ports": [port]},
                  {"host": PINNED, "ports": [port], "tunnel": True}],
        "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB]}},
    }


def ocsf_events(*args):
    r = run_broker_cli("log", *args, "--format", "ocsf")
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()], r.stdout


def assert_valid(events):
    for e in events:
        assert validate.problems(e) == [], (e["activity_name"], e)


def test_every_record_of_a_recorded_session_is_a_valid_ocsf_http_activity_event(
        broker_factory, tls_upstream, pki):
    b = broker_factory(policy=policy(tls_upstream.port),
                       connect_to=[connect_to_arg(h, tls_upstream.port)
                                   for h in (GITHUB, OTHER, PINNED)],
                       upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL}, env_file=True)
    dummy = b.session_env()["GITHUB_TOKEN"]
    base = f"https://{GITHUB}:{tls_upstream.port}"
    r = curl(f"{base}/user?token=abc", proxy=b.proxy, cacert=b.ca_cert,
             args=["-H", f"Authorization: token {dummy}"])
    assert r.status == 200
    r = curl(f"{base}/repos", proxy=b.proxy, cacert=b.ca_cert, http="2",
             args=["-H", f"Authorization: token {dummy}", "--data-binary", "x=1"])
    assert r.status == 200
    r = curl(f"https://{OTHER}:{tls_upstream.port}/collect", proxy=b.proxy, cacert=b.ca_cert,
             args=["-H", f"Authorization: Bearer {dummy}"])
    assert r.status == 403  # the dummy sent to a host it is not bound to
    r = curl(f"https://denied.example.test:{tls_upstream.port}/", proxy=b.proxy,
             cacert=b.ca_cert)
    assert r.status == 403
    r = curl(f"https://{PINNED}:{tls_upstream.port}/", proxy=b.proxy, cacert=pki.ca_cert)
    assert r.status == 200
    b.wait_for_records(lambda x: x.get("event") == "tunnel")
    b.proc.send_signal(signal.SIGHUP)  # a policy_reload record
    b.wait_for_records(lambda x: x.get("event") == "policy_reload")
    assert b.stop() == 0

    records = b.records()
    kinds = {rec["event"] for rec in records}
    assert kinds >= {"session_start", "request", "exfiltration_blocked", "refused", "tunnel",
                     "policy_reload", "session_end"}
    events, text = ocsf_events(str(b.log_path))
    assert len(events) == len(records)  # one event per record, in the log's order
    assert_valid(events)
    assert REAL not in text

    by_seq = {e["metadata"]["sequence"]: e for e in events}
    for rec in records:
        e = by_seq[rec["seq"]]
        assert e["class_uid"] == 4002 and e["actor"]["session"]["uid"] == b.session
        assert e["metadata"]["uid"] == f"{b.session}/{rec['seq']}"
        assert e["metadata"]["original_time"] == rec["ts"]
        ts = datetime.fromisoformat(rec["ts"].replace("Z", "+00:00"))
        assert e["time"] == round(ts.timestamp() * 1000)  # OCSF time: ms since the epoch
    get, post = [by_seq[rec["seq"]] for rec in records if rec["event"] == "request"]
    assert (get["activity_id"], get["activity_name"], get["type_uid"]) == (3, "Get", 400203)
    assert get["http_request"]["url"] == {
        "scheme": "https", "hostname": GITHUB, "port": tls_upstream.port, "path": "/user",
        "query_string": "token=<redacted>",
        "url_string": f"https://{GITHUB}:{tls_upstream.port}/user?token=<redacted>"}
    assert get["http_response"] == {"code": 200} and get["http_request"]["version"] == "1.1"
    assert (get["action_id"], get["disposition_id"], get["status_id"]) == (1, 1, 1)
    assert "process" not in get["actor"]  # serve knows no client process (wrap does)
    assert get["unmapped"]["credential"] == "github"
    assert (post["activity_id"], post["http_request"]["version"]) == (6, "2")
    assert post["traffic"]["bytes_out"] >= 3

    exfil = next(e for e in events if e["unmapped"].get("event") == "exfiltration_blocked")
    assert (exfil["action_id"], exfil["disposition_id"], exfil["severity_id"]) == (2, 2, 4)
    assert exfil["status_code"] == "credential_not_bound" and exfil["status_id"] == 2
    refused = next(e for e in events if e["unmapped"].get("event") == "refused")
    assert refused["status_code"] == "policy_denied" and refused["disposition"] == "Blocked"
    assert refused["dst_endpoint"]["hostname"] == "denied.example.test"
    tunnel = next(e for e in events if e["unmapped"].get("event") == "tunnel")
    assert tunnel["activity_name"] == "Connect" and tunnel["dst_endpoint"]["hostname"] == PINNED
    for kind in ("session_start", "policy_reload", "session_end"):
        e = next(e for e in events if e["activity_name"] == kind)
        # not an HTTP exchange: activity Other, the whole record kept
        assert e["activity_id"] == 99 and e["unmapped"]["event"] == kind
        assert e["unmapped"]["hash"] == next(r["hash"] for r in records if r["event"] == kind)


def test_records_the_class_cannot_express_are_events_too_and_a_gateway_user_is_the_actor(
        tmp_path):
    # The record kinds a gateway, an ask or a kept-out write leave, as broker writes them, and a
    # line that is not JSON: each is one event, the record (or the line) kept whole.
    base = {"session": "s-team1"}
    lines = [json.dumps({**base, **r}) for r in [
        {"ts": "2026-12-04T10:00:00.000Z", "seq": 1, "event": "session_start", "mode": "serve",
         "user": "alice", "labels": {"team": "infra"}},
        {"ts": "2026-12-04T10:00:01.000Z", "seq": 2, "event": "ask", "pid": None, "exe": None,
         "method": "PATCH", "scheme": "https", "host": "api.example.com", "port": 443,
         "path": "/x", "decision": "ask", "rule": None, "id": "a-1", "timeout_s": 60},
        {"ts": "2026-12-04T10:00:02.000Z", "seq": 3, "event": "approval", "id": "a-1",
         "decision": "approve", "who": "uid 1000", "scope": "once", "rule": None,
         "host": "api.example.com", "port": 443, "path_prefix": None, "released": 1},
        {"ts": "2026-12-04T10:00:03.000Z", "seq": 4, "event": "dns", "pid": 7, "exe": "/bin/x",
         "method": None, "scheme": None, "host": "api.example.com", "port": 53, "path": None,
         "status": None, "bytes_out": 0, "bytes_in": 0, "ms": 0.2, "decision": "allow",
         "rule": "allow[0]", "credential": None, "llm_tokens": None},
        {"ts": "2026-12-04T10:00:04.000Z", "seq": 5, "event": "admin", "decision": "deny",
         "who": None, "status": 401, "method": "GET", "path": "/admin/api/sessions",
         "peer": "127.0.0.1", "reason": "no credential"},
        {"ts": "2026-12-04T10:00:05.000Z", "seq": 6, "event": "kept_out", "path": "/home/u/.bashrc"},
        {"ts": "2026-12-04T10:00:06.000Z", "seq": 7, "event": "session_end", "requests": 1,
         "denied": 0, "exit": 0},
    ]] + ["{not json"]
    log = tmp_path / "s-team1.jsonl"
    log.write_text("\n".join(lines) + "\n")
    events, _ = ocsf_events(str(log))
    assert len(events) == len(lines)
    assert_valid(events)
    assert [e["activity_name"] for e in events] == [
        "session_start", "Patch", "approval", "Unknown", "admin", "kept_out", "session_end",
        "unparseable_line"]
    ask = events[1]
    assert ask["actor"]["user"] == {"name": "alice"}  # named in the session's start
    assert ask["disposition"] == "Delayed" and ask["activity_id"] == 9
    assert all(e["actor"]["user"]["name"] == "alice" for e in events[:7])
    assert events[2]["unmapped"]["who"] == "uid 1000"
    assert events[3]["actor"]["process"] == {"pid": 7, "name": "x", "path": "/bin/x"}
    assert events[-1]["unmapped"] == {"event": "unparseable_line", "line": "{not json"}


def test_an_unknown_format_is_refused_with_the_choices(tmp_path):
    log = tmp_path / "s-x.jsonl"
    log.write_text("")
    r = run_broker_cli("log", str(log), "--format", "xml")
    assert r.returncode != 0
    assert "xml" in r.stderr and "ocsf" in r.stderr
    r = run_broker_cli("log", str(log), "--format", "ocsf", "--json")
    assert r.returncode != 0 and "excludes" in r.stderr
