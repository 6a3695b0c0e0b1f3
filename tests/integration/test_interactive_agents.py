"""The real agents' interactive TUIs inside `broker wrap`, driven as a person drives them: in a
tmux pane (tests/agents/agent_terminal.py), keys typed, the screen read. Claude Code (API key;
subscription login), Codex (API key; ChatGPT login) and Gemini CLI (API key), each against the
fakes of tests/agents/fake_apis.py, with no policy written (the embedded default).

Each test walks the first screens a person meets, types a prompt and reads the fake's answer,
resizes the window, quits the way a person does (/exit, Ctrl-C, Ctrl-D), and checks the exit
status and that the terminal is left as it was (`stty -a` and the pane's modes). And what makes
a second session behave like the first outside broker: the agents remember their key between
sessions (Claude Code's approved keys, docs/policy.md: stable dummies), and what an agent stores of
its key (a dummy) never lands in the user's home where the agent outside broker would use it.

Without the agents installed every test fails, saying to run scripts/install-agents.sh
(BROKER_SKIP_AGENTS=1 skips them instead).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

import agent_run  # noqa: E402
import fake_apis  # noqa: E402
import fake_oauth  # noqa: E402
from agent_terminal import Terminal, wait_until  # noqa: E402
from conftest import BROKER_BIN  # noqa: E402
from test_real_agents import (ANTHROPIC, ANTHROPIC_KEY, DOCS, FETCH_DOCS, GEMINI_KEY,  # noqa: F401,E402
                              OPENAI, OPENAI_KEY, _agents_installed, agents_pki, answered,
                              assert_no_leaks, claude_login, codex_chatgpt_login, make_fake,
                              sessions)

ANSWER = "PINEAPPLE-42"
PROMPT = "Say the magic word."
SIZE, SMALLER = (120, 40), (90, 30)


@pytest.fixture
def terminal():
    made = []

    def make(s, name, cmd, env=None, extra_args=()):
        argv, environment, cwd = s.command(name, cmd, env=env, interactive=True,
                                           extra_args=extra_args)
        t = Terminal(argv, environment, cwd, size=SIZE)
        t.environment = environment  # for the broker commands a person runs beside it
        made.append(t)
        t.start()
        return t

    yield make
    for t in made:
        t.close()


def as_run(s, name, t):
    """The session as an AgentRun (audit records, files), its output what the pane showed."""
    d, home, runtime, logs, work = s.prepare(name)
    return agent_run.AgentRun(name=name, dir=d, argv=[], returncode=None,
                              stdout=t.history().encode(), stderr=b"", elapsed=0, home=home,
                              logs=logs, runtime=runtime, work=work)


def ask(t, prompt=PROMPT, pause=0.5):
    """Types the prompt as a person does, waits until the input box shows it, then Enter on its
    own (an Enter in the same burst as the text is taken for a pasted newline by Codex and
    Gemini CLI). On a loaded machine the keys can still reach the agent in one burst and the
    Enter is lost while the prompt stays in the box; a person presses Enter again, and so does
    this, only while the box still holds the prompt and no answer has come."""
    t.type(prompt)
    t.wait_for(prompt, timeout=20)
    for _ in range(3):
        t.keys("Enter", pause=pause)
        if wait_until(lambda: ANSWER in t.screen(), 20):
            return t.wait_for(ANSWER)
        if "› " + prompt not in t.screen() and "> " + prompt not in t.screen():
            break  # taken: the agent is still at work
    return t.wait_for(ANSWER, timeout=60)


def resized(t, answer=ANSWER):
    """The window made smaller: the agent redraws at the new width, the answer still shown."""
    t.resize(*SMALLER)
    assert t.size() == SMALLER
    screen = t.wait_for(answer, timeout=20)
    assert all(len(line) <= SMALLER[0] for line in screen.splitlines()), screen
    return screen


def exited(t, status=0):
    rc = t.wait_exit(timeout=30)
    assert rc == status, f"exit status {rc}\n{t.history()[-3000:]}"
    bad = t.sane_afterwards()
    assert not bad, "the terminal was left changed:\n" + "\n".join(bad)


# --------------------------------------------------------------------------------------------
# Claude Code
# --------------------------------------------------------------------------------------------

CLAUDE_READY = "shift+tab to cycle"  # the footer under the prompt
KEY_QUESTION = "Detected a custom API key in your environment"


def claude_onboarding(t):
    """A fresh home's first screens: theme, (the key question), security notes, the folder."""
    t.wait_for("Choose the text style that looks best with your terminal")
    t.keys("Enter")


