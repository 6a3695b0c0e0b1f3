"""Real clients inside a session (docs/policy.md, docs/cli.md, docs/security-model.md): git over HTTPS, python3-requests and curl,
configured only by the --env-file variables (proxy, trust bundle, dummy credentials). The real
tokens live only in the broker's environment and at the upstreams; each test checks that they
never reach a client's output nor any file the broker wrote."""

import base64
import json
import os
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from conftest import (LoopbackHttpServer, clean_env, connect_to_arg, read_request_body,
                      tls_server_context)

GITHUB, API, OPENAI, OTHER = "github.com", "api.github.com", "api.openai.com", "other.example.test"
REAL_GH = "ghp_Cl13ntT3stR3alT0ken0123456789abcdEF"  # GitHub classic token shape
REAL_OAI = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7jKl0n"  # 40 chars after the prefix
assert len(REAL_OAI) == 48
PY = "/usr/bin/python3"  # Debian's, with python3-requests


def forbidden(*reals):
    """Every byte form in which a real value must never show up."""
    out = []
    for v in reals:
        out += [v.encode(), base64.b64encode(v.encode()),
                base64.b64encode(f"x-access-token:{v}".encode())]
    return out


def assert_nothing_written_contains(b, *values):
    """No byte the broker wrote (audit log, env file, CA dir, its stderr) holds a real value."""
    files = [p for p in b.dir.rglob("*") if p.is_file() and not p.name.startswith("policy")]
    assert files
    for p in files:
        data = p.read_bytes()
        for v in forbidden(*values):
            assert v not in data, f"{p} contains a real secret ({v[:8]!r}...)"


def assert_outputs_clean(outputs, *values):
    for i, out in enumerate(outputs):
        for v in forbidden(*values):
            assert v not in out, f"client output #{i} contains a real secret: {out[:300]!r}"


# --- An HTTPS git server posing as github.com: `git http-backend` as CGI behind Basic auth ---


