"""The agents' own variables in the embedded default policy (docs/agents.md): with no policy written,
`broker wrap` gives Codex's CODEX_API_KEY, Claude Code's ANTHROPIC_AUTH_TOKEN and
CLAUDE_CODE_OAUTH_TOKEN, and Gemini CLI's GEMINI_API_KEY / GOOGLE_API_KEY to the child as dummies
and swaps them in the header (or query parameter) each agent sends, on its API host only.

The API hosts are a local HTTPS upstream reached with --connect-to; the child's request is curl,
sending the variable the way the agent does.
"""

import json
import subprocess

import pytest

from conftest import BROKER_BIN, clean_env
from test_wrap import assert_clean

CODEX = "sk-proj-" + "C0dexRealKeyAbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
AUTH_TOKEN = "sk-ant-api03-" + "AuthT0kenRealAbCdEfGhIjKlMnOpQrStUvWxYz0123"
OAUTH = "sk-ant-oat01-" + "0authRealAbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
GEMINI = "AIzaSy" + "GeminiRealKeyAbCdEfGhIjKlMnOpQrSt1"
GOOGLE = "AIzaSy" + "GoogleRealKeyAbCdEfGhIjKlMnOpQrSt2"
GEN = "generativelanguage.googleapis.com"

CASES = [
    # variable, real value, host, what curl sends, where the upstream must see the real value
    ("CODEX_API_KEY", CODEX, "api.openai.com", '-H "Authorization: Bearer $V"', "Authorization",
     "Bearer {}"),
    ("ANTHROPIC_AUTH_TOKEN", AUTH_TOKEN, "api.anthropic.com", '-H "Authorization: Bearer $V"',
     "Authorization", "Bearer {}"),
    ("CLAUDE_CODE_OAUTH_TOKEN", OAUTH, "api.anthropic.com", '-H "Authorization: Bearer $V"',
     "Authorization", "Bearer {}"),
    ("GEMINI_API_KEY", GEMINI, GEN, '-H "x-goog-api-key: $V"', "x-goog-api-key", "{}"),
    ("GOOGLE_API_KEY", GOOGLE, GEN, '-G --data-urlencode "key=$V"', "query", "key={}"),
]


@pytest.mark.parametrize("variable,real,host,sends,where,form", CASES,
                         ids=[c[0] for c in CASES])
def test_the_default_policy_brokers_the_agents_variables(tmp_path, pki, tls_upstream, variable,
                                                         real, host, sends, where, form):
    home = tmp_path / "home"
    home.mkdir()
    script = (f'V="${variable}"; echo "child:$V"; '
              f'curl -sS --max-time 10 -o /dev/null -w "status:%{{http_code}}\\n" {sends} '
              f'https://{host}/v1/probe')
    env = clean_env({"HOME": str(home), variable: real, "XDG_RUNTIME_DIR": str(tmp_path)})
    argv = [BROKER_BIN, "wrap", "--upstream-ca", str(pki.ca_cert), "--log-dir",
            str(tmp_path / "logs"), "--connect-to", f"{host}:443:127.0.0.1:{tls_upstream.port}",
            "--", "sh", "-c", script]
    p = subprocess.run(argv, env=env, capture_output=True, timeout=60, cwd=tmp_path)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 0 and "status:200" in out, f"{out}\n{err}"
    assert f"brokered {variable}" in err, err
    dummy = out.split("child:")[1].split()[0]
    assert dummy and dummy != real and len(dummy) == len(real), dummy
    [seen] = [q for q in tls_upstream.requests if q["path"].startswith("/v1/probe")]
    if where == "query":
        assert seen["path"] == "/v1/probe?" + form.format(real), seen["path"]
    else:
        assert seen["headers"].get(where) == form.format(real), seen["headers"]
    assert_clean(p.stdout + p.stderr, "wrap output", real)
    for log in (tmp_path / "logs").glob("*.jsonl"):
        assert_clean(log.read_bytes(), "audit log", real)
        records = [json.loads(x) for x in log.read_text().splitlines()]
        assert any(r.get("credential") for r in records if r["event"] == "request"), records


def test_the_agents_telemetry_on_their_api_hosts_is_denied(tmp_path, pki, tls_upstream):
    """Claude Code's event logging shares api.anthropic.com with its model API: the default policy
    denies that path (and Codex's analytics on chatgpt.com), so no real key goes along with it,
    while the model API on the same host works."""
    home = tmp_path / "home"
    home.mkdir()
    script = ('for u in https://api.anthropic.com/api/event_logging/v2/batch '
              'https://chatgpt.com/backend-api/codex/analytics-events/events '
              'https://api.anthropic.com/v1/messages; do '
              'curl -sS --max-time 10 -o /dev/null -w "%{http_code}\\n" -d "{}" '
              '-H "x-api-key: $ANTHROPIC_API_KEY" "$u"; done')
    env = clean_env({"HOME": str(home), "ANTHROPIC_API_KEY": AUTH_TOKEN,
                     "XDG_RUNTIME_DIR": str(tmp_path)})
    argv = [BROKER_BIN, "wrap", "--upstream-ca", str(pki.ca_cert), "--log-dir",
            str(tmp_path / "logs"),
            "--connect-to", f"api.anthropic.com:443:127.0.0.1:{tls_upstream.port}",
            "--connect-to", f"chatgpt.com:443:127.0.0.1:{tls_upstream.port}",
            "--", "sh", "-c", script]
    p = subprocess.run(argv, env=env, capture_output=True, timeout=60, cwd=tmp_path)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 0 and out.split() == ["403", "403", "200"], f"{out}\n{err}"
    assert [q["path"] for q in tls_upstream.requests] == ["/v1/messages"]
    [log] = (tmp_path / "logs").glob("*.jsonl")
    refused = [json.loads(x) for x in log.read_text().splitlines()]
    refused = [r for r in refused if r.get("error") == "policy_denied"]
    assert len(refused) == 2, refused
