"""SSH inside `broker wrap` without the keys (docs/security-model.md, "SSH"): git and ssh reach
the hosts the policy's ssh rules allow through the session's own ssh-agent, whose keys are bound
to those hosts; the key files are unreadable inside, the agent cannot be emptied or read from
inside, other hosts are refused (the connection, and the signature through a jump host), and
every connection and refusal has its record.

Debian's sshd on loopback poses as github.com (and as a host the policy does not allow), reached
through --connect-to; each test first proves the command ran.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BROKER_BIN
from ssh_server import SshServer, available, fingerprint, keygen
from test_wrap import API, PY, WrapSession, github_policy

# scripts/install-deps.sh installs both; a machine without them fails here, never skips.
assert available(), "openssh-server and openssh-client are needed (scripts/install-deps.sh)"

RAN = "command-ran"
GH, EVIL = "github.com", "evil.example"


class World:
    def __init__(self, tmp_path, pki, tls_upstream, extra_rules=(), ssh_section=None):
        self.tmp = tmp_path
        home = tmp_path / "home"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        self.user_pub = keygen(home / ".ssh" / "id_ed25519", comment="user@laptop")
        self.user_key = (home / ".ssh" / "id_ed25519").read_text()
        self.key_fp = fingerprint(self.user_pub)
        self.gh = SshServer(tmp_path, [self.user_pub], name="github")
        self.evil = SshServer(tmp_path, [self.user_pub], name="evil")
        (home / ".ssh" / "known_hosts").write_text(
            self.gh.known_hosts_line(GH) + "\n" + self.evil.known_hosts_line(EVIL) + "\n")
        # ssh reads ~ from the password file (root's /root here), not $HOME: its own config file
        # names the test's (a jump host's ssh gets it too).
        (home / "ssh_config").write_text(
            f"Host *\n  UserKnownHostsFile {home}/.ssh/known_hosts\n  BatchMode yes\n"
            "  ConnectTimeout 10\n")
        # evil.example answers DNS (its HTTPS is allowed), so ssh reaches the broker on port 22.
        policy = github_policy({"allow": [{"host": API}, {"host": GH, "ssh": True},
                                          {"host": EVIL}, *extra_rules]})
        if ssh_section:
            policy["ssh"] = ssh_section
        self.policy, self.ws_pki, self.ws_port = policy, pki, tls_upstream.port
        self.ws = WrapSession(tmp_path, pki, tls_upstream.port, policy=policy,
                              connect=[f"{GH}:22:127.0.0.1:{self.gh.port}",
                                       f"{EVIL}:22:127.0.0.1:{self.evil.port}"])
        self.home = home

    def ssh_command(self):
        return f"ssh -F {self.home}/ssh_config"

    def close(self):
        self.gh.close()
        self.evil.close()


@pytest.fixture
def world(tmp_path, pki, tls_upstream):
    w = World(tmp_path, pki, tls_upstream)
    yield w
    w.close()


def ssh_records(ws):
    return [r for r in ws.records() if r.get("ssh") or r.get("event") == "ssh_agent"]


def test_git_clone_commit_push_over_ssh_inside_wrap(world, tmp_path):
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    (seed / "README").write_text("hello\n")
    git_id = ["-c", "user.name=t", "-c", "user.email=t@example.test"]
    subprocess.run(["git", "-C", str(seed), *git_id, "commit", "-q", "--allow-empty", "-am", "x"],
                   check=False)
    subprocess.run(["git", "-C", str(seed), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(seed), *git_id, "commit", "-q", "-m", "first"], check=True)
    subprocess.run(["git", "-C", str(seed), "push", "-q", str(origin), "main"], check=True)

    script = f"""set -e
