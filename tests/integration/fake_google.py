"""A strict fake of the cloud endpoints the gcp and azure token credentials talk to.

One threaded HTTPS server on loopback (the test CA's leaf, reached with `--connect-to` for every
name it answers), routing by the Host header:

- oauth2.googleapis.com POST /token: Google's OAuth token endpoint. A JWT bearer grant
  (RFC 7523) is accepted only when the assertion's RS256 signature verifies with the public key
  of a registered service account and its header and claims are what Google requires (iss = the
  account's email, aud = the token URI, the expected scope, iat now, exp = iat + 1 h, kid = the
  key id). A refresh-token grant is accepted only with a registered authorized_user's client id,
  client secret and refresh token. Success: {"access_token": "ya29.<random>", "expires_in": N,
  "token_type": "Bearer"}; anything else: 400 {"error": "invalid_grant", ...}.
- sts.googleapis.com POST /v1/token: Google's STS token exchange (RFC 8693) that downscopes an
  access token this fake issued with a Credential Access Boundary ("options"); the new token is
  issued to "downscoped:<who>" and recorded with its boundary in `exchanges`.
- storage.googleapis.com: GET /storage/v1/b lists buckets; GET /storage/v1/echo-auth answers
  with the Authorization header it received (in a header and the JSON body, as an upstream that
  leaks what it got would). Both only with `Authorization: Bearer T` where T is a token this fake
  issued that has not expired, or one registered with accept_static() (401 otherwise).
- management.azure.com: GET /subscriptions likewise (and /echo-auth), with the tokens a fake `az`
  wrote to a file registered with watch_az_file() ("TOKEN EXPIRES_ON" lines), not expired.

Everything received is recorded (requests, token grants, API calls, failures) for the tests.
"""

import base64
import json
import secrets
import string
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qsl

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from conftest import LoopbackHttpServer, tls_server_context

TOKEN_URI = "https://oauth2.googleapis.com/token"
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEFAULT_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
GOOGLE_HOSTS = ["oauth2.googleapis.com", "storage.googleapis.com", "sts.googleapis.com"]
AZURE_HOSTS = ["management.azure.com"]
CERT_NAMES = GOOGLE_HOSTS + AZURE_HOSTS + ["api.example.test", "localhost"]
BUCKETS = ["bucket-a", "bucket-b"]
SUBSCRIPTIONS = [{"subscriptionId": "00000000-1111-2222-3333-444444444444",
                  "displayName": "broker-test-subscription", "state": "Enabled"}]
_TOKEN_CHARS = string.ascii_letters + string.digits + "-_"


def google_access_token() -> str:
    """Shaped like Google's: "ya29." then 160 characters of [A-Za-z0-9_-] (fixed length)."""
    return "ya29.a0" + "".join(secrets.choice(_TOKEN_CHARS) for _ in range(158))


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class ServiceAccount:
    email: str
    key_id: str
    private_key_pem: str
    public_key: object
    expires_in: int
    scope: str = DEFAULT_SCOPE

    def key_file(self) -> dict:
        project = self.email.split("@")[1].split(".")[0]
        return {"type": "service_account", "project_id": project,
                "private_key_id": self.key_id, "private_key": self.private_key_pem,
                "client_email": self.email, "client_id": "1" + "0" * 20,
                "auth_uri": "https://accounts.google.com/o/oauth2/auth",
                "token_uri": TOKEN_URI,
                "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
                "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/x"}

    def pem_lines(self):
        """The base64 lines of the PEM (what a leak of the key would show)."""
        return [l for l in self.private_key_pem.splitlines() if l and not l.startswith("-----")]


def make_service_account(name: str, expires_in: int, scope: str = DEFAULT_SCOPE) -> ServiceAccount:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return ServiceAccount(f"{name}@broker-test-project.iam.gserviceaccount.com",
                          secrets.token_hex(20), pem, key.public_key(), expires_in, scope)


