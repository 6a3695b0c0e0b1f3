"""`broker wrap -- CMD` (docs/cli.md, docs/security-model.md): the child's environment (dummies in, other secrets
out, proxy and trust variables set), real clients inside the session getting the dummy→real
swap, the network/PID/mount namespaces (no way around the proxy, no way to the real value through
/proc or the well-known credential files), exit statuses, process lifetime, signal forwarding,
the terminal, the unprivileged (user namespace) path and `--isolate env`.

Every run is the real binary as a subprocess with a policy file written here, its own --log-dir,
$HOME and $XDG_RUNTIME_DIR under tmp_path, and `--connect-to` so that https://api.github.com
(and https://github.com for git) inside the child lands on a local HTTPS upstream whose test CA
is given with --upstream-ca.
"""

import base64
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from conftest import BROKER_BIN, LoopbackHttpServer, clean_env, tls_server_context

API, GITHUB = "api.github.com", "github.com"
REAL = "ghp_" + "Wr4pR3alT0kenAbCdEfGh0123456789XyZw1"  # GitHub classic shape: ghp_ + 36
assert len(REAL) == 40
# The part after the prefix: what the child greps for (a dummy shares only the prefix).
REAL_BODY = REAL[4:]
PY = "/usr/bin/python3"  # Debian's, with python3-requests
PROXY_URL = "http://127.0.0.1:3128"
TRUST_VARS = ["SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO",
              "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE", "PIP_CERT", "CARGO_HTTP_CAINFO",
              "DENO_CERT", "npm_config_cafile", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE"]
PROXY_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]


def forbidden_forms(*values):
    """Every byte form in which a real value must never show up."""
    out = []
    for v in values:
        out += [v.encode(), base64.b64encode(v.encode()),
                base64.b64encode(f"x-access-token:{v}".encode())]
    return out


def assert_clean(data: bytes, what: str, *values):
    for v in forbidden_forms(*values):
        assert v not in data, f"{what} contains a real secret ({v[:10]!r}...): {data[-1500:]!r}"


def github_policy(extra=None):
    p = {
        "version": 1,
        "allow": [{"host": API}, {"host": GITHUB}],
        "credentials": {
            "github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB, API]},
        },
    }
    if extra:
        p.update(extra)
    return p


@dataclass
class WrapResult:
    returncode: int
    stdout: bytes
    stderr: bytes
    elapsed: float

    @property
    def out(self) -> str:
        return self.stdout.decode(errors="replace")

    @property
    def err(self) -> str:
        return self.stderr.decode(errors="replace")

    def describe(self) -> str:
        return f"exit={self.returncode}\nstdout={self.out[-3000:]}\nstderr={self.err[-3000:]}"


class WrapSession:
    """Builds and runs `broker wrap` invocations inside one temp directory."""

    def __init__(self, directory: Path, pki, upstream_port: int, policy=None, connect=()):
        self.dir = Path(directory)
        self.home = self.dir / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs = self.dir / "logs"
        self.runtime = self.dir / "run"
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        self.policy_file = self.dir / "policy.json"
        self.policy_file.write_text(json.dumps(policy or github_policy(), indent=2))
        self.upstream_ca = pki.ca_cert
        self.connect = [f"{API}:443:127.0.0.1:{upstream_port}", *connect]

    def argv(self, *cmd, isolate=None, extra=(), policy_file=None):
        a = [BROKER_BIN, "wrap", "--policy", str(policy_file or self.policy_file),
             "--upstream-ca", str(self.upstream_ca)]
        for c in self.connect:
            a += ["--connect-to", c]
        if isolate:
            a += ["--isolate", isolate]
        a += [str(x) for x in extra]
        # (test_a_repeatable_option_right_before_the_double_dash_... covers the other order)
        a += ["--log-dir", str(self.logs)]
        return a + ["--", *[str(c) for c in cmd]]

    def env(self, extra=None) -> dict:
        e = clean_env({"HOME": str(self.home), "GITHUB_TOKEN": REAL,
                       "XDG_RUNTIME_DIR": str(self.runtime)})
        e.pop("GH_TOKEN", None)
        if extra:
            e.update(extra)
        return e

    def run(self, *cmd, env=None, timeout=30, isolate=None, extra=(), policy_file=None,
            stdin=subprocess.DEVNULL) -> WrapResult:
        t0 = time.monotonic()
        p = subprocess.run(self.argv(*cmd, isolate=isolate, extra=extra, policy_file=policy_file),
                           env=self.env(env), capture_output=True, timeout=timeout, stdin=stdin,
                           cwd=self.dir)
        return WrapResult(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)

    def popen(self, *cmd, env=None, isolate=None):
        self._out = open(self.dir / "popen.stdout", "wb")
        self._err = open(self.dir / "popen.stderr", "wb")
        return subprocess.Popen(self.argv(*cmd, isolate=isolate), env=self.env(env),
                                stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
                                cwd=self.dir)

    def popen_output(self):
        self._out.close()
        self._err.close()
        return ((self.dir / "popen.stdout").read_bytes(),
                (self.dir / "popen.stderr").read_bytes())

    def records(self):
        out = []
        for f in sorted(self.logs.glob("*.jsonl")):
            for line in f.read_text().splitlines():
                if line.strip():
                    out.append(json.loads(line))
        return out

    def requests(self):
        return [r for r in self.records() if r.get("event") == "request"]

    def assert_logs_clean(self):
        for f in self.logs.rglob("*"):
            if f.is_file():
                assert_clean(f.read_bytes(), f"audit log {f}", REAL)


@pytest.fixture
def ws(tmp_path, pki, tls_upstream):
    return WrapSession(tmp_path, pki, tls_upstream.port)


def session_lines(stderr: str):
    return [l for l in stderr.splitlines() if l.startswith("broker: session ")]


