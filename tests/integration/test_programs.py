"""Per-program rules (DESIGN §13): a credential whose "programs" name git is swapped for git's
requests only. git with the GitHub dummy reaches the upstream with the real token; curl in the
same session, sending the same dummy to the same host, is refused 403 credential_not_bound
naming the program binding, and the upstream never sees the real token from it. An allow rule
with "programs" admits only those programs."""

import json
import subprocess

from conftest import BROKER_BIN, clean_env

REAL = "ghp_" + "ProgramsRealGithubToken0123456789ABC"
assert len(REAL) == 40
HOST = "github.com"
GIT = ["*/git", "*/git-remote-http*"]  # git's HTTPS transport is git-remote-https


def run_wrapped(tmp_path, pki, upstream, script, policy):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(policy))
    argv = [BROKER_BIN, "wrap", "--policy", str(policy_file), "--upstream-ca", str(pki.ca_cert),
            "--connect-to", f"{HOST}:443:127.0.0.1:{upstream.port}",
            "--connect-to", f"api.example.test:443:127.0.0.1:{upstream.port}",
            "--log-dir", str(tmp_path / "logs"), "--", "sh", "-c", script]
    env = clean_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(runtime), "GITHUB_TOKEN": REAL})
    p = subprocess.run(argv, env=env, capture_output=True, timeout=60, cwd=tmp_path)
    records = [json.loads(l) for f in (tmp_path / "logs").glob("*.jsonl")
               for l in f.read_text().splitlines() if l.strip()]
    return p, records


def test_a_credential_for_git_is_not_swapped_for_curl(tmp_path, pki, tls_upstream):
    policy = {"version": 1,
              "allow": [{"host": HOST, "ports": [443]}],
              "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"],
                                         "hosts": [HOST], "programs": GIT}}}
    script = (
        'git -c http.extraHeader="Authorization: token $GITHUB_TOKEN" '
        f'ls-remote https://{HOST}/o/r.git >/dev/null 2>&1; echo "GIT $?"\n'
        'curl -sS -o curl.body -w "CURL %{http_code}\\n" '
        f'-H "Authorization: token $GITHUB_TOKEN" https://{HOST}/user\n'
        'cat curl.body; echo')
    p, records = run_wrapped(tmp_path, pki, tls_upstream, script, policy)
    out = p.stdout.decode(errors="replace")
    assert "CURL 403" in out, (out, p.stderr)
    # git's request reached the upstream with the real token; curl's never did.
    seen = tls_upstream.requests
    git_requests = [r for r in seen if r["path"].startswith("/o/r.git/info/refs")]
    assert git_requests, (seen, out, p.stderr)
    assert all({k.lower(): v for k, v in r["headers"].items()}.get("authorization") ==
               f"token {REAL}" for r in git_requests), \
        ([(r["path"], r["headers"]) for r in git_requests], records)
    assert not [r for r in seen if r["path"] == "/user"], seen
    body = json.loads(out[out.index("{"):out.rindex("}") + 1])
    assert body["error"] == "credential_not_bound", body
    assert "for the programs */git, */git-remote-http* only" in body["message"], body
    assert "/curl" in body["message"], body
    refused = [r for r in records if r.get("error") == "credential_not_bound"]
    assert len(refused) == 1 and refused[0]["exe"].endswith("/curl"), refused
    swapped = [r for r in records if r.get("credential") == "github" and r.get("status")]
    assert swapped and all("/git-core/git-remote-http" in r["exe"] for r in swapped
                           if r["decision"] == "allow"), [(r["exe"], r["path"]) for r in swapped]
    # No byte the broker wrote holds the real token.
    for f in [*(tmp_path / "logs").rglob("*"), tmp_path / "curl.body"]:
        if f.is_file():
            assert REAL.encode() not in f.read_bytes(), f
    assert REAL.encode() not in p.stdout + p.stderr


def test_an_allow_rule_with_programs_admits_only_them(tmp_path, pki, tls_upstream):
    policy = {"version": 1, "allow": [{"host": HOST, "ports": [443], "programs": GIT},
                                      {"host": "api.example.test", "ports": [443]}]}
    script = (f'git ls-remote https://{HOST}/o/r.git >/dev/null 2>&1; echo "GIT $?"\n'
              f'curl -sS -o /dev/null -w "CURL %{{http_code}}\\n" https://{HOST}/x\n'
              'curl -sS -o /dev/null -w "OTHER %{http_code}\\n" https://api.example.test/y\n')
    p, records = run_wrapped(tmp_path, pki, tls_upstream, script, policy)
    out = p.stdout.decode(errors="replace")
    assert "CURL 403" in out and "OTHER 200" in out, (out, p.stderr)
    assert [r for r in tls_upstream.requests if r["path"].startswith("/o/r.git/info/refs")]
    assert not [r for r in tls_upstream.requests if r["path"] == "/x"]
    denied = [r for r in records if r.get("path") == "/x"]
    assert denied and denied[0]["error"] == "policy_denied", denied
    assert denied[0]["exe"].endswith("/curl"), denied
