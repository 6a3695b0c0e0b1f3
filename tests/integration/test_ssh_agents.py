"""Claude Code and Codex pushing over SSH inside `broker wrap` with no policy written
(docs/agents.md, "Git over SSH"): the fake model asks the real agent to run `git push`, the
workspace's origin is an SSH remote on github.com (Debian's sshd on loopback), and the user's key
in ~/.ssh signs through the session's agent while the agent never reads it.
"""
import subprocess
import time
from pathlib import Path

import pytest

from ssh_server import SshServer, fingerprint, keygen
from test_real_agents import (_agents_installed, agents_pki, assert_no_leaks,  # noqa: F401
                              assert_turn_done, make_fake, sessions, tool_agent, tool_results)

GH = "github.com"


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_an_agent_pushes_over_ssh_with_the_users_key_it_never_holds(make_fake, sessions, agent,
                                                                    tmp_path):
    origin = Path(f"/tmp/broker-ssh-agent-{agent}-{time.monotonic_ns()}.git")
    server = None
    try:
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
        push = ("GIT_SSH_COMMAND=\"ssh -F $HOME/ssh_config\" git push -q origin main "
                "&& echo pushed-over-ssh")
        fake = make_fake(tool_call=push, ws="refuse")
        cmd, env, host, real = tool_agent(fake, agent)
        s = sessions(fake)
        name = f"{agent}-ssh"
        d, home, runtime, logs, work = s.prepare(name)
        (home / ".ssh").mkdir(mode=0o700)
        pub = keygen(home / ".ssh" / "id_ed25519", comment="user@laptop")
        server = SshServer(tmp_path, [pub], name="github")
        (home / ".ssh" / "known_hosts").write_text(server.known_hosts_line(GH) + "\n")
        (home / "ssh_config").write_text(
            f"Host *\n  UserKnownHostsFile {home}/.ssh/known_hosts\n  BatchMode yes\n")
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
        subprocess.run(["git", "-C", str(work), "remote", "add", "origin", f"root@{GH}:{origin}"],
                       check=True)
        (work / "NOTES").write_text("from the agent\n")
        subprocess.run(["git", "-C", str(work), "add", "NOTES"], check=True)
        subprocess.run(["git", "-C", str(work), "-c", "user.name=a", "-c",
                        "user.email=a@example.test", "commit", "-qm", "agent's work"], check=True)

        run = s.run(name, cmd, env=env, timeout=120,
                    extra_args=["--connect-to", f"{GH}:22:127.0.0.1:{server.port}"])
        assert_turn_done(run, fake)
        assert "holds 1 key, for github.com only" in run.err, run.describe()
        # The push reached the server, and its output reached the model as the tool's result.
        assert subprocess.run(["git", "-C", str(origin), "log", "-1", "--format=%s"],
                              capture_output=True, text=True).stdout.strip() == "agent's work"
        results = tool_results(fake, host)
        assert results and any("pushed-over-ssh" in r for r in results), results
        conns = [r for r in run.records() if r.get("ssh")]
        assert conns and conns[0]["ssh"]["key"] == fingerprint(pub), conns
        assert any(fingerprint(pub) in line for line in server.accepted())
        # The key's private half is in no byte the agent or the broker wrote.
        key_body = (home / ".ssh" / "id_ed25519").read_text().splitlines()[1]
        assert_no_leaks(run, [real])
        assert key_body.encode() not in run.stdout + run.stderr
        for f in logs.glob("*.jsonl"):
            assert key_body.encode() not in f.read_bytes()
    finally:
        if server:
            server.close()
        subprocess.run(["rm", "-rf", str(origin)])
