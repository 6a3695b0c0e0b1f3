"""examples/gateway/run.sh --demo (issue 16): one Redis, two gateway replicas and haproxy in
front, started by the script on free loopback ports, fully offline. The script issues a session,
sends two curl requests and a real agent (Claude Code; Codex in a run of its own) through
haproxy to the local fakes, stops everything and verifies the session's log. These tests check
what it did from what it kept (--keep): the fakes got the real values while the clients held
dummies, both replicas served the session and wrote verifiable, ended audit files, and no file
of the run holds a real value."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BROKER_BIN, clean_env
from redis_server import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
import agent_run  # noqa: E402
import fake_apis  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "gateway" / "run.sh"
RUN_TIMEOUT = 120
# The real values the gateways hold (what the fakes accept). Shapes as the real ones.
REAL = {"DEMO_GITHUB_TOKEN": "ghp_" + "Ex4mpleGatewayRealTok" + "en0123456789abc",
        "DEMO_ANTHROPIC_API_KEY": "sk-ant-api03-" + "Ex4mpleGatewayRealAnthropicKey" * 3 + "AA",
        "DEMO_CODEX_API_KEY": "sk-proj-" + "Ex4mpleGatewayRealCodexKey" * 2}
PORTS = ("FRONT_PORT", "GATEWAY1_PORT", "GATEWAY2_PORT", "ADMIN1_PORT", "ADMIN2_PORT",
         "REDIS_PORT", "DEMO_PORT")


def missing_agent_reason(agent):
    return (f"{agent} is not installed in {agent_run.AGENTS_BIN}: run scripts/install-agents.sh "
            f"(or set BROKER_AGENTS_DIR); the rest of the example is tested without it")


class ExampleRun:
    """One run of run.sh --demo; `work` is its work dir (kept with --keep)."""

    def __init__(self, base: Path, agent: str, keep=True):
        self.work = base / "work"
        ports = set()
        while len(ports) < len(PORTS):
            ports.add(free_port())
        self.ports = dict(zip(PORTS, sorted(ports)))
        env = clean_env({"BROKER": BROKER_BIN, "WORK_DIR": str(self.work), "AGENT": agent,
                         "PYTHON": sys.executable, **REAL,
                         **{k: str(v) for k, v in self.ports.items()}})
        p = subprocess.run([str(SCRIPT), "--demo", *(["--keep"] if keep else [])],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env,
                           stdin=subprocess.DEVNULL)
        self.returncode, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr

    def describe(self):
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"

    def session_env(self):
        lines = (self.work / "session.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if line)

    @property
    def session(self):
        return self.session_env()["HTTPS_PROXY"].split("//", 1)[1].split(":", 1)[0]

    def upstream_requests(self, host=None):
        """What the fakes received (demo_upstreams.py's requests.jsonl)."""
        lines = (self.work / "demo" / "requests.jsonl").read_text().splitlines()
        return [r for r in map(json.loads, lines) if host is None or r["host"] == host]

    def replica_records(self, replica):
        out = []
        for f in sorted((self.work / "logs" / self.session).glob(f"{replica}.*.jsonl")):
            out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        return out


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The default run: Claude Code as the agent when it is installed, else none."""
    agent = "claude" if not set(agent_run.missing_agents()) & {"claude"} else "none"
    run = ExampleRun(tmp_path_factory.mktemp("example"), agent)
    run.agent = agent
    assert run.returncode == 0, run.describe()
    return run


def started_by(run):
    """The processes still alive that the script started: every one of them has its FRONT_PORT
    in its environment (run.sh exports it for haproxy.cfg)."""
    mark = f"FRONT_PORT={run.ports['FRONT_PORT']}".encode()
    alive = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0"):
                alive.append((proc.name, (proc / "cmdline").read_bytes().replace(b"\0", b" ")))
        except OSError:
            pass
    return alive


def test_it_exits_0_having_stopped_everything(example):
    assert "Done:" in example.stdout
    assert "run.sh: kept" in example.stdout
    assert started_by(example) == []


def test_curl_went_through_haproxy_and_only_the_fake_saw_the_real_token(example):
    env = example.session_env()
    # The client's proxy is haproxy (--proxy-authority), its token a dummy of the real one's shape.
    assert env["HTTPS_PROXY"].endswith(f"@127.0.0.1:{example.ports['FRONT_PORT']}")
    dummy, real = env["GITHUB_TOKEN"], REAL["DEMO_GITHUB_TOKEN"]
    assert dummy != real and dummy.startswith("ghp_") and len(dummy) == len(real)
    for i in (1, 2):
        assert json.loads((example.work / f"curl-{i}.out").read_text()) == {
            "login": fake_apis.GITHUB_LOGIN}
    seen = [r for r in example.upstream_requests("api.github.com") if r["path"] == "/user"]
    assert [(r["status"], r["credential"]) for r in seen] == [(200, "real")] * 2, seen
    # haproxy passed the connections on, to both replicas.
    log = (example.work / "haproxy.log").read_text()
    assert "gateway_replicas/r1" in log and "gateway_replicas/r2" in log, log


def test_the_session_was_served_by_both_replicas(example):
    for replica in ("r1", "r2"):
        records = example.replica_records(replica)
        assert records, f"no audit file of {example.session} from {replica}"
        assert records[0]["event"] == "session_start"
        assert records[-1]["event"] == "session_end"  # the script stopped the replicas
        assert all(r["session"] == example.session for r in records)
    github = [r for replica in ("r1", "r2") for r in example.replica_records(replica)
              if r.get("host") == "api.github.com" and r.get("path") == "/user"]
    assert len(github) == 2 and all(r["credential"] == "github" for r in github)
    # Each curl was a connection of its own: one went to each replica.
    assert {r["path"] for r in example.replica_records("r1") if r["event"] == "request"} >= {"/user"}
    assert {r["path"] for r in example.replica_records("r2") if r["event"] == "request"} >= {"/user"}


def test_the_merged_log_verifies_for_both_replicas(example):
    key = example.work / "broker-home" / ".config" / "broker" / "audit-key"
    v = subprocess.run([BROKER_BIN, "log", example.session, "--verify", "--log-dir",
                        str(example.work / "logs"), "--key", str(key)],
                       capture_output=True, text=True, timeout=30, env=clean_env())
    assert v.returncode == 0, v.stdout + v.stderr
    for replica in ("r1", "r2"):
        assert f"replica {replica}: ok" in v.stdout, v.stdout
    # The script showed the same.
    assert f"{example.session} replica r1: ok" in example.stdout
    assert f"{example.session} replica r2: ok" in example.stdout


def test_claude_completed_its_turn_through_the_gateway(example):
    if example.agent != "claude":
        pytest.skip(missing_agent_reason("claude"))
    assert fake_apis.ANSWER in (example.work / "agent.out").read_text(), example.describe()
    assert "claude finished its turn (exit 0)" in example.stdout
    env = example.session_env()
    assert env["ANTHROPIC_API_KEY"] != REAL["DEMO_ANTHROPIC_API_KEY"]
    turns = [r for r in example.upstream_requests("api.anthropic.com") if r["path"] == "/v1/messages"]
    assert turns and all(r["credential"] == "real" and r["status"] == 200 for r in turns), turns
    audited = [r for replica in ("r1", "r2") for r in example.replica_records(replica)
               if r.get("host") == "api.anthropic.com" and r.get("path", "").startswith("/v1/messages")]
    assert audited and all(r["credential"] == "anthropic" for r in audited)


def test_nothing_the_run_wrote_holds_a_real_value(example):
    files = [(str(p), p.read_bytes()) for p in sorted(example.work.rglob("*"))
             if p.is_file() and not p.is_symlink()]
    assert any("/logs/" in name for name, _ in files) and any(n.endswith("r1.log") for n, _ in files)
    written = files + [("stdout", example.stdout.encode()), ("stderr", example.stderr.encode())]
    assert agent_run.leaks(written, list(REAL.values())) == []
    # The session's proxy token is a secret too: the script masks it in what it prints.
    token = example.session_env()["HTTPS_PROXY"].split("//", 1)[1].rsplit("@", 1)[0].split(":")[1]
    assert token not in example.stdout + example.stderr


def test_codex_completes_its_turn_and_nothing_is_left_without_keep(tmp_path):
    if "codex" in agent_run.missing_agents():
        pytest.skip(missing_agent_reason("codex"))
    run = ExampleRun(tmp_path, "codex", keep=False)
    assert run.returncode == 0, run.describe()
    # The fake answers only to the real key: its answer means the gateway swapped it in.
    assert fake_apis.ANSWER in run.stdout and "codex finished its turn (exit 0)" in run.stdout
    assert "replica r1: ok" in run.stdout and "replica r2: ok" in run.stdout
    assert not run.work.exists()
    assert agent_run.leaks([("stdout", run.stdout.encode()), ("stderr", run.stderr.encode())],
                           list(REAL.values())) == []
