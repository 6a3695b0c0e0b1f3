"""A running session's control socket: `broker status` shows its usage against every budget and
`broker kill` ends it (docs/cli.md)."""

import json
import subprocess
import time

from conftest import BROKER_BIN, clean_env


def runtime_env(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    return clean_env({"XDG_RUNTIME_DIR": str(run), "HOME": str(tmp_path)})


def cli(env, *args):
    return subprocess.run([BROKER_BIN, *args], capture_output=True, text=True, timeout=30,
                          env=env)


def wait_for_socket(tmp_path, session, timeout=10):
    sock = tmp_path / "run" / "broker" / session / "control.sock"
    deadline = time.monotonic() + timeout
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sock.exists(), "no control socket"
    assert (sock.stat().st_mode & 0o077) == 0, oct(sock.stat().st_mode)
    return sock


def test_status_and_kill_a_wrapped_session(tmp_path):
    env = runtime_env(tmp_path)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"version": 1, "allow": [{"host": "api.example.test"}],
                                  "budgets": {"requests": 10, "duration": "1h"}}))
    p = subprocess.Popen([BROKER_BIN, "wrap", "--session", "ctl-wrap", "--policy", str(policy),
                          "--log-dir", str(tmp_path / "logs"), "--", "sleep", "60"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_socket(tmp_path, "ctl-wrap")
        r = cli(env, "status", "ctl-wrap", "--json")
        assert r.returncode == 0, r.stderr
        status = json.loads(r.stdout)
        assert status["session"] == "ctl-wrap" and status["mode"] == "wrap"
        budgets = status["budgets"]["budgets"]
        assert budgets["requests"]["limit"] == "10" and budgets["duration"]["limit"] == "1h"
        r = cli(env, "status")
        assert r.returncode == 0 and "ctl-wrap" in r.stdout and "requests" in r.stdout
        t0 = time.monotonic()
        r = cli(env, "kill", "ctl-wrap")
        assert r.returncode == 0, r.stderr
        _, err = p.communicate(timeout=10)
        assert time.monotonic() - t0 < 5
        assert p.returncode == 137
        assert b"ended by broker kill" in err
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    # the session's directory went with it
    assert not (tmp_path / "run" / "broker" / "ctl-wrap").exists()
    r = cli(env, "status", "ctl-wrap")
    assert r.returncode == 1 and "does not answer" in r.stderr


def test_kill_ends_a_serve_session(tmp_path):
    env = runtime_env(tmp_path)
    p = subprocess.Popen([BROKER_BIN, "serve", "--listen", "127.0.0.1:0", "--session", "ctl-serve",
                          "--log-dir", str(tmp_path / "logs"), "--ca-dir", str(tmp_path / "ca")],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_socket(tmp_path, "ctl-serve")
        assert cli(env, "kill", "ctl-serve").returncode == 0
        p.communicate(timeout=15)
        assert p.returncode == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    records = [json.loads(l) for l in (tmp_path / "logs" / "ctl-serve.jsonl").read_text().splitlines()]
    assert records[-1]["event"] == "session_end"


def test_status_without_sessions_says_so(tmp_path):
    r = cli(runtime_env(tmp_path), "status")
    assert r.returncode == 0 and "no running sessions" in r.stdout
