"""`serve --gateway --audit-sink syslog:HOST:PORT` (docs/gateway.md): every audit record also goes to a
syslog server as RFC 5424 over TCP, octet-counted, batched off the request path, queued while the
server is away. Checked against Debian's rsyslog receiving on loopback: every record of a
10,000-request run arrives, none lost when rsyslog hangs and is killed and restarted in the middle
of it."""
import json
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import connect_to_arg, run_broker_cli
from gateway_session import create_session
from redis_server import free_port

RSYSLOGD = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"
OTHER = "other.example.test"
REAL = "ghp_" + "R3alSysl0gT0ken" * 2 + "abcde"

pytestmark = pytest.mark.skipif(not shutil.os.path.exists(RSYSLOGD),
                                reason="rsyslog is not installed (scripts/install-deps.sh)")


class Rsyslog:
    """rsyslogd in the foreground with a config of its own: imtcp on a loopback port, every
    message appended to one file as `SEVERITY PROCID MSGID MSG`."""

    def __init__(self, directory, port):
        self.dir = directory
        self.port = port
        self.out = directory / "received.log"
        self.conf = directory / "rsyslog.conf"
        (directory / "work").mkdir(exist_ok=True)
        self.conf.write_text(f"""
global(workDirectory="{directory / 'work'}" maxMessageSize="64k")
module(load="imtcp")
template(name="fields" type="string" string="%syslogseverity% %procid% %msgid% %msg%\\n")
ruleset(name="audit") {{ action(type="omfile" file="{self.out}" template="fields") }}
input(type="imtcp" address="127.0.0.1" port="{port}" ruleset="audit")
""")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([RSYSLOGD, "-n", "-f", str(self.conf), "-i",
                                      str(self.dir / "rsyslogd.pid")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                assert self.proc.poll() is None, self.proc.stderr.read()
                time.sleep(0.05)
        raise AssertionError("rsyslogd did not listen")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)

    def messages(self):
        """(severity, procid, msgid, record) for each message received so far."""
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text(errors="replace").splitlines():
            severity, procid, msgid, msg = line.split(" ", 3)
            out.append((int(severity), procid, msgid, json.loads(msg.strip())))
        return out


@pytest.fixture
def rsyslog(tmp_path):
    r = Rsyslog(tmp_path, free_port())
    r.start()
    yield r
    if r.proc.poll() is None:
        r.stop()


def policy(plain_port):
    return {"version": 1, "allow": [{"host": OTHER, "ports": [plain_port]}],
            "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"],
                                       "hosts": ["api.github.com"]}}}


def logged_records(log_dir):
    """Every record the broker wrote, by (session, seq)."""
    out = {}
    for f in log_dir.rglob("*.jsonl"):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            out[(rec["session"], rec["seq"])] = rec
    return out


def test_every_record_of_10000_requests_reaches_rsyslog_across_its_restart(
        broker_factory, upstream, rsyslog, tmp_path):
    gw = broker_factory(policy=policy(upstream.port), session="gw-syslog",
                        args=["--gateway", "--audit-sink", f"syslog:127.0.0.1:{rsyslog.port}"],
                        connect_to=[connect_to_arg(OTHER, upstream.port)],
                        env={"GITHUB_TOKEN": REAL})
    _, env, _ = create_session(gw)
    base = f"http://{OTHER}:{upstream.port}"

    def get(first, count):
        """`count` GETs on one keep-alive connection (one curl), each answered 200."""
        urls = tmp_path / "urls"
        urls.write_text("".join(f'url = "{base}/r{i}"\noutput = "/dev/null"\n'
                                for i in range(first, first + count)))
        r = subprocess.run(["curl", "-sf", "-x", env["HTTP_PROXY"], "-K", str(urls),
                            "-w", "%{http_code}\n"], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["200"] * count

    get(0, 5000)
    # rsyslog hangs, the next 1,000 requests' records go into its socket unread, then it is
    # killed: what it had not read is lost to it, and the sink sends it again once it is back.
    rsyslog.proc.send_signal(signal.SIGSTOP)
    get(5000, 1000)  # the requests do not wait for the sink
    rsyslog.proc.kill()
    rsyslog.proc.wait(timeout=10)
    rsyslog.start()
    get(6000, 4000)
    # One refusal: warning severity.
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-x",
                        env["HTTP_PROXY"], f"http://denied.example.test:{upstream.port}/"],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout == "403"
    total = 10_000

    sent = logged_records(gw.log_dir)
    assert len(sent) > total
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        received = {(m[3]["session"], m[3]["seq"]): m for m in rsyslog.messages()}
        if set(sent) <= set(received):
            break
        time.sleep(0.2)
    missing = sorted(set(sent) - set(received))
    assert not missing, f"{len(missing)} record(s) never reached rsyslog, e.g. {missing[:5]}"
    for key, rec in sent.items():
        severity, procid, msgid, got = received[key]
        assert got == rec  # the record as written, hash and all
        assert procid == "gw-syslog" and msgid == rec["event"]
        assert severity == (4 if rec.get("decision") == "deny" else 6)
    assert REAL.encode() not in rsyslog.out.read_bytes()
    assert gw.stop() == 0


def test_a_bad_sink_is_refused_at_start(tmp_path):
    for spec, says in (("syslog:nohost", "syslog:HOST:PORT"), ("syslog:h:0", "1-65535"),
                       ("kafka", "redis[:KEY] or syslog[:HOST:PORT]")):
        r = run_broker_cli("serve", "--listen", "127.0.0.1:0", "--gateway", "--log-dir",
                           tmp_path / "logs", "--ca-dir", tmp_path / "ca", "--audit-sink", spec,
                           timeout=20)
        assert r.returncode != 0 and says in r.stderr, r.stderr
    r = run_broker_cli("serve", "--listen", "127.0.0.1:0", "--log-dir", tmp_path / "logs",
                       "--ca-dir", tmp_path / "ca", "--audit-sink", "syslog", timeout=20)
    assert r.returncode != 0 and "--audit-sink needs --gateway" in r.stderr, r.stderr
