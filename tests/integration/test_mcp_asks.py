"""Asks about MCP calls (docs/policy.md, "Asks about MCP calls"): in a session whose layer asks,
a tool call its "mcp" rule refuses for want of an allow glob or by an argument check is held
while a person decides with `broker pending` / `approve` / `deny`, shown with its server, tool
and arguments (pretty-printed, secrets redacted); a tool the rule denies is refused at once and
never asked about. The real MCP SDK client runs inside `broker wrap` against the SDK server, as
in test_mcp.py, and each decision is checked by what the client got and what reached the server.
"""

import json
import subprocess
import threading
import time

import requests
from selenium.webdriver.common.by import By

from browser import artifacts, wait_for
from conftest import BROKER_BIN
from redis_server import free_port
from test_ask import in_background
from test_console_browser import browser, sign_in  # noqa: F401 (browser: a fixture)
from test_gateway_asks import cli as gateway_cli
from test_gateway_asks import new_session, records
from test_gateway_replicas import via
from test_mitm import assert_nothing_written_contains
from test_mcp import HOST, POLICY, TOKEN, McpServer, McpWrapper, _server, steps_of  # noqa: F401
from test_mcp import upstream_pki  # noqa: F401 (fixture)
from wrapped_session import broker_env, echo  # noqa: F401 (fixture)

ASK_POLICY = {
    "version": 1,
    "on_deny": "ask",
    "allow": [{
        "host": HOST, "ports": [443],
        "mcp": {"tools": {"allow": ["get_*"], "deny": ["delete_*"],
                          "arguments": {"get_issue": {"/owner": "acme"}}}},
    }],
    "credentials": POLICY["credentials"],
}

SECRET_ARG = "hunter2-" + "NotForTheScreen"

STEPS = [
    {"op": "list"},
    # Not in the allow list: asked, approved once.
    {"op": "call", "tool": "create_issue",
     "args": {"owner": "acme", "repo": "web", "title": "T", "apiToken": SECRET_ARG}},
    # Asked again (once was once): denied.
    {"op": "call", "tool": "create_issue", "args": {"owner": "acme", "repo": "web", "title": "U"}},
    # Outside get_issue's argument check: asked, approved for the session...
    {"op": "call", "tool": "get_issue", "args": {"owner": "evil", "repo": "r", "number": 1}},
    # ... so the next one goes without asking.
    {"op": "call", "tool": "get_issue", "args": {"owner": "other", "repo": "r", "number": 2}},
    # A deny glob: refused at once, never asked.
    {"op": "call", "tool": "delete_repo", "args": {"owner": "acme", "repo": "web"}},
]