def wait_for(predicate, timeout=10.0, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def host_processes_with(prefix: str):
    """PIDs on the host whose command line (NUL-separated argv) starts with `prefix`."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(prefix.encode()):
            found.append(int(d.name))
    return found


# ==============================================================================================
# 1. The child's environment
# ==============================================================================================


def _parse_env_lines(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def test_child_env_has_a_dummy_for_the_brokered_token_and_no_other_secret(ws):
    secret_named = "sk-unbrokered-api-key-value-0123456789"
    sock = "/tmp/ssh-agent-wrap-test.sock"
    harmless_named = "ghp_" + "HarmlessNamedVarValue0123456789abcdeF"
    extra = {"MY_API_KEY": secret_named, "SSH_AUTH_SOCK": sock, "BUILD_NOTE": harmless_named,
             "FOO": "bar", "LANG": "C.UTF-8"}
    r = ws.run("sh", "-c", "env; echo '=====ENVIRON====='; cat /proc/self/environ", env=extra)
    assert r.returncode == 0, r.describe()
    env_text, sep, environ = r.stdout.partition(b"=====ENVIRON=====\n")
    assert sep, r.describe()
    printed = _parse_env_lines(env_text.decode())
    raw = {}
    for item in environ.split(b"\0"):
        k, s, v = item.decode(errors="replace").partition("=")
        if s:
            raw[k] = v

    for env in (printed, raw):
        dummy = env.get("GITHUB_TOKEN")
        assert dummy, f"no GITHUB_TOKEN in the child: {sorted(env)}"
        assert dummy != REAL
        assert dummy.startswith("ghp_") and len(dummy) == len(REAL) and dummy[4:].isalnum(), dummy
        for gone in ("MY_API_KEY", "SSH_AUTH_SOCK", "BUILD_NOTE"):
            assert gone not in env, f"{gone} reached the child: {env.get(gone)!r}"
        assert env.get("FOO") == "bar"
        assert env.get("LANG") == "C.UTF-8"
        assert env.get("HOME") == str(ws.home)
        for v in PROXY_VARS:
            assert env.get(v) == PROXY_URL, (v, env.get(v))
        assert env.get("NO_PROXY", None) == "" and env.get("no_proxy", None) == ""
        bundles = {env.get(v) for v in TRUST_VARS}
        assert len(bundles) == 1 and None not in bundles, {v: env.get(v) for v in TRUST_VARS}
        bundle = bundles.pop()
        assert bundle.endswith("/ca-bundle.pem") and bundle.startswith(str(ws.runtime)), bundle
    assert printed["GITHUB_TOKEN"] == raw["GITHUB_TOKEN"]
    # No other value anywhere in the child's environment is a secret that was passed in.
    for v in (secret_named, sock, harmless_named):
        assert v.encode() not in r.stdout

    lines = session_lines(r.err)
    assert len(lines) == 1, f"expected one session line on stderr: {r.err!r}"
    line = lines[0]
    brokered, _, rest = line.partition("; removed ")
    assert "GITHUB_TOKEN (github)" in brokered, line
    for name in ("MY_API_KEY", "SSH_AUTH_SOCK", "BUILD_NOTE"):
        assert name in rest, f"{name} not named as removed: {line}"
    assert "FOO" not in rest and "LANG" not in rest, line
    assert line.endswith("isolation: netns, transparent capture"), line
    for v in (REAL, printed["GITHUB_TOKEN"], secret_named, sock, harmless_named):
        assert v not in r.err, f"stderr shows a value: {r.err!r}"

    assert_clean(r.stdout, "child stdout", REAL)
    assert_clean(r.stderr, "stderr", REAL)
    ws.assert_logs_clean()


def child_token(ws, env=None, home=None):
    """The GITHUB_TOKEN dummy one session's child sees (HOME: `home` or the session's)."""
    extra = dict(env or {})
    if home:
        extra["HOME"] = str(home)
    r = ws.run("sh", "-c", 'printf "%s" "$GITHUB_TOKEN"', env=extra)
    assert r.returncode == 0, r.describe()
    assert r.out.startswith("ghp_") and len(r.out) == len(REAL), r.describe()
    return r.out


def test_the_command_gets_every_argument_exactly_as_given(ws):
    """JSON, brackets, commas and "--" reach the command untouched (an option parser would read
    "[a,b]" as a list of two)."""
    args = ['[{"op": "list"}]', "[a,b]", "[]", "--", "--session", "x y", ""]
    r = ws.run("/usr/bin/printf", "<%s>\\n", *args)
    assert r.returncode == 0, r.describe()
    assert r.stdout.decode().splitlines() == [f"<{a}>" for a in args], r.describe()


def test_a_users_dummy_is_the_same_in_every_session_and_new_for_a_rotated_key(ws):
    """docs/policy.md: an agent that remembers its key (Claude Code's approved keys) meets the same
    dummy next session; a rotated real key gets another; another user's key gives another."""
    key = ws.home / ".config" / "broker" / "dummy-key"
    assert not key.exists()
    first = child_token(ws)
    assert key.exists() and (key.stat().st_mode & 0o777) == 0o600
    assert first != REAL
    assert child_token(ws) == first
    rotated = REAL[:-4] + ("AAAA" if not REAL.endswith("AAAA") else "BBBB")
    assert child_token(ws, env={"GITHUB_TOKEN": rotated}) not in (first, rotated)
    assert child_token(ws) == first  # back to the old key, back to its dummy
    other = ws.dir / "other-user"
    other.mkdir()
    assert child_token(ws, home=other) != first
    # The key is the broker's own: nothing of it reached the child or the log.
    text = key.read_text().strip()
    assert len(text) == 64 and text not in first
    ws.assert_logs_clean()


def test_sessions_starting_at_once_share_one_dummy_key(ws):
    procs = [subprocess.Popen(ws.argv("sh", "-c", 'printf "%s" "$GITHUB_TOKEN"'), env=ws.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, cwd=ws.dir) for _ in range(4)]
    outs = [p.communicate(timeout=30) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    dummies = {o.decode() for o, _ in outs}
    assert len(dummies) == 1 and REAL not in dummies, outs
    assert sorted(x.name for x in (ws.home / ".config" / "broker").iterdir()) == \
        ["audit-key", "dummy-key"]


@pytest.mark.parametrize("damage", ["readable-by-others", "not-a-key", "a-link", "no-home"])
def test_an_unusable_dummy_key_stops_wrap_before_the_command_runs(ws, damage):
    """Never a silent random fallback: a key the broker cannot trust or read is an error naming
    the file, and nothing starts."""
    key = ws.home / ".config" / "broker" / "dummy-key"
    child_token(ws)
    env = None
    if damage == "readable-by-others":
        key.chmod(0o644)
    elif damage == "not-a-key":
        key.write_text("not a key\n")
    elif damage == "a-link":
        planted = ws.dir / "planted-key"
        planted.write_text("ab" * 32 + "\n")
        planted.chmod(0o600)
        key.unlink()
        key.symlink_to(planted)
    else:
        env = {"HOME": ""}
    marker = ws.dir / "ran"
    r = ws.run("sh", "-c", f"touch {shlex.quote(str(marker))}", env=env)
    assert r.returncode == 125, r.describe()
    assert not marker.exists()
    expected = {"readable-by-others": "chmod 600", "not-a-key": "64 hex digits",
                "a-link": str(key), "no-home": "HOME is not set"}[damage]
    assert expected in r.err and r.err.startswith("broker: "), r.err
    assert REAL not in r.err


def test_the_trust_bundle_holds_the_session_ca_and_is_removed_afterwards(ws):
    r = ws.run("sh", "-c", 'echo "$SSL_CERT_FILE"; grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"')
    assert r.returncode == 0, r.describe()
    path, count = r.out.split()
    assert int(count) >= 2, "the bundle should hold the system roots and the session CA"
    assert not Path(path).exists(), f"{path} outlived the session"


# ==============================================================================================
# 2. Real clients inside wrap get the swap; the audit names the client process
# ==============================================================================================


def test_curl_inside_wrap_reaches_github_with_the_real_token(ws, tls_upstream):
    r = ws.run("sh", "-c", 'curl -sS --max-time 10 -H "Authorization: Bearer $GITHUB_TOKEN" '
                           'https://api.github.com/repos/o/r')
    assert r.returncode == 0, r.describe()
    body = json.loads(r.stdout)
    assert body["path"] == "/repos/o/r"
    seen = [q for q in tls_upstream.requests if q["path"] == "/repos/o/r"]
    assert len(seen) == 1, tls_upstream.requests
    assert seen[0]["headers"].get("Authorization") == f"Bearer {REAL}"
    # The echo of the real header comes back with the dummy in it, never the real value.
    assert body["headers"]["authorization"].startswith("Bearer ghp_")
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)

    reqs = [q for q in ws.requests() if q.get("path") == "/repos/o/r"]
    assert len(reqs) == 1, ws.records()
    rec = reqs[0]
    assert rec["host"] == API and rec["status"] == 200 and rec["credential"] == "github", rec
    assert isinstance(rec["pid"], int) and rec["pid"] > 1, rec
    assert isinstance(rec["exe"], str) and rec["exe"].endswith("/curl"), rec
    kinds = [x["event"] for x in ws.records()]
    assert kinds[0] == "session_start" and kinds[-1] == "session_end", kinds
    # The end is signed with the user's audit key (loaded while the session started).
    assert ws.records()[-1]["signature"]["alg"] == "ed25519", ws.records()[-1]
    [log] = ws.logs.glob("*.jsonl")
    v = subprocess.run([BROKER_BIN, "log", str(log), "--verify"], capture_output=True, text=True,
                       env=ws.env(), timeout=30)
    assert v.returncode == 0 and ": ok, " in v.stdout, v.stdout + v.stderr
    ws.assert_logs_clean()


def test_python_requests_inside_wrap_reaches_github_with_the_real_token(ws, tls_upstream):
    script = ("import os, requests\n"
              "r = requests.get('https://api.github.com/user', timeout=10,\n"
              "                 headers={'Authorization': 'token ' + os.environ['GITHUB_TOKEN']})\n"
              "print(r.status_code, r.json()['path'])\n")
    r = ws.run(PY, "-c", script)
    assert r.returncode == 0, r.describe()
    assert r.out.split() == ["200", "/user"], r.describe()
    seen = [q for q in tls_upstream.requests if q["path"] == "/user"]
    assert len(seen) == 1 and seen[0]["headers"].get("Authorization") == f"token {REAL}", seen
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)
    rec = [q for q in ws.requests() if q.get("path") == "/user"]
    assert len(rec) == 1, ws.records()
    assert isinstance(rec[0]["pid"], int) and rec[0]["pid"] > 1, rec[0]
    exe = rec[0]["exe"] or ""
    assert exe.endswith("/python3.11") or exe.endswith("/python3"), rec[0]