class _GitHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def _handle(self):
        try:
            body = read_request_body(self)
        except (ConnectionError, ValueError, OSError):
            self.close_connection = True
            return
        srv = self.server
        auth = self.headers.get("Authorization")
        with srv.lock:
            srv.seen.append({"method": self.command, "path": self.path,
                             "host": self.headers.get("Host"), "authorization": auth})
        if auth != srv.expected_auth:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(srv.root),
               "GIT_PROJECT_ROOT": str(srv.root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "x-access-token",
               "REMOTE_ADDR": "127.0.0.1", "GIT_CONFIG_NOSYSTEM": "1"}
        for header, var in (("Content-Encoding", "HTTP_CONTENT_ENCODING"),
                            ("Git-Protocol", "HTTP_GIT_PROTOCOL")):
            if self.headers.get(header):
                env[var] = self.headers[header]
        p = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env,
                           timeout=60)
        seps = [(i, len(s)) for s in (b"\r\n\r\n", b"\n\n") if (i := p.stdout.find(s)) >= 0]
        if not seps:
            self.send_error(500, p.stderr.decode(errors="replace")[:200])
            return
        cut, width = min(seps)
        head, out = p.stdout[:cut], p.stdout[cut + width:]
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.strip().lower() == "status":
                status = int(v.split()[0])
            elif k.strip():
                headers.append((k.strip(), v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _handle


class GitServer(LoopbackHttpServer):
    def __init__(self, pki, root: Path, real: str):
        self.root = root
        self.expected_auth = "Basic " + base64.b64encode(f"x-access-token:{real}".encode()).decode()
        self.seen = []
        super().__init__(_GitHandler, tls_server_context(pki))
        self.start()

    def requests_to(self, host):
        with self.lock:
            return [r for r in self.seen if (r["host"] or "").split(":")[0] == host]


def _git(*args, cwd=None, home=None):
    env = clean_env({"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"})
    return subprocess.run(["git", *map(str, args)], cwd=cwd, env=env, check=True,
                          capture_output=True, timeout=60).stdout.decode().strip()


@pytest.fixture
def git_server(pki, tmp_path):
    home = tmp_path / "server-home"
    home.mkdir()
    work = tmp_path / "work"
    _git("init", "-q", "-b", "main", work, home=home)
    (work / "README.md").write_text("hello from the brokered repo\n")
    _git("add", "README.md", cwd=work, home=home)
    _git("-c", "user.name=Test", "-c", "user.email=test@example.test", "commit", "-q", "-m",
         "first commit", cwd=work, home=home)
    root = tmp_path / "git-root"
    (root / "o").mkdir(parents=True)
    _git("clone", "-q", "--bare", work, root / "o" / "r.git", home=home)
    srv = GitServer(pki, root, REAL_GH)
    srv.commit = _git("rev-parse", "HEAD", cwd=work, home=home)
    yield srv
    srv.shutdown()
    srv.server_close()


# --- The session: github bound to github.com + api.github.com, openai bound to api.openai.com ---


@pytest.fixture
def session(broker_factory, git_server, tls_upstream, pki):
    gp, ap = git_server.port, tls_upstream.port
    policy = {
        "version": 1,
        "allow": [{"host": GITHUB, "ports": [gp]}, {"host": OTHER, "ports": [gp]},
                  {"host": API, "ports": [ap]}, {"host": OPENAI, "ports": [ap]}],
        "credentials": {
            "github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB, API]},
            "openai": {"type": "bearer", "env": ["OPENAI_API_KEY"], "hosts": [OPENAI]},
        },
    }
    b = broker_factory(policy=policy, upstream_ca=pki.ca_cert, env_file=True,
                       env={"GITHUB_TOKEN": REAL_GH, "OPENAI_API_KEY": REAL_OAI},
                       connect_to=[connect_to_arg(GITHUB, gp), connect_to_arg(OTHER, gp),
                                   connect_to_arg(API, ap), connect_to_arg(OPENAI, ap)])
    file_env = b.session_env()
    assert not any(REAL_GH in v or REAL_OAI in v for v in file_env.values())
    b.gh_dummy, b.oai_dummy = file_env["GITHUB_TOKEN"], file_env["OPENAI_API_KEY"]
    assert b.gh_dummy != REAL_GH and b.oai_dummy != REAL_OAI
    assert b.oai_dummy.startswith("sk-proj-") and len(b.oai_dummy) == len(REAL_OAI)
    for var in ("HTTPS_PROXY", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"):
        assert var in file_env, f"{var} missing from the env file: {sorted(file_env)}"
    return b


@pytest.fixture
def child(session, tmp_path):
    """Runs a client with only the env-file variables on top of a proxy-free environment;
    collects its stdout/stderr in child.outputs."""
    home = tmp_path / "client-home"
    home.mkdir()
    env = clean_env(session.session_env())
    env.update({"HOME": str(home), "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"})
    assert REAL_GH not in json.dumps(env) and REAL_OAI not in json.dumps(env)

    class Child:
        outputs = []

        @staticmethod
        def run(cmd, timeout=90, extra_env=None):
            p = subprocess.run([str(c) for c in cmd], env={**env, **(extra_env or {})},
                               capture_output=True, timeout=timeout, cwd=home)
            Child.outputs += [p.stdout, p.stderr]
            return p

    return Child


def finish(session, child):
    session.stop()
    assert_nothing_written_contains(session, REAL_GH, REAL_OAI)
    assert_outputs_clean(child.outputs, REAL_GH, REAL_OAI)


GIT = ["git", "-c", "credential.helper=", "-c", "http.sslVerify=true"]


# --- git ---


def test_git_clone_with_the_dummy_reaches_github_with_the_real_token(session, child,
                                                                     git_server, tmp_path):
    dest = tmp_path / "clone"
    url = f"https://x-access-token:{session.gh_dummy}@{GITHUB}:{git_server.port}/o/r.git"
    p = child.run([*GIT, "clone", url, dest])
    assert p.returncode == 0, f"git clone failed: {p.stderr.decode(errors='replace')}\n" \
                              f"broker stderr: {session.stderr[-2000:]}"
    assert (dest / "README.md").read_text() == "hello from the brokered repo\n"
    head = child.run(["git", "-C", dest, "rev-parse", "HEAD"])
    assert head.stdout.decode().strip() == git_server.commit
    # the server saw the real token (the 401 challenge first), never the dummy
    seen = [r["authorization"] for r in git_server.requests_to(GITHUB)]
    assert None in seen and git_server.expected_auth in seen
    assert all(session.gh_dummy not in base64.b64decode(a.split()[1]).decode()
               for a in seen if a)
    assert any(r["method"] == "POST" and r["path"].endswith("/git-upload-pack")
               for r in git_server.requests_to(GITHUB))
    recs = session.wait_for_records(
        lambda r: r.get("event") == "request" and r.get("credential") == "github", count=2)
    assert len(recs) >= 2, session.records()
    assert all(r["host"] == GITHUB and r["status"] == 200 for r in recs)
    assert {r["method"] for r in recs} == {"GET", "POST"}
    finish(session, child)


def test_git_with_the_dummy_to_an_unbound_host_is_refused(session, child, git_server):
    url = f"https://x-access-token:{session.gh_dummy}@{OTHER}:{git_server.port}/o/r.git"
    p = child.run([*GIT, "ls-remote", url])
    assert p.returncode != 0, p.stdout
    assert b"403" in p.stderr, p.stderr
    assert git_server.commit.encode() not in p.stdout
    # the unauthenticated probe got through (and its 401); nothing with a credential did
    assert all(r["authorization"] is None for r in git_server.requests_to(OTHER))
    recs = session.wait_for_records(lambda r: r.get("event") == "exfiltration_blocked")
    assert recs, session.records()
    assert recs[0]["credential"] == "github" and recs[0]["host"] == OTHER
    assert recs[0]["decision"] == "deny"
    finish(session, child)


# --- python3-requests ---

REQUESTS_SCRIPT = r"""
import hashlib, json, os, requests
gh, oa, port = os.environ["GITHUB_TOKEN"], os.environ["OPENAI_API_KEY"], os.environ["API_PORT"]
out = {}
r = requests.get(f"https://api.github.com:{port}/user",
                 headers={"Authorization": "Bearer " + gh}, timeout=30)
out["get"] = {"status": r.status_code, "body": r.json()}
r = requests.post(f"https://api.openai.com:{port}/v1/chat/completions",
                  headers={"Authorization": "Bearer " + oa}, timeout=30,
                  json={"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]})
out["post"] = {"status": r.status_code, "body": r.json(),
               "sent_sha256": hashlib.sha256(r.request.body).hexdigest()}
r = requests.get(f"https://api.github.com:{port}/models",
                 headers={"Authorization": "Bearer " + oa}, timeout=30)
out["cross"] = {"status": r.status_code, "body": r.text,
                "headers": {k.lower(): v for k, v in r.headers.items()}}
print(json.dumps(out))
"""


def test_python_requests_gets_real_tokens_swapped_on_bound_hosts_only(session, child,
                                                                       tls_upstream):
    p = child.run([PY, "-c", REQUESTS_SCRIPT], extra_env={"API_PORT": str(tls_upstream.port)})
    assert p.returncode == 0, f"{p.stderr.decode(errors='replace')}\n{session.stderr[-2000:]}"
    out = json.loads(p.stdout)
    by_path = {r["path"]: r for r in tls_upstream.requests}
    # GET api.github.com with the github dummy
    assert out["get"]["status"] == 200
    assert by_path["/user"]["headers"]["Authorization"] == f"Bearer {REAL_GH}"
    assert out["get"]["body"]["headers"]["authorization"] == f"Bearer {session.gh_dummy}"
    # POST api.openai.com with a JSON body and the openai dummy
    assert out["post"]["status"] == 200
    sent = by_path["/v1/chat/completions"]
    assert sent["method"] == "POST"
    assert sent["headers"]["Authorization"] == f"Bearer {REAL_OAI}"
    assert out["post"]["body"]["body_sha256"] == out["post"]["sent_sha256"]
    # the openai dummy sent to api.github.com
    cross = out["cross"]
    assert cross["status"] == 403, cross
    assert cross["headers"].get("x-broker-error") == "credential_not_bound", cross
    assert cross["headers"].get("content-type", "").startswith("application/json")
    assert json.loads(cross["body"])["error"] == "credential_not_bound"
    assert "/models" not in by_path
    recs = session.wait_for_records(lambda r: r.get("event") == "exfiltration_blocked")
    assert recs and recs[0]["credential"] == "openai" and recs[0]["host"] == API
    creds = {r.get("path"): r.get("credential") for r in session.records()
             if r.get("event") == "request"}
    assert creds.get("/user") == "github"
    assert creds.get("/v1/chat/completions") == "openai"
    finish(session, child)


# --- curl ---


def test_curl_configured_only_by_the_env_file_gets_the_real_token_upstream(session, child,
                                                                           tls_upstream):
    url = f"https://{API}:{tls_upstream.port}/x"
    p = child.run(["sh", "-c", 'exec curl -sS --max-time 30 -w "\\n%{http_code}" '
                               '-H "Authorization: Bearer $GITHUB_TOKEN" "$URL"'],
                  extra_env={"URL": url})
    assert p.returncode == 0, f"{p.stderr.decode(errors='replace')}\n{session.stderr[-2000:]}"
    body, _, status = p.stdout.rpartition(b"\n")
    assert status == b"200", p.stdout
    assert tls_upstream.requests[-1]["headers"]["Authorization"] == f"Bearer {REAL_GH}"
    assert json.loads(body)["headers"]["authorization"] == f"Bearer {session.gh_dummy}"
    recs = session.wait_for_records(lambda r: r.get("event") == "request" and r.get("path") == "/x")
    assert recs and recs[0]["credential"] == "github" and recs[0]["status"] == 200
    finish(session, child)
