"""Running one real agent (Codex, Claude Code, Gemini CLI) inside `broker wrap`, netns mode,
against the fakes of fake_apis.py: the harness of tests/integration/test_real_agents.py.

The agents come from scripts/install-agents.sh (${BROKER_AGENTS_DIR:-/var/cache/broker-agents}).
Each run gets its own directory: HOME (home/), XDG_RUNTIME_DIR (run/), the audit log (logs/), the
working directory (work/); the broker runs with `--connect-to H:443:127.0.0.1:PORT` for every
host the fakes answer for and `--upstream-ca` of the test CA, and with no `--policy` unless the
test gives layers (the embedded default policy applies then).
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

AGENTS_DIR = Path(os.environ.get("BROKER_AGENTS_DIR") or "/var/cache/broker-agents")
AGENTS_BIN = AGENTS_DIR / "node_modules" / ".bin"
AGENTS = ("codex", "claude", "gemini")

# Variables of the test's own environment that never reach a session: proxies, and anything
# that selects a credential, endpoint or login of an agent or a cloud.
DROP_PREFIXES = ("OPENAI_", "CODEX_", "ANTHROPIC_", "CLAUDE_", "GEMINI_", "GOOGLE_", "CLOUDSDK_",
                 "AWS_", "AZURE_", "VERTEX")


def missing_agents():
    """The agents that are not installed (empty when all are)."""
    return [a for a in AGENTS if not os.access(AGENTS_BIN / a, os.X_OK)]


def forms_of(value: str):
    """Every byte form in which a real value must never show up: raw, percent-encoded, base64
    (standard and URL-safe, of the value alone and as the password of Basic auth)."""
    v = value.encode()
    return {v, quote(value, safe="").encode(), base64.b64encode(v),
            base64.urlsafe_b64encode(v).rstrip(b"="), base64.b64encode(b"x-access-token:" + v)}


@dataclass
class AgentRun:
    name: str
    dir: Path
    argv: list
    returncode: int
    stdout: bytes
    stderr: bytes
    elapsed: float
    home: Path
    logs: Path
    runtime: Path
    work: Path
    records_: list = field(default_factory=list)

    @property
    def out(self) -> str:
        return self.stdout.decode(errors="replace")

    @property
    def err(self) -> str:
        return self.stderr.decode(errors="replace")

    def describe(self) -> str:
        return (f"[{self.name}] exit={self.returncode} elapsed={self.elapsed:.1f}s\n"
                f"--- stdout (tail)\n{self.out[-3000:]}\n--- stderr (tail)\n{self.err[-5000:]}\n"
                f"--- audit\n" + "\n".join(
                    f"{r.get('event')} {r.get('decision', '')} {r.get('method', '')} "
                    f"{r.get('host', '')}{r.get('path', '')} {r.get('status', '')} "
                    f"cred={r.get('credential')} tokens={r.get('llm_tokens')} "
                    f"err={r.get('error')}" for r in self.records()[:80]))

    def records(self):
        if not self.records_:
            for f in sorted(self.logs.glob("*.jsonl")):
                for line in f.read_text().splitlines():
                    if line.strip():
                        self.records_.append(json.loads(line))
        return self.records_

    def requests(self, host=None):
        return [r for r in self.records() if r.get("event") in ("request", "refused")
                and (host is None or r.get("host") == host)]

    def broker_written(self):
        """(what, bytes) for every byte the broker wrote or passed on: the session's stdout and
        stderr (the child's relayed, the broker's own lines) and every file in the log dir and
        the runtime dir."""
        out = [("stdout", self.stdout), ("stderr", self.stderr)]
        for root in (self.logs, self.runtime):
            if root.exists():
                for f in sorted(root.rglob("*")):
                    if f.is_file() and not f.is_symlink():
                        out.append((str(f), f.read_bytes()))
        return out

    def child_files(self, skip=()):
        """(path, bytes) of every regular file under the session's HOME and working directory
        (what the agent wrote), but the paths in `skip`."""
        out = []
        skip = {Path(s) for s in skip}
        for root in (self.home, self.work):
            for f in sorted(root.rglob("*")):
                if f in skip or f.is_symlink() or not f.is_file():
                    continue
                try:
                    out.append((str(f), f.read_bytes()))
                except OSError:
                    pass
        return out


def leaks(items, values):
    """[(what, value prefix)] for every real value (in any form) found in `items` ((what, bytes)
    pairs)."""
    found = []
    for what, data in items:
        for v in values:
            if any(form in data for form in forms_of(v)):
                found.append((what, v[:12]))
    return found


class AgentSessions:
    """Makes runs under `base`, every fake host reached at 127.0.0.1:`port`."""

    def __init__(self, broker_bin, base: Path, ca_cert: Path, port: int, hosts):
        self.broker_bin, self.base, self.ca_cert, self.port = broker_bin, base, ca_cert, port
        self.hosts = list(hosts)
        self.runtimes = {}

    def prepare(self, name: str):
        d = self.base / name
        home, logs, work = d / "home", d / "logs", d / "work"
        for p in (home, logs, work):
            p.mkdir(parents=True, exist_ok=True)
        # XDG_RUNTIME_DIR short, under /tmp: the session's control socket lives below it and a
        # unix socket path has at most 107 bytes.
        if name not in self.runtimes:
            self.runtimes[name] = Path(tempfile.mkdtemp(prefix="ag-", dir="/tmp"))
        return d, home, self.runtimes[name], logs, work

    def close(self):
        for p in self.runtimes.values():
            shutil.rmtree(p, ignore_errors=True)

    def command(self, name: str, cmd, env=None, policies=None, log_level=None, extra_args=(),
                interactive=False):
        """(argv, environment, working directory) of `broker wrap [--policy L]... -- cmd` with
        the agents on PATH; `env` adds to the broker's environment (the real values go here: the
        broker reads them, the child gets dummies). `interactive`: for a terminal (a tmux pane
        sets TERM; no NO_COLOR, no CI), else for a pipe."""
        d, home, runtime, logs, work = self.prepare(name)
        argv = [str(self.broker_bin), "wrap", "--isolate", "netns", "--upstream-ca",
                str(self.ca_cert), "--log-dir", str(logs)]
        for h in self.hosts:
            argv += ["--connect-to", f"{h}:443:127.0.0.1:{self.port}"]
        for i, layer in enumerate(policies or []):
            f = d / f"policy{i}.json"
            f.write_text(layer if isinstance(layer, str) else json.dumps(layer, indent=1))
            argv += ["--policy", str(f)]
        if log_level:
            argv += ["--log-level", log_level]
        argv += [*extra_args, "--", *cmd]
        base_env = {k: v for k, v in os.environ.items()
                    if "proxy" not in k.lower() and not k.startswith(DROP_PREFIXES)}
        base_env.update({
            "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime),
            "PATH": f"{AGENTS_BIN}:/usr/local/bin:/usr/bin:/bin",
        })
        if interactive:
            for k in ("TERM", "NO_COLOR", "CI", "COLUMNS", "LINES"):
                base_env.pop(k, None)
        else:
            base_env.update({"TERM": "dumb", "NO_COLOR": "1", "CI": "1"})
        for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            base_env.pop(k, None)
        base_env.update(env or {})
        return argv, base_env, work

    def run(self, name: str, cmd, env=None, policies=None, timeout=90, log_level=None,
            extra_args=()):
        """`broker wrap ... -- cmd` (command()) with no terminal, stdin closed. Returns an
        AgentRun."""
        argv, base_env, work = self.command(name, cmd, env, policies, log_level, extra_args)
        d, home, runtime, logs, _ = self.prepare(name)
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=work,
                               stdin=subprocess.DEVNULL, env=base_env)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = None, e.stdout or b"", (e.stderr or b"") + b"\n[test: timed out]"
        return AgentRun(name=name, dir=d, argv=argv, returncode=rc, stdout=out, stderr=err,
                        elapsed=time.monotonic() - t0, home=home, logs=logs, runtime=runtime,
                        work=work)
