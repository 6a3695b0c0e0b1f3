"""The operators' console over HTTP (docs/gateway.md), as a script or an attacker would use it: every
page and JSON route refuses a request without a valid admin credential (and records it), the
sign-in form trades an admin token for a login cookie, a state-changing request carried by that
cookie needs the console's CSRF token and its own origin, and the JSON pages the views read hold
what the audit files say (counters, refusals, a verified timeline, spend)."""
import time

import pytest
import requests

from conftest import BROKER_BIN, allow_policy, clean_env, curl
from redis_server import free_port
from test_mitm import assert_nothing_written_contains

ALLOWED = "api.example.test"
PAGES = ["/console/sessions", "/console/refusals", "/console/asks", "/console/spend",
         "/console/session/g-000000000000"]
API = [("GET", "/api/sessions"), ("GET", "/api/asks"), ("GET", "/api/console/me"),
       ("GET", "/api/console/sessions"), ("GET", "/api/console/refusals"),
       ("GET", "/api/console/spend"), ("GET", "/api/console/sessions/g-1/timeline"),
       ("POST", "/api/sessions/g-1/revoke"), ("POST", "/api/asks/g-1-1/approve"),
       ("POST", "/api/asks/g-1-1/deny"), ("POST", "/console/logout")]


def start(broker_factory, tmp_path, upstream, env=None):
    run = tmp_path / "run"  # its own runtime dir: the only gateway the CLI finds there
    run.mkdir(mode=0o700)
    admin = free_port()
    gw = broker_factory(policy=allow_policy(ALLOWED, ports=[upstream.port],
                                            budgets={"requests": 40}),
                        args=["--gateway", "--admin", f"127.0.0.1:{admin}"],
                        env={"XDG_RUNTIME_DIR": str(run), **(env or {})},
                        connect_to=[f"{ALLOWED}:{upstream.port}:127.0.0.1:{upstream.port}"])
    gw.admin = f"http://127.0.0.1:{admin}"
    gw.host = f"127.0.0.1:{admin}"
    return gw


def cli(gw, *args):
    import subprocess
    return subprocess.run([BROKER_BIN, *map(str, args)], capture_output=True, text=True,
                          timeout=30, env=clean_env(gw.env))


def new_session(gw, name, *args):
    env_file = gw.dir / f"{name}.env"
    r = cli(gw, "session", "create", "--env-file", env_file, *args)
    assert r.returncode == 0, r.stderr
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if line)
    return env["HTTPS_PROXY"].split("//", 1)[1].split(":", 1)[0], env


def token_of(gw, name="ana"):
    made = cli(gw, "admin-token", "create", "--name", name)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def sign_in(gw, token, origin=True):
    s = requests.Session()
    s.trust_env = False
    headers = {"Origin": f"http://{gw.host}"} if origin else {}
    r = s.post(gw.admin + "/console/login", data={"token": token, "next": "/console/asks"},
               headers=headers, allow_redirects=False, timeout=10)
    return s, r


def admin_records(gw):
    """The refused admin requests in the gateway's log."""
    return [r for r in gw.records() if r.get("event") == "admin" and r.get("decision") == "deny"]