class Person:
    """Beside the session: `broker pending`, `approve` and `deny` in its runtime dir."""

    def __init__(self, wrapper, name):
        self.dir = wrapper.dir(name)

    def cli(self, *args):
        return subprocess.run([BROKER_BIN, *args], capture_output=True, text=True, timeout=30,
                              env=broker_env(None, self.dir / "home", self.dir / "run"))

    def next_ask(self, seen, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (self.dir / "run").exists():
                p = self.cli("pending", "--json")
                if p.returncode == 0:
                    fresh = [a for a in json.loads(p.stdout) if a["id"] not in seen]
                    if fresh:
                        seen.add(fresh[0]["id"])
                        return fresh[0], self.cli("pending").stdout
            time.sleep(0.1)
        raise AssertionError("no MCP call was held for a person")


def test_a_person_decides_each_held_tool_call(tmp_path_factory, upstream_pki, echo):
    server = _server(tmp_path_factory, upstream_pki, "--stateless")
    decisions = []
    try:
        wrapper = McpWrapper(tmp_path_factory.mktemp("mcp-asks"), upstream_pki, server, echo)
        person = Person(wrapper, "asks")

        def decide():
            seen = set()
            for verb in (["approve", "--once"], ["deny"], ["approve"]):
                ask, listed = person.next_ask(seen)
                before = server.requests()  # what reached the server while the call was held
                decided = person.cli(verb[0], ask["id"], *verb[1:])
                decisions.append((ask, listed, decided, before))

        t = threading.Thread(target=decide, daemon=True)
        t.start()
        r = wrapper.run("asks", STEPS, policy=ASK_POLICY)
        t.join(timeout=30)
        server_requests = server.requests()
    finally:
        server.close()
    steps = steps_of(r)
    assert len(decisions) == 3, (decisions, r.describe())

    # The list keeps what may be asked about, never what is denied.
    assert steps[0]["tools"] == ["get_issue", "create_issue", "echo_auth"], steps[0]

    # The ask shows the server, the tool and its arguments, the secret among them redacted.
    ask, listed, decided, seen_by_server = decisions[0]
    assert ask["mcp"]["server"] == f"{HOST}:443" and ask["mcp"]["tool"] == "create_issue", ask
    assert ask["mcp"]["method"] == "tools/call", ask
    assert ask["rule"] == "allow[0].mcp.tools.allow", ask
    args = ask["mcp"]["arguments"]
    assert '"title": "T"' in args and '"apiToken": "<redacted>"' in args, args
    assert "MCP tools/call create_issue on mcp.example.test:443" in listed, listed
    assert '"owner": "acme"' in listed, listed
    assert not [q for q in seen_by_server if "create_issue" in (q.get("tools") or [])]
    assert decided.returncode == 0 and "approved (once)" in decided.stdout, decided
    assert steps[1]["ok"] and "created issue acme/web#42: T" in steps[1]["text"], steps[1]

    # Denied: a JSON-RPC error for that call, never forwarded.
    assert decisions[1][0]["mcp"]["tool"] == "create_issue"
    assert not steps[2]["ok"] and steps[2]["code"] == -32001, steps[2]
    assert steps[2]["data"]["error"] == "approval_denied", steps[2]
    created = [q for q in server_requests if "create_issue" in (q.get("tools") or [])]
    assert len(created) == 1 and '"T"' in created[0]["body"], created

    # An argument outside its check, approved for the session: this tool on this server goes.
    ask, _, decided, _ = decisions[2]
    assert ask["mcp"]["tool"] == "get_issue", ask
    assert ask["rule"] == "allow[0].mcp.tools.arguments.get_issue./owner", ask
    assert "approved (session)" in decided.stdout, decided
    assert steps[3]["ok"] and "evil/r#1" in steps[3]["text"], steps[3]
    assert steps[4]["ok"] and "other/r#2" in steps[4]["text"], steps[4]

    # A denied tool is refused at once.
    assert not steps[5]["ok"] and steps[5]["data"]["error"] == "mcp_tool_denied", steps[5]
    assert "delete_repo" not in [t for q in server_requests for t in q.get("tools") or []]

    # wrap's stderr: one line per ask and the arguments under it, redacted.
    err = r.stderr.decode(errors="replace")
    assert err.count("MCP tools/call create_issue on mcp.example.test:443") == 2, err
    assert '"apiToken": "<redacted>"' in err, err

    # The records: each ask, each decision naming the call, each call's outcome.
    recs = r.records()
    asks = [q for q in recs if q.get("event") == "ask"]
    assert [q["mcp"]["tool"] for q in asks] == ["create_issue", "create_issue", "get_issue"], asks
    approvals = [q for q in recs if q.get("event") == "approval"]
    assert [(q["decision"], q["scope"], q["call"]) for q in approvals] == [
        ("approve", "once", "tools/call create_issue"), ("deny", None, "tools/call create_issue"),
        ("approve", "session", "tools/call get_issue")], approvals
    calls = [q for q in recs if (q.get("mcp") or {}).get("method") == "tools/call"
             and q.get("event") != "ask"]
    assert [(q["mcp"]["tool"], q["rule"]) for q in calls] == [
        ("create_issue", "approved:once"),
        ("create_issue", "allow[0].mcp.tools.allow"),
        ("get_issue", "approved:session"),
        ("get_issue", "allow[0]"),
        ("delete_repo", "allow[0].mcp.tools.deny[0]")], calls
    assert calls[1]["error"] == "approval_denied", calls[1]
    for what, data in r.written():
        assert TOKEN.encode() not in data, f"{what} holds the real token"
        assert SECRET_ARG.encode() not in data, f"{what} holds the argument's secret"


def test_an_operator_approves_a_tool_call_in_the_gateway_console(tmp_path_factory, tmp_path,
                                                                  upstream_pki, broker_factory,
                                                                  browser):
    """The same through `serve --gateway`: a session's held call is listed on the console's asks
    page with its tool and arguments, and the operator's approval (this tool, this session) in
    a real browser lets it, and the next call of the tool, through."""
    server = _server(tmp_path_factory, upstream_pki, "--stateless")
    try:
        run = tmp_path / "run"
        run.mkdir(mode=0o700)
        admin = free_port()
        gw = broker_factory(policy=ASK_POLICY, upstream_ca=upstream_pki.ca_cert,
                            args=["--gateway", "--admin", f"127.0.0.1:{admin}"],
                            env={"XDG_RUNTIME_DIR": str(run), "MCP_TOKEN": TOKEN},
                            connect_to=[f"{HOST}:443:127.0.0.1:{server.port}"])
        gw.admin = f"http://127.0.0.1:{admin}"
        token = gateway_cli(gw, "admin-token", "create", "--name", "ana").stdout.strip()
        sid, env = new_session(gw, "mcp")

        def call(number, title):
            with requests.Session() as s:
                s.trust_env = False
                s.proxies = {"https": via(gw, env)}
                s.verify = str(gw.ca_cert)
                body = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                        "params": {"name": "create_issue",
                                   "arguments": {"owner": "acme", "repo": "web", "title": title,
                                                 "password": SECRET_ARG}}}
                return s.post(f"https://{HOST}/mcp", json=body, timeout=60, headers={
                    "Authorization": f"Bearer {env['MCP_TOKEN']}",
                    "Accept": "application/json, text/event-stream"})

        held_call = in_background(lambda: call(1, "From the console"))
        sign_in(browser, gw, token, "/console/asks")
        row = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, "#asks tbody tr"),
                       what="the held MCP call on the asks page")
        request = row.find_element(By.CSS_SELECTOR, "td.request")
        assert f"MCP tools/call create_issue on {HOST}:443" in request.text, request.text
        shown = row.find_element(By.CSS_SELECTOR, "pre.mcp-arguments").text
        assert '"title": "From the console"' in shown and '"password": "<redacted>"' in shown
        assert sid in row.text
        assert not [q for q in server.requests() if "create_issue" in (q.get("tools") or [])]
        browser.save_screenshot(str(artifacts("console") / "asks-mcp.png"))
        button = row.find_element(By.CSS_SELECTOR, "button.approve-session")
        assert button.text == "Approve this tool for session"
        button.click()
        answer = held_call()
        assert answer.status_code == 200 and "created issue acme/web#42" in answer.text, answer.text
        wait_for(lambda: browser.find_element(By.ID, "no-asks"), what="the asks page to empty")
        # Approved for the session: the next call of the tool goes without asking.
        again = call(2, "Second")
        assert again.status_code == 200 and "created issue" in again.text, again.text
        created = [q for q in server.requests() if "create_issue" in (q.get("tools") or [])]
        assert len(created) == 2 and all(q["authorization"] == f"Bearer {TOKEN}" for q in created)
        recs = records(gw, sid)
        [approval] = [q for q in recs if q.get("event") == "approval"]
        assert approval["call"] == "tools/call create_issue", approval
        assert approval["scope"] == "session" and "ana" in approval["who"], approval
        assert_nothing_written_contains(gw, SECRET_ARG, TOKEN)
    finally:
        server.close()
