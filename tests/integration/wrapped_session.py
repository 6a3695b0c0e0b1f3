"""Running one `broker wrap` session per scenario, with a child script that prints its findings.

Shared by the credential-family tests (test_aws.py, test_cloud_tokens.py): each scenario writes a
policy, runs `broker wrap --policy ... --upstream-ca ... --connect-to ... --log-dir ... -- CHILD`
in a directory of its own (HOME, XDG_RUNTIME_DIR and the log dir below it), and the child prints
one line `RESULT {json}`. The run keeps what the broker printed, the parsed RESULT and the paths,
and reads the audit records and every byte the broker wrote for the checks that no real value
leaks.

A test module that imports the fixtures `echo` and `proxy` from here provides the module-scoped
fixtures `upstream_pki` (its test CA, and a leaf naming its fake's hosts and OTHER) and `fake`
(its fake upstream, listening on `.port`).
"""

import base64
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import BROKER_BIN, Upstream, clean_env
from fake_aws import ConnectProxy

RESULT_PREFIX = "RESULT "
OTHER = "api.example.test"  # allowed by the policies, bound to no credential; the echo serves it

# Variables that name or hold cloud credentials: none reaches a session from the test's own
# environment.
CLOUD_ENV_PREFIXES = ("GOOGLE_", "CLOUDSDK_", "AZURE_", "AWS_")

# The child's side of the RESULT line, for a child script that imports json and collects its
# findings in a dict OUT: response(r) is what OUT keeps of a `requests` response, finish()
# prints OUT.
CHILD_HELPERS = f'''

def response(r):
    return {{"status": r.status_code, "headers": {{k.lower(): v for k, v in r.headers.items()}},
            "body": r.text[:4000]}}


def finish():
    print({RESULT_PREFIX!r} + json.dumps(OUT), flush=True)
'''


def parse_result(stdout: bytes):
    """The child's RESULT object from what the session printed, or None when there is none."""
    for line in stdout.decode(errors="replace").splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    return None


def broker_env(extra=None, home=None, runtime=None, path_prefix=None,
               drop_prefixes=CLOUD_ENV_PREFIXES) -> dict:
    """The environment of the broker process (or of a child run without it): no proxy
    variables and none starting with `drop_prefixes`; HOME, XDG_RUNTIME_DIR when given,
    `path_prefix` in front of PATH, then `extra`."""
    env = {k: v for k, v in clean_env().items() if not k.startswith(drop_prefixes)}
    if home is not None:
        env["HOME"] = str(home)
    if runtime is not None:
        env["XDG_RUNTIME_DIR"] = str(runtime)
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}:{env.get('PATH', '/usr/bin:/bin')}"
    env.update(extra or {})
    return env


def forms_of(value: str) -> set:
    """Every byte form in which a real value must never show up: raw, percent-encoded, base64."""
    return {value.encode(), quote(value, safe="").encode(), base64.b64encode(value.encode())}