# A tiny smart-HTTP git server posing as github.com: /info/refs only (enough for ls-remote),
# behind Basic auth that only the real token passes.
class _RefsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        auth = self.headers.get("Authorization")
        with srv.lock:
            srv.seen.append({"path": self.path, "authorization": auth})
        if auth != srv.expected_auth:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if not self.path.startswith("/o/r.git/info/refs?service=git-upload-pack"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return

        def pkt(s: bytes) -> bytes:
            return b"%04x" % (len(s) + 4) + s

        sha = srv.sha.encode()
        body = (pkt(b"# service=git-upload-pack\n") + b"0000" +
                pkt(sha + b" HEAD\0symref=HEAD:refs/heads/main agent=git/test\n") +
                pkt(sha + b" refs/heads/main\n") + b"0000")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-git-upload-pack-advertisement")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _RefsServer(LoopbackHttpServer):
    def __init__(self, pki):
        self.expected_auth = "Basic " + base64.b64encode(
            f"x-access-token:{REAL}".encode()).decode()
        self.sha = "0123456789abcdef0123456789abcdef01234567"
        self.seen = []
        super().__init__(_RefsHandler, tls_server_context(pki))
        self.start()


def test_git_ls_remote_inside_wrap_authenticates_with_the_real_token(tmp_path, pki,
                                                                     tls_upstream):
    srv = _RefsServer(pki)
    try:
        ws = WrapSession(tmp_path, pki, tls_upstream.port,
                         connect=[f"{GITHUB}:443:127.0.0.1:{srv.port}"])
        r = ws.run("sh", "-c", 'git -c credential.helper= ls-remote '
                               '"https://x-access-token:$GITHUB_TOKEN@github.com/o/r.git"',
                   env={"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"})
        assert r.returncode == 0, r.describe()
        assert f"{srv.sha}\trefs/heads/main" in r.out, r.describe()
        with srv.lock:
            auths = [s["authorization"] for s in srv.seen]
        assert srv.expected_auth in auths, auths
        assert_clean(r.stdout + r.stderr, "wrap output", REAL)
        recs = [q for q in ws.requests() if q.get("host") == GITHUB and q.get("status") == 200]
        assert recs, ws.records()
        assert recs[0]["pid"] > 1 and "git-remote-http" in (recs[0]["exe"] or ""), recs[0]
        ws.assert_logs_clean()
    finally:
        srv.shutdown()
        srv.server_close()


# ==============================================================================================
# 3. No way to the real value: /proc and credential files
# ==============================================================================================

MASKED_FILES = {
    ".config/gh/hosts.yml": f"github.com:\n    oauth_token: {REAL}\n",
    ".aws/credentials": f"[default]\naws_secret_access_key = {REAL}\n",
    ".netrc": f"machine github.com login x password {REAL}\n",
    ".git-credentials": f"https://x-access-token:{REAL}@github.com\n",
    ".docker/config.json": json.dumps({"auths": {"ghcr.io": {"auth": REAL}}}),
    ".npmrc": f"//registry.npmjs.org/:_authToken={REAL}\n",
    ".pypirc": f"[pypi]\npassword = {REAL}\n",
    ".kube/config": f"users:\n- user:\n    token: {REAL}\n",
    ".config/gcloud/credentials.db": f"token {REAL}\n",
    ".azure/accessTokens.json": json.dumps([{"accessToken": REAL}]),
    ".ssh/id_ed25519": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{REAL}\n"
                       "-----END OPENSSH PRIVATE KEY-----\n",
    # Gemini CLI's key store without a system keychain (encrypted with a key derived from the
    # host and user names: as good as plain; plain here).
    ".gemini/gemini-credentials.json": json.dumps({"gemini-cli-api-key": {"default-api-key": REAL}}),
}
VISIBLE_FILES = {
    ".ssh/id_ed25519.pub": "ssh-ed25519 AAAAC3NzaPUBLICPART test@host\n",
    ".ssh/known_hosts": "github.com ssh-ed25519 AAAAC3NzaKNOWNHOST\n",
    "notes.txt": "ordinary file in home\n",
}


def _plant(home: Path):
    for rel, text in {**MASKED_FILES, **VISIBLE_FILES}.items():
        p = home / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (home / ".ssh" / "id_ed25519").chmod(0o600)


def test_child_sees_only_its_own_processes_and_no_environ_holds_the_real_value(ws):
    script = (
        'echo "pids:$(ls /proc | grep -E "^[0-9]+$" | tr "\\n" " ")"\n'
        'grep -l -F -e "$1" /proc/[0-9]*/environ 2>/dev/null; echo "grep-environ:$?"\n'
        'grep -l -F -e "$1" /proc/[0-9]*/task/*/environ 2>/dev/null; echo "grep-task:$?"\n'
    )
    r = ws.run("sh", "-c", script, "sh", REAL_BODY)
    assert r.returncode == 0, r.describe()
    lines = dict(l.split(":", 1) for l in r.out.splitlines() if ":" in l)
    pids = [int(p) for p in lines["pids"].split()]
    # init (1), sh (2) and the few processes of the pipeline above; the host has hundreds.
    assert 1 in pids and 2 in pids and len(pids) <= 10 and max(pids) < 20, \
        f"the child sees more than its own namespace: {pids}"
    # grep exits 1 when nothing matched, 2 when some environ could not even be read (init's);
    # 0, or a file name listed, means some environ holds the real value.
    assert lines["grep-environ"].strip() in ("1", "2"), r.describe()
    assert "/proc/" not in r.out, r.describe()
    assert lines["grep-task"].strip() in ("1", "2"), r.describe()


def test_the_broker_wipes_the_real_value_from_its_own_environ_block(ws):
    ready = ws.dir / "ready"
    p = ws.popen("sh", "-c", 'touch "$WRAP_READY"; sleep 5', env={"WRAP_READY": str(ready)})
    try:
        assert wait_for(ready.exists), "the child never started"
        environ = Path(f"/proc/{p.pid}/environ").read_bytes()
        assert b"GITHUB_TOKEN" in environ or b"HOME=" in environ  # we read the right process
        assert_clean(environ, "the broker's /proc/PID/environ", REAL)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=15)
        ws.popen_output()


