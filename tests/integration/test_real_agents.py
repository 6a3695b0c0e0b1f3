"""The REAL agents inside `broker wrap` with no policy written (the embedded default, docs/agents.md):
OpenAI Codex CLI, Claude Code and Gemini CLI, at the versions scripts/install-agents.sh pins,
each running one turn, fully offline, against local fakes of their APIs (tests/agents/).

The agents use their real host names (api.openai.com, api.anthropic.com,
generativelanguage.googleapis.com, ...): broker's `--connect-to HOST:443:127.0.0.1:PORT` and
`--upstream-ca` steer every one of them to one local TLS server, whose fakes accept ONLY the real
credential values (401 otherwise) and return usage so that broker meters llm_tokens. Each test
checks that the agent finished its turn (exit 0, the fake's answer in its output), that the fake
got the real value while the child only ever held a dummy (its environment, its output and every
file it wrote), that no byte the broker wrote (audit log, stdout/stderr, runtime files) holds a
real value, and what the audit log recorded.

The login files (docs/agents.md) are tested the same way: the child sees a dummy copy of the agent's
login file, the refresh goes to a fake token endpoint that rotates refresh tokens and refuses
reuse, the real file outside ends up holding the rotated login, and the child's refresh token
sent to another host is refused.

Without the agents installed every test fails, saying to run scripts/install-agents.sh
(BROKER_SKIP_AGENTS=1 skips them instead, for a quick local run).
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from conftest import BROKER_BIN, make_pki  # noqa: E402
import agent_run  # noqa: E402
import fake_apis  # noqa: E402
import fake_oauth  # noqa: E402

# Real values (what the user's environment or login files hold). Shapes as the real ones.
CODEX_KEY = "sk-proj-" + "C0dexRealAgentKeyAbCdEfGhIjKlMnOpQrStUvWxYz0123456789_ab-CdEf"
OPENAI_KEY = "sk-proj-" + "0penAIRealAgentKeyAbCdEfGhIjKlMnOpQrStUvWxYz0123456789_ab-Cd"
ANTHROPIC_KEY = ("sk-ant-api03-" + "AnthropicRealAgentKeyAbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
                 "AbCdEfGhIjKlMnOpQrStUvWxYz01234567-AbCdEfAA")
GEMINI_KEY = "AIzaSy" + "GeminiRealAgentKeyAbCdEfGhIjKlMnO"
assert len(GEMINI_KEY) == 39

OPENAI, ANTHROPIC, GEN = "api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com"
# An allowed host bound to none of the agents' credentials (a dummy sent there is caught).
ELSEWHERE = "api.github.com"
HOSTS = list(dict.fromkeys(fake_apis.HOSTS + [ELSEWHERE]))  # (fake_apis.HOSTS has it too)
TOKENS = fake_apis.INPUT_TOKENS + fake_apis.OUTPUT_TOKENS  # what one answer of a fake costs
RUN_TIMEOUT = 60

# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _agents_installed():
    missing = agent_run.missing_agents()
    if missing:
        msg = (f"the real agents are not installed in {agent_run.AGENTS_DIR} (missing: "
               f"{', '.join(missing)}): run scripts/install-agents.sh (or set BROKER_AGENTS_DIR)")
        if os.environ.get("BROKER_SKIP_AGENTS") == "1":
            pytest.skip(msg + "; skipped because BROKER_SKIP_AGENTS=1")
        pytest.fail(msg, pytrace=False)


@pytest.fixture(scope="module")
def agents_pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("agents-pki"), HOSTS)


@pytest.fixture
def make_fake(agents_pki):
    made = []

    def make(**kw):
        f = fake_apis.FakeApis(agents_pki.leaf_cert, agents_pki.leaf_key, **kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


@pytest.fixture
def sessions(tmp_path, agents_pki):
    made = []

    def make(fake):
        made.append(agent_run.AgentSessions(BROKER_BIN, tmp_path, agents_pki.ca_cert, fake.port,
                                            HOSTS))
        return made[-1]

    yield make
    for s in made:
        s.close()


def default_policy() -> str:
    p = subprocess.run([BROKER_BIN, "policy", "default"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def budget_layers(llm_tokens):
    """The embedded default plus a layer of budgets only (docs/policy.md: a --policy replaces the
    default, and every layer narrows; this one only adds the budget)."""
    return [default_policy(),
            {"version": 1, "budgets": {"llm_tokens": llm_tokens, "on_exhaust": "kill"}}]


# --------------------------------------------------------------------------------------------
# Commands and checks
# --------------------------------------------------------------------------------------------

CODEX = ["codex", "exec", "--skip-git-repo-check", "--color", "never", "Say the magic word."]
CLAUDE = ["claude", "-p", "Say the magic word."]
GEMINI = ["gemini", "--skip-trust", "-p", "Say the magic word."]
GEMINI_NO_ROUTER = ["gemini", "--skip-trust", "-m", "gemini-2.5-flash", "-p",
                    "Say the magic word."]


def with_env_dump(cmd, before=""):
    """`cmd` run by sh after writing the child's environment to child.env in its workspace (and running
    `before`), keeping the agent's exit status."""
    return ["sh", "-c", f'env > "$PWD/child.env"; {before} exec "$@"', "sh", *cmd]