def test_claude_code_asks_about_its_key_once_and_not_in_the_next_session(make_fake, sessions,
                                                                        terminal):
    fake = make_fake()
    fake.accept("anthropic_key", ANTHROPIC_KEY)
    s = sessions(fake)
    env = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    t = terminal(s, "claude-key", ["claude"], env=env)
    claude_onboarding(t)
    screen = t.wait_for(KEY_QUESTION, "Do you want to use this API key?")
    # It shows the end of the key it holds: the dummy's, never the real one's.
    assert ANTHROPIC_KEY[-20:] not in screen, screen
    shown = next(line for line in screen.splitlines() if "ANTHROPIC_API_KEY:" in line)
    tail = shown.split("...")[-1].strip()
    assert len(tail) == 20, shown
    t.keys("Up", "Enter")  # "Yes" (the default is "No (recommended)")
    t.wait_for("Security notes")
    t.keys("Enter")
    t.wait_for("Yes, I trust this folder")
    t.keys("Down", "Enter")  # "Yes, I trust this folder" (the default is "No, exit")
    t.wait_for(CLAUDE_READY)
    ask(t)
    resized(t)
    t.type("/exit")
    t.keys("Enter")
    exited(t)
    run = as_run(s, "claude-key", t)
    state = json.loads((run.home / ".claude.json").read_text())
    assert state["customApiKeyResponses"]["approved"] == [tail], state["customApiKeyResponses"]
    calls = [r for r in answered(fake, ANTHROPIC, "/v1/messages") if r["path"] == "/v1/messages"]
    assert calls and all(r["headers"]["x-api-key"] == ANTHROPIC_KEY for r in calls)

    # The next session: the same dummy, so the approved key is recognised and nothing is asked.
    t2 = terminal(s, "claude-key", ["claude"], env=env)
    first = t2.wait_for_any(CLAUDE_READY, KEY_QUESTION)
    assert first == CLAUDE_READY, t2.screen()
    ask(t2)
    t2.keys("C-c", "C-c", pause=0.3)
    exited(t2)
    run = as_run(s, "claude-key", t2)
    assert_no_leaks(run, [ANTHROPIC_KEY])
    # What persists between sessions: the approved key, the trusted folder, the history; and
    # nothing of its settings but data (docs/security-model.md).
    state = json.loads((run.home / ".claude.json").read_text())
    assert state["customApiKeyResponses"]["approved"] == [tail]
    assert state["projects"][str(run.work)]["hasTrustDialogAccepted"] is True, state["projects"]
    assert PROMPT in (run.home / ".claude" / "history.jsonl").read_text()
    assert list((run.home / ".claude" / "projects").iterdir()), "no transcript went through"
    assert not (run.home / ".claude" / "CLAUDE.md").exists()


def test_claude_code_waits_on_its_screen_while_a_person_approves_its_fetch(make_fake, sessions,
                                                                          terminal):
    """`wrap --ask` under the agent's own TUI: its tool's fetch is held, the ask is one line on
    the same terminal, a person approves from another shell, and the agent goes on to its
    answer; the terminal is left as it was."""
    fake = make_fake(tool_call=FETCH_DOCS)
    fake.accept("anthropic_key", ANTHROPIC_KEY)
    s = sessions(fake)
    # Its default auto mode would ask the (fake) model whether the tool may run: a person who
    # allows Bash up front is asked nothing.
    t = terminal(s, "claude-ask", ["claude", "--permission-mode", "default", "--allowedTools", "Bash"],
                 env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY}, extra_args=["--ask"])

    def broker(*args):
        return subprocess.run([BROKER_BIN, *args], capture_output=True, text=True, timeout=30,
                              env=t.environment)

    claude_onboarding(t)
    t.wait_for(KEY_QUESTION)
    t.keys("Up", "Enter")
    t.wait_for("Security notes")
    t.keys("Enter")
    t.wait_for("Yes, I trust this folder")
    t.keys("Down", "Enter")
    t.wait_for("manual mode on")
    t.type("Fetch the guide.")
    t.wait_for("Fetch the guide.", timeout=20)
    def pending():
        return json.loads(broker("pending", "--json").stdout)
    t.keys("Enter", pause=0.5)
    deadline = time.monotonic() + 90
    while not pending() and time.monotonic() < deadline:
        screen = t.screen()
        # Enter again while the prompt still waits in the box (see ask()), or to go past the
        # notice auto mode shows before its first tool call.
        if "Enter to continue" in screen or "❯ Fetch the guide." in screen.splitlines()[-8:]:
            t.keys("Enter", pause=0.5)
        time.sleep(1)
    held = pending()
    assert len(held) == 1 and held[0]["url"] == f"https://{DOCS}/guide", t.screen()
    screen = t.wait_for("broker: ask ")
    assert sum("broker: ask " in line for line in t.history().splitlines()) == 1, screen
    assert ANSWER not in screen
    # One row of the pane, whole: the request, its program, how to answer.
    row = next(line for line in screen.splitlines() if "broker: ask " in line)
    assert row.startswith(f"broker: ask {held[0]['id']}: GET https://{DOCS}/guide (curl)"), row
    assert row.rstrip().endswith(f"broker approve|deny {held[0]['id']}"), row
    assert broker("approve", held[0]["id"]).returncode == 0
    t.wait_for(ANSWER, timeout=60)
    t.type("/exit")
    t.keys("Enter")
    exited(t)
    assert [r["status"] for r in fake.requests(DOCS)] == [200]
    assert_no_leaks(as_run(s, "claude-ask", t), [ANTHROPIC_KEY])