@dataclass
class AuthorizedUser:
    name: str
    client_id: str
    client_secret: str
    refresh_token: str
    expires_in: int

    def key_file(self) -> dict:
        return {"type": "authorized_user", "client_id": self.client_id,
                "client_secret": self.client_secret, "refresh_token": self.refresh_token}


def make_authorized_user(name: str, expires_in: int) -> AuthorizedUser:
    digits = "".join(secrets.choice(string.digits) for _ in range(12))
    alnum = string.ascii_lowercase + string.digits
    return AuthorizedUser(
        name,
        f"{digits}-{''.join(secrets.choice(alnum) for _ in range(32))}.apps.googleusercontent.com",
        "GOCSPX-" + "".join(secrets.choice(_TOKEN_CHARS) for _ in range(28)),
        "1//0" + "".join(secrets.choice(_TOKEN_CHARS) for _ in range(99)),
        expires_in)


@dataclass
class Issued:
    token: str
    who: str          # the account email, user name, or static / az label
    expires: float    # time.time() when it stops working
    issued: float


class GrantError(Exception):
    pass


def verify_assertion(assertion: str, accounts: dict, now: float):
    """Returns the ServiceAccount whose key signed `assertion`; raises GrantError otherwise."""
    parts = assertion.split(".")
    if len(parts) != 3:
        raise GrantError("the assertion is not header.claims.signature")
    try:
        header = json.loads(_b64url_decode(parts[0]))
        claims = json.loads(_b64url_decode(parts[1]))
        signature = _b64url_decode(parts[2])
    except ValueError as e:
        raise GrantError(f"the assertion does not decode: {e}")
    if header.get("alg") != "RS256" or header.get("typ") != "JWT":
        raise GrantError(f"bad JWT header {header}")
    account = accounts.get(claims.get("iss"))
    if account is None:
        raise GrantError(f"unknown issuer {claims.get('iss')!r}")
    try:
        account.public_key.verify(signature, f"{parts[0]}.{parts[1]}".encode(),
                                  padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        raise GrantError("invalid JWT signature")
    if header.get("kid") != account.key_id:
        raise GrantError(f"kid {header.get('kid')!r} is not the key's id")
    if claims.get("aud") != TOKEN_URI:
        raise GrantError(f"aud {claims.get('aud')!r}")
    if claims.get("scope") != account.scope:
        raise GrantError(f"scope {claims.get('scope')!r}, expected {account.scope!r}")
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int):
        raise GrantError(f"iat/exp not integers: {claims}")
    if abs(iat - now) > 30:
        raise GrantError(f"iat {iat} is not now ({now:.0f})")
    if exp - iat != 3600:
        raise GrantError(f"exp - iat = {exp - iat}")
    if set(claims) - {"iss", "scope", "aud", "iat", "exp"}:
        raise GrantError(f"unexpected claims {sorted(claims)}")
    return account


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def _send(self, status, doc, extra_headers=()):
        payload = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        for k, v in extra_headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    def _handle(self):
        fake: FakeCloud = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        auth = self.headers.get("Authorization")
        fake._record("requests", {"host": host, "method": self.command, "path": self.path,
                                  "authorization": auth, "body": body.decode(errors="replace"),
                                  "content_type": self.headers.get("Content-Type"),
                                  "time": time.time()})
        path = self.path.split("?")[0]
        if host == "oauth2.googleapis.com" and self.command == "POST" and path == "/token":
            status, doc = fake._token_grant(self.headers.get("Content-Type") or "", body)
            return self._send(status, doc, [("Cache-Control", "no-store")])
        if host == "sts.googleapis.com" and self.command == "POST" and path == "/v1/token":
            status, doc = fake._exchange(body)
            return self._send(status, doc, [("Cache-Control", "no-store")])
        if host in ("storage.googleapis.com", "management.azure.com") and self.command == "GET":
            issued = fake._check_bearer(host, auth)
            call = {"host": host, "path": self.path, "authorization": auth,
                    "token": issued.token if issued else None,
                    "who": issued.who if issued else None, "ok": issued is not None,
                    "time": time.time()}
            fake._record("api_calls", call)
            if issued is None:
                fake._record("failures", {**call, "why": "bad or expired bearer token"})
                if host == "storage.googleapis.com":
                    return self._send(401, {"error": {"code": 401, "message": "Invalid Credentials",
                                                      "errors": [{"reason": "authError"}]}},
                                      [("WWW-Authenticate", 'Bearer realm="https://accounts.google.com/"')])
                return self._send(401, {"error": {"code": "InvalidAuthenticationToken",
                                                  "message": "The access token is invalid."}})
            if path.endswith("/echo-auth"):
                return self._send(200, {"seen": auth}, [("X-Seen-Authorization", auth)])
            if host == "storage.googleapis.com" and path == "/storage/v1/b":
                return self._send(200, {"kind": "storage#buckets",
                                        "items": [{"kind": "storage#bucket", "name": b}
                                                  for b in BUCKETS]})
            if host == "management.azure.com" and path == "/subscriptions":
                return self._send(200, {"value": SUBSCRIPTIONS, "count": {"type": "Total",
                                                                          "value": 1}})
        fake._record("failures", {"host": host, "path": self.path, "why": "no such endpoint"})
        return self._send(404, {"error": "not found", "host": host, "path": self.path})

    do_GET = do_POST = do_PUT = do_DELETE = _handle