def child_env(run) -> dict:
    path = run.work / "child.env"
    assert path.exists(), f"the child wrote no environment\n{run.describe()}"
    out = {}
    for line in path.read_text().splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def assert_no_leaks(run, reals, skip_files=()):
    bad = agent_run.leaks(run.broker_written(), reals)
    assert not bad, f"a real value in what the broker wrote: {bad}\n{run.describe()}"
    bad = agent_run.leaks(run.child_files(skip=skip_files), reals)
    assert not bad, f"a real value in a file the child wrote: {bad}\n{run.describe()}"


def assert_turn_done(run, fake):
    assert run.returncode == 0, run.describe()
    assert fake_apis.ANSWER in run.out, run.describe()


def assert_dummy_in_env(run, variable, real):
    env = child_env(run)
    dummy = env.get(variable)
    assert dummy and dummy != real and len(dummy) == len(real), \
        f"{variable} inside: {dummy!r}\n{run.describe()}"
    assert f"brokered {variable}" in run.err, run.err
    return dummy


def answered(fake, host, prefix):
    return [r for r in fake.requests(host, prefix) if r["status"] in (101, 200)]


def audit_requests(run, host, path_prefix, method=None):
    return [r for r in run.requests(host) if (r.get("path") or "").startswith(path_prefix)
            and (method is None or r.get("method") == method)]


def assert_telemetry_denied(run, where):
    """Every attempt at telemetry is refused by the default policy; `where` holds host names
    and (host, path prefix) pairs. Returns the attempts."""
    def is_telemetry(r):
        for w in where:
            host, prefix = (w, "") if isinstance(w, str) else w
            if r.get("host") == host and (r.get("path") or "").startswith(prefix):
                return True
        return False
    tried = [r for r in run.records() if r.get("event") in ("request", "refused")
             and is_telemetry(r)]
    assert all(r.get("decision") == "deny" for r in tried), \
        [(r.get("host"), r.get("path"), r.get("decision")) for r in tried]
    return tried


# Codex's OTLP metrics and its analytics events.
CODEX_TELEMETRY = {"ab.chatgpt.com", ("chatgpt.com", "/backend-api/codex/analytics-events")}


# --------------------------------------------------------------------------------------------
# The official SDKs and Node's fetch, which ignore the proxy variables (transparent capture)
# --------------------------------------------------------------------------------------------

GITHUB_KEY = "ghp_" + "SdkCaptureRealGithubToken0123456789A"
assert len(GITHUB_KEY) == 40
SDK_DIR = agent_run.AGENTS_DIR / "sdk"
SDK_CALL = Path(__file__).resolve().parent.parent / "agents" / "sdk_call.mjs"


