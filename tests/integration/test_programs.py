"""Per-program rules (docs/policy.md): a credential whose "programs" name git is swapped for git's
requests only. git with the GitHub dummy reaches the upstream with the real token; curl in the
same session, sending the same dummy to the same host, is refused 403 credential_not_bound
naming the program binding, and the upstream never sees the real token from it. An allow rule
with "programs" admits only those programs.

A program's identity cannot be borrowed (docs/policy.md), tried from inside the sandbox: a socket a
listed program holds along with another process is the other's too; a copy of a listed program
is another file; a glob that could match a file the session writes is refused before anything
runs."""

import json
import re
import subprocess

from conftest import BROKER_BIN, clean_env, run_broker_cli

REAL = "ghp_" + "ProgramsRealGithubToken0123456789ABC"
assert len(REAL) == 40
HOST = "github.com"
# git's HTTPS transport is git-remote-https, a link to git-remote-http (the file it runs).
GIT = ["/usr/bin/git", "/usr/lib/git-core/git-remote-http"]


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
    assert "for the programs /usr/bin/git, /usr/lib/git-core/git-remote-http only" in \
        body["message"], body
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


# ---- a program's identity cannot be borrowed (docs/policy.md) ----------------------------------------

# Python makes a socket, starts git with it (inherited, before it is connected; git waits on its
# input), then connects through the proxy and sends the GitHub dummy itself.
BORROWED_SOCKET = r'''
import os, socket, ssl, subprocess, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
s = socket.socket()
git = subprocess.Popen(["/usr/bin/git", "hash-object", "--stdin"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, pass_fds=[s.fileno()])
s.connect((proxy.hostname, proxy.port))
s.sendall(b"CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    chunk = s.recv(4096)
    if not chunk:
        break
    head += chunk
print("CONNECT", head.split(b"\r\n")[0].decode(), flush=True)
tls = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]).wrap_socket(
    s, server_hostname="github.com")
tls.sendall(("GET /borrowed HTTP/1.1\r\nHost: github.com\r\nAuthorization: token " +
             os.environ["GITHUB_TOKEN"] + "\r\nConnection: close\r\n\r\n").encode())
reply = b""
try:
    while True:
        chunk = tls.recv(65536)
        if not chunk:
            break
        reply += chunk
except ssl.SSLError:
    pass
print("REPLY", reply.split(b"\r\n")[0].decode(), flush=True)
print("BODY", reply.split(b"\r\n\r\n", 1)[-1].decode(), flush=True)
out, _ = git.communicate(b"borrowed")
print("GIT", git.returncode, out.decode().strip(), flush=True)
'''


def test_a_socket_git_shares_with_python_is_pythons_too(tmp_path, pki, tls_upstream):
    """The credential is bound to git; Python's connection that a git child also holds is not
    swapped (every holder must be listed), and its record names both; git alone, in the same
    session, still gets the real token."""
    policy = {"version": 1,
              "allow": [{"host": HOST, "ports": [443]}],
              "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"],
                                         "hosts": [HOST], "programs": GIT}}}
    (tmp_path / "borrow.py").write_text(BORROWED_SOCKET)
    script = ('python3 borrow.py\n'
              'git -c http.extraHeader="Authorization: token $GITHUB_TOKEN" '
              f'ls-remote https://{HOST}/o/r.git >/dev/null 2>&1; echo "LS $?"\n')
    p, records = run_wrapped(tmp_path, pki, tls_upstream, script, policy)
    out = p.stdout.decode(errors="replace")
    # The attack ran: the tunnel opened, git held the socket and did its work, the request went.
    assert "CONNECT HTTP/1.1 200" in out, (out, p.stderr)
    assert re.search(r"^GIT 0 [0-9a-f]{40}$", out, re.M), (out, p.stderr)
    assert "REPLY HTTP/1.1 403" in out, (out, p.stderr)
    body = json.loads(out[out.index("BODY ") + 5:].split("\n", 1)[0])
    assert body["error"] == "credential_not_bound", body
    assert "/usr/bin/git" in body["message"] and "/python3" in body["message"], body
    assert not [r for r in tls_upstream.requests if r["path"] == "/borrowed"]
    refused = [r for r in records if r.get("path") == "/borrowed"]
    assert len(refused) == 1 and refused[0]["error"] == "credential_not_bound", refused
    holders = refused[0].get("holders")
    assert holders and len(holders) == 2, refused
    exes = [h["exe"] for h in holders]
    assert "/usr/bin/git" in exes and any("/python3" in e for e in exes), holders
    assert refused[0]["pid"] == holders[0]["pid"] and refused[0]["exe"] == holders[0]["exe"]
    # git alone is git.
    git = [r for r in tls_upstream.requests if r["path"].startswith("/o/r.git/info/refs")]
    assert git and all({k.lower(): v for k, v in r["headers"].items()}.get("authorization") ==
                       f"token {REAL}" for r in git), (git, out)
    # The log with the new field still verifies and exports.
    log = next((tmp_path / "logs").glob("*.jsonl"))
    key = tmp_path / "home" / ".config" / "broker" / "audit-key"
    verified = run_broker_cli("log", log, "--verify", "--key", key)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    ocsf = run_broker_cli("log", log, "--format", "ocsf")
    assert ocsf.returncode == 0, ocsf.stderr
    events = [json.loads(l) for l in ocsf.stdout.splitlines() if l.strip()]
    shown = [e for e in events if e.get("unmapped", {}).get("holders")]
    assert len(shown) == 1 and len(shown[0]["unmapped"]["holders"]) == 2, events
    assert REAL not in ocsf.stdout and REAL.encode() not in p.stdout + p.stderr