echo {RAN}
export GIT_SSH_COMMAND="{world.ssh_command()}"
git clone -q root@{GH}:{origin} work
cd work
echo more >> README
git -c user.name=agent -c user.email=agent@example.test commit -q -am "from inside"
git push -q origin main
echo pushed
"""
    r = world.ws.run("sh", "-c", script, timeout=90)
    assert r.returncode == 0, r.describe()
    assert RAN in r.out and "pushed" in r.out, r.describe()
    assert subprocess.run(["git", "-C", str(origin), "log", "-1", "--format=%s", "main"],
                          capture_output=True, text=True).stdout.strip() == "from inside"
    # The server saw the user's key, signed by the session's agent.
    assert any(world.key_fp in line for line in world.gh.accepted()), world.gh.accepted()
    assert "the session's agent holds 1 key, for github.com only" in r.err, r.err

    conns = [x for x in world.ws.records() if x.get("ssh")]
    assert len(conns) == 2, conns  # clone, push
    for c in conns:
        assert c["host"] == GH and c["port"] == 22 and c["captured"], c
        assert c["decision"] == "allow" and c["event"] == "tunnel", c
        assert c["ssh"]["host_key"] == world.gh.host_key_fingerprint, c
        assert c["ssh"]["key"] == world.key_fp, c
        assert c["ssh"]["user"] == "root", c
        assert c["bytes_out"] > 0 and c["bytes_in"] > 0 and c["ms"] > 0, c
    log = next(world.ws.logs.glob("*.jsonl"))
    v = subprocess.run([BROKER_BIN, "log", str(log), "--verify"], capture_output=True, text=True,
                       env=world.ws.env())
    assert v.returncode == 0 and "ok" in v.stdout, (v.stdout, v.stderr)


def test_the_key_cannot_be_read_or_the_agent_emptied_from_inside(world):
    script = f"""echo {RAN}
echo "agent:$SSH_AUTH_SOCK"
echo "--cat"; cat ~/.ssh/id_ed25519; echo
echo "--list"; ssh-add -L
echo "--remove-all"; ssh-add -D; echo "rc=$?"
echo "--lock"; echo pw | SSH_ASKPASS_REQUIRE=never ssh-add -x </dev/null; echo "rc=$?"
echo "--remove-smartcard"; ssh-add -e /usr/lib/x86_64-linux-gnu/opensc-pkcs11.so; echo "rc=$?"
echo "--add"; ssh-keygen -q -t ed25519 -N '' -f /tmp/mine && ssh-add /tmp/mine; echo "rc=$?"
echo "--agents"; ls /proc | grep -c '^[0-9]' ; ps -eo comm | grep -c ssh-agent
echo "--after"; {world.ssh_command()} root@{GH} echo still-signs
"""
    r = world.ws.run("sh", "-c", script, timeout=60)
    assert r.returncode == 0, r.describe()
    out = r.out
    assert RAN in out, r.describe()
    assert "BEGIN OPENSSH PRIVATE KEY" not in out and world.user_key.splitlines()[1] not in out
    # ssh-add -L shows the public key only.
    listed = out.split("--list\n")[1].split("--remove-all")[0]
    assert world.user_pub.split()[1] in listed, out
    for step in ("--remove-all", "--lock", "--remove-smartcard", "--add"):
        part = out.split(step + "\n")[1].split("\n--")[0]
        assert "rc=1" in part or "rc=2" in part, (step, out)
    agents = out.split("--agents\n")[1].splitlines()[1]
    assert agents.strip() == "0", out  # no ssh-agent process is visible inside
    assert "still-signs" in out, out  # the refusals left the agent's keys in place
    refused = [x for x in world.ws.records() if x.get("event") == "ssh_agent"]
    messages = sorted(x.get("message", "") for x in refused if x["refused"] == "message")
    assert {"remove_all_identities", "lock", "remove_smartcard_key", "add_identity"} <= set(
        messages), refused
    agent_line = [l for l in out.splitlines() if l.startswith("agent:")][0]
    sock = agent_line.split(":", 1)[1]
    assert sock and not os.path.exists(sock), "the socket is left on the host"


def test_other_hosts_are_refused_the_connection_and_the_signature(world):
    script = f"""echo {RAN}
echo "--direct"; {world.ssh_command()} root@{EVIL} echo reached-evil; echo "rc=$?"
echo "--jump"; {world.ssh_command()} -o ProxyJump=root@{GH} -o StrictHostKeyChecking=no \
  -o UserKnownHostsFile=/dev/null -p {world.evil.port} root@127.0.0.1 echo reached-evil; echo "rc=$?"
