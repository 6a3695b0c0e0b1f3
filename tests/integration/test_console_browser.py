"""The operators' console in a real browser (docs/gateway.md): Debian's chromium, headless, driven by
Selenium, against two gateway replicas sharing Redis and a log directory, with live traffic from
clients of both. An operator signs in, watches a session's counters move, approves a held
request and sees it complete, revokes a session and sees its next request refused, reads a
session's verified timeline across replicas and the spend charts. Pages from other origins that
post to the console with the operator's cookie change nothing. Screenshots of every page go to
build/test-artifacts/console/."""
import json
import signal
import time
from http.server import BaseHTTPRequestHandler

import pytest
import requests
from selenium.webdriver.common.by import By

from browser import artifacts, chromium, wait_for
from conftest import LoopbackHttpServer, run_broker_cli
from gateway_session import create_session
from test_ask import in_background
from test_budgets import OPENAI, OTHER, llm, llm_pki  # noqa: F401 (fixtures)
from test_gateway_replicas import redis, start_replicas, via  # noqa: F401 (redis: a fixture)
from test_mitm import assert_nothing_written_contains

REAL = "sk-proj-" + "C0nsoleSecretValue" * 3
ASKED = "docs.example.test"


@pytest.fixture
def replicas(redis, broker_factory, llm, llm_pki, tmp_path):  # noqa: F811
    """Two replicas on one Redis, one CA, one log directory, each with its admin listener."""
    # Asks for what no rule allows (a session layer that says "on_deny": "deny" refuses instead).
    policy = {"version": 1, "allow": [{"host": OPENAI}, {"host": OTHER}], "on_deny": "ask",
              "credentials": {"openai": {"type": "bearer", "env": ["OPENAI_API_KEY"],
                                         "hosts": [OPENAI]}},
              "budgets": {"requests": 200, "llm_tokens": 100000, "cost_usd": 1}}
    out = start_replicas(redis, broker_factory, llm, llm_pki, tmp_path, policy, REAL,
                         plain_hosts=(OTHER, ASKED))
    for b in out:
        b.admin = f"http://127.0.0.1:{b.admin}"
    return out


@pytest.fixture
def browser(tmp_path):
    driver = chromium(tmp_path)
    yield driver
    driver.quit()


def plain(gw, env, path="/x", host=OTHER, timeout=20):
    return requests.get(f"http://{host}{path}", proxies={"http": via(gw, env)}, timeout=timeout)


def chat(gw, env):
    with requests.Session() as s:
        s.trust_env = False
        s.proxies = {"https": via(gw, env)}
        s.verify = str(gw.bundle)
        r = s.post(f"https://{OPENAI}/v1/chat/completions", timeout=20,
                   headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
                   json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    return r


def admin_token(gw, name="ana"):
    r = run_broker_cli("admin-token", "--gateway", gw.session, "create", "--name", name)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def sign_in(driver, gw, token, page="/console/sessions"):
    driver.get(gw.admin + page)
    assert driver.title.startswith("Sign in")
    driver.save_screenshot(str(artifacts("console") / "login.png"))
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "sign-in").click()
    wait_for(lambda: driver.find_element(By.ID, "who").text == "ana", what="the signed-in page")
    assert driver.current_url == gw.admin + page


def cell(driver, session_id, name):
    return driver.find_element(By.CSS_SELECTOR, f"#session-{session_id} td.{name}").text