def test_init_wipes_the_real_value_from_its_environ_block(ws):
    """Init is cloned before the broker reads the credentials, so the environment block it
    inherited held the real value of an `env:` source: overwritten, as the broker's own is (read
    here from the host, which may read any process's)."""
    ready = ws.dir / "ready-init"
    p = ws.popen("sh", "-c", 'touch "$WRAP_READY"; sleep 5', env={"WRAP_READY": str(ready)})
    try:
        assert wait_for(ready.exists), "the child never started"
        inits = [int(c) for t in Path(f"/proc/{p.pid}/task").iterdir()
                 for c in (t / "children").read_text().split()]
        nspid = [Path(f"/proc/{c}/status").read_text().split("NSpid:")[1].split("\n")[0].split()
                 for c in inits]
        init = next(c for c, ids in zip(inits, nspid) if ids[-1] == "1")  # PID 1 inside
        environ = Path(f"/proc/{init}/environ").read_bytes()
        assert environ.strip(b"\0") == b"", environ  # nothing of the broker's environment
        assert_clean(environ, "init's /proc/PID/environ", REAL)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=15)
        ws.popen_output()


def test_credential_files_under_home_are_masked_inside_and_intact_outside(ws):
    _plant(ws.home)
    names = list(MASKED_FILES) + list(VISIBLE_FILES)
    script = ('cd "$HOME"\n'
              'for f in "$@"; do echo "== $f"; cat "$f" 2>&1; echo; done\n'
              'echo "== listing"; ls -A .aws .config/gh 2>&1\n'
              'if (echo x > .aws/planted) 2>/dev/null; then echo "write:ok"; else echo "write:refused"; fi\n')
    r = ws.run("sh", "-c", script, "sh", *names)
    assert r.returncode == 0, r.describe()
    assert REAL_BODY.encode() not in r.stdout, f"a masked file was readable:\n{r.out}"
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)
    for rel, text in VISIBLE_FILES.items():
        assert text.strip() in r.out, f"{rel} should stay readable:\n{r.out}"
    assert "write:refused" in r.out, r.out
    # Outside, after the run: every file is as planted, nothing added.
    for rel, text in {**MASKED_FILES, **VISIBLE_FILES}.items():
        assert (ws.home / rel).read_text() == text, rel
    assert not (ws.home / ".aws" / "planted").exists()


# The child of a root broker runs as root, but without the capabilities that would undo the
# sandbox: it can neither unmount the masks nor read the init process's memory.


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root broker gives the child root")
def test_a_root_child_cannot_lift_the_credential_file_masks(ws):
    _plant(ws.home)
    r = ws.run("sh", "-c", 'umount "$HOME/.aws" 2>&1; umount "$HOME/.netrc" 2>&1; '
                           'cat "$HOME/.aws/credentials" "$HOME/.netrc" 2>&1; true')
    assert r.returncode == 0, r.describe()
    assert REAL_BODY.encode() not in r.stdout, f"mask lifted:\n{r.out}"


