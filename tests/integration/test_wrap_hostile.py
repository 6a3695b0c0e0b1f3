"""A hostile command inside `broker wrap` (DESIGN §8.1, §8.2): each test performs one attack from
inside the session, as root and as an unprivileged user where both apply, first proves that the
command ran, then that the attack got nothing.

- The broker's own state is invisible: a `file:` credential source, the policy files, the audit
  log directory and ~/.config/broker read as empty, and the log cannot be rewritten from inside.
- A root child cannot change host-global kernel state through /proc/sys, /proc/sysrq-trigger or
  /sys (each write below is harmless if it got through: a domain name the test restores, a
  SysRq help request, a KSM setting written back unchanged).
"""

import json
import os
from pathlib import Path

import pytest

from conftest import clean_env
from test_wrap import (API, REAL, WrapSession, assert_clean, github_policy, nobody,  # noqa: F401
                       NOBODY)

ACME_REAL = "acme_" + "F1leS0urceRealT0ken0123456789abcdef"
RAN = "command-ran"


def acme_policy(token_file):
    """The GitHub policy plus a bearer credential whose real value is read from a file."""
    return github_policy({"credentials": {
        "github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": ["github.com", API]},
        "acme": {"type": "bearer", "source": f"file:{token_file}", "env": ["ACME_TOKEN"],
                 "hosts": ["api.acme.test"]},
    }})


# What the child tries: read the source file, the policy, the log directory, the broker's config
# and its key; then replace its own audit log. Each finding is one line.
STEAL = f'''
echo {RAN}
echo "source:[$(cat "$1" 2>&1)]"
echo "policy:[$(cat "$2" 2>&1 | head -c 200)]"
echo "logs:[$(ls -A "$3" 2>&1)]"
echo "config:[$(ls -A "$HOME/.config/broker" 2>&1)]"
for f in "$3"/*.jsonl; do
  if (echo forged > "$f") 2>/dev/null; then echo "forge:ok"; else echo "forge:refused"; fi
done
if (echo forged > "$3/forged.jsonl") 2>/dev/null; then echo "plant:ok"; else echo "plant:refused"; fi
'''


def check_state_hidden(out: str, logs, policy_text: str):
    assert RAN in out, out
    assert ACME_REAL not in out, f"the file: source was readable inside:\n{out}"
    assert "source:[]" in out, out
    assert "policy:[]" in out, f"the policy file was readable inside:\n{out}"
    assert "logs:[]" in out, f"the audit log directory was visible inside:\n{out}"
    assert "config:[]" in out or "No such file" in out, out
    assert "forge:ok" not in out and "plant:refused" in out, out
    # Outside, the log is the broker's own: a chain from session_start to session_end.
    records = [json.loads(line) for f in sorted(logs.glob("*.jsonl"))
               for line in f.read_text().splitlines() if line.strip()]
    assert records and records[0]["event"] == "session_start", records
    assert records[-1]["event"] == "session_end", records
    assert not (logs / "forged.jsonl").exists()


def test_a_root_or_user_child_cannot_read_the_brokers_own_state(tmp_path, pki, tls_upstream):
    token = tmp_path / "secrets" / "acme-token"
    token.parent.mkdir()
    token.write_text(ACME_REAL + "\n")
    token.chmod(0o600)
    ws = WrapSession(tmp_path / "s", pki, tls_upstream.port, policy=acme_policy(token))
    (ws.home / ".config" / "broker").mkdir(parents=True)
    (ws.home / ".config" / "broker" / "audit-key").write_text("not a real key\n")
    r = ws.run("sh", "-c", STEAL, "sh", token, ws.policy_file, ws.logs)
    assert r.returncode == 0, r.describe()
    check_state_hidden(r.out, ws.logs, ws.policy_file.read_text())
    assert_clean(r.stdout + r.stderr, "wrap output", ACME_REAL, REAL)
    # The dummy still stands in for it.
    assert token.read_text().strip() == ACME_REAL


def test_an_unprivileged_child_cannot_read_the_brokers_own_state(nobody, tls_upstream):
    token = nobody.home / "acme-token"
    token.write_text(ACME_REAL + "\n")
    os.chown(token, NOBODY, NOBODY)
    token.chmod(0o600)
    nobody.policy.write_text(json.dumps(acme_policy(token)))
    r = nobody.run(tls_upstream.port, "sh", "-c", STEAL, "sh", token, nobody.policy, nobody.logs)
    assert r.returncode == 0, r.describe()
    check_state_hidden(r.out, nobody.logs, nobody.policy.read_text())
    assert_clean(r.stdout + r.stderr, "wrap output", ACME_REAL, REAL)


KERNEL_WRITES = f'''
echo {RAN}
if (echo broker-attack > /proc/sys/kernel/domainname) 2>/dev/null; then echo "sysctl:ok"; else echo "sysctl:refused"; fi
if (echo h > /proc/sysrq-trigger) 2>/dev/null; then echo "sysrq:ok"; else echo "sysrq:refused"; fi
if [ -e /sys/kernel/mm/ksm/run ]; then
  v=$(cat /sys/kernel/mm/ksm/run)
  if (echo "$v" > /sys/kernel/mm/ksm/run) 2>/dev/null; then echo "sysfs:ok"; else echo "sysfs:refused"; fi
else echo "sysfs:refused"; fi
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root broker gives the child root")
def test_a_root_child_cannot_change_host_kernel_settings(tmp_path, pki, tls_upstream):
    domainname = Path("/proc/sys/kernel/domainname")
    before = domainname.read_text()
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    try:
        r = ws.run("sh", "-c", KERNEL_WRITES)
        assert r.returncode == 0, r.describe()
        assert RAN in r.out, r.out
        assert domainname.read_text() == before, "the child changed the host's domain name"
        for what in ("sysctl", "sysrq", "sysfs"):
            assert f"{what}:refused" in r.out, r.out
    finally:
        domainname.write_text(before)