def test_an_operator_runs_the_gateway_from_the_console(replicas, browser, tmp_path):
    r1, r2 = replicas
    shots = artifacts("console")
    token = admin_token(r1)
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"version": 1, "allow": [{"host": OPENAI}, {"host": OTHER}],
                                  "on_deny": "deny"}))
    ana, ana_env, _ = create_session(r1, "--user", "ana-dev", "--label", "team=web", "--policy",
                                     strict, name="ana")
    bo, bo_env, _ = create_session(r2, "--user", "bo", name="bo")
    for gw in (r1, r2):  # traffic through both replicas, LLM responses with usage and cost
        chat(gw, ana_env)
        assert plain(gw, ana_env).status_code == 200

    sign_in(browser, r1, token)
    # The sessions page: both sessions, the counters of both replicas' files, budgets as bars.
    wait_for(lambda: cell(browser, ana, "requests") == "4", what="ana's 4 requests")
    assert cell(browser, ana, "tokens") == "300"
    assert browser.find_element(By.CSS_SELECTOR, f"#session-{bo} td.requests").text == "0"
    meters = [m.get_attribute("title")
              for m in browser.find_elements(By.CSS_SELECTOR, f"#session-{ana} meter")]
    assert meters[:2] == ["4 of 200", "300 of 100000"] and meters[2].endswith(" of $1.00")
    assert cell(browser, ana, "cost").startswith("$0.0")
    # Live: requests through the other replica move the counters without a reload.
    for _ in range(3):
        assert plain(r2, ana_env).status_code == 200
    assert plain(r2, ana_env, host="blocked.example.test").status_code == 403
    wait_for(lambda: cell(browser, ana, "requests") == "8", what="the counters to move")
    assert cell(browser, ana, "denied") == "1"
    browser.save_screenshot(str(shots / "sessions.png"))

    # An ask: bo's request to a host no rule allows is held on r2 until the operator, on r1's
    # console, decides: r1 lists r2's asks and sends the decision there (through Redis).
    held = in_background(lambda: plain(r2, bo_env, "/guide", host=ASKED, timeout=60))
    browser.find_element(By.ID, "nav-asks").click()
    row = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, "#asks tbody tr"),
                   what="the held request on the asks page")
    assert bo in row.text and f"GET http://{ASKED}/guide" in row.text
    assert row.find_element(By.CSS_SELECTOR, "td.replica").text == "r2"
    wait_for(lambda: browser.find_element(By.ID, "asks-count").text == "1",
             what="the asks badge")
    browser.save_screenshot(str(shots / "asks.png"))
    row.find_element(By.CSS_SELECTOR, "button.approve-once").click()
    assert held().status_code == 200  # the held request completed
    wait_for(lambda: browser.find_element(By.ID, "no-asks"), what="the asks page to empty")
    # Approved once: the next such request is asked again (and denied from the API here).
    r = requests.get(r1.admin + "/api/asks", headers={"Authorization": f"Bearer {token}"},
                     timeout=10)
    assert r.json()["asks"] == []

    # The other replica's console knows the login (Redis) and shows the same counters.
    browser.get(r2.admin + "/console/sessions")
    wait_for(lambda: browser.find_element(By.ID, "who").text == "ana", what="r2's console")
    wait_for(lambda: cell(browser, ana, "requests") == "8", what="the same counters on r2")
    browser.get(r1.admin + "/console/asks")
    wait_for(lambda: browser.find_element(By.ID, "no-asks"), what="r1's asks page")

    # Refusals: ana's, linked to her session.
    browser.find_element(By.ID, "nav-refusals").click()
    wait_for(lambda: "blocked.example.test" in browser.find_element(By.ID, "refusals").text,
             what="the refusal")
    browser.find_element(By.ID, "filter-code").send_keys("policy_denied\n")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#refusals td.code"),
             what="the filtered refusals")
    assert {c.text for c in browser.find_elements(By.CSS_SELECTOR, "#refusals td.code")} == {
        "policy_denied"}
    browser.save_screenshot(str(shots / "refusals.png"))

    # One session's timeline: both replicas' records merged, the chains verified.
    browser.find_element(By.LINK_TEXT, ana).click()
    verdict = wait_for(lambda: browser.find_element(By.ID, "verdict"), what="the timeline")
    assert "Chain verified" in verdict.text
    assert "replica r1" in verdict.text and "replica r2" in verdict.text
    rows = browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    assert len(rows) == 10  # two session_starts, eight exchanges
    assert f"POST https://{OPENAI}/v1/chat/completions" in browser.find_element(
        By.ID, "timeline").text
    browser.save_screenshot(str(shots / "session.png"))

    # Spend: tokens and cost per day and user as charts, the same numbers in the table.
    browser.find_element(By.ID, "nav-spend").click()
    table = wait_for(lambda: browser.find_element(By.ID, "spend-table"), what="the spend page")
    wait_for(lambda: "ana-dev" in table.text, what="ana's spend")
    row = [r for r in table.find_elements(By.CSS_SELECTOR, "tbody tr") if "ana-dev" in r.text][0]
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1:5] == ["ana-dev", "1", "2", "300"], cells
    drawn = browser.execute_script(
        "const c = Chart.getChart('tokens-chart');"
        "return c ? c.data.datasets.map(d => [d.label, d.data.reduce((a, b) => a + b, 0)]) : null;")
    assert drawn == [["ana-dev", 300]]
    assert browser.execute_script("return Chart.getChart('cost-chart').data.datasets[0].data"
                                  ".reduce((a, b) => a + b, 0)") > 0
    browser.save_screenshot(str(shots / "spend.png"))

    # Revoke, with the confirmation; the session's next request is refused on both replicas.
    browser.find_element(By.ID, "nav-sessions").click()
    button = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, f"#session-{ana} button.revoke"),
                      what="ana's revoke button")
    button.click()
    alert = browser.switch_to.alert
    assert ana in alert.text
    alert.accept()
    wait_for(lambda: not browser.find_elements(By.ID, f"session-{ana}"),
             what="ana to leave the active sessions")
    for gw in (r2, r1):
        wait_for(lambda: plain(gw, ana_env).status_code == 407, timeout=5,
                 what=f"the revoked session refused on {gw.session}")
    assert plain(r2, bo_env).status_code == 200  # the other session goes on
    # The browser reported no error of its own (a CSP violation, a script error).
    problems = [e for e in browser.get_log("browser")
                if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert problems == []
    for gw in (r1, r2):
        assert_nothing_written_contains(gw, REAL, token)


class _Attacker(BaseHTTPRequestHandler):
    """Pages of another origin that make the operator's browser post to the console."""
    page = b""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)