_MEMSCAN = r"""
import os, sys
# Given reversed, so that the shell that passes it on does not hold it; this process does
# hold it, and scans every other one.
needle = sys.argv[1][::-1].encode()
hits = []
for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:
    try:
        maps = open(f'/proc/{pid}/maps').read().splitlines()
        mem = open(f'/proc/{pid}/mem', 'rb', 0)
    except OSError:
        continue
    for line in maps:
        lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
        if 'r' not in line.split()[1] or hi - lo > (1 << 30):
            continue
        try:
            mem.seek(lo)
            if needle in mem.read(hi - lo):
                hits.append(pid)
        except (OSError, ValueError, OverflowError):
            pass
print('hits:' + ','.join(sorted(set(hits))))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root broker gives the child root")
def test_no_process_memory_readable_by_the_child_holds_the_real_value(ws):
    r = ws.run(PY, "-c", _MEMSCAN, REAL_BODY[::-1])
    assert r.returncode == 0, r.describe()
    assert "hits:" in r.out, r.describe()
    assert r.out.strip() == "hits:", f"real value found in the memory of PIDs {r.out.strip()}"


# ==============================================================================================
# 4. No way around the proxy
# ==============================================================================================

_CONNECTS = r"""
import errno, json, socket, sys, time
out = []
for spec in sys.argv[1:]:
    host, port = spec.rsplit(':', 1)
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    t = time.monotonic()
    try:
        s.connect((host.strip('[]'), int(port)))
        res = 'connected'
    except OSError as e:
        res = errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__
    out.append({'target': spec, 'result': res, 'secs': round(time.monotonic() - t, 3)})
    s.close()