def test_node_fetch_and_the_official_sdks_work_unmodified_through_capture(make_fake, sessions):
    """Node 20's fetch ignores HTTPS_PROXY, and so do the SDKs built on it: each call is
    captured (docs/architecture.md), gets its real key swapped in, and is audited as captured."""
    assert (SDK_DIR / "node_modules" / "openai").is_dir(), \
        f"the SDKs are not installed in {SDK_DIR}: run scripts/install-agents.sh"
    fake = make_fake()
    fake.accept("github", GITHUB_KEY)
    fake.accept("openai", OPENAI_KEY)
    fake.accept("anthropic_bearer", ANTHROPIC_KEY)
    s = sessions(fake)
    # The script goes into the command's working directory: a checkout under /tmp is not
    # visible inside (the child's /tmp is its own).
    work = s.prepare("sdks")[-1]
    shutil.copy(SDK_CALL, work / "sdk_call.mjs")
    shutil.copy(SDK_CALL.parent / "prefix_import.mjs", work / "prefix_import.mjs")
    run = s.run(
        "sdks", with_env_dump(["sh", "-c", 'for k in fetch openai anthropic octokit; do '
                                           'node ./sdk_call.mjs $k; done']),
        env={"GITHUB_TOKEN": GITHUB_KEY, "OPENAI_API_KEY": OPENAI_KEY,
             "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "BROKER_SDK_DIR": str(SDK_DIR)})
    assert run.returncode == 0, run.describe()
    calls = {c["kind"]: c for c in map(json.loads, (l for l in run.out.splitlines()
                                                    if l.startswith("{")))}
    assert set(calls) == {"fetch", "openai", "anthropic", "octokit"}, run.describe()
    assert all(c["ok"] and c["status"] == 200 for c in calls.values()), calls
    assert calls["openai"]["text"] == fake_apis.ANSWER, calls
    assert calls["anthropic"]["text"] == fake_apis.ANSWER, calls
    assert calls["octokit"]["text"] == "octocat-fake", calls
    env = child_env(run)
    for variable, real in (("GITHUB_TOKEN", GITHUB_KEY), ("OPENAI_API_KEY", OPENAI_KEY),
                           ("ANTHROPIC_API_KEY", ANTHROPIC_KEY)):
        assert env.get(variable) and env[variable] != real, variable
    # Each reached the broker by capture, not through the proxy variables.
    for host in ("api.github.com", OPENAI, ANTHROPIC):
        recs = [r for r in run.requests(host) if r.get("status") == 200]
        assert recs and all(r.get("captured") for r in recs), (host, run.requests(host))
    assert_no_leaks(run, [GITHUB_KEY, OPENAI_KEY, ANTHROPIC_KEY])


# --------------------------------------------------------------------------------------------
# API keys
# --------------------------------------------------------------------------------------------


def test_codex_exec_with_codex_api_key_over_its_websocket(make_fake, sessions):
    fake = make_fake()
    fake.accept("openai", CODEX_KEY)
    run = sessions(fake).run("codex-ws", with_env_dump(CODEX), env={"CODEX_API_KEY": CODEX_KEY},
                             timeout=RUN_TIMEOUT)
    assert_turn_done(run, fake)
    dummy = assert_dummy_in_env(run, "CODEX_API_KEY", CODEX_KEY)
    [ws] = answered(fake, OPENAI, "/v1/responses")
    assert ws["status"] == 101 and ws["headers"]["authorization"] == f"Bearer {CODEX_KEY}", ws
    assert any('"response.create"' in m for m in ws["ws_in"]), ws["ws_in"]
    assert not any(dummy in m for m in ws["ws_in"]), "the dummy went up in a message"
    [rec] = [r for r in audit_requests(run, OPENAI, "/v1/responses", "GET") if r["status"] == 101]
    assert rec["credential"] == "codex" and rec["decision"] == "allow", rec
    # The OTLP metrics (ab.chatgpt.com, at exit) and analytics events are refused; the turn
    # does not need them.
    assert_telemetry_denied(run, CODEX_TELEMETRY)
    assert_no_leaks(run, [CODEX_KEY])


def test_codex_exec_with_codex_api_key_over_http_when_the_websocket_is_refused(make_fake,
                                                                               sessions):
    fake = make_fake(ws="refuse")
    fake.accept("openai", CODEX_KEY)
    run = sessions(fake).run("codex-http", with_env_dump(CODEX),
                             env={"CODEX_API_KEY": CODEX_KEY}, timeout=RUN_TIMEOUT)
    assert_turn_done(run, fake)
    assert_dummy_in_env(run, "CODEX_API_KEY", CODEX_KEY)
    [post] = [r for r in answered(fake, OPENAI, "/v1/responses") if r["method"] == "POST"]
    assert post["headers"]["authorization"] == f"Bearer {CODEX_KEY}"
    assert post.json()["stream"] is True
    [rec] = [r for r in audit_requests(run, OPENAI, "/v1/responses", "POST")
             if r["status"] == 200]
    assert rec["credential"] == "codex" and rec["llm_tokens"] == TOKENS, rec
    assert_telemetry_denied(run, CODEX_TELEMETRY)
    assert_no_leaks(run, [CODEX_KEY])
    # Its session's transcript and its threads went through to the home, nothing was named
    # kept out; the next session finds them (docs/security-model.md).
    codex = run.home / ".codex"
    assert list((codex / "sessions").rglob("rollout-*.jsonl")), run.describe()
    assert list(codex.glob("state_*.sqlite")), sorted(p.name for p in codex.iterdir())
    assert "kept out" not in run.err, run.err
    again = sessions(fake).run("codex-http", CODEX, env={"CODEX_API_KEY": CODEX_KEY},
                               timeout=RUN_TIMEOUT)
    assert_turn_done(again, fake)
    assert "kept out" not in again.err, again.err
    assert len(list((codex / "sessions").rglob("rollout-*.jsonl"))) == 2


def test_codex_with_openai_api_key_logged_in_from_the_dummy(make_fake, sessions):
    """`codex exec` 0.171 does not read OPENAI_API_KEY from the environment (only CODEX_API_KEY);
    the documented way is `codex login --with-api-key` from stdin, which here stores the
    session's dummy in ~/.codex/auth.json: broker swaps it on api.openai.com. The file holds a
    dummy, so it stays with broker's sessions (~/.config/broker/agent-files), never in the home
    where Codex outside broker would send the dummy."""
    fake = make_fake(ws="refuse")
    fake.accept("openai", OPENAI_KEY)
    login = 'printenv OPENAI_API_KEY | codex login --with-api-key >/dev/null 2>&1 || exit 90;'
    run = sessions(fake).run("codex-openai", with_env_dump(CODEX, before=login),
                             env={"OPENAI_API_KEY": OPENAI_KEY}, timeout=RUN_TIMEOUT)
    assert_turn_done(run, fake)
    dummy = assert_dummy_in_env(run, "OPENAI_API_KEY", OPENAI_KEY)
    assert not (run.home / ".codex" / "auth.json").exists()
    kept = run.home / ".config" / "broker" / "agent-files" / ".codex" / "auth.json"
    stored = json.loads(kept.read_text())
    assert stored.get("OPENAI_API_KEY") == dummy, stored.keys()
    assert (kept.stat().st_mode & 0o777) == 0o600
    [post] = [r for r in answered(fake, OPENAI, "/v1/responses") if r["method"] == "POST"]
    assert post["headers"]["authorization"] == f"Bearer {OPENAI_KEY}"
    [rec] = [r for r in audit_requests(run, OPENAI, "/v1/responses", "POST")
             if r["status"] == 200]
    assert rec["credential"] == "openai" and rec["llm_tokens"] == TOKENS, rec
    assert_no_leaks(run, [OPENAI_KEY])


def test_claude_p_with_anthropic_api_key(make_fake, sessions):
    fake = make_fake()
    fake.accept("anthropic_key", ANTHROPIC_KEY)
    run = sessions(fake).run("claude-key", with_env_dump(CLAUDE),
                             env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY}, timeout=RUN_TIMEOUT)
    assert_turn_done(run, fake)
    assert_dummy_in_env(run, "ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    msgs = [r for r in answered(fake, ANTHROPIC, "/v1/messages") if r["path"] == "/v1/messages"]
    assert msgs and all(r["headers"]["x-api-key"] == ANTHROPIC_KEY for r in msgs), msgs
    recs = [r for r in audit_requests(run, ANTHROPIC, "/v1/messages", "POST")
            if r["status"] == 200]
    assert recs and all(r["credential"] == "anthropic" for r in recs), recs
    assert any(r["llm_tokens"] == TOKENS for r in recs), recs
    assert_no_leaks(run, [ANTHROPIC_KEY])


def test_claude_telemetry_on_its_api_host_is_denied(make_fake, sessions):
    fake = make_fake()
    fake.accept("anthropic_key", ANTHROPIC_KEY)
    run = sessions(fake).run("claude-telemetry", CLAUDE, env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY},
                             timeout=RUN_TIMEOUT)
    assert_turn_done(run, fake)
    # Claude's event logging is on its API host: the default policy refuses that path there
    # (the real key is never swapped into it) and the turn does not care.
    assert assert_telemetry_denied(run, {(ANTHROPIC, "/api/event_logging")}), run.describe()
    assert not fake.requests(ANTHROPIC, "/api/event_logging")


def test_gemini_p_with_gemini_api_key(make_fake, sessions):
    fake = make_fake()
    fake.accept("gemini_key", GEMINI_KEY)
    run = sessions(fake).run("gemini-key", with_env_dump(GEMINI),
                             env={"GEMINI_API_KEY": GEMINI_KEY}, timeout=RUN_TIMEOUT)
    assert_turn_done(run, fake)
    assert_dummy_in_env(run, "GEMINI_API_KEY", GEMINI_KEY)
    calls = answered(fake, GEN, "/v1beta/models/")
    assert calls and all(r["headers"].get("x-goog-api-key") == GEMINI_KEY for r in calls), calls
    stream = [r for r in audit_requests(run, GEN, "/v1beta/models/", "POST")
              if ":streamGenerateContent" in r["path"] and r["status"] == 200]
    assert stream and stream[-1]["credential"] == "gemini", stream
    assert stream[-1]["llm_tokens"] == TOKENS, stream
    # Clearcut telemetry (play.googleapis.com/log) is tried and refused; the turn does not care.
    assert assert_telemetry_denied(run, {"play.googleapis.com"}), run.describe()
    assert_no_leaks(run, [GEMINI_KEY])


# --------------------------------------------------------------------------------------------
# Budgets: a layer of llm_tokens on top of the default stops the agent at its next request
# --------------------------------------------------------------------------------------------


def assert_stopped_by_budget(run, model_records):
    """The first answer was metered past the budget and the agent got no further: wrap ends the
    session (on_exhaust: kill) as soon as it sees the budget spent (exit 137, one line on
    stderr), or, when the agent is quicker, its next model request is refused with 429
    budget_exhausted and it gives up (a non-zero exit)."""
    metered = [r for r in model_records if r.get("llm_tokens")]
    assert len(metered) == 1 and metered[0]["llm_tokens"] == TOKENS, run.describe()
    assert run.returncode not in (0, None), run.describe()
    refused = [r for r in model_records if r.get("error") == "budget_exhausted"]
    if run.returncode == 137:
        assert "ended: the llm_tokens budget is spent" in run.err, run.err
    else:
        assert refused and all(r["status"] == 429 for r in refused), run.describe()
    end = [r for r in run.records() if r.get("event") == "session_end"]
    assert len(end) == 1 and end[0]["exit"] == run.returncode, end


def test_gemini_streaming_answer_spends_the_llm_tokens_budget(make_fake, sessions):
    fake = make_fake(tool_call=True)
    fake.accept("gemini_key", GEMINI_KEY)
    run = sessions(fake).run("gemini-budget", GEMINI_NO_ROUTER, env={"GEMINI_API_KEY": GEMINI_KEY},
                             policies=budget_layers(TOKENS - 200), timeout=RUN_TIMEOUT)
    streams = [r for r in audit_requests(run, GEN, "/v1beta/models/", "POST")
               if ":streamGenerateContent" in r["path"]]
    assert_stopped_by_budget(run, streams)
    # One answer reached the agent (a tool call); the request carrying its result did not leave.
    assert len(answered(fake, GEN, "/v1beta/models/")) == 1, run.describe()
    assert_no_leaks(run, [GEMINI_KEY])


def test_codex_http_answer_spends_the_llm_tokens_budget(make_fake, sessions):
    fake = make_fake(ws="refuse", tool_call=True)
    fake.accept("openai", CODEX_KEY)
    run = sessions(fake).run("codex-budget-http", CODEX, env={"CODEX_API_KEY": CODEX_KEY},
                             policies=budget_layers(TOKENS - 200), timeout=RUN_TIMEOUT)
    assert_stopped_by_budget(run, audit_requests(run, OPENAI, "/v1/responses", "POST"))
    assert len([r for r in answered(fake, OPENAI, "/v1/responses")
                if r["method"] == "POST"]) == 1, run.describe()
    assert_no_leaks(run, [CODEX_KEY])


def test_codex_websocket_usage_is_metered(make_fake, sessions):
    fake = make_fake()
    fake.accept("openai", CODEX_KEY)
    run = sessions(fake).run("codex-ws-meter", CODEX, env={"CODEX_API_KEY": CODEX_KEY},
                             timeout=RUN_TIMEOUT)
    assert_turn_done(run, fake)
    [ws] = answered(fake, OPENAI, "/v1/responses")
    assert ws["status"] == 101
    # The prewarm (input tokens only) and the turn: both response.completed usages counted.
    expected = fake_apis.INPUT_TOKENS + TOKENS
    total = sum(r.get("llm_tokens") or 0 for r in run.requests(OPENAI))
    assert total == expected, run.describe()


def test_codex_websocket_answer_spends_the_llm_tokens_budget(make_fake, sessions):
    fake = make_fake(tool_call=True)
    fake.accept("openai", CODEX_KEY)
    run = sessions(fake).run("codex-budget-ws", CODEX, env={"CODEX_API_KEY": CODEX_KEY},
                             policies=budget_layers(TOKENS + fake_apis.INPUT_TOKENS - 200),
                             timeout=RUN_TIMEOUT)
    # docs/security-model.md: the usage of each response.completed is metered; once the budget is spent the
    # next response.create is refused (an error event and close 1008) and audited, or wrap ends
    # the session first (on_exhaust kill).
    assert run.returncode not in (0, None), run.describe()
    if run.returncode == 137:
        assert "ended: the llm_tokens budget is spent" in run.err, run.err
    else:
        assert any(r.get("error") == "budget_exhausted" for r in run.records()), run.describe()
    [ws] = answered(fake, OPENAI, "/v1/responses")
    creates = [m for m in ws["ws_in"] if '"response.create"' in m]
    assert len(creates) == 2, creates  # the prewarm and the turn; not the tool result
    assert sum(r.get("llm_tokens") or 0 for r in run.requests(OPENAI)) >= TOKENS, run.describe()
    assert_no_leaks(run, [CODEX_KEY])


# --------------------------------------------------------------------------------------------
# Login files (docs/agents.md): a dummy copy inside, refresh brokered, rotated tokens written back
# --------------------------------------------------------------------------------------------


def login_cmd(agent_cmd, login_file, token_field):
    """sh: copy the child's view of its login file to ./child-view.json, run the agent, then
    send the refresh token the child sees to ELSEWHERE (a host it is not bound to) and print
    `elsewhere: STATUS ERROR`; exit with the agent's status."""
    extract = ("import json,sys; d=json.load(open(sys.argv[1])); "
               f"print(eval('d' + sys.argv[2]))")
    script = f"""
cp "$HOME/{login_file}" "$PWD/child-view.json"
"$@"; rc=$?
cp "$HOME/{login_file}" "$PWD/child-view-after.json"
t=$(python3 -c {shlex.quote(extract)} "$PWD/child-view.json" {shlex.quote(token_field)})
curl -sS -o /dev/null -D "$PWD/elsewhere.head" --max-time 10 -X POST \\
  -H "Authorization: Bearer $t" https://{ELSEWHERE}/oauth/token -d "refresh_token=$t"
printf 'elsewhere: %s\\n' "$(grep '^HTTP/' "$PWD/elsewhere.head" | tail -1)"
grep -i '^x-broker-error' "$PWD/elsewhere.head"
exit $rc
"""
    return ["sh", "-c", script, "sh", *agent_cmd]


def assert_login_session(run, fake, ep, real_file, reals, read_refresh, read_access):
    assert_turn_done(run, fake)
    # The token endpoint got the REAL refresh token, once, and rotated it.
    ok = [q for q in ep.requests if q["ok"]]
    assert len(ok) == 1 and len(ep.requests) == 1, ep.requests
    # The real file outside holds the rotated real tokens (the user's login survives).
    doc = json.loads(real_file.read_text())
    access, refresh = ep.issued[-1]
    assert read_refresh(doc) == refresh == ep.live, doc
    assert read_access(doc) == access
    # Inside: same structure, every secret a dummy.
    view = json.loads((run.work / "child-view.json").read_text())
    assert read_refresh(view) not in reals and read_refresh(view), view
    bad = agent_run.leaks([(str(run.work / f), (run.work / f).read_bytes())
                           for f in ("child-view.json", "child-view-after.json")], reals)
    assert not bad, bad
    # The child's refresh token sent to another host is caught.
    assert "x-broker-error: credential_not_bound" in run.out.lower(), run.describe()
    assert " 403" in run.out.split("elsewhere:")[1].splitlines()[0], run.describe()
    assert_no_leaks(run, reals + [a for a, _ in ep.issued] + [r for _, r in ep.issued if r],
                    skip_files=[real_file])


def test_codex_login_file_with_an_api_key(make_fake, sessions):
    fake = make_fake(ws="refuse")
    fake.accept("openai", OPENAI_KEY)
    s = sessions(fake)
    _, home, *_ = s.prepare("codex-authjson-key")
    real_file = home / ".codex" / "auth.json"
    real_file.parent.mkdir()
    real_file.write_text(json.dumps({"OPENAI_API_KEY": OPENAI_KEY, "tokens": None,
                                     "last_refresh": None}))
    script = 'cp "$HOME/.codex/auth.json" "$PWD/child-view.json"; exec "$@"'
    run = s.run("codex-authjson-key", ["sh", "-c", script, "sh", *CODEX], timeout=RUN_TIMEOUT)
    assert_turn_done(run, fake)
    view = json.loads((run.work / "child-view.json").read_text())
    dummy = view["OPENAI_API_KEY"]
    assert dummy != OPENAI_KEY and len(dummy) == len(OPENAI_KEY) and dummy[:8] == "sk-proj-"
    [post] = [r for r in answered(fake, OPENAI, "/v1/responses") if r["method"] == "POST"]
    assert post["headers"]["authorization"] == f"Bearer {OPENAI_KEY}"
    assert json.loads(real_file.read_text())["OPENAI_API_KEY"] == OPENAI_KEY
    assert_no_leaks(run, [OPENAI_KEY], skip_files=[real_file])


def codex_chatgpt_login(fake, s, name, refresh, expires_in):
    """A ChatGPT login in the home of session `name`: ~/.codex/auth.json with tokens that expire
    in `expires_in` seconds (the fake takes the access token until then), redeemed at a fake
    auth.openai.com. Returns (token endpoint, the real file, id token, access token)."""
    ep = fake_oauth.TokenEndpoint("openai", refresh, fake_oauth.CODEX_CLIENT_ID,
                                  on_access=lambda t: fake.accept("chatgpt", t),
                                  account_id=fake.chatgpt_account_id)
    fake.add_token_endpoint("auth.openai.com", ep)
    _, home, *_ = s.prepare(name)
    id_token, access = fake_oauth.codex_tokens(fake.chatgpt_account_id, expires_in=expires_in)
    real_file = home / ".codex" / "auth.json"
    real_file.parent.mkdir()
    real_file.write_text(json.dumps({
        "OPENAI_API_KEY": None, "last_refresh": "2026-01-01T00:00:00Z",
        "tokens": {"id_token": id_token, "access_token": access, "refresh_token": refresh,
                   "account_id": fake.chatgpt_account_id}}))
    if expires_in > 0:
        fake.accept("chatgpt", access)
    return ep, real_file, id_token, access


def test_codex_chatgpt_login_refreshes_through_the_broker(make_fake, sessions):
    fake = make_fake(ws="refuse")
    old_refresh = "rt_" + "C0dexRealRefreshTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-ab"
    s = sessions(fake)
    ep, real_file, id_token, access = codex_chatgpt_login(fake, s, "codex-chatgpt", old_refresh,
                                                          expires_in=-3600)
    run = s.run("codex-chatgpt", login_cmd(CODEX, ".codex/auth.json", "['tokens']['refresh_token']"),
                timeout=RUN_TIMEOUT)
    assert_login_session(run, fake, ep, real_file, [old_refresh, access, id_token],
                         lambda d: d["tokens"]["refresh_token"],
                         lambda d: d["tokens"]["access_token"])
    calls = answered(fake, "chatgpt.com", "/backend-api/codex/responses")
    assert calls and all(r["headers"]["authorization"] == f"Bearer {ep.issued[-1][0]}"
                         for r in calls), calls
    # Its turns are zstd-compressed (searched through their decoding, docs/security-model.md) and reach
    # the fake as Codex sent them.
    assert all(r["headers"].get("content-encoding") == "zstd" for r in calls), calls


def test_codex_chatgpt_turn_carrying_a_foreign_dummy_is_refused(make_fake, sessions):
    """Codex signed in with ChatGPT zstd-compresses its turns: a turn whose prompt carries the
    GitHub token's dummy (bound to GitHub's hosts only) is found through the coding and refused
    before it reaches chatgpt.com (docs/security-model.md)."""
    fake = make_fake(ws="refuse")
    refresh = "rt_" + "C0dexRealRefreshTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-cd"
    s = sessions(fake)
    _, real_file, id_token, access = codex_chatgpt_login(fake, s, "codex-chatgpt-canary", refresh,
                                                         expires_in=3600)
    script = ('printf %s "$GITHUB_TOKEN" > "$PWD/child-dummy"; '
              'exec "$@" "Remember this note: $GITHUB_TOKEN"')
    run = s.run("codex-chatgpt-canary", ["sh", "-c", script, "sh", *CODEX[:-1]],
                env={"GITHUB_TOKEN": GITHUB_KEY}, timeout=RUN_TIMEOUT)
    dummy = (run.work / "child-dummy").read_text()
    assert dummy.startswith("ghp_") and dummy != GITHUB_KEY, run.describe()
    blocked = [r for r in run.records() if r.get("event") == "exfiltration_blocked"
               and r.get("host") == "chatgpt.com" and r.get("credential") == "github"]
    assert blocked, run.describe()
    turns = fake.requests("chatgpt.com", "/backend-api/codex/responses")
    assert not any(dummy.encode() in r["body"] for r in turns), "the dummy reached chatgpt.com"
    assert_no_leaks(run, [GITHUB_KEY, refresh, access, id_token], skip_files=[real_file])


def claude_login(s, name, access, refresh, expires_in):
    """A Claude subscription login in the home of session `name`: ~/.claude/.credentials.json
    (0600) with tokens that expire in `expires_in` seconds. Returns the file."""
    _, home, *_ = s.prepare(name)
    real_file = home / ".claude" / ".credentials.json"
    real_file.parent.mkdir()
    real_file.write_text(json.dumps({"claudeAiOauth": {
        "accessToken": access, "refreshToken": refresh,
        "expiresAt": int((time.time() + expires_in) * 1000),
        "scopes": ["user:inference", "user:profile", "user:sessions:claude_code"],
        "subscriptionType": "max"}}))
    real_file.chmod(0o600)
    return real_file


def test_claude_oauth_login_refreshes_through_the_broker(make_fake, sessions):
    fake = make_fake()
    old_refresh = "sk-ant-ort01-" + "ClaudeRealRefreshTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-ab"
    old_access = "sk-ant-oat01-" + "ClaudeRealAccessTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abc"
    ep = fake_oauth.TokenEndpoint("anthropic", old_refresh, fake_oauth.CLAUDE_CLIENT_ID,
                                  on_access=lambda t: fake.accept("anthropic_bearer", t))
    fake.add_token_endpoint("platform.claude.com", ep)
    s = sessions(fake)
    # Expired: the refresh is forced.
    real_file = claude_login(s, "claude-oauth", old_access, old_refresh, expires_in=-3600)
    run = s.run("claude-oauth", login_cmd(CLAUDE, ".claude/.credentials.json",
                                          "['claudeAiOauth']['refreshToken']"),
                timeout=RUN_TIMEOUT)
    assert_login_session(run, fake, ep, real_file, [old_refresh, old_access],
                         lambda d: d["claudeAiOauth"]["refreshToken"],
                         lambda d: d["claudeAiOauth"]["accessToken"])
    msgs = [r for r in answered(fake, ANTHROPIC, "/v1/messages") if r["path"] == "/v1/messages"]
    assert msgs and all(r["headers"]["authorization"] == f"Bearer {ep.issued[-1][0]}"
                        for r in msgs), msgs


def test_gemini_oauth_login_refreshes_through_the_broker(make_fake, sessions):
    fake = make_fake()
    old_refresh = "1//0" + "GeminiRealRefreshTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcdefgh"
    old_access = "ya29." + "GeminiRealAccessTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcdefghij"
    ep = fake_oauth.TokenEndpoint("google", old_refresh, fake_oauth.GEMINI_CLIENT_ID,
                                  on_access=lambda t: fake.accept("google_bearer", t),
                                  rotate=True)
    fake.add_token_endpoint("oauth2.googleapis.com", ep)
    s = sessions(fake)
    _, home, *_ = s.prepare("gemini-oauth")
    real_file = home / ".gemini" / "oauth_creds.json"
    real_file.parent.mkdir()
    real_file.write_text(json.dumps({
        "access_token": old_access, "refresh_token": old_refresh, "token_type": "Bearer",
        "scope": "https://www.googleapis.com/auth/cloud-platform",
        "expiry_date": int((time.time() - 3600) * 1000)}))
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "oauth-personal"}}}))
    run = s.run("gemini-oauth", login_cmd(GEMINI, ".gemini/oauth_creds.json",
                                          "['refresh_token']"),
                timeout=RUN_TIMEOUT)
    assert_login_session(run, fake, ep, real_file, [old_refresh, old_access],
                         lambda d: d["refresh_token"], lambda d: d["access_token"])
    calls = answered(fake, "cloudcode-pa.googleapis.com", "/v1internal:streamGenerateContent")
    assert calls and all(r["headers"]["authorization"] == f"Bearer {ep.issued[-1][0]}"
                         for r in calls), calls