@dataclass
class WrappedRun:
    """One finished session. Subclasses add what their scenarios need (as fields with
    defaults, passed by keyword)."""
    name: str
    dir: Path
    returncode: int
    stdout: bytes
    stderr: bytes
    elapsed: float
    logs: Path
    runtime: Path
    home: Path = None
    result: dict = None
    records_: list = field(default_factory=list)

    def describe(self) -> str:
        return (f"[{self.name}] exit={self.returncode} elapsed={self.elapsed:.1f}s\n"
                f"stdout={self.stdout.decode(errors='replace')[-4000:]}\n"
                f"stderr={self.stderr.decode(errors='replace')[-4000:]}")

    def out(self) -> dict:
        """The child's RESULT (fails the test with the run's output when there is none)."""
        assert self.result is not None, f"the wrapped script printed no RESULT\n{self.describe()}"
        return self.result

    def env(self) -> dict:
        return self.out()["env"]

    def session_lines(self) -> list:
        """The broker's "broker: session ..." lines on stderr (what it brokered and removed)."""
        return [l for l in self.stderr.decode(errors="replace").splitlines()
                if l.startswith("broker: session ")]

    def step(self, name) -> dict:
        s = self.out().get(name)
        assert s is not None, f"no step {name} in the result\n{self.describe()}"
        return s

    def ok(self, name):
        s = self.step(name)
        assert s["ok"], f"step {name} failed: {json.dumps(s, indent=1)[:3000]}\n{self.describe()}"
        return s["value"]

    def records(self):
        if not self.records_:
            for f in sorted(self.logs.glob("*.jsonl")):
                for line in f.read_text().splitlines():
                    if line.strip():
                        self.records_.append(json.loads(line))
        return self.records_

    def requests(self):
        return [r for r in self.records() if r.get("event") == "request"]

    def written_roots(self) -> tuple:
        """The directories whose files count as written by the broker."""
        return (self.logs, self.runtime)

    def written(self):
        """(what, bytes) for everything the broker wrote or passed on: stdout (the child's,
        relayed), stderr and every file under written_roots() (the log dir, the runtime dir,
        and what a subclass adds)."""
        out = [("stdout", self.stdout), ("stderr", self.stderr)]
        for root in self.written_roots():
            if root.exists():
                for f in sorted(root.rglob("*")):
                    if f.is_file():
                        out.append((str(f), f.read_bytes()))
        return out


class Wrapper:
    """Runs sessions under `base`, the fake upstream reached for every name in `hosts` and the
    echo upstream for `other`, both with `--connect-to`. Subclasses set the class attributes."""
    hosts = ()
    other = OTHER
    drop_prefixes = CLOUD_ENV_PREFIXES  # what broker_env() clears of the test's environment

    def __init__(self, base: Path, pki, fake, echo):
        self.base, self.pki, self.fake, self.echo = base, pki, fake, echo

    def connect_args(self):
        out = []
        for h in self.hosts:
            out += ["--connect-to", f"{h}:443:127.0.0.1:{self.fake.port}"]
        return out + ["--connect-to", f"{self.other}:443:127.0.0.1:{self.echo.port}"]

    def dir(self, name) -> Path:
        d = self.base / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def wrap(self, run_type, name, cmd, policy, env=None, path_prefix=None, log_level=None,
             timeout=180, wrap_args=(), **fields) -> WrappedRun:
        """`broker wrap` with `policy` around `cmd` in the directory `name` (HOME home/,
        XDG_RUNTIME_DIR run/, the audit log in logs/); `env` and `path_prefix` go to
        broker_env(); `wrap_args` go to wrap before "--"; returns a `run_type` with `fields`
        added."""
        d = self.dir(name)
        home, runtime, logs = d / "home", d / "run", d / "logs"
        home.mkdir()
        runtime.mkdir(mode=0o700)
        policy_file = d / "policy.json"
        policy_file.write_text(json.dumps(policy, indent=2))
        argv = [BROKER_BIN, "wrap", "--policy", str(policy_file), "--upstream-ca",
                str(self.pki.ca_cert), *self.connect_args(), "--log-dir", str(logs)]
        if log_level:
            argv += ["--log-level", log_level]
        argv += [*wrap_args, "--", *cmd]
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=d,
                           stdin=subprocess.DEVNULL,
                           env=broker_env(env, home, runtime, path_prefix, self.drop_prefixes))
        return run_type(name=name, dir=d, returncode=p.returncode, stdout=p.stdout,
                        stderr=p.stderr, elapsed=time.monotonic() - t0, logs=logs,
                        runtime=runtime, home=home, result=parse_result(p.stdout), **fields)


@pytest.fixture(scope="module")
def echo(upstream_pki):
    """A plain HTTPS echo upstream posing as OTHER (allowed, bound to nothing)."""
    u = Upstream(tls=upstream_pki)
    yield u
    u.close()


@pytest.fixture(scope="module")
def proxy(fake, echo):
    """A plain CONNECT proxy, no broker: OTHER goes to the echo, every other host to the fake."""
    p = ConnectProxy(lambda host, port: ("127.0.0.1", echo.port if host == OTHER else fake.port))
    yield p
    p.close()