print(json.dumps(out))
"""


def test_direct_connections_from_the_child_reach_nothing_but_the_broker(ws, tls_upstream):
    """The host's loopback services are out of reach (the child's loopback is its own), and a
    dial to any other address lands on the broker (transparent capture, docs/architecture.md), which
    decides as for a CONNECT: here a literal TEST-NET address no cidr rule allows."""
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    other_port = other.getsockname()[1]
    try:
        up = tls_upstream.port
        script = (
            't=$(date +%s%N); curl -sS -k --noproxy "*" --max-time 5 -o /dev/null '
            f'https://127.0.0.1:{up}/direct; rc=$?; '
            'echo "curl-direct:$rc:$(( ($(date +%s%N) - t) / 1000000 ))"; '
            f'{PY} -c "$1" 127.0.0.1:{up} 127.0.0.1:{other_port} 192.0.2.1:443 [::1]:{up} '
            '127.0.0.1:3128'
        )
        r = ws.run("sh", "-c", script, "sh", _CONNECTS, timeout=60)
        assert r.returncode == 0, r.describe()
        lines = r.out.splitlines()
        curl_lines = {l.split(":")[0]: l.split(":")[1:] for l in lines if l.startswith("curl-")}
        rc, ms = curl_lines["curl-direct"]
        assert rc != "0", f"curl-direct succeeded without the proxy: {r.describe()}"
        assert int(ms) < 3000, f"curl-direct took {ms} ms to fail"
        results = {x["target"]: x for x in json.loads(lines[-1])}
        for target in (f"127.0.0.1:{up}", f"127.0.0.1:{other_port}", f"[::1]:{up}"):
            assert results[target]["result"] in ("ECONNREFUSED", "ENETUNREACH", "EADDRNOTAVAIL"), \
                results[target]
            assert results[target]["secs"] < 3.0, results[target]
        # Captured: connected to the broker, which refused it (no cidr rule) and dialed nothing.
        assert results["192.0.2.1:443"]["result"] == "connected", results["192.0.2.1:443"]
        refused = [x for x in ws.records() if x.get("host") == "192.0.2.1"]
        assert refused and refused[0]["captured"] and refused[0]["decision"] == "deny", refused
        # The proxy is the one endpoint the child can reach.
        assert results["127.0.0.1:3128"]["result"] == "connected", results
        assert r.elapsed < 15, r.elapsed
        # Nothing reached the host's sockets.
        assert not [q for q in tls_upstream.requests if q["path"] == "/direct"]
        assert tls_upstream.connections == 0, tls_upstream.peers
        other.setblocking(False)
        with pytest.raises(BlockingIOError):
            other.accept()
    finally:
        other.close()


# ==============================================================================================
# 5. Exit statuses
# ==============================================================================================


@pytest.mark.parametrize("cmd, expected", [
    (["true"], 0),
    (["sh", "-c", "exit 7"], 7),
    (["sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM),
    (["sh", "-c", "kill -ALRM $$"], 128 + signal.SIGALRM),
    (["sh", "-c", "kill -KILL $$"], 128 + signal.SIGKILL),
    (["/nonexistent/wrap-test-command"], 127),
    (["no-such-command-wrap-test"], 127),
], ids=["true", "exit7", "sigterm", "sigalrm", "sigkill", "missing-path", "missing-in-PATH"])
def test_wrap_exits_with_the_commands_status(ws, cmd, expected):
    r = ws.run(*cmd)
    assert r.returncode == expected, r.describe()
    ends = [x for x in ws.records() if x["event"] == "session_end"]
    assert len(ends) == 1 and ends[0]["exit"] == expected, ws.records()


def test_the_command_is_found_on_its_own_path(ws):
    """Looked up in the PATH the command gets, like a shell would: a tool installed outside
    /bin and /usr/bin (npm's, pip's) starts by name."""
    tools = ws.dir / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "my-agent-tool").write_text("#!/bin/sh\necho tool-ran\n")
    (tools / "my-agent-tool").chmod(0o755)
    r = ws.run("my-agent-tool", env={"PATH": f"{tools}:/usr/bin:/bin"})
    assert r.returncode == 0 and "tool-ran" in r.out, r.describe()


def test_a_non_executable_command_exits_126(ws):
    f = ws.dir / "not-executable.sh"
    f.write_text("#!/bin/sh\necho should-not-run\n")
    f.chmod(0o644)
    r = ws.run(str(f))
    assert r.returncode == 126, r.describe()
    assert "should-not-run" not in r.out


@pytest.mark.parametrize("policy_text", [
    '{"version": 1, "allow": [ {"host": "api.github.com", "ports": "443"} ] }',
    '{"version": 1, "allow": [ ',
], ids=["wrong-type", "truncated"])
def test_a_bad_policy_exits_125_and_starts_nothing(ws, policy_text):
    bad = ws.dir / "bad.json"
    bad.write_text(policy_text)
    marker = ws.dir / "started"
    r = ws.run("sh", "-c", f"touch {shlex.quote(str(marker))}", policy_file=bad)
    assert r.returncode == 125, r.describe()
    assert not marker.exists(), "the command ran although the policy is bad"
    assert "bad.json" in r.err, r.describe()
    assert not session_lines(r.err), r.describe()


@pytest.mark.parametrize("extra", [["--isolate", "bogus"], ["--no-such-option"]],
                         ids=["bad-isolate", "unknown-option"])
def test_a_bad_option_exits_125_and_starts_nothing(ws, extra):
    marker = ws.dir / "started"
    r = ws.run("sh", "-c", f"touch {shlex.quote(str(marker))}", extra=extra)
    assert r.returncode == 125, r.describe()
    assert not marker.exists()


@pytest.mark.parametrize("last", ["--policy", "--connect-to", "--upstream-ca"])
def test_a_repeatable_option_right_before_the_double_dash_keeps_the_command_intact(ws, last):
    values = {"--policy": str(ws.policy_file), "--connect-to": ws.connect[0],
              "--upstream-ca": str(ws.upstream_ca)}
    argv = [BROKER_BIN, "wrap", "--log-dir", str(ws.logs)]
    argv += [x for k, v in values.items() if k != last for x in (k, v)]
    argv += [last, values[last], "--", "sh", "-c", "exit 7"]
    p = subprocess.run(argv, env=ws.env(), capture_output=True, timeout=30, cwd=ws.dir)
    assert p.returncode == 7, f"exit={p.returncode} stderr={p.stderr.decode(errors='replace')}"


def test_isolate_netns_explicitly_works_and_is_audited(ws):
    r = ws.run("true", isolate="netns")
    assert r.returncode == 0, r.describe()
    assert session_lines(r.err)[0].endswith("isolation: netns, transparent capture"), r.err
    recs = ws.records()
    assert recs[0]["event"] == "session_start", recs
    assert recs[0]["mode"] == "wrap" and recs[0]["isolation"] == "netns", recs[0]
    assert recs[-1]["event"] == "session_end" and recs[-1]["exit"] == 0, recs[-1]


# ==============================================================================================
# 6. Nothing outlives the session
# ==============================================================================================


def test_background_processes_do_not_outlive_the_session(ws):
    tag = f"{300 + (uuid.uuid4().int % 600)}.{uuid.uuid4().int % 10**6:06d}"
    mine = f"sleep\0{tag}\0"  # the sleeps' own command lines, not the shell's nor the broker's
    ready, go = ws.dir / "ready", ws.dir / "go"
    script = (f'sleep {tag} >/dev/null 2>&1 &\n'
              f'setsid sleep {tag} >/dev/null 2>&1 &\n'
              # ignores TERM: only the KILL after the grace (or the namespace's end) stops it
              f'(trap "" TERM; exec sleep {tag}) >/dev/null 2>&1 &\n'
              f'sleep {tag} &\n'  # keeps wrap's stdout open while it lives
              'touch "$WRAP_READY"\n'
              'while [ ! -e "$WRAP_GO" ]; do sleep 0.05; done\n')
    p = subprocess.Popen(ws.argv("sh", "-c", script), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ws.dir,
                         env=ws.env({"WRAP_READY": str(ready), "WRAP_GO": str(go)}))
    try:
        assert wait_for(ready.exists), "the command never started"
        # The detector sees them while the session runs ...
        assert wait_for(lambda: len(host_processes_with(mine)) == 4, timeout=5), \
            host_processes_with(mine)
        go.touch()
        t0 = time.monotonic()
        out, err = p.communicate(timeout=15)
        assert p.returncode == 0, err
        assert time.monotonic() - t0 < 10
        # ... and none of them is left once wrap has returned.
        assert not host_processes_with(mine), f"left behind: {host_processes_with(mine)}"
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        for pid in host_processes_with(mine):
            os.kill(pid, signal.SIGKILL)


def test_the_command_dies_with_the_broker(ws):
    tag = f"{300 + (uuid.uuid4().int % 600)}.{uuid.uuid4().int % 10**6:06d}"
    mine = f"sleep\0{tag}\0"
    p = ws.popen("sleep", tag)
    try:
        assert wait_for(lambda: len(host_processes_with(mine)) == 1, timeout=5), \
            "the command never started"
        p.kill()  # SIGKILL: the broker gets no chance to end the session itself
        p.wait(timeout=5)
        assert wait_for(lambda: not host_processes_with(mine), timeout=5), \
            f"outlived the broker: {host_processes_with(mine)}"
    finally:
        for pid in host_processes_with(mine):
            os.kill(pid, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
        ws.popen_output()


# ==============================================================================================
# 7. Signals sent to the broker reach the command
# ==============================================================================================


@pytest.mark.parametrize("sig", ["TERM", "HUP", "INT", "USR1", "USR2"])
def test_a_signal_to_the_broker_is_forwarded_to_the_command(ws, sig):
    ready, mark = ws.dir / "ready", ws.dir / "mark"
    script = (f'trap \'echo got-{sig} > "$WRAP_MARK"; exit 0\' {sig}; touch "$WRAP_READY"; '
              'while :; do sleep 0.1; done')
    p = ws.popen("sh", "-c", script, env={"WRAP_READY": str(ready), "WRAP_MARK": str(mark)})
    try:
        assert wait_for(ready.exists), "the command never started"
        p.send_signal(getattr(signal, f"SIG{sig}"))
        rc = p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        out, err = ws.popen_output()
    assert rc == 0, f"exit={rc} stderr={err!r}"
    assert mark.exists() and mark.read_text().strip() == f"got-{sig}"
    ends = [x for x in ws.records() if x["event"] == "session_end"]
    assert ends and ends[0]["exit"] == 0, ws.records()


@pytest.mark.parametrize("isolate", ["netns", "env"])
def test_the_command_starts_with_no_signal_blocked(ws, isolate):
    r = ws.run(PY, "-c", "import signal; "
               "print(sorted(s.name for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))",
               isolate=isolate)
    assert r.returncode == 0, r.describe()
    assert r.out.strip() == "[]", f"blocked in the command: {r.out.strip()}"


def test_an_untrapped_term_to_the_broker_ends_a_plain_program_with_143(ws):
    tag = f"{400 + uuid.uuid4().int % 500}.{uuid.uuid4().int % 10**6:06d}"
    p = ws.popen("sleep", tag)
    try:
        assert wait_for(lambda: host_processes_with(f"sleep\0{tag}\0"), timeout=10), \
            "the command never started"
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            rc = "still running 3 s after SIGTERM"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        ws.popen_output()
        for pid in host_processes_with(f"sleep\0{tag}\0"):
            os.kill(pid, signal.SIGKILL)
    assert rc == 143


def test_an_untrapped_term_to_the_broker_ends_the_command_with_143(ws):
    ready = ws.dir / "ready"
    p = ws.popen("sh", "-c", 'touch "$WRAP_READY"; exec sleep 30',
                 env={"WRAP_READY": str(ready)})
    try:
        assert wait_for(ready.exists), "the command never started"
        time.sleep(0.1)  # let the exec happen
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=10)
        assert time.monotonic() - t0 < 3
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        out, err = ws.popen_output()
    assert rc == 143, f"exit={rc} stderr={err!r}"


# ==============================================================================================
# 8. Interactive: the command gets the terminal
# ==============================================================================================


class Tmux:
    """A tmux server of its own, on a socket in a short private directory (a unix socket path
    must stay under 108 bytes, pytest's tmp paths may not)."""

    def __init__(self, env):
        self.dir = Path(tempfile.mkdtemp(prefix="bw-tmux-"))
        self.sock = self.dir / "s"
        self.env = env

    def __call__(self, *args, check=True):
        return subprocess.run(["tmux", "-S", str(self.sock), *args], env=self.env, check=check,
                              capture_output=True, timeout=15)

    def kill(self):
        if self.dir.exists():
            self("kill-server", check=False)
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def tmux_for(ws):
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    made = []

    def make():
        t = Tmux(ws.env({"TERM": "xterm"}))
        made.append(t)
        return t

    yield make
    for t in made:
        t.kill()


def test_an_interactive_command_under_tmux_reads_the_terminal(ws, tmux_for):
    out, rcfile = ws.dir / "got", ws.dir / "rc"
    inner = f"read line; echo got:$line > {shlex.quote(str(out))}"
    cmd = shlex.join(ws.argv("/bin/sh", "-c", inner)) + f"; echo $? > {shlex.quote(str(rcfile))}"
    t = tmux_for()
    t("new-session", "-d", "-s", "T", "-c", str(ws.dir), "-x", "80", "-y", "24", cmd)
    assert wait_for(lambda: session_started(ws), timeout=10), "wrap did not start under tmux"
    t("send-keys", "-t", "T", "hello", "Enter")
    assert wait_for(lambda: out.exists() and out.read_text().strip() == "got:hello", timeout=10), \
        f"the command did not read the terminal; got={out.read_text() if out.exists() else None}"
    assert wait_for(lambda: rcfile.exists() and rcfile.read_text().strip() != "", timeout=10)
    assert rcfile.read_text().strip() == "0"


def test_ctrl_c_under_tmux_interrupts_the_command(ws, tmux_for):
    ready, rcfile = ws.dir / "ready", ws.dir / "rc"
    inner = f"touch {shlex.quote(str(ready))}; exec sleep 30"
    cmd = shlex.join(ws.argv("/bin/sh", "-c", inner)) + f"; echo $? > {shlex.quote(str(rcfile))}"
    t = tmux_for()
    t("new-session", "-d", "-s", "T", "-c", str(ws.dir), "-x", "80", "-y", "24", cmd)
    assert wait_for(ready.exists, timeout=10), "wrap did not start under tmux"
    time.sleep(0.2)
    t("send-keys", "-t", "T", "C-c")
    assert wait_for(lambda: rcfile.exists() and rcfile.read_text().strip() != "", timeout=10), \
        "Ctrl-C did not end the command"
    assert rcfile.read_text().strip() == str(128 + signal.SIGINT)


def test_ctrl_c_under_tmux_interrupts_a_plain_program(ws, tmux_for):
    rcfile = ws.dir / "rc"
    tag = f"{400 + uuid.uuid4().int % 500}.{uuid.uuid4().int % 10**6:06d}"
    cmd = shlex.join(ws.argv("sleep", tag)) + f"; echo $? > {shlex.quote(str(rcfile))}"
    t = tmux_for()
    try:
        t("new-session", "-d", "-s", "T", "-c", str(ws.dir), "-x", "80", "-y", "24", cmd)
        assert wait_for(lambda: host_processes_with(f"sleep\0{tag}\0"), timeout=10), \
            "wrap did not start under tmux"
        time.sleep(0.1)
        t("send-keys", "-t", "T", "C-c")
        assert wait_for(lambda: rcfile.exists() and rcfile.read_text().strip() != "",
                        timeout=3), "Ctrl-C did not end the command"
        assert rcfile.read_text().strip() == str(128 + signal.SIGINT)
    finally:
        t.kill()
        for pid in host_processes_with(f"sleep\0{tag}\0"):
            os.kill(pid, signal.SIGKILL)


def session_started(ws) -> bool:
    try:
        return any(r["event"] == "session_start" for r in ws.records())
    except (OSError, json.JSONDecodeError):
        return False


# ==============================================================================================
# 9. Unprivileged: a user namespace
# ==============================================================================================

NOBODY = 65534


def _userns_available() -> str:
    """Empty when an unprivileged user can make user+net+pid+mount namespaces, else why not."""
    if os.geteuid() != 0:
        return "the tests are not root, cannot switch to nobody"
    if not shutil.which("setpriv") or not shutil.which("unshare"):
        return "setpriv/unshare missing"
    p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                        "unshare", "-U", "-r", "-n", "-p", "-m", "--fork", "true"],
                       capture_output=True, text=True, timeout=15, cwd="/")
    return "" if p.returncode == 0 else f"the kernel refuses user namespaces: {p.stderr.strip()}"