def test_claude_twice_at_once_keeps_both_sessions_state(make_fake, sessions):
    """Two `claude -p` in one home at the same time, each under its own `broker wrap`: each
    session's transcript survives, ~/.claude.json stays one JSON object (both merged), and
    nothing the agent wrote is kept out (it planted no command)."""
    import threading
    fake = make_fake()
    fake.accept("anthropic_key", ANTHROPIC_KEY)
    s = sessions(fake)
    runs = {}

    def one(i):
        runs[i] = s.run("claude-twice", CLAUDE, env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY},
                        timeout=RUN_TIMEOUT)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for run in runs.values():
        assert_turn_done(run, fake)
        assert "kept out" not in run.err, run.describe()
    home = runs[0].home
    transcripts = list((home / ".claude" / "projects").rglob("*.jsonl"))
    assert len(transcripts) >= 2, (transcripts, runs[0].describe())
    state = json.loads((home / ".claude.json").read_text())
    assert "userID" in state, state.keys()
    assert len({r["session"] for run in runs.values() for r in run.records()}) == 2
    assert_no_leaks(runs[0], [ANTHROPIC_KEY])


# --------------------------------------------------------------------------------------------
# Ask and approve (docs/policy.md): the agent's tool fetches a host the policy does not list; a
# person decides from another process while the agent waits
# --------------------------------------------------------------------------------------------

