"""Least privilege on the bound host (docs/policy.md, "Least privilege"): `broker wrap
--scope-to-workspace` inside a clone of org/web, with the real `git` and `gh` against a fake
GitHub that serves REST, GraphQL and git smart HTTP (git http-backend) to the real token only.

The agent can push and open a pull request on its repository; every request the scope does not
name is refused 403 credential_out_of_scope before it leaves, and the fake never sees it.
"""

import base64
import json
import os
import shutil
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from conftest import LoopbackHttpServer, read_request_body, tls_server_context
from test_wrap import API, GITHUB, REAL, WrapSession, assert_clean


REAL_BASIC = "Basic " + base64.b64encode(f"x-access-token:{REAL}".encode()).decode()
REAL_AUTHS = {f"token {REAL}", f"Bearer {REAL}", f"bearer {REAL}", REAL_BASIC}


class _GithubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def _reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status, doc):
        self._reply(status, json.dumps(doc).encode(), [("Content-Type", "application/json")])

    def _handle(self):
        srv = self.server
        body = read_request_body(self)
        host = (self.headers.get("Host") or "").split(":")[0]
        auth = self.headers.get("Authorization")
        with srv.lock:
            srv.seen.append({"host": host, "method": self.command, "path": self.path,
                             "authorization": auth, "body": body})
        if auth not in REAL_AUTHS:
            self._reply(401, b"", [("WWW-Authenticate", 'Basic realm="GitHub"')])
            return
        if host == GITHUB:
            self._git(body)
        elif self.path == "/graphql":
            self._json(200, {"data": {"viewer": {"login": "octo"}}})
        elif self.command == "POST" and self.path.endswith("/pulls"):
            self._json(201, {"number": 7, "html_url": "https://github.com/org/web/pull/7"})
        elif self.command == "DELETE":
            self._reply(204)
        else:
            self._json(200, {"ok": True})

    def _git(self, body):
        """git smart HTTP, answered by `git http-backend` as CGI."""
        path, _, query = self.path.partition("?")
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(self.server.root),
               "GIT_HTTP_EXPORT_ALL": "1", "REMOTE_USER": "x-access-token",
               "REMOTE_ADDR": "127.0.0.1", "REQUEST_METHOD": self.command, "PATH_INFO": path,
               "QUERY_STRING": query, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "GIT_CONFIG_NOSYSTEM": "1"}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                             timeout=30).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self._reply(status, payload, headers)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


class _FakeGithub(LoopbackHttpServer):
    def __init__(self, pki, root: Path):
        self.seen = []
        self.root = root
        super().__init__(_GithubHandler, tls_server_context(pki))
        self.start()


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)})


@pytest.fixture
def github(tmp_path, pki):
    """Bare repositories org/web and org/other behind a fake GitHub, and a clone of org/web."""
    root = tmp_path / "srv"
    for name in ("web", "other"):
        bare = root / "org" / f"{name}.git"
        bare.mkdir(parents=True)
        _git("init", "--bare", "-q", "-b", "main", str(bare), cwd=tmp_path)
    srv = _FakeGithub(pki, root)
    yield srv
    srv.shutdown()
    srv.server_close()


# Each command's exit status and output, one block per step, for the checks below.
CHILD = r'''
git config --global user.email a@example.test
git config --global user.name agent
git config --global credential.helper \
  '!f() { echo username=x-access-token; echo "password=$GITHUB_TOKEN"; }; f'
step() { name=$1; shift; out=$("$@" 2>&1); rc=$?; echo "STEP $name rc=$rc $(echo "$out" | tr '\n' ' ')"; }
echo change > file.txt
git add file.txt && git commit -qm change
step push_origin git push origin HEAD:main
step push_other git push https://github.com/org/other.git HEAD:main
step pr gh api repos/org/web/pulls -f title=t -f head=feature -f base=main
step delete_other gh api -X DELETE repos/org/other
step other_org gh api orgs/other/repos
step graphql_query gh api graphql -f query='query { viewer { login } }'
step graphql_mutation gh api graphql -f query='mutation { deleteRepository(input: {repositoryId: "R"}) { clientMutationId } }'
step graphql_after_comment gh api graphql -f query='# query only
mutation { deleteRepository(input: {repositoryId: "R"}) { clientMutationId } }'
step graphql_second_op gh api graphql -f operationName=A -f query='query A { viewer { login } } mutation B { deleteRepository(input: {repositoryId: "R"}) { clientMutationId } }'
step graphql_block_string gh api graphql -f query='query { a(s: """ } """) } mutation { deleteRepository(input: {repositoryId: "R"}) { clientMutationId } }'
'''