@dataclass
class Nobody:
    dir: Path
    home: Path
    logs: Path
    policy: Path
    ca: Path
    env: dict

    def run(self, upstream_port, *cmd, timeout=30, isolate="netns", cwd="/", extra=(),
            default_policy=False):
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                BROKER_BIN, "wrap", "--isolate", isolate,
                *([] if default_policy else ["--policy", str(self.policy)]),
                "--upstream-ca", str(self.ca),
                "--connect-to", f"{API}:443:127.0.0.1:{upstream_port}", *extra,
                "--log-dir", str(self.logs), "--", *cmd]
        t0 = time.monotonic()
        p = subprocess.run(argv, env=self.env, capture_output=True, timeout=timeout, cwd=cwd)
        return WrapResult(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)


@pytest.fixture
def nobody(pki):
    """A HOME (mode 777), log and runtime dirs owned by nobody, a readable policy and CA, all in
    a directory nobody can reach (pytest's own tmp dirs are private to root)."""
    why = _userns_available()
    if why:
        pytest.skip(why)
    d = Path(tempfile.mkdtemp(prefix="broker-wrap-nobody-"))
    try:
        d.chmod(0o755)
        home, logs, run = d / "home", d / "logs", d / "run"
        for sub, mode in ((home, 0o777), (logs, 0o700), (run, 0o700)):
            sub.mkdir()
            os.chown(sub, NOBODY, NOBODY)
            sub.chmod(mode)
        policy = d / "policy.json"
        policy.write_text(json.dumps(github_policy()))
        ca = d / "ca.pem"
        shutil.copy(pki.ca_cert, ca)
        for f in (policy, ca):
            f.chmod(0o644)
        env = clean_env({"HOME": str(home), "GITHUB_TOKEN": REAL, "XDG_RUNTIME_DIR": str(run),
                         "USER": "nobody", "LOGNAME": "nobody"})
        yield Nobody(d, home, logs, policy, ca, env)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_unprivileged_wrap_runs_in_a_user_namespace(nobody, tls_upstream):
    r = nobody.run(tls_upstream.port, "sh", "-c",
                   'cat /proc/self/uid_map; echo "uid:$(id -u)"; '
                   'curl -sS --max-time 10 -o /dev/null -w "status:%{http_code}\\n" '
                   '-H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/nobody')
    assert r.returncode == 0, r.describe()
    assert session_lines(r.err) and session_lines(r.err)[0].endswith(
        "isolation: netns, transparent capture"), r.err
    assert r.out.splitlines()[0].split() == [str(NOBODY), str(NOBODY), "1"], r.out
    assert f"uid:{NOBODY}" in r.out and "status:200" in r.out, r.out
    seen = [q for q in tls_upstream.requests if q["path"] == "/nobody"]
    assert seen and seen[0]["headers"].get("Authorization") == f"Bearer {REAL}", seen
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)
    start = [x for f in nobody.logs.glob("*.jsonl") for x in map(json.loads, f.read_text().split())
             if x["event"] == "session_start"]
    assert start and start[0]["isolation"] == "netns", start


