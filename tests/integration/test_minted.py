"""Minted credentials (docs/policy.md, "Minted credentials"): a github-app credential under
`broker wrap`, against a fake GitHub API that verifies the App's JWT with the App's public key
(as GitHub does), mints installation tokens, serves the REST API to them only and revokes them.

The child holds a `ghs_` dummy; the fake sees the JWT only on the mint, the requested
repositories and permissions, and the minted token on every request; the App's key never goes
upstream. The token is revoked when the session ends, and after a SIGKILL by the next session of
the same App.
"""

import base64
import datetime
import json
import os
import secrets
import signal
import string
import subprocess
import time
from http.server import BaseHTTPRequestHandler

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from conftest import LoopbackHttpServer, read_request_body, tls_server_context
from test_wrap import API, WrapSession, assert_clean

APP_ID, INSTALLATION = 1234, 5678
ALPHABET = string.ascii_letters + string.digits


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class _AppHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def _json(self, status, doc=None):
        body = json.dumps(doc).encode() if doc is not None else b""
        self.send_response(status)
        if doc is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _app_jwt_error(self, auth):
        """Why the Authorization is not a JWT of the App (as GitHub checks it), or None."""
        if not auth or not auth.startswith("Bearer "):
            return "no Bearer JWT"
        parts = auth[7:].split(".")
        if len(parts) != 3:
            return "not a JWT"
        header, claims = json.loads(_b64url(parts[0])), json.loads(_b64url(parts[1]))
        try:
            self.server.public_key.verify(_b64url(parts[2]), f"{parts[0]}.{parts[1]}".encode(),
                                          padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return "bad signature"
        now = time.time()
        if header.get("alg") != "RS256" or claims.get("iss") not in (APP_ID, str(APP_ID)):
            return f"header {header} claims {claims}"
        if not claims["iat"] <= now <= claims["exp"] or claims["exp"] - claims["iat"] > 600:
            return f"iat/exp {claims}"
        return None

    def _handle(self):
        srv = self.server
        body = read_request_body(self)
        auth = self.headers.get("Authorization")
        with srv.lock:
            srv.seen.append({"method": self.command, "path": self.path, "authorization": auth,
                             "body": body})
        if self.command == "POST" and self.path == f"/app/installations/{INSTALLATION}/access_tokens":
            why = self._app_jwt_error(auth)
            if why or srv.refuse_mints:
                self._json(401, {"message": "A JSON web token could not be decoded"
                                 if why else "Bad credentials"})
                return
            token = "ghs_" + "".join(secrets.choice(ALPHABET) for _ in range(36))
            expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
            with srv.lock:
                srv.mints.append({"token": token, "request": json.loads(body or b"{}")})
            self._json(201, {"token": token,
                             "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                             "permissions": {"contents": "write"},
                             "repository_selection": "selected"})
            return
        token = auth[6:] if auth and auth.startswith("token ") else (
            auth[7:] if auth and auth.startswith("Bearer ") else None)
        with srv.lock:
            minted = {m["token"] for m in srv.mints}
            live = token in minted and token not in srv.revoked
        if self.command == "DELETE" and self.path == "/installation/token":
            if not live:
                self._json(401, {"message": "Bad credentials"})
                return
            with srv.lock:
                srv.revoked.append(token)
            self._json(204)
            return
        if not live:
            self._json(401, {"message": "Bad credentials"})
            return
        # The token echoed back: the child must see its dummy instead.
        self._json(200, {"full_name": "org/web", "echo": token})

    do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _handle


class _FakeApp(LoopbackHttpServer):
    def __init__(self, pki):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.private_pem = key.private_bytes(serialization.Encoding.PEM,
                                             serialization.PrivateFormat.TraditionalOpenSSL,
                                             serialization.NoEncryption()).decode()
        self.public_key = key.public_key()
        self.seen, self.mints, self.revoked = [], [], []
        self.refuse_mints = False
        super().__init__(_AppHandler, tls_server_context(pki))
        self.start()

    def key_lines(self):
        return [l for l in self.private_pem.splitlines() if l and not l.startswith("-----")]


@pytest.fixture
def app(pki):
    srv = _FakeApp(pki)
    yield srv
    srv.shutdown()
    srv.server_close()


def app_policy():
    return {"version": 1, "allow": [{"host": API}],
            "credentials": {"gh": {"type": "github-app", "app_id": APP_ID,
                                   "installation_id": INSTALLATION,
                                   "private_key": "env:GITHUB_APP_KEY",
                                   "repositories": ["web"],
                                   "permissions": {"contents": "write", "pull_requests": "write"},
                                   "hosts": [API]}}}


CHILD = r'''
echo "DUMMY $GITHUB_TOKEN"
for i in 1 2; do
  curl -sS -w '\nSTATUS %{http_code}\n' -H "Authorization: token $GITHUB_TOKEN" \
    https://api.github.com/repos/org/web
done
'''


def _session(tmp_path, pki, app):
    ws = WrapSession(tmp_path, pki, app.port, policy=app_policy())
    return ws, {"GITHUB_APP_KEY": app.private_pem}


def test_a_github_app_token_is_minted_used_and_revoked(tmp_path, pki, app):
    ws, env = _session(tmp_path, pki, app)
    r = ws.run("sh", "-c", CHILD, env=env, timeout=60)
    assert r.returncode == 0, r.describe()
    dummy = r.out.split("DUMMY ", 1)[1].split()[0]
    assert dummy.startswith("ghs_") and len(dummy) == 40, r.describe()
    assert r.out.count("STATUS 200") == 2, r.describe()
    with app.lock:
        mints, seen, revoked = list(app.mints), list(app.seen), list(app.revoked)
    # One mint, for the repositories and permissions of the policy, with a JWT the App's key signed.
    assert len(mints) == 1, seen
    assert mints[0]["request"] == {"repositories": ["web"],
                                   "permissions": {"contents": "write", "pull_requests": "write"}}
    token = mints[0]["token"]
    assert dummy != token
    api_calls = [s for s in seen if s["path"] == "/repos/org/web"]
    assert [s["authorization"] for s in api_calls] == [f"token {token}"] * 2, api_calls
    # The echo came back as the dummy.
    assert f'"echo": "{dummy}"' in r.out, r.describe()
    # Revoked when the session ended.
    assert revoked == [token], seen
    # The App's key and its JWTs went to the mint endpoint only; nothing the broker wrote or the
    # child saw holds the token or the key.
    for s in seen:
        if s["path"] != f"/app/installations/{INSTALLATION}/access_tokens":
            assert not (s["authorization"] or "").startswith("Bearer ey"), s
    assert_clean(r.stdout + r.stderr, "wrap output", token, *app.key_lines())
    for f in ws.logs.rglob("*"):
        if f.is_file():
            assert_clean(f.read_bytes(), f"log {f}", token, *app.key_lines())
    records = [q for q in ws.requests() if q.get("credential") == "gh"]
    assert len(records) == 2 and all(q.get("credential_expires", 0) > time.time() for q in records)
    minted_dir = ws.home / ".config" / "broker" / "minted"
    assert not list(minted_dir.glob("*.json")), list(minted_dir.iterdir())


def test_a_mint_that_fails_is_502_and_never_the_apps_key(tmp_path, pki, app):
    app.refuse_mints = True
    ws, env = _session(tmp_path, pki, app)
    r = ws.run("sh", "-c", CHILD, env=env, timeout=60)
    assert r.returncode == 0, r.describe()
    assert r.out.count("STATUS 502") == 2, r.describe()
    body = json.loads(r.out.split("\n", 2)[1])
    assert body["error"] == "credential_unavailable" and "401" in body["message"], body
    with app.lock:
        seen = list(app.seen)
    assert not [s for s in seen if s["path"] == "/repos/org/web"], seen
    assert_clean(r.stdout + r.stderr, "wrap output", *app.key_lines())
    refused = [q for q in ws.records() if q.get("error") == "credential_unavailable"]
    assert refused and refused[0]["credential"] == "gh", ws.records()


def test_a_killed_sessions_token_is_revoked_by_the_next_session(tmp_path, pki, app):
    ws, env = _session(tmp_path, pki, app)
    marker = ws.dir / "used"
    child = CHILD.replace("for i in 1 2", "for i in 1") + f"touch {marker}; sleep 60\n"
    p = ws.popen("sh", "-c", child, env=env)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), ws.popen_output()
        minted_dir = ws.home / ".config" / "broker" / "minted"
        assert len(list(minted_dir.glob("*.json"))) == 1
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    with app.lock:
        token = app.mints[0]["token"]
        assert app.revoked == [], "nothing revokes a token after SIGKILL"
    # The next session of the same App revokes it as it starts, before the command runs.
    r = ws.run("true", env=env, timeout=60)
    assert r.returncode == 0, r.describe()
    with app.lock:
        assert app.revoked == [token], app.seen
    assert not list((ws.home / ".config" / "broker" / "minted").glob("*.json"))
