"""SIGHUP re-reads the policy files of `serve`: a valid file takes effect, a broken one is
refused and the running policy stays."""

import json
import signal
import time

from conftest import allow_policy, assert_refusal, connect_to_arg, curl


def _wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_sighup_applies_a_valid_policy_and_keeps_the_old_on_error(broker_factory, upstream):
    port = upstream.port
    b = broker_factory(policy=allow_policy("api.example.test", ports=[port]),
                       connect_to=[connect_to_arg("api.example.test", port),
                                   connect_to_arg("other.example.test", port)])
    other = f"http://other.example.test:{port}/x"
    r = curl(other, proxy=b.proxy)
    assert_refusal(r.status, r.headers, r.body, "policy_denied", 403, session=b.session)

    policy_file = b.policy_files[0]
    policy_file.write_text(json.dumps(allow_policy("other.example.test", ports=[port])))
    b.proc.send_signal(signal.SIGHUP)
    assert _wait_for(lambda: b.wait_for_records(lambda r: r.get("event") == "policy_reload",
                                                timeout=0.1))
    assert curl(other, proxy=b.proxy).status == 200
    r = curl(f"http://api.example.test:{port}/", proxy=b.proxy)
    assert_refusal(r.status, r.headers, r.body, "policy_denied", 403, session=b.session)

    policy_file.write_text('{"version": 1, "allow": [ {"host": 42} ]}')
    b.proc.send_signal(signal.SIGHUP)
    assert _wait_for(lambda: "policy reload refused" in b.stderr), b.stderr
    assert "allow[0].host" in b.stderr
    assert curl(other, proxy=b.proxy).status == 200  # the last good policy still applies
    assert b.alive()


def test_sighup_refuses_a_policy_that_changes_credentials(broker_factory, upstream):
    port = upstream.port
    creds = {"gh": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": ["api.example.test"]}}
    b = broker_factory(policy=allow_policy("api.example.test", "other.example.test", ports=[port],
                                           credentials=creds),
                       connect_to=[connect_to_arg("api.example.test", port)],
                       env={"GITHUB_TOKEN": "ghp_0123456789abcdefghijABCDEFGHIJ012345"})
    creds["gh"]["hosts"].append("other.example.test")
    b.policy_files[0].write_text(json.dumps(
        allow_policy("api.example.test", "other.example.test", ports=[port], credentials=creds)))
    b.proc.send_signal(signal.SIGHUP)
    assert _wait_for(lambda: "policy reload refused" in b.stderr), b.stderr
    assert "credentials" in b.stderr
    assert not b.wait_for_records(lambda r: r.get("event") == "policy_reload", timeout=0.2)