def test_an_unprivileged_childs_home_is_an_overlay_of_its_own(nobody, tls_upstream):
    """In a user namespace the home is a copy-on-write layer too (an overlay, user.* attributes):
    the command writes there, and what it wrote stays out of the host."""
    (nobody.home / "notes.txt").write_text("host\n")
    os.chown(nobody.home / "notes.txt", NOBODY, NOBODY)
    r = nobody.run(tls_upstream.port, "sh", "-c",
                   f'grep " {nobody.home} overlay " /proc/self/mounts; '
                   'echo child >> "$HOME/notes.txt"')
    assert r.returncode == 0, r.describe()
    assert f" {nobody.home} overlay " in r.out and "userxattr" in r.out, r.describe()
    assert (nobody.home / "notes.txt").read_text() == "host\n"
    assert f"broker: kept out: {nobody.home}/notes.txt (" in r.err, r.err


def test_an_unprivileged_child_cannot_lift_the_masks_nor_read_init_memory(nobody, tls_upstream):
    _plant(nobody.home)
    for p in nobody.home.rglob("*"):
        os.chown(p, NOBODY, NOBODY)
    r = nobody.run(tls_upstream.port, "sh", "-c",
                   'umount "$HOME/.aws" 2>/dev/null; umount "$HOME/.netrc" 2>/dev/null; '
                   'umount /proc 2>/dev/null; '
                   'cat "$HOME/.aws/credentials" "$HOME/.netrc" 2>&1; '
                   f'{PY} -c "$1" "$2"; echo "pids:$(ls /proc | grep -cE "^[0-9]+$")"',
                   "sh", _MEMSCAN, REAL_BODY[::-1])
    assert r.returncode == 0, r.describe()
    lines = r.out.splitlines()
    assert "hits:" in lines, f"real value in the memory of a process the child can read: {r.out}"
    assert REAL_BODY.encode() not in r.stdout.replace(b"hits:", b""), r.out
    assert int(lines[-1].split(":")[1]) < 10, f"/proc shows the host: {lines[-1]}"


# ==============================================================================================
# 10. --isolate env
# ==============================================================================================


def test_isolate_env_passes_the_exit_status_and_says_it_is_not_isolated(ws):
    r = ws.run("sh", "-c", "exit 3", isolate="env")
    assert r.returncode == 3, r.describe()
    lines = session_lines(r.err)
    assert len(lines) == 1 and "isolation: env" in lines[0], r.err
    assert "netns" not in lines[0]
    recs = ws.records()
    assert recs[0]["event"] == "session_start" and recs[0]["isolation"] == "env", recs[0]
    assert recs[-1]["event"] == "session_end" and recs[-1]["exit"] == 3, recs[-1]


def test_isolate_env_still_swaps_through_its_proxy(ws, tls_upstream):
    r = ws.run("sh", "-c", 'echo "proxy:$HTTPS_PROXY"; curl -sS --max-time 10 -o /dev/null '
                           '-w "status:%{http_code}\\n" -H "Authorization: Bearer $GITHUB_TOKEN" '
                           'https://api.github.com/env-mode', isolate="env")
    assert r.returncode == 0, r.describe()
    assert "status:200" in r.out, r.describe()
    proxy = r.out.split("proxy:")[1].split()[0]
    assert proxy.startswith("http://127.0.0.1:"), proxy
    seen = [q for q in tls_upstream.requests if q["path"] == "/env-mode"]
    assert seen and seen[0]["headers"].get("Authorization") == f"Bearer {REAL}", seen
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)
    rec = [q for q in ws.requests() if q.get("path") == "/env-mode"]
    assert rec and rec[0]["pid"] > 1 and (rec[0]["exe"] or "").endswith("/curl"), rec


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch user namespaces off")
def test_without_user_namespaces_auto_falls_back_loudly_and_netns_refuses(nobody, tls_upstream):
    knob = Path("/proc/sys/user/max_user_namespaces")
    old = knob.read_text()
    try:
        knob.write_text("0")
    except OSError as e:
        pytest.skip(f"cannot switch user namespaces off here: {e}")
    try:
        r = nobody.run(tls_upstream.port, "sh", "-c", "exit 3", isolate="auto")
        assert r.returncode == 3, r.describe()
        assert "WARNING" in r.err and "network isolation is unavailable" in r.err
        assert "isolation: env (no isolation; no transparent capture" in session_lines(r.err)[0], \
            r.err
        r = nobody.run(tls_upstream.port, "true", isolate="netns")
        assert r.returncode == 125, r.describe()
        assert "--isolate netns" in r.err
    finally:
        knob.write_text(old)


def test_the_policy_files_section_masks_more_and_passes_some(ws):
    _plant(ws.home)
    (ws.home / "private").mkdir()
    (ws.home / "private" / "key").write_text(REAL)
    policy = github_policy()
    policy["files"] = {"mask": ["~/private"], "pass": ["~/.netrc"]}
    f = ws.dir / "files-policy.json"
    f.write_text(json.dumps(policy))
    r = ws.run("sh", "-c", 'cat "$HOME/private/key" 2>/dev/null; echo; cat "$HOME/.netrc"; '
                           'cat "$HOME/.aws/credentials" 2>/dev/null; true', policy_file=f)
    assert r.returncode == 0, r.describe()
    assert REAL_BODY.encode() in r.stdout  # ~/.netrc was passed ...
    assert r.out.count(REAL_BODY) == 1     # ... and nothing else was readable