class _Server(LoopbackHttpServer):
    def __init__(self, fake, ssl_context):
        self.fake = fake
        super().__init__(_Handler, ssl_context)


class FakeCloud:
    def __init__(self, pki):
        self.lock = threading.Lock()
        self.accounts = {}       # email -> ServiceAccount
        self.users = {}          # client_id -> AuthorizedUser
        self.static = {}         # token -> label (cmd: sources' fixed tokens)
        self.az_files = []       # (path, label)
        self.issued = {}         # token -> Issued (Google tokens this fake issued)
        self.requests = []
        self.grants = []         # every token endpoint request, parsed
        self.exchanges = []      # every STS token exchange, parsed
        self.refused_subjects = set()  # emails whose tokens STS will not exchange
        self.api_calls = []
        self.failures = []
        self.server = _Server(self, tls_server_context(pki)).start()
        self.port = self.server.port

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    # ---- registration ----
    def add_account(self, account: ServiceAccount):
        with self.lock:
            self.accounts[account.email] = account

    def refuse_exchanges(self, account: ServiceAccount):
        """STS answers 400 to every exchange of this account's tokens."""
        with self.lock:
            self.refused_subjects.add(account.email)

    def add_user(self, user: AuthorizedUser):
        with self.lock:
            self.users[user.client_id] = user

    def accept_static(self, token: str, label: str):
        with self.lock:
            self.static[token] = label

    def watch_az_file(self, path: Path, label: str):
        with self.lock:
            self.az_files.append((Path(path), label))

    # ---- what was seen ----
    def _record(self, what, entry):
        with self.lock:
            getattr(self, what).append(entry)

    def snapshot(self, what):
        with self.lock:
            return list(getattr(self, what))

    def issued_to(self, who):
        with self.lock:
            return [i for i in self.issued.values() if i.who == who]

    def grants_for(self, who):
        return [g for g in self.snapshot("grants") if g.get("who") == who]

    def calls_by(self, who):
        return [c for c in self.snapshot("api_calls") if c["who"] == who]

    def az_tokens(self):
        out = {}
        for path, label in list(self.az_files):
            try:
                lines = path.read_text().splitlines()
            except FileNotFoundError:
                continue
            for line in lines:
                parts = line.split()
                if len(parts) == 2:
                    out[parts[0]] = Issued(parts[0], label, float(parts[1]), 0.0)
        return out

    # ---- endpoints ----
    def _issue(self, who, expires_in):
        token = google_access_token()
        now = time.time()
        with self.lock:
            self.issued[token] = Issued(token, who, now + expires_in, now)
        return {"access_token": token, "expires_in": expires_in, "token_type": "Bearer"}

    def _token_grant(self, content_type, body):
        form = dict(parse_qsl(body.decode(errors="replace"), keep_blank_values=True))
        grant = {"form": form, "time": time.time(), "who": None, "ok": False}
        try:
            if not content_type.startswith("application/x-www-form-urlencoded"):
                raise GrantError(f"content type {content_type!r}")
            kind = form.get("grant_type")
            if kind == JWT_GRANT:
                if set(form) != {"grant_type", "assertion"}:
                    raise GrantError(f"unexpected parameters {sorted(form)}")
                with self.lock:
                    accounts = dict(self.accounts)
                account = verify_assertion(form["assertion"], accounts, time.time())
                grant["who"] = account.email
                answer = self._issue(account.email, account.expires_in)
            elif kind == "refresh_token":
                with self.lock:
                    user = self.users.get(form.get("client_id"))
                if user is None:
                    raise GrantError("unknown client_id")
                if form.get("client_secret") != user.client_secret:
                    raise GrantError("wrong client_secret")
                if form.get("refresh_token") != user.refresh_token:
                    raise GrantError("wrong refresh_token")
                grant["who"] = user.name
                answer = self._issue(user.name, user.expires_in)
            else:
                raise GrantError(f"unsupported grant_type {kind!r}")
        except GrantError as e:
            grant["error"] = str(e)
            self._record("grants", grant)
            self._record("failures", {"host": "oauth2.googleapis.com", "path": "/token",
                                      "why": str(e)})
            return 400, {"error": "invalid_grant", "error_description": str(e)}
        grant["ok"] = True
        grant["token"] = answer["access_token"]
        self._record("grants", grant)
        return 200, answer

    def _exchange(self, body):
        form = dict(parse_qsl(body.decode(errors="replace"), keep_blank_values=True))
        entry = {"form": form, "time": time.time(), "ok": False}
        access = "urn:ietf:params:oauth:token-type:access_token"
        try:
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
                raise GrantError(f"grant_type {form.get('grant_type')!r}")
            if form.get("subject_token_type") != access or form.get("requested_token_type") != access:
                raise GrantError("token types")
            with self.lock:
                subject = self.issued.get(form.get("subject_token", ""))
            if subject is None or subject.expires <= time.time():
                raise GrantError("unknown or expired subject_token")
            if subject.who in self.refused_subjects:
                entry["who"] = subject.who
                raise GrantError("the caller may not downscope this token")
            options = json.loads(form.get("options") or "{}")
            rules = options.get("accessBoundary", {}).get("accessBoundaryRules")
            if not rules:
                raise GrantError("no accessBoundary rules in options")
            entry["who"], entry["boundary"] = subject.who, rules
            answer = self._issue("downscoped:" + subject.who, int(subject.expires - time.time()))
            answer["issued_token_type"] = access
        except (GrantError, ValueError) as e:
            entry["error"] = str(e)
            self._record("exchanges", entry)
            return 400, {"error": "invalid_request", "error_description": str(e)}
        entry["ok"], entry["token"] = True, answer["access_token"]
        self._record("exchanges", entry)
        return 200, answer

    def _check_bearer(self, host, auth):
        if not auth or not auth.startswith("Bearer "):
            return None
        token = auth[len("Bearer "):]
        now = time.time()
        if host == "storage.googleapis.com":
            with self.lock:
                issued = self.issued.get(token)
                label = self.static.get(token)
            if label is not None:
                return Issued(token, label, now + 3600, 0.0)
        else:
            issued = self.az_tokens().get(token)
        if issued is None or issued.expires <= now:
            return None
        return issued