echo "--allowed"; {world.ssh_command()} root@{GH} echo reached-github
"""
    r = world.ws.run("sh", "-c", script, timeout=90)
    assert r.returncode == 0, r.describe()
    assert RAN in r.out and "reached-github" in r.out, r.describe()
    assert "reached-evil" not in r.out.replace("echo reached-evil", ""), r.describe()
    assert "Permission denied (publickey)" in r.err, r.err
    # The evil server accepts the same key from outside (the refusal is the agent's).
    outside = subprocess.run(
        ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes",
         "-i", str(world.home / ".ssh" / "id_ed25519"), "-p", str(world.evil.port),
         "root@127.0.0.1", "echo", "outside-ok"], capture_output=True, text=True, timeout=30,
        stdin=subprocess.DEVNULL, env={"PATH": os.environ["PATH"], "HOME": str(world.home)})
    assert "outside-ok" in outside.stdout, outside.stderr
    assert not world.evil.accepted() or all("127.0.0.1" in x for x in world.evil.accepted())
    recs = world.ws.records()
    direct = [x for x in recs if x.get("host") == EVIL and x.get("port") == 22]
    assert direct and direct[0]["decision"] == "deny", recs
    hidden = [x for x in recs if x.get("event") == "ssh_agent" and x["refused"] == "key_hidden"]
    assert hidden, [x for x in recs if x.get("event") == "ssh_agent"]
    assert hidden[0]["host_key"] == world.evil.host_key_fingerprint, hidden
    assert hidden[0]["host"] is None  # through the jump host: no tunnel of the session carried it
    jump = [x for x in recs if x.get("ssh") and x["host"] == GH]
    assert len(jump) == 2 and all(x["ssh"]["key"] == world.key_fp for x in jump), jump


def children(pid: int) -> list:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def agents_of(broker: int) -> dict:
    """The session agents a broker started (its keeper's child): pid -> the socket it serves.
    Other tests' sessions may run meanwhile; their agents are not these."""
    out = {}
    for keeper in children(broker):
        for agent in children(keeper):
            args = Path(f"/proc/{agent}/cmdline").read_bytes().split(b"\0")
            if len(args) >= 4 and args[0].endswith(b"ssh-agent") and args[2] == b"-a":
                out[agent] = args[3].decode()
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ssh-agent")
    except OSError:
        return False


def wait_for(predicate, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_two_sessions_have_separate_agents_and_a_killed_broker_leaves_none(world, tmp_path):
    script = (f"echo {RAN}; echo \"agent:$SSH_AUTH_SOCK\"; "
              f"{world.ssh_command()} root@{GH} echo signed; sleep 60")
    second_dir = tmp_path / "second"
    second_dir.mkdir()
    second = WrapSession(second_dir, world.ws_pki, world.ws_port, policy=world.policy,
                         connect=world.ws.connect[1:])
    sessions = [world.ws, second]
    procs = [ws.popen("sh", "-c", script, env={"HOME": str(world.home)}) for ws in sessions]
    try:
        signed = lambda ws: (ws.dir / "popen.stdout").read_bytes().count(b"\nsigned\n") == 1
        assert wait_for(lambda: all(signed(ws) for ws in sessions)), [
            (ws.dir / "popen.stderr").read_bytes()[-2000:] for ws in sessions]
        mine = [agents_of(p.pid) for p in procs]
        assert [len(a) for a in mine] == [1, 1], mine  # one each
        (first_agent, first_sock), = mine[0].items()
        (second_agent, second_sock), = mine[1].items()
        assert first_sock != second_sock and Path(first_sock).is_socket()
        inside = [(ws.dir / "popen.stdout").read_text().split("agent:")[1].split()[0]
                  for ws in sessions]
        assert inside[0] != inside[1], inside

        procs[0].kill()  # SIGKILL: no clean-up of its own
        procs[0].wait(timeout=10)
        assert wait_for(lambda: not alive(first_agent)), "the killed broker's agent still runs"
        # The keeper removes the socket and its directory once the agent has ended: a moment later.
        assert wait_for(lambda: not Path(first_sock).parent.exists()), "the agent's socket is left"
        assert alive(second_agent) and Path(second_sock).is_socket()
        # The session's own socket was bound into the command's view and gone from the host's
        # since; only the killed broker's control socket is left of it.
        left_behind = [p for p in world.ws.runtime.rglob("*") if p.is_socket()]
        assert [p.name for p in left_behind] == ["control.sock"], left_behind
        assert not Path(inside[0]).exists()

        procs[1].terminate()  # the second ends as a session ends: its agent with it
        procs[1].wait(timeout=20)
        assert wait_for(lambda: not alive(second_agent)), "the second session's agent still runs"
        assert not Path(second_sock).parent.exists()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for ws in sessions:
            ws.popen_output()


def test_the_policys_host_keys_are_the_agents_and_the_commands(tmp_path, pki, tls_upstream):
    w = World(tmp_path, pki, tls_upstream, extra_rules=[{"host": "git.corp.example", "ssh": True}])
    try:
        # The user's known_hosts lacks github.com: the policy names its key.
        (w.home / ".ssh" / "known_hosts").write_text(w.evil.known_hosts_line(EVIL) + "\n")
        policy = dict(w.policy, ssh={"host_keys": [w.gh.known_hosts_line(GH)]})
        w.ws.policy_file.write_text(json.dumps(policy))
        script = f"""echo {RAN}
echo "--list"; ssh-add -l
echo "--write"; echo x >> ~/.ssh/known_hosts; echo "rc=$?"
echo "--ssh"; ssh -o BatchMode=yes -o UserKnownHostsFile=/dev/null root@{GH} echo trusted-by-policy
"""
        r = w.ws.run("sh", "-c", script, timeout=60)
        assert r.returncode == 0, r.describe()
        assert RAN in r.out and "trusted-by-policy" in r.out, r.describe()
        assert w.key_fp in r.out.split("--list\n")[1], r.out
        assert "rc=0" not in r.out.split("--write\n")[1].split("--ssh")[0], r.out
        assert "no known host key for git.corp.example" in r.err, r.err
        assert "holds 1 key, for github.com only" in r.err, r.err
        assert (w.home / ".ssh" / "known_hosts").read_text() == w.evil.known_hosts_line(EVIL) + "\n"
    finally:
        w.close()


def test_no_policy_written_an_ssh_origin_pushes(world, tmp_path):
    """The default policy's agent profiles: keys in ~/.ssh and an SSH origin on github.com add
    the ssh rule for it (docs/agents.md)."""
    origin = Path(f"/tmp/broker-ssh-origin-{os.getpid()}-{time.monotonic_ns()}.git")
    try:
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
        clone = tmp_path / "clone"
        subprocess.run(["git", "init", "-q", "-b", "main", str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "remote", "add", "origin",
                        f"root@{GH}:{origin}"], check=True)
        (clone / "file").write_text("x\n")
        argv = [BROKER_BIN, "wrap", "--connect-to", f"{GH}:22:127.0.0.1:{world.gh.port}",
                "--log-dir", str(world.ws.logs), "--", "sh", "-c",
                f"echo {RAN}; export GIT_SSH_COMMAND='{world.ssh_command()}'; git add file && "
                "git -c user.name=a -c user.email=a@example.test commit -qm from-default && "
                "git push -q origin main && echo pushed"]
        p = subprocess.run(argv, cwd=clone, env=world.ws.env(), capture_output=True, timeout=90,
                           stdin=subprocess.DEVNULL)
        out, err = p.stdout.decode(), p.stderr.decode()
        assert p.returncode == 0 and RAN in out and "pushed" in out, (out, err)
        assert "holds 1 key, for github.com only" in err, err
        assert subprocess.run(["git", "-C", str(origin), "log", "-1", "--format=%s"],
                              capture_output=True, text=True).stdout.strip() == "from-default"
        conns = [x for x in world.ws.records() if x.get("ssh")]
        assert conns and conns[0]["ssh"]["key"] == world.key_fp, conns

        # Without an SSH origin nothing is added: port 22 stays closed.
        subprocess.run(["git", "-C", str(clone), "remote", "set-url", "origin",
                        "https://github.com/org/repo.git"], check=True)
        p = subprocess.run(argv[:-1] + [f"echo {RAN}; echo \"sock:$SSH_AUTH_SOCK\"; "
                                        f"{world.ssh_command()} root@{GH} echo reached"],
                           cwd=clone, env=world.ws.env(), capture_output=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        out = p.stdout.decode()
        assert RAN in out and "sock:\n" in out and "reached" not in out.replace("echo reached", "")
    finally:
        subprocess.run(["rm", "-rf", str(origin)])


# A client that speaks the agent protocol itself: it lists the keys, then asks for a signature of
# data of its choosing on a connection bound to no server.
_SIGN_ANYTHING = r"""
import os, socket, struct
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["SSH_AUTH_SOCK"])
def ask(payload):
    s.sendall(struct.pack(">I", len(payload)) + payload)
    n = struct.unpack(">I", s.recv(4))[0]; r = b""
    while len(r) < n: r += s.recv(n - len(r))
    return r
listed = ask(b"\x0b")
count = struct.unpack(">I", listed[1:5])[0]
blob_len = struct.unpack(">I", listed[5:9])[0]
blob = listed[9:9 + blob_len]
data = b"exfiltrate-this-with-a-signature"
answer = ask(b"\x0d" + struct.pack(">I", len(blob)) + blob + struct.pack(">I", len(data)) + data
             + struct.pack(">I", 0))
print("keys", count, "answer", answer[0])
"""


def test_a_signature_of_anything_on_an_unbound_connection_is_refused(world):
    script = (f"{PY} -c '{_SIGN_ANYTHING}'; echo data > /tmp/commit; "
              "ssh-keygen -Y sign -n git -f ~/.ssh/id_ed25519.pub /tmp/commit; "
              "echo keygen-rc=$?; ls /tmp/commit.sig 2>&1; true")
    r = world.ws.run("sh", "-c", script, timeout=60)
    assert r.returncode == 0, r.describe()
    assert "keys 1 answer 5" in r.out, r.describe()  # SSH_AGENT_FAILURE
    # git's SSH commit signing asks the agent the same way: refused too.
    assert "keygen-rc=0" not in r.out and "No such file" in r.out, r.describe()
    refused = [x for x in world.ws.records() if x.get("event") == "ssh_agent"]
    assert [x["refused"] for x in refused] == ["sign", "sign"], refused
    assert refused[0]["key"] == world.key_fp and refused[0]["host_key"] is None, refused
    assert refused[0]["exe"] and refused[0]["exe"].endswith(("python3", "python3.11")), refused


def test_an_encrypted_key_loads_through_the_users_askpass(tmp_path, pki, tls_upstream):
    w = World(tmp_path, pki, tls_upstream)
    try:
        key = w.home / ".ssh" / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-p", "-N", "open sesame", "-f", str(key)],
                       check=True, stdin=subprocess.DEVNULL)
        askpass = tmp_path / "askpass.sh"
        askpass.write_text("#!/bin/sh\necho 'open sesame'\n")
        askpass.chmod(0o700)
        script = (f"echo {RAN}; ssh-add -l; echo askpass-vars:$(env | grep -c '^SSH_ASKPASS='); "
                  f"{w.ssh_command()} root@{GH} echo signed-encrypted")
        r = w.ws.run("sh", "-c", script, timeout=60,
                     env={"SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force"})
        assert r.returncode == 0, r.describe()
        assert RAN in r.out and "signed-encrypted" in r.out and w.key_fp in r.out, r.describe()
        assert "holds 1 key" in r.err, r.err
        # The passphrase program is the broker's to run, not the command's.
        assert "askpass-vars:0" in r.out, r.out

        # With no way to ask, the key is left out and wrap says so.
        r = w.ws.run("sh", "-c", f"echo {RAN}; ssh-add -l; echo rc=$?", timeout=60)
        assert RAN in r.out and "rc=1" in r.out, r.describe()
        assert f"{key} did not load" in r.err, r.err
    finally:
        w.close()