DOCS = "docs.agent.test"
FETCH_DOCS = f"curl -sS https://{DOCS}/guide"
# The agents' own sandboxes stand aside for broker's (Codex's would cut the tool off the
# network; Claude Code asks before running a tool in -p mode).
CODEX_TOOL = ["codex", "exec", "--skip-git-repo-check", "--color", "never", "--sandbox",
              "danger-full-access", "Fetch the guide."]
CLAUDE_TOOL = ["claude", "-p", "Fetch the guide.", "--allowedTools", "Bash"]


def tool_agent(fake, agent):
    """(command, environment, model host, real key) of Claude Code or Codex running one turn
    whose tool call `fake` asks for, `fake` accepting the agent's real key."""
    if agent == "claude":
        fake.accept("anthropic_key", ANTHROPIC_KEY)
        return CLAUDE_TOOL, {"ANTHROPIC_API_KEY": ANTHROPIC_KEY}, ANTHROPIC, ANTHROPIC_KEY
    fake.accept("openai", CODEX_KEY)
    return CODEX_TOOL, {"CODEX_API_KEY": CODEX_KEY}, OPENAI, CODEX_KEY


class AskedRun:
    """`broker wrap --ask -- agent` running in the background, its stderr read as it comes."""

    def __init__(self, s, name, cmd, env, extra_args=()):
        argv, self.env, work = s.command(name, cmd, env=env, policies=None,
                                         extra_args=["--ask", *extra_args])
        self.dir = s.prepare(name)[0]
        self.err_path = self.dir / "wrap.stderr"
        self.out_path = self.dir / "wrap.stdout"
        self.proc = subprocess.Popen(argv, env=self.env, cwd=work, stdin=subprocess.DEVNULL,
                                     stdout=open(self.out_path, "wb"),
                                     stderr=open(self.err_path, "wb"))
        self.name, self.argv, self.s = name, argv, s

    def ask_lines(self):
        return [l for l in self.err_path.read_text(errors="replace").splitlines()
                if l.startswith("broker: ask ")]

    def wait_ask(self, timeout=RUN_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ask_lines():
                return self.ask_lines()[0].split()[2].rstrip(":")
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.proc.kill()
        raise AssertionError(f"no ask; stderr={self.err_path.read_text(errors='replace')}")

    def broker(self, *args):
        return subprocess.run([BROKER_BIN, *args], capture_output=True, text=True, timeout=30,
                              env=self.env)

    def finish(self, timeout=RUN_TIMEOUT):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        d, home, runtime, logs, work = self.s.prepare(self.name)
        return agent_run.AgentRun(name=self.name, dir=d, argv=self.argv,
                                  returncode=self.proc.returncode,
                                  stdout=self.out_path.read_bytes(),
                                  stderr=self.err_path.read_bytes(), elapsed=0, home=home,
                                  logs=logs, runtime=runtime, work=work)


def tool_results(fake, host):
    """The model requests that carry a tool's result, as text."""
    return [r["body"].decode(errors="replace") for r in fake.requests(host) if
            r["method"] == "POST" and fake_apis._conversation_has_tool_result(
                json.loads(r["body"] or b"{}"))]


def assert_asked_and_decided(run, decision, scope=None):
    records = run.records()
    asks = [r for r in records if r.get("event") == "ask"]
    assert asks and asks[0]["host"] == DOCS and asks[0]["path"] == "/guide", asks
    assert asks[0]["exe"] and asks[0]["exe"].endswith("curl"), asks
    decisions = [r for r in records if r.get("event") == "approval"]
    assert [d["decision"] for d in decisions] == [decision], decisions
    if scope:
        assert decisions[0]["scope"] == scope, decisions


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_an_agent_waits_while_a_person_approves_its_fetch(make_fake, sessions, agent):
    fake = make_fake(tool_call=FETCH_DOCS, ws="refuse")
    cmd, env, host, real = tool_agent(fake, agent)
    s = sessions(fake)
    asked = AskedRun(s, f"{agent}-ask", cmd, env)
    ask_id = asked.wait_ask()
    assert fake.requests(DOCS) == []  # held: nothing reached the docs host yet
    pending = json.loads(asked.broker("pending", "--json").stdout)
    assert [a["url"] for a in pending] == [f"https://{DOCS}/guide"], pending
    approved = asked.broker("approve", ask_id)
    assert approved.returncode == 0, approved.stderr
    run = asked.finish()
    assert_turn_done(run, fake)
    assert len(asked.ask_lines()) == 1, run.describe()
    # The fetch went through once approved, and its page reached the model as the tool result.
    assert [r["status"] for r in fake.requests(DOCS)] == [200]
    results = tool_results(fake, host)
    assert results and any(fake_apis.DOCS_PAGE in r for r in results), results
    assert_asked_and_decided(run, "approve", "session")
    [rec] = [r for r in run.requests(DOCS)]
    assert rec["status"] == 200 and rec["rule"] == "approved[0]", rec
    assert_no_leaks(run, [real])


def test_a_denied_ask_leaves_the_agent_with_the_json_refusal(make_fake, sessions):
    fake = make_fake(tool_call=FETCH_DOCS)
    fake.accept("anthropic_key", ANTHROPIC_KEY)
    asked = AskedRun(sessions(fake), "claude-deny", CLAUDE_TOOL,
                     {"ANTHROPIC_API_KEY": ANTHROPIC_KEY})
    ask_id = asked.wait_ask()
    assert asked.broker("deny", ask_id).returncode == 0
    run = asked.finish()
    assert_turn_done(run, fake)
    assert fake.requests(DOCS) == []
    # What the agent's tool printed, and the model read: the broker's JSON 403.
    results = tool_results(fake, ANTHROPIC)
    assert results and any('approval_denied' in r for r in results), results
    assert_asked_and_decided(run, "deny")
    assert_no_leaks(run, [ANTHROPIC_KEY])


def test_an_always_approval_applies_to_the_next_session(make_fake, sessions):
    fake = make_fake(tool_call=FETCH_DOCS)
    fake.accept("anthropic_key", ANTHROPIC_KEY)
    s = sessions(fake)
    asked = AskedRun(s, "claude-always", CLAUDE_TOOL, {"ANTHROPIC_API_KEY": ANTHROPIC_KEY})
    ask_id = asked.wait_ask()
    assert asked.broker("approve", ask_id, "--always").returncode == 0
    first = asked.finish()
    assert_turn_done(first, fake)
    approved = first.home / ".config" / "broker" / "approved.json"
    assert json.loads(approved.read_text()) == {"allow": [{"host": DOCS, "ports": [443]}]}
    # The next session of the same user: the fetch goes at once, nobody is asked.
    again = AskedRun(s, "claude-always", CLAUDE_TOOL, {"ANTHROPIC_API_KEY": ANTHROPIC_KEY})
    run = again.finish()
    assert_turn_done(run, fake)
    assert again.ask_lines() == [], run.describe()
    # (The log directory holds both sessions: the first one's fetch was approved[0].)
    recs = sorted((r["session"], r["rule"], r["status"]) for r in run.requests(DOCS))
    assert len(recs) == 2 and {r[2] for r in recs} == {200}, recs
    assert sorted(r[1].rsplit("#", 1)[-1] for r in recs) == \
        ["approved.json:allow[0]", "approved[0]"], recs