def test_a_forged_cross_site_post_changes_nothing(replicas, browser, tmp_path):
    r1, _ = replicas
    token = admin_token(r1)
    sid, env, _ = create_session(r1, "--user", "eve", name="victim")
    sign_in(browser, r1, token)
    target = f"{r1.admin}/api/sessions/{sid}/revoke"
    _Attacker.page = f"""<!doctype html><html><body>
<form id="f" method="post" action="{target}"><input name="scope" value="x"></form>
<iframe name="sink" id="sink"></iframe>
<script>
fetch("{target}", {{method: "POST", credentials: "include", mode: "no-cors",
                     body: "x"}}).catch(() => {{}});
fetch("{target}", {{method: "POST", credentials: "include",
                     headers: {{"X-CSRF-Token": "guess"}}}}).catch(() => {{}});
document.getElementById("f").target = "sink";
document.getElementById("f").submit();
setTimeout(() => {{ document.title = "done"; }}, 1500);
</script></body></html>""".encode()
    attacker = LoopbackHttpServer(_Attacker).start()
    try:
        # Same site, another origin (another port: the cookie rides along), and another site.
        for origin in (f"http://127.0.0.1:{attacker.port}", f"http://localhost:{attacker.port}"):
            browser.get(origin + "/")
            wait_for(lambda: browser.title == "done", what="the attacker's page to post")
    finally:
        attacker.shutdown()
        attacker.server_close()
    # The session is still active and its client still served.
    r = requests.get(r1.admin + "/api/sessions", headers={"Authorization": f"Bearer {token}"},
                     timeout=10)
    assert [x["state"] for x in r.json()["sessions"]] == ["active"]
    assert plain(r1, env).status_code == 200
    # The refusals are in the gateway's log: the same-site posts carried the cookie and were
    # refused for want of the console's CSRF token.
    time.sleep(0.5)
    refused = [x for x in r1.records() if x.get("event") == "admin" and x.get("decision") == "deny"
               and x.get("path") == f"/api/sessions/{sid}/revoke"]
    assert any(x["status"] == 403 for x in refused), refused
    # The operator's own console still works, with the same login.
    browser.get(r1.admin + "/console/sessions")
    wait_for(lambda: browser.find_element(By.ID, f"session-{sid}"), what="the session row")


def test_asks_are_listed_and_decided_on_any_replica(replicas):
    """The admin API behind the asks page, without a browser: a request held on r1 is listed
    by r2 (naming r1) and denied through r2; the decision's record names r2's operator. While
    r1 is frozen, a decision sent through r2 fails (503) and is not applied later."""
    r1, r2 = replicas
    token = admin_token(r1)
    auth = {"Authorization": f"Bearer {token}"}
    sid, env, _ = create_session(r1, "--user", "cy", name="cy")
    held = in_background(lambda: plain(r1, env, "/held", host=ASKED, timeout=60))
    asks = wait_for(lambda: requests.get(r2.admin + "/api/asks", headers=auth, timeout=10)
                    .json()["asks"], what="r1's ask listed by r2")
    assert [(a["session"], a["replica"]) for a in asks] == [(sid, "r1")]
    r = requests.post(r2.admin + "/api/asks/g-000000000000-1/deny", headers=auth, timeout=10)
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    # A holder that does not take the decision in time: 503, and the decision is taken back,
    # so it does not apply when the holder returns.
    r1.proc.send_signal(signal.SIGSTOP)
    try:
        r = requests.post(r2.admin + f"/api/asks/{asks[0]['id']}/deny", headers=auth, timeout=20)
    finally:
        r1.proc.send_signal(signal.SIGCONT)
    assert r.status_code == 503 and r.json()["error"] == "state_unavailable", r.text
    assert "nothing was decided" in r.json()["message"]
    time.sleep(1)
    assert [a["id"] for a in requests.get(r2.admin + "/api/asks", headers=auth, timeout=10)
            .json()["asks"]] == [asks[0]["id"]]
    r = requests.post(r2.admin + f"/api/asks/{asks[0]['id']}/deny", headers=auth, timeout=10)
    assert r.status_code == 200 and r.json()["decision"] == "deny", r.text
    assert r.json()["replica"] == "r1"
    assert held().status_code == 403
    wait_for(lambda: requests.get(r1.admin + "/api/asks", headers=auth, timeout=10)
             .json()["asks"] == [], what="the ask to leave every list")
    r = run_broker_cli("log", sid, "--json", "--log-dir", r1.log_dir)
    [decision] = [json.loads(x) for x in r.stdout.splitlines() if '"approval"' in x]
    assert decision["decision"] == "deny" and decision["who"].startswith("admin-token ana (a-")
