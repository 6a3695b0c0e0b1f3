"""`broker demo`: the offline walk-through (docs/cli.md) exits 0 and shows a swapped request, a
denial, a blocked dummy and the session's audit log, without ever printing a whole token."""

import re
import subprocess
import time

from conftest import BROKER_BIN, clean_env

WHOLE_TOKEN = re.compile(r"ghp_[A-Za-z0-9]{36}")


def run_demo(tmp_path, *args):
    home = tmp_path / "home"
    tmp = tmp_path / "tmp"
    for d in (home, tmp):
        d.mkdir(exist_ok=True)
    env = clean_env({"HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
                     "XDG_RUNTIME_DIR": str(tmp), "TMPDIR": str(tmp)})
    env.pop("GITHUB_TOKEN", None)
    started = time.monotonic()
    p = subprocess.run([BROKER_BIN, "demo", *args], capture_output=True, text=True, env=env,
                       timeout=60)
    return p, time.monotonic() - started, tmp


def test_demo_shows_swap_denial_block_and_audit_log(tmp_path):
    p, elapsed, tmp = run_demo(tmp_path)
    out = p.stdout
    assert p.returncode == 0, f"stdout:\n{out}\nstderr:\n{p.stderr}"
    assert elapsed < 15, elapsed
    # The child's view: a dummy prefix, then the upstream's 200 for the real token.
    assert re.search(r"dummy of the right shape: ghp_[A-Za-z0-9]{4}\.\.\.", out), out
    assert '"login":"octocat"' in out and "the upstream received the real token" in out, out
    # The refusals, as the client sees them.
    assert '"error":"policy_denied"' in out and '"host":"example.com"' in out, out
    assert '"error":"credential_not_bound"' in out, out
    # The audit log, human format, and its verification.
    assert re.search(r"request\s+allow\s+GET https://api\.github\.com/user\s+200\b.*"
                     r"credential=github", out), out
    assert re.search(r"refused\s+deny\s+CONNECT example\.com:443\s+403\b.*error=policy_denied",
                     out), out
    assert re.search(r"exfiltration_blocked\s+deny\s+GET https://uploads\.example\.net/\s+403\b"
                     r".*error=credential_not_bound", out), out
    assert re.search(r"session_end\s+requests=\d+\s+denied=\d+\s+exit=0", out), out
    assert "hash chain intact" in out, out
    assert "broker demo: ok." in out, out
    # Neither the real token nor a whole dummy is printed anywhere.
    assert not WHOLE_TOKEN.search(out + p.stderr), out + p.stderr
    # Its work directory is gone.
    assert not list(tmp.glob("broker-demo-*")), list(tmp.iterdir())


def test_demo_keep_leaves_a_verifiable_log_without_tokens(tmp_path):
    p, _, tmp = run_demo(tmp_path, "--keep")
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    kept = list(tmp.glob("broker-demo-*"))
    assert len(kept) == 1, list(tmp.iterdir())
    work = kept[0]
    assert f"kept {work}" in p.stdout, p.stdout
    assert (work / "policy.json").is_file() and (work / "upstream-ca.pem").is_file()
    logs = list((work / "logs").glob("demo-*.jsonl"))
    assert len(logs) == 1, logs
    # Checked as the user who ran the demo: its end is signed with their audit key.
    v = subprocess.run([BROKER_BIN, "log", str(logs[0]), "--verify"], capture_output=True,
                       text=True, env=clean_env({"HOME": str(tmp_path / "home")}), timeout=30)
    assert v.stdout.split(": ")[1].startswith("ok"), v.stdout
    assert v.returncode == 0, v.stdout + v.stderr
    for f in work.rglob("*"):
        if f.is_file():
            assert not WHOLE_TOKEN.search(f.read_text(errors="replace")), f