def _steps(out: str) -> dict:
    steps = {}
    for line in out.splitlines():
        if line.startswith("STEP "):
            name, rc, text = (line[5:].split(" ", 2) + [""])[:3]
            steps[name] = (int(rc[3:]), text)
    return steps


def test_scope_to_workspace_lets_the_agent_work_on_its_repository_only(tmp_path, pki, github):
    # The real GitHub CLI (Debian's gh, from scripts/install-deps.sh); missing, the test fails.
    assert shutil.which("gh"), "gh is not installed"
    ws = WrapSession(tmp_path / "session", pki, github.port,
                     connect=[f"{GITHUB}:443:127.0.0.1:{github.port}"])
    ws.connect[0] = f"{API}:443:127.0.0.1:{github.port}"
    work = ws.dir / "web"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    _git("remote", "add", "origin", "https://github.com/org/web.git", cwd=work)
    argv = ws.argv("sh", "-c", CHILD, extra=["--scope-to-workspace"])
    env = ws.env({"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
                  "GH_NO_UPDATE_NOTIFIER": "1", "GH_PROMPT_DISABLED": "1", "NO_COLOR": "1"})
    p = subprocess.run(argv, env=env, cwd=work, capture_output=True, timeout=120)
    out = p.stdout.decode(errors="replace")
    describe = f"exit={p.returncode}\nstdout={out[-4000:]}\nstderr={p.stderr.decode()[-3000:]}"
    steps = _steps(out)

    # Its own repository: pushed, and the pull request opened with the real token.
    assert steps["push_origin"][0] == 0, describe
    refs = subprocess.run(["git", "--git-dir", str(github.root / "org" / "web.git"),
                           "rev-parse", "main"], capture_output=True, text=True)
    assert refs.returncode == 0, describe
    assert steps["pr"][0] == 0 and '"number":7' in steps["pr"][1].replace(" ", ""), describe
    assert steps["graphql_query"][0] == 0, describe

    # Everything else: refused by the broker, never seen by the fake.
    refused = ["push_other", "delete_other", "other_org", "graphql_mutation",
               "graphql_after_comment", "graphql_second_op", "graphql_block_string"]
    for name in refused:
        rc, text = steps[name]
        assert rc != 0, (name, describe)
        assert "credential_out_of_scope" in text or "403" in text, (name, describe)
    with github.lock:
        seen = list(github.seen)
    # (git asks without credentials first: the fake saw that, with no token, and said 401.)
    assert not [s for s in seen if ("org/other" in s["path"] or "orgs/other" in s["path"])
                and s["authorization"] is not None], seen
    assert not [s for s in seen if b"mutation" in s["body"]], seen
    other = subprocess.run(["git", "--git-dir", str(github.root / "org" / "other.git"),
                            "rev-parse", "--verify", "-q", "main"], capture_output=True)
    assert other.returncode != 0, "the push to org/other reached the server"
    # What reached the fake carried the real token; nothing the broker wrote holds it.
    assert any(s["authorization"] in REAL_AUTHS for s in seen), seen

    records = ws.records()
    out_of_scope = [r for r in records if r.get("error") == "credential_out_of_scope"]
    assert len(out_of_scope) >= len(refused), records
    rules = {r["rule"] for r in out_of_scope}
    assert rules <= {"credentials.github.scope.repos", "credentials.github.scope.graphql"}, rules
    assert "credentials.github.scope.graphql" in rules and "credentials.github.scope.repos" in rules
    assert all(r["credential"] == "github" for r in out_of_scope), out_of_scope
    assert_clean(p.stdout + p.stderr, "wrap output", REAL)
    ws.assert_logs_clean()


def test_scope_to_workspace_outside_a_repository_starts_nothing(tmp_path, pki, github):
    ws = WrapSession(tmp_path / "session", pki, github.port)
    plain = ws.dir / "plain"
    plain.mkdir()
    marker = ws.dir / "ran"
    argv = ws.argv("touch", str(marker), extra=["--scope-to-workspace"])
    p = subprocess.run(argv, env=ws.env(), cwd=plain, capture_output=True, timeout=60)
    assert p.returncode == 125, p.stderr
    assert b"--scope-to-workspace: " in p.stderr and b"not in a git repository" in p.stderr
    assert not marker.exists()