def test_without_a_valid_credential_every_page_and_route_is_refused_and_recorded(
        broker_factory, tmp_path, upstream):
    gw = start(broker_factory, tmp_path, upstream)
    sid, env = new_session(gw, "one")
    token = token_of(gw)
    session_token = env["HTTP_PROXY"].split("//", 1)[1].split("@", 1)[0].split(":", 1)[1]
    wrong = [{}, {"Authorization": "Bearer bka_" + "A" * 43},
             {"Authorization": f"Bearer {session_token}"},  # a proxy token opens nothing here
             {"Cookie": "broker_console=bkl_" + "B" * 43},
             {"Cookie": f"broker_console={token}"}]  # the admin token is no login cookie
    for headers in wrong:
        for path in PAGES:
            r = requests.get(gw.admin + path, headers=headers, timeout=10, allow_redirects=False)
            assert r.status_code == 401, (path, headers, r.status_code)
            # The answer is the sign-in form, nothing of the page's data.
            assert 'action="/console/login"' in r.text and sid not in r.text
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
            assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
        for method, path in API:
            r = requests.request(method, gw.admin + path, headers=headers, timeout=10)
            assert r.status_code == 401, (method, path, headers, r.text)
            assert r.json()["error"] == "admin_auth_required"
            assert sid not in r.text
    # Refusals are recorded (at most 20 a second: the rest counted into the next record).
    time.sleep(1.1)
    assert requests.get(gw.admin + "/api/console/me", timeout=10).status_code == 401
    recs = admin_records(gw)
    assert recs and all(r["decision"] == "deny" and r["status"] == 401 for r in recs)
    seen = len(recs) + sum(r.get("suppressed", 0) for r in recs)
    assert seen == len(wrong) * (len(PAGES) + len(API)) + 1, recs[-3:]
    assert {r["path"] for r in recs} >= {"/console/sessions", "/api/console/spend"}
    # The sign-in form, its script and style, /metrics and /healthz stay open; nothing else is.
    for path in ("/console/login", "/console/static/console.css", "/console/static/console.js",
                 "/console/static/login.js", "/console/static/chart.min.js", "/healthz"):
        assert requests.get(gw.admin + path, timeout=10).status_code == 200, path
    chart = requests.get(gw.admin + "/console/static/chart.min.js", timeout=10)
    assert chart.headers["Content-Type"].startswith("text/javascript")
    assert chart.content == open("/usr/share/javascript/chart.js/chart.min.js", "rb").read()
    assert requests.get(gw.admin + "/console/static/nope.js", timeout=10).status_code == 404
    # A bearer token opens the JSON as before.
    r = requests.get(gw.admin + "/api/console/sessions",
                     headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert r.status_code == 200 and r.json()["sessions"][0]["id"] == sid
    assert_nothing_written_contains(gw, token)


def test_sign_in_trades_the_admin_token_for_a_login_cookie_that_csrf_cannot_ride(
        broker_factory, tmp_path, upstream):
    gw = start(broker_factory, tmp_path, upstream)
    sid, env = new_session(gw, "one", "--user", "bob")
    token = token_of(gw)

    s, r = sign_in(gw, "bka_" + "C" * 43)
    assert r.status_code == 401 and "unknown or revoked" in r.text and "Set-Cookie" not in r.headers
    s, r = sign_in(gw, token)
    assert r.status_code == 303 and r.headers["Location"] == "/console/asks"
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith("broker_console=bkl_") and token not in cookie
    for flag in ("HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"):
        assert flag in cookie, cookie
    # The login opens the pages and the JSON.
    page = s.get(gw.admin + "/console/sessions", timeout=10)
    assert page.status_code == 200 and "/console/static/console.js" in page.text
    me = s.get(gw.admin + "/api/console/me", timeout=10).json()
    assert me["name"] == "ana" and len(me["csrf"]) == 43

    # A state change by cookie alone (what a forged form or another site's script sends) fails.
    revoke = gw.admin + f"/api/sessions/{sid}/revoke"
    attempts = [{},  # no CSRF token
                {"X-CSRF-Token": "x" * 43},  # a wrong one
                {"X-CSRF-Token": me["csrf"], "Origin": "http://evil.example"},
                {"X-CSRF-Token": me["csrf"], "Origin": "null"},
                {"X-CSRF-Token": me["csrf"], "Sec-Fetch-Site": "cross-site"}]
    for headers in attempts:
        r = s.post(revoke, headers=headers, timeout=10)
        assert r.status_code == 403 and r.json()["error"] == "csrf_rejected", (headers, r.text)
    assert curl(f"http://{ALLOWED}:{upstream.port}/still", proxy=env["HTTP_PROXY"]).status == 200
    csrf = [r for r in admin_records(gw) if r.get("status") == 403]
    assert len(csrf) == len(attempts) and all(r["path"] == f"/api/sessions/{sid}/revoke" for r in csrf)

    # The console's own request: the token, its origin.
    r = s.post(revoke, headers={"X-CSRF-Token": me["csrf"], "Origin": f"http://{gw.host}"},
               timeout=10)
    assert r.status_code == 200 and r.json() == {"ok": True, "session": sid}
    r = curl(f"http://{ALLOWED}:{upstream.port}/after", proxy=env["HTTP_PROXY"])
    assert r.status == 407

    # Behind a TLS-terminating proxy the origin is https:// and the same Host: that is the
    # console's own too. Signing in from another origin (login CSRF) is refused.
    other = requests.Session()
    r = other.post(gw.admin + "/console/login", data={"token": token},
                   headers={"Origin": f"https://{gw.host}"}, allow_redirects=False, timeout=10)
    assert r.status_code == 303 and r.headers["Location"] == "/console/sessions"
    r = other.post(gw.admin + "/console/login", data={"token": token},
                   headers={"Origin": "http://evil.example"}, allow_redirects=False, timeout=10)
    assert r.status_code == 403 and "Set-Cookie" not in r.headers
    # Signing out ends the login; so does revoking its admin token.
    r = s.post(gw.admin + "/console/logout", headers={"X-CSRF-Token": me["csrf"]},
               allow_redirects=False, timeout=10)
    assert r.status_code == 303 and "Max-Age=0" in r.headers["Set-Cookie"]
    assert requests.get(gw.admin + "/api/console/me", timeout=10,
                        cookies={"broker_console": cookie.split(";")[0].split("=", 1)[1]}
                        ).status_code == 401
    s2, r = sign_in(gw, token)
    assert s2.get(gw.admin + "/api/console/me", timeout=10).status_code == 200
    assert cli(gw, "admin-token", "revoke", "ana").returncode == 0
    assert s2.get(gw.admin + "/api/console/me", timeout=10).status_code == 401
    assert_nothing_written_contains(gw, token, cookie.split(";")[0].split("=", 1)[1])


def test_the_json_pages_hold_what_the_audit_files_say(broker_factory, tmp_path, upstream):
    gw = start(broker_factory, tmp_path, upstream)
    token = token_of(gw)
    auth = {"Authorization": f"Bearer {token}"}

    def get(path, **params):
        r = requests.get(gw.admin + path, params=params, headers=auth, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    ids = [new_session(gw, f"s{i}", "--user", "bob" if i % 2 else "eve", "--label",
                       f"n=v{i}")[0] for i in range(7)]
    sid, env = ids[-1], None
    env = dict(line.split("=", 1) for line in (gw.dir / "s6.env").read_text().splitlines() if line)
    for i in range(5):
        assert curl(f"http://{ALLOWED}:{upstream.port}/ok/{i}", proxy=env["HTTP_PROXY"]).status == 200
    for host in ("one.blocked.test", "two.blocked.test"):
        assert curl(f"http://{host}/x", proxy=env["HTTP_PROXY"]).status == 403

    # Sessions: newest first, a page at a time, filtered; counters from the files.
    deadline = time.monotonic() + 10
    while True:
        page = get("/api/console/sessions", per_page=3)
        row = page["sessions"][0]
        if row["requests"] == 7 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert page["total"] == 7 and page["all"] == 7 and len(page["sessions"]) == 3
    assert [x["id"] for x in page["sessions"]] == ids[::-1][:3]
    assert row["id"] == sid and row["requests"] == 7 and row["denied"] == 2
    assert row["budgets"] == [{"name": "requests", "used": "7", "limit": "40",
                               "fraction": pytest.approx(7 / 40)}]
    last = get("/api/console/sessions", per_page=3, page=2)
    assert [x["id"] for x in last["sessions"]] == [ids[0]]
    assert [x["id"] for x in get("/api/console/sessions", q="eve")["sessions"]] == ids[::-2]
    assert get("/api/console/sessions", q="n=v3")["total"] == 0  # a label's key or value
    assert [x["id"] for x in get("/api/console/sessions", q="v3")["sessions"]] == [ids[3]]

    # Refusals: newest first, filtered by code, session and host.
    refused = get("/api/console/refusals")
    assert [r["host"] for r in refused["refusals"]] == ["two.blocked.test", "one.blocked.test"]
    assert all(r["session"] == sid and r["code"] == "policy_denied" and r["status"] == 403
               for r in refused["refusals"])
    assert get("/api/console/refusals", host="one.")["total"] == 1
    assert get("/api/console/refusals", code="budget_exhausted")["total"] == 0
    assert get("/api/console/refusals", session=ids[0])["total"] == 0

    # The timeline: the session's records in order, a page at a time, and the chain verified.
    t = get(f"/api/console/sessions/{sid}/timeline", per_page=3)
    assert t["total"] == 8 and t["pages"] == 3 and t["page"] == 2  # the newest by default
    assert [r["seq"] for r in t["records"]] == [7, 8]
    first = get(f"/api/console/sessions/{sid}/timeline", per_page=3, page=0)
    assert [r["event"] for r in first["records"]] == ["session_start", "request", "request"]
    assert t["verify"]["ok"] and t["verify"]["replicas"][0]["records"] == 8
    assert t["registry"]["user"] == "eve"
    # A record changed in the file is found.
    [path] = list((gw.log_dir / sid).glob("*.jsonl"))
    path.write_text(path.read_text().replace('"/ok/2"', '"/ok/9"'))
    v = get(f"/api/console/sessions/{sid}/timeline")["verify"]
    assert not v["ok"] and v["replicas"][0]["line"] == 4 and "hash" in v["replicas"][0]["error"]
    r = requests.get(gw.admin + "/api/console/sessions/g-nothere/timeline", headers=auth, timeout=10)
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = requests.get(gw.admin + "/api/console/sessions/..%2f..%2fetc/timeline", headers=auth,
                     timeout=10)
    assert r.status_code == 404


def write_chained_session(directory, session, count):
    """`count` records of one replica, chained as broker chains them (hash over prev and the
    record without its hash), written straight to its file."""
    import hashlib
    directory.mkdir(parents=True)
    prev = "0" * 64
    with open(directory / "r0.000001.jsonl", "w") as out:
        for seq in range(1, count + 1):
            body = (f'{{"ts":"2026-12-01T00:{seq // 60000 % 60:02d}:{seq // 1000 % 60:02d}.'
                    f'{seq % 1000:03d}Z","session":"{session}","seq":{seq},"event":"request",'
                    f'"method":"GET","host":"h.test","path":"/{seq}","status":200,'
                    f'"decision":"allow","prev":"{prev}"}}')
            prev = hashlib.sha256((prev + body).encode()).hexdigest()
            out.write(body[:-1] + f',"hash":"{prev}"}}\n')


def test_a_long_sessions_page_comes_before_its_verdict(broker_factory, tmp_path, upstream):
    """Verifying a session reads all of it: a long one's timeline answers with its last page at
    once and "pending" for the verdict, which comes with a later ask and is then kept. (The
    wait for a verdict is 0 here instead of 1.5 s, so the first answer is pending on any
    machine, sanitizers or not.)"""
    gw = start(broker_factory, tmp_path, upstream, env={"BROKER_CONSOLE_VERIFY_WAIT_MS": "0"})
    auth = {"Authorization": f"Bearer {token_of(gw)}"}
    sid = "g-" + "5e" * 6
    count = 50_000
    write_chained_session(gw.log_dir / sid, sid, count)
    url = gw.admin + f"/api/console/sessions/{sid}/timeline"
    first = requests.get(url, headers=auth, timeout=10).json()
    assert first["verify"].get("pending") is True, first["verify"]
    assert first["total"] == count and first["page"] == count // 50 - 1
    assert [r["seq"] for r in first["records"]] == list(range(count - 49, count + 1))
    deadline = time.monotonic() + 120
    while "ok" not in (answer := requests.get(url, headers=auth, timeout=10).json())["verify"]:
        assert time.monotonic() < deadline, "no verdict"
        time.sleep(0.5)
    assert answer["verify"]["ok"] and answer["verify"]["replicas"][0]["records"] == count
    # /metrics answered while it was verified; the verdict is kept for the unchanged files.
    assert requests.get(gw.admin + "/metrics", timeout=5).status_code == 200
    again = requests.get(url, headers=auth, params={"page": 0}, timeout=10).json()
    assert again["verify"]["ok"] and [r["seq"] for r in again["records"]][:2] == [1, 2]