def test_claude_code_with_a_subscription_login(make_fake, sessions, terminal):
    fake = make_fake()
    access = "sk-ant-oat01-" + "ClaudeTuiAccessTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcd"
    refresh = "sk-ant-ort01-" + "ClaudeTuiRefreshTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-ab"
    fake.accept("anthropic_bearer", access)
    s = sessions(fake)
    login = claude_login(s, "claude-login", access, refresh, expires_in=8 * 3600)
    t = terminal(s, "claude-login", ["claude"])
    claude_onboarding(t)
    screen = t.wait_for("Security notes")
    assert KEY_QUESTION not in screen
    t.keys("Enter")
    t.wait_for("Yes, I trust this folder")
    t.keys("Down", "Enter")  # "Yes, I trust this folder" (the default is "No, exit")
    t.wait_for(CLAUDE_READY, "Claude Max")
    ask(t)
    resized(t)
    t.keys("C-d", "C-d", pause=0.3)
    exited(t)
    calls = [r for r in answered(fake, ANTHROPIC, "/v1/messages") if r["path"] == "/v1/messages"]
    assert calls and all(r["headers"]["authorization"] == f"Bearer {access}" for r in calls)
    # The user's login is as it was.
    assert json.loads(login.read_text())["claudeAiOauth"]["accessToken"] == access
    assert_no_leaks(as_run(s, "claude-login", t), [access, refresh], skip_files=[login])


# --------------------------------------------------------------------------------------------
# Codex
# --------------------------------------------------------------------------------------------

CODEX_READY = "Ask Codex to do anything"  # the composer's placeholder


def test_codex_signed_in_with_the_api_key_it_detects(make_fake, sessions, terminal):
    """Codex's TUI ignores CODEX_API_KEY and offers OPENAI_API_KEY (the dummy) at sign-in, then
    stores it in ~/.codex/auth.json: that file holds a dummy, so it is kept for broker's
    sessions and never lands in the home, where Codex outside broker would send the dummy."""
    fake = make_fake(ws="refuse")
    fake.accept("openai", OPENAI_KEY)
    s = sessions(fake)
    env = {"OPENAI_API_KEY": OPENAI_KEY}
    t = terminal(s, "codex-key", ["codex"], env=env)
    t.wait_for("Choose how you want to use Codex")
    t.keys("3")  # Sign in another way
    t.wait_for("Use an OpenAI API key")
    t.keys("1")
    t.wait_for("Detected OPENAI_API_KEY environment variable")
    t.keys("Enter", pause=1.5)  # an Enter right as the page opens is dropped
    t.wait_for(CODEX_READY)
    ask(t)
    resized(t)
    t.type("/exit")
    t.keys("Enter")
    exited(t)
    posts = [r for r in answered(fake, OPENAI, "/v1/responses") if r["method"] == "POST"]
    assert posts and all(r["headers"]["authorization"] == f"Bearer {OPENAI_KEY}" for r in posts)
    run = as_run(s, "codex-key", t)
    assert not (run.home / ".codex" / "auth.json").exists(), \
        (run.home / ".codex" / "auth.json").read_text()
    # Said once, when it was first stored; the daemon's state is dropped, in the log only, and
    # nothing else it wrote is named.
    stored = f"{run.home}/.codex/auth.json (an agent's stored key"
    assert stored in " ".join(run.out.split()), run.out
    dropped = [r["path"] for r in run.records() if r.get("event") == "kept_out"
               and r.get("change") == "dropped"]
    assert f"{run.home}/.codex/app-server-daemon" in dropped, dropped
    assert not (run.home / ".codex" / "packages").exists()
    assert run.out.count("broker: kept out:") == 1, run.out

    # The next session: signed in already, with the key it stored.
    t2 = terminal(s, "codex-key", ["codex"], env=env)
    first = t2.wait_for_any(CODEX_READY, "Choose how you want to use Codex")
    assert first == CODEX_READY, t2.screen()
    ask(t2)
    t2.keys("C-c")  # on an empty composer: quits
    exited(t2)
    assert not (run.home / ".codex" / "auth.json").exists()
    assert stored not in " ".join(t2.history().split()), t2.history()
    assert_no_leaks(as_run(s, "codex-key", t2), [OPENAI_KEY])