def test_a_copy_of_a_listed_program_is_another_program(tmp_path, pki, tls_upstream):
    """The credential is bound to /usr/bin/curl by path: copies of it in the session's /tmp (under
    another name) and in the workspace are refused; the file at the listed path cannot be
    replaced from inside, and it alone gets the real token."""
    policy = {"version": 1,
              "allow": [{"host": HOST, "ports": [443]}],
              "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"],
                                         "hosts": [HOST], "programs": ["/usr/bin/curl"]}}}
    request = '-sS -o /dev/null -H "Authorization: token $GITHUB_TOKEN"'
    script = (
        'mkdir -p /tmp/x && cp /usr/bin/curl /tmp/x/gh && cp /usr/bin/curl ./curl-copy && '
        'echo COPIED\n'
        f'/tmp/x/gh {request} -w "TMP %{{http_code}}\\n" https://{HOST}/tmp-copy\n'
        f'./curl-copy {request} -w "WORKSPACE %{{http_code}}\\n" https://{HOST}/workspace-copy\n'
        'if cp /bin/sh /usr/bin/curl 2>/dev/null; then echo REPLACED; else echo KEPT; fi\n'
        f'/usr/bin/curl {request} -w "REAL %{{http_code}}\\n" https://{HOST}/real\n')
    p, records = run_wrapped(tmp_path, pki, tls_upstream, script, policy)
    out = p.stdout.decode(errors="replace")
    assert "COPIED" in out and "KEPT" in out, (out, p.stderr)
    assert "TMP 403" in out and "WORKSPACE 403" in out and "REAL 200" in out, (out, p.stderr)
    seen = {r["path"]: r for r in tls_upstream.requests}
    assert "/tmp-copy" not in seen and "/workspace-copy" not in seen, seen
    assert {k.lower(): v for k, v in seen["/real"]["headers"].items()}.get("authorization") == \
        f"token {REAL}"
    by_path = {r.get("path"): r for r in records if r.get("event") != "session_start"}
    assert by_path["/tmp-copy"]["exe"] == "/tmp/x/gh", by_path["/tmp-copy"]
    assert by_path["/tmp-copy"]["error"] == "credential_not_bound"
    assert by_path["/workspace-copy"]["exe"] == str(tmp_path / "curl-copy")
    assert by_path["/workspace-copy"]["error"] == "credential_not_bound"
    assert by_path["/real"]["exe"] == "/usr/bin/curl" and by_path["/real"]["credential"] == "github"
    assert "holders" not in by_path["/real"]  # one holder: pid and exe as always


GLOB_POLICY = '''{"version": 1,
  "allow": [{"host": "github.com"},
            {"host": "api.example.test", "programs": ["/usr/bin/git", "/tmp/tools/*"]}],
  "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": ["github.com"],
                             "programs": ["*/gh"]}}}
'''


def test_a_glob_the_session_could_satisfy_is_refused(tmp_path):
    """policy check names each "programs" glob that could match a file the session can write;
    wrap refuses the policy the same way before its command runs."""
    policy = tmp_path / "globs.json"
    policy.write_text(GLOB_POLICY)
    r = run_broker_cli("policy", "check", policy)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert f"broker: {policy}:3: allow[1].programs[1]: \"/tmp/tools/*\" could match a file the " \
        "session can write: it lies in /tmp (private to the session, empty at its start); name " \
        "the program by its absolute path" in lines, lines
    assert f"broker: {policy}:5: credentials.github.programs[0]: \"*/gh\" could match a file " \
        "the session can write: a glob starting with \"*\" matches a file in any directory, the " \
        "session's own /tmp among them; name the program by its absolute path" in lines, lines
    assert len(lines) == 2 and r.stdout == "", r
    # The same policy with paths instead passes.
    policy.write_text(GLOB_POLICY.replace('"/tmp/tools/*"', '"/usr/bin/curl"')
                      .replace('"*/gh"', '"/usr/bin/gh"'))
    assert run_broker_cli("policy", "check", policy).returncode == 0
    # wrap: refused before anything runs.
    policy.write_text(GLOB_POLICY)
    home = tmp_path / "home"
    home.mkdir()
    p = subprocess.run([BROKER_BIN, "wrap", "--policy", str(policy), "--log-dir",
                        str(tmp_path / "logs"), "--", "sh", "-c", "touch ran"],
                       env=clean_env({"HOME": str(home)}), capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert p.returncode == 125, p.stdout + p.stderr
    assert '"*/gh" could match a file the session can write' in p.stderr, p.stderr
    assert "allow[1].programs[1]" in p.stderr, p.stderr
    assert not (tmp_path / "ran").exists()
