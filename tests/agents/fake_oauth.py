"""Fake OAuth token endpoints of the agents' logins (refresh grant only), pure stdlib.

Each endpoint holds ONE live refresh token (the real one the test planted in the login file
outside the sandbox). A refresh with it answers new access and refresh tokens and retires it:
sending it again is refused as reuse, as the real services do (refresh tokens are single-use);
anything else (a dummy, a made-up value) is refused as invalid. Every request is recorded.

- OpenAI (Codex ChatGPT login): POST https://auth.openai.com/oauth/token, JSON
  {client_id, grant_type: "refresh_token", refresh_token}; answers {id_token, access_token,
  refresh_token} (JWTs for the first two); reuse → 401 {"error": {"code": "refresh_token_reused"}}.
- Anthropic (Claude Code): POST https://platform.claude.com/v1/oauth/token, JSON
  {grant_type: "refresh_token", refresh_token, client_id, scope}; answers {access_token,
  refresh_token, expires_in, scope, token_type}; reuse → 400 {"error": "invalid_grant"}.
- Google (Gemini CLI): POST https://oauth2.googleapis.com/token, form
  refresh_token=&client_id=&client_secret=&grant_type=refresh_token; answers {access_token,
  expires_in, scope, token_type, id_token} (Google does not rotate the refresh token unless
  asked; this fake may: `rotate=True`); reuse → 400 {"error": "invalid_grant"}.
"""

import base64
import json
import secrets
import string
import threading
import time
from urllib.parse import parse_qs

CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
CLAUDE_CLIENT_ID = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
GEMINI_CLIENT_ID = "681255809395-oo8ft2oprdrnp9e3aqf6av3hmdib135j.apps.googleusercontent.com"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(claims: dict, header=None) -> str:
    """A JWT-shaped token (RS256 header, random 256-byte signature): decodable, not verifiable."""
    header = header or {"alg": "RS256", "typ": "JWT", "kid": "fake-key-1"}
    return ".".join([b64url(json.dumps(header, separators=(",", ":")).encode()),
                     b64url(json.dumps(claims, separators=(",", ":")).encode()),
                     b64url(secrets.token_bytes(256))])


def jwt_claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def random_token(prefix: str, n: int, alphabet=string.ascii_letters + string.digits) -> str:
    return prefix + "".join(secrets.choice(alphabet) for _ in range(n))


def codex_tokens(account_id: str, email="agent@example.test", plan="pro", expires_in=3600):
    """(id_token, access_token) JWTs shaped like a ChatGPT login's."""
    now = int(time.time())
    auth = {"chatgpt_account_id": account_id, "chatgpt_plan_type": plan,
            "chatgpt_user_id": "user-fake0001", "user_id": "user-fake0001"}
    id_token = make_jwt({"iss": "https://auth.openai.com", "aud": [CODEX_CLIENT_ID],
                         "sub": "auth0|fake", "email": email, "email_verified": True,
                         "iat": now, "exp": now + expires_in,
                         "https://api.openai.com/auth": auth})
    access = make_jwt({"iss": "https://auth.openai.com", "aud": ["https://api.openai.com/v1"],
                       "sub": "auth0|fake", "iat": now, "exp": now + expires_in,
                       "scp": ["openid", "profile", "email", "offline_access"],
                       "https://api.openai.com/auth": auth,
                       "https://api.openai.com/profile": {"email": email}})
    return id_token, access


class TokenEndpoint:
    """One provider's token endpoint. `on_access(token)` is called with each access token it
    issues (the fake model API then accepts it)."""

    def __init__(self, kind: str, refresh_token: str, client_id: str, on_access=None,
                 rotate=True, account_id="acct-fake0001"):
        assert kind in ("openai", "anthropic", "google"), kind
        self.kind, self.client_id, self.rotate = kind, client_id, rotate
        self.account_id = account_id
        self.live = refresh_token          # the one refresh token that works now
        self.retired = []                  # used ones: a second use is reuse
        self.issued = []                   # (access, refresh) pairs handed out, in order
        self.requests = []                 # what arrived: {"content_type", "fields", "ok"}
        self.on_access = on_access or (lambda token: None)
        self.lock = threading.Lock()

    # The path each provider serves its token endpoint on.
    @property
    def path(self) -> str:
        return {"openai": "/oauth/token", "anthropic": "/v1/oauth/token",
                "google": "/token"}[self.kind]

    def _fields(self, content_type: str, body: bytes) -> dict:
        if "json" in content_type:
            doc = json.loads(body or b"{}")
            return {k: v for k, v in doc.items()}
        return {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}

    def _new_tokens(self):
        if self.kind == "openai":
            id_token, access = codex_tokens(self.account_id)
            refresh = random_token("rt_", 60, string.ascii_letters + string.digits + "-_")
            return {"id_token": id_token, "access_token": access, "refresh_token": refresh}
        if self.kind == "anthropic":
            access = random_token("sk-ant-oat01-", 95, string.ascii_letters + string.digits + "-_")
            refresh = random_token("sk-ant-ort01-", 95, string.ascii_letters + string.digits + "-_")
            return {"access_token": access, "refresh_token": refresh, "expires_in": 28800,
                    "token_type": "Bearer",
                    "scope": "user:inference user:profile user:sessions:claude_code"}
        access = random_token("ya29.", 150, string.ascii_letters + string.digits + "-_")
        out = {"access_token": access, "expires_in": 3599, "token_type": "Bearer",
               "scope": "openid https://www.googleapis.com/auth/cloud-platform "
                        "https://www.googleapis.com/auth/userinfo.email "
                        "https://www.googleapis.com/auth/userinfo.profile",
               "id_token": make_jwt({"iss": "https://accounts.google.com", "sub": "1000001",
                                     "email": "agent@example.test", "aud": self.client_id,
                                     "iat": int(time.time()),
                                     "exp": int(time.time()) + 3600})}
        if self.rotate:
            out["refresh_token"] = random_token("1//0", 100, string.ascii_letters + string.digits + "-_")
        return out

    def _refusal(self, reused: bool):
        if self.kind == "openai":
            code = "refresh_token_reused" if reused else "refresh_token_invalidated"
            return 401, {"error": {"code": code, "message": "refresh token refused by the fake"}}
        return 400, {"error": "invalid_grant",
                     "error_description": "refresh token already used" if reused
                     else "unknown refresh token"}

    def handle(self, content_type: str, body: bytes):
        """(status, JSON document) for one token request."""
        with self.lock:
            try:
                fields = self._fields(content_type or "", body)
            except (ValueError, UnicodeDecodeError):
                self.requests.append({"content_type": content_type, "fields": None, "ok": False})
                return 400, {"error": "invalid_request"}
            record = {"content_type": content_type, "fields": fields, "ok": False}
            self.requests.append(record)
            if fields.get("grant_type") != "refresh_token":
                return 400, {"error": "unsupported_grant_type"}
            if fields.get("client_id") != self.client_id:
                return 401, {"error": "invalid_client"}
            token = fields.get("refresh_token")
            if token != self.live:
                return self._refusal(token in self.retired)
            tokens = self._new_tokens()
            if "refresh_token" in tokens:
                self.retired.append(self.live)
                self.live = tokens["refresh_token"]
            self.issued.append((tokens["access_token"], tokens.get("refresh_token")))
            record["ok"] = True
            self.on_access(tokens["access_token"])
            return 200, tokens