def test_codex_signed_in_with_chatgpt(make_fake, sessions, terminal):
    fake = make_fake(ws="refuse")
    refresh = "rt_" + "C0dexTuiRefreshTokenAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcd"
    s = sessions(fake)
    _, real_file, id_token, access = codex_chatgpt_login(fake, s, "codex-chatgpt-tui", refresh,
                                                         expires_in=3600)
    t = terminal(s, "codex-chatgpt-tui", ["codex"])
    t.wait_for(CODEX_READY)
    ask(t)
    resized(t)
    t.keys("C-d")  # on an empty composer: quits
    exited(t)
    calls = answered(fake, "chatgpt.com", "/backend-api/codex/responses")
    assert calls and all(r["headers"]["authorization"] == f"Bearer {access}" for r in calls)
    assert_no_leaks(as_run(s, "codex-chatgpt-tui", t), [refresh, access, id_token],
                    skip_files=[real_file])


# --------------------------------------------------------------------------------------------
# Gemini CLI
# --------------------------------------------------------------------------------------------

GEMINI_READY = "Type your message or @path/to/file"


def test_gemini_cli_first_run_and_the_next(make_fake, sessions, terminal):
    """The first run trusts the folder (Gemini CLI restarts itself), picks the API key it
    detected and offers to store it "in your system keychain" (here a file, ~/.gemini/gemini-
    credentials.json): it holds the dummy, so it never lands in the home, where Gemini CLI
    outside broker, given no GEMINI_API_KEY, would send the dummy. The next run asks nothing."""
    fake = make_fake()
    fake.accept("gemini_key", GEMINI_KEY)
    s = sessions(fake)
    env = {"GEMINI_API_KEY": GEMINI_KEY, "COLORTERM": "truecolor"}
    t = terminal(s, "gemini-key", ["gemini"], env=env)
    t.wait_for("Do you trust the files in this folder?", timeout=90)
    t.keys("Enter")  # 1. Trust folder
    t.wait_for("How would you like to authenticate", timeout=90)
    # 2. Use Gemini API Key (chosen for the key it detected); the menu may be the restarting
    # process's, whose Enter is lost.
    screen = t.press("Enter", "Enter Gemini API Key", "stored in your system keychain")
    assert GEMINI_KEY not in screen
    t.keys("Enter")
    t.wait_for(GEMINI_READY)
    ask(t)
    resized(t)
    t.type("/quit")
    t.keys("Enter")
    exited(t)
    calls = [r for r in fake.requests("generativelanguage.googleapis.com") if r.get("model_call")]
    assert calls and all(r["status"] == 200 for r in calls), calls
    run = as_run(s, "gemini-key", t)
    settings = json.loads((run.home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert not (run.home / ".gemini" / "gemini-credentials.json").exists()

    t2 = terminal(s, "gemini-key", ["gemini"], env=env)
    first = t2.wait_for_any(GEMINI_READY, "How would you like to authenticate",
                            "Do you trust the files in this folder?", timeout=90)
    assert first == GEMINI_READY, t2.screen()
    ask(t2)
    t2.keys("C-c", "C-c", pause=0.3)
    exited(t2)
    assert_no_leaks(as_run(s, "gemini-key", t2), [GEMINI_KEY])
    # The folder stays trusted (the session's own workspace only), its settings keep data only.
    trusted = json.loads((run.home / ".gemini" / "trustedFolders.json").read_text())
    assert list(trusted) == [str(run.work)], trusted
