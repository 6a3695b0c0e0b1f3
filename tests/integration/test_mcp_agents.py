"""Claude Code (real, print mode) with an HTTP MCP server added by `claude mcp add --transport
http`, inside `broker wrap` (docs/policy.md, "MCP servers"): the fake model asks for one allowed
tool call and one whose arguments the policy's "mcp" rule refuses. Claude Code gets the refusal
as the tool's error and hands it to the model; the MCP server never sees the refused call; the
session's log has both calls. The MCP server is tests/agents/mcp_server.mjs (the real MCP SDK),
the model tests/agents/fake_apis.py; both answer only the real credentials, which the agent
never holds.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from conftest import BROKER_BIN, make_pki  # noqa: E402
from mcp_upstream import McpServer, sdk_installed  # noqa: E402
import agent_run  # noqa: E402
import fake_apis  # noqa: E402

ANTHROPIC_KEY = ("sk-ant-api03-" + "McpAgentRealKeyAbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEf"
                 "GhIjKlMnOpQrStUvWxYz0123456789abcd-AbCdEfAA")
HOSTS = fake_apis.HOSTS

MCP_HOST = "mcp.example.test"
MCP_TOKEN = "mcp_" + "ClaudeCodeServerToken0123456789abcdefX"
RULE = {"host": MCP_HOST, "ports": [443],
        "mcp": {"tools": {"allow": ["get_issue", "create_issue"],
                          "arguments": {"create_issue": {"/owner": "acme"}}}}}
CREDENTIAL = {"type": "bearer", "env": ["MCP_TOKEN"], "hosts": [MCP_HOST]}
CALLS = [{"name": "mcp__gh__get_issue", "input": {"owner": "o", "repo": "r", "number": 7}},
         {"name": "mcp__gh__create_issue", "input": {"owner": "evil", "repo": "web", "title": "T"}}]
CLAUDE_MCP = ("claude mcp add --transport http gh https://" + MCP_HOST + "/mcp "
              "--header \"Authorization: Bearer $MCP_TOKEN\" >/dev/null && "
              "claude -p 'Read issue 7, then open an issue.' "
              "--allowedTools mcp__gh__get_issue,mcp__gh__create_issue")


def policy_with_mcp() -> str:
    """The embedded default policy (Claude Code's hosts and key) plus the MCP server's rule and
    token: one layer (another layer would only narrow the default)."""
    p = subprocess.run([BROKER_BIN, "policy", "default"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert text.count('"allow": [') == 1 and text.count('"credentials": {') == 1
    text = text.replace('"allow": [', '"allow": [' + json.dumps(RULE) + ",", 1)
    return text.replace('"credentials": {',
                        '"credentials": {"mcp": ' + json.dumps(CREDENTIAL) + ",", 1)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("mcp-agents-pki"), HOSTS + [MCP_HOST])


def test_claude_code_calls_an_mcp_tool_and_gets_the_refusal_of_another(tmp_path, pki):
    sdk_installed()
    missing = agent_run.missing_agents()
    assert "claude" not in missing, "Claude Code is not installed: run scripts/install-agents.sh"
    fake = fake_apis.FakeApis(pki.leaf_cert, pki.leaf_key, tool_call=CALLS)
    fake.accept("anthropic_key", ANTHROPIC_KEY)
    server = McpServer(tmp_path / "mcp-server", pki, MCP_TOKEN)
    sessions = agent_run.AgentSessions(BROKER_BIN, tmp_path, pki.ca_cert, fake.port, HOSTS)
    try:
        run = sessions.run("claude-mcp", ["sh", "-c", CLAUDE_MCP],
                           env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "MCP_TOKEN": MCP_TOKEN},
                           policies=[policy_with_mcp()], timeout=120,
                           extra_args=["--connect-to", f"{MCP_HOST}:443:127.0.0.1:{server.port}"])
        served = server.requests()
    finally:
        server.close()
        sessions.close()
        fake.close()
    assert run.returncode == 0, run.describe()
    assert fake_apis.ANSWER in run.out, run.describe()
    # The allowed call reached the server with the real token; the refused one never did.
    calls = [t for q in served for t in q.get("tools") or []]
    assert calls == ["get_issue"], served
    assert all(q["authorization"] == f"Bearer {MCP_TOKEN}" for q in served), served
    # Claude Code handed the broker's refusal to the model as the tool's error.
    turns = [json.loads(r["body"]) for r in fake.model_requests() if r.get("body")]
    last = json.dumps(turns[-1])
    assert "mcp_tool_denied" in last or "arguments outside" in last, last[-3000:]
    # Both calls are in the session's log.
    mcp = [(q["mcp"].get("tool"), q.get("error")) for q in run.records()
           if (q.get("mcp") or {}).get("method") == "tools/call"]
    assert mcp == [("get_issue", None), ("create_issue", "mcp_tool_denied")], mcp
    for what in (run.broker_written(), run.child_files()):
        bad = agent_run.leaks(what, [ANTHROPIC_KEY, MCP_TOKEN])
        assert not bad, f"a real value written: {bad}\n{run.describe()}"
