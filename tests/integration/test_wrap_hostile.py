"""A hostile command inside `broker wrap` (docs/security-model.md, docs/audit-log.md): each test performs one attack from
inside the session, as root and as an unprivileged user where both apply, first proves that the
command ran, then that the attack got nothing.

- The broker's own state is invisible: a `file:` credential source, the policy files, the audit
  log directory and ~/.config/broker (the audit and dummy keys) read as empty, and the log cannot be rewritten from inside.
- A root child cannot change host-global kernel state through /proc/sys, /proc/sysrq-trigger or
  /sys (each write below is harmless if it got through: a domain name the test restores, a
  SysRq help request, a KSM setting written back unchanged).
- No host IPC: sockets under the host's /tmp, /run and the runtime dir (another session's
  control socket too) do not answer, /dev/shm is empty, and files.pass binds one through.
- The control socket: the command cannot reach its own to replace it, and `broker status|kill`
  refuse a socket whose peer is not the session's broker.
- A syscall filter: no child can push input into the user's terminal (TIOCSTI, here on a
  pseudo-terminal that is the session's controlling terminal, as a user's shell has one), make
  new namespaces or use the kernel keyring; a root child makes no set-user-ID file by any call
  (chmod, open, creat, mknod with the mode bits; openat2 and io_uring are refused outright).
- A minimal private /dev: no block device, none of the host's terminals.
"""

import json
import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BROKER_BIN
from test_wrap import (API, NOBODY, PY, REAL, WrapSession, assert_clean, github_policy,
                       nobody)  # noqa: F401

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


def hidden(out: str, what: str) -> bool:
    """The child's `what:[...]` line shows nothing: empty, or not there at all (a path under the
    child's private /tmp)."""
    line = next((x for x in out.splitlines() if x.startswith(f"{what}:[")), None)
    return line is not None and (line == f"{what}:[]" or "No such file or directory" in line)


def check_state_hidden(out: str, logs, policy_text: str):
    assert RAN in out, out
    assert ACME_REAL not in out, f"the file: source was readable inside:\n{out}"
    assert hidden(out, "source"), out
    assert hidden(out, "policy"), f"the policy file was readable inside:\n{out}"
    assert hidden(out, "logs"), f"the audit log directory was visible inside:\n{out}"
    assert hidden(out, "config"), out
    assert "forge:ok" not in out and "plant:refused" in out, out
    # Outside, the log is the broker's own: a chain from session_start to session_end.
    records = [json.loads(line) for f in sorted(logs.glob("*.jsonl"))
               for line in f.read_text().splitlines() if line.strip()]
    assert records and records[0]["event"] == "session_start", records
    assert records[-1]["event"] == "session_end", records
    assert not (logs / "forged.jsonl").exists()


def test_a_root_or_user_child_cannot_read_the_brokers_own_state(tmp_path, pki, tls_upstream):
    # Under the working directory, so that the child's private /tmp does not hide them already.
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    token = ws.home / ".acme" / "token"
    token.parent.mkdir()
    token.write_text(ACME_REAL + "\n")
    token.chmod(0o600)
    ws.policy_file.write_text(json.dumps(acme_policy(token)))
    r = ws.run("sh", "-c", STEAL, "sh", token, ws.policy_file, ws.logs)
    assert r.returncode == 0, r.describe()
    check_state_hidden(r.out, ws.logs, ws.policy_file.read_text())
    # The audit key the session signed with was there all along, out of the child's sight.
    key = ws.home / ".config" / "broker" / "audit-key"
    assert key.exists() and "PRIVATE KEY" in key.read_text()
    assert key.read_text() not in r.out
    # So was the key the session's dummies are derived with (docs/policy.md).
    dummy_key = ws.home / ".config" / "broker" / "dummy-key"
    assert dummy_key.exists() and dummy_key.read_text().strip() not in r.out
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


# ---- the syscall filter: the terminal, new namespaces, the kernel keyring ----------------------

TIOCSTI = r'''
import errno, fcntl, termios
print("command-ran", flush=True)
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"#")
    print("tiocsti:ok", flush=True)
except OSError as e:
    print("tiocsti:" + errno.errorcode.get(e.errno, str(e.errno)), flush=True)
'''


def run_on_terminal(argv, env, cwd, timeout=30.0):
    """Runs argv as the session leader of a new pseudo-terminal (its controlling terminal, as a
    user's shell has one). Returns (exit status, what it wrote to the terminal)."""
    pid, master = pty.fork()
    if pid == 0:  # the child: exec at once
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's last user closed it
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def test_a_child_cannot_push_input_into_the_users_terminal(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    argv = ws.argv(PY, "-c", TIOCSTI)
    code, out = run_on_terminal(argv, ws.env(), ws.dir)
    assert code == 0, out
    assert RAN in out, out
    assert "tiocsti:EPERM" in out, f"TIOCSTI went through:\n{out}"


def test_an_unprivileged_child_cannot_push_input_into_the_users_terminal(nobody, tls_upstream):
    argv = [shutil.which("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            BROKER_BIN, "wrap", "--isolate", "netns", "--policy", str(nobody.policy),
            "--log-dir", str(nobody.logs), "--", PY, "-c", TIOCSTI]
    code, out = run_on_terminal(argv, nobody.env, "/")
    assert code == 0, out
    assert RAN in out, out
    assert "tiocsti:EPERM" in out, f"TIOCSTI went through:\n{out}"


SYSCALLS = r'''
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
found = {}
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    found[name] = "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
# x86_64 numbers: unshare(CLONE_NEWUSER), keyctl(KEYCTL_GET_KEYRING_ID, session keyring, 0),
# add_key("user", ...) into the session keyring.
call("unshare", 272, ctypes.c_ulong(0x10000000))
call("keyctl", 250, 0, ctypes.c_long(-3), 0)
call("add_key", 248, b"user", b"broker-test", b"x", 1, ctypes.c_long(-3))
print("command-ran " + json.dumps(found), flush=True)
'''


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the script uses x86_64 numbers")
def test_a_child_cannot_make_namespaces_or_use_the_kernel_keyring(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    r = ws.run(PY, "-c", SYSCALLS)
    assert r.returncode == 0, r.describe()
    line = next(l for l in r.out.splitlines() if l.startswith(RAN))
    found = json.loads(line[len(RAN) + 1:])
    assert found == {"unshare": "EPERM", "keyctl": "EPERM", "add_key": "EPERM"}, found


# ---- persistence: the user's startup files ------------------------------------------------------

PERSIST = f'''
echo {RAN}
for f in .bashrc .profile .gitconfig .config/git/config .ssh/authorized_keys .local/bin/tool; do
  if (echo "touch /tmp/pwned" >> "$HOME/$f") 2>/dev/null; then echo "$f:written"; else echo "$f:refused"; fi
done
if (echo x > "$HOME/.config/autostart/evil.desktop") 2>/dev/null; then echo "autostart:written"; else echo "autostart:refused"; fi
cat "$HOME/.bashrc"
'''
STARTUP = {".bashrc": "# the user's bashrc\n", ".profile": "# profile\n",
           ".gitconfig": "[user]\n\tname = U\n", ".config/git/config": "[core]\n",
           ".ssh/authorized_keys": "ssh-ed25519 AAAA user\n", ".config/autostart/keep": "x\n",
           ".local/bin/tool": "#!/bin/sh\n"}  # the last one is the policy's files.readonly
READONLY = github_policy({"files": {"readonly": ["~/.local/bin"]}})


def plant_startup(home, owner=None):
    for rel, text in STARTUP.items():
        f = home / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        if owner is not None:
            for p in [f, *f.relative_to(home).parents]:
                os.chown(home / p, owner, owner)


def check_startup_intact(out, err, home):
    assert RAN in out, out
    # Written inside (the session's own layer), but files.readonly, which is read-only there.
    assert ".local/bin/tool:refused" in out and ".bashrc:written" in out, out
    assert "the user's bashrc" in out, f"startup files must stay readable:\n{out}"
    for rel, text in STARTUP.items():
        assert (home / rel).read_text() == text, rel
    assert not (home / ".config/autostart/evil.desktop").exists()
    for rel in (".bashrc", ".profile", ".gitconfig", ".config/git/config", ".ssh/authorized_keys",
                ".config/autostart/evil.desktop"):
        assert f"broker: kept out: {home / rel} (" in err, (rel, err)


def test_a_child_cannot_persist_through_the_users_startup_files(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port, policy=READONLY)
    plant_startup(ws.home)
    r = ws.run("sh", "-c", PERSIST)
    assert r.returncode == 0, r.describe()
    check_startup_intact(r.out, r.err, ws.home)


def test_an_unprivileged_child_cannot_persist_through_the_users_startup_files(nobody,
                                                                               tls_upstream):
    plant_startup(nobody.home, NOBODY)
    nobody.policy.write_text(json.dumps(READONLY))
    r = nobody.run(tls_upstream.port, "sh", "-c", PERSIST)
    assert r.returncode == 0, r.describe()
    check_startup_intact(r.out, r.err, nobody.home)


class HostService:
    """An HTTP service on a unix socket, standing in for docker.sock, systemd, D-Bus or ssh-agent:
    anyone who can reach the socket gets `200 host-service`."""

    def __init__(self, path: Path):
        import socket
        import threading
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        path.chmod(0o777)
        self.sock.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\n"
                             b"host-service")

    def close(self):
        self.sock.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture
def host_ipc(tmp_path):
    """Host services under /tmp (outside the session's working directory) and /run, a file in
    /dev/shm, and (per test) another session's control socket in the runtime dir."""
    import tempfile
    tmp = Path(tempfile.mkdtemp(prefix="bw-ipc-", dir="/tmp"))
    tmp.chmod(0o755)
    tag = tmp.name
    services = [HostService(tmp / "service.sock"), HostService(Path("/run") / f"{tag}.sock")]
    shm = Path("/dev/shm") / tag
    shm.write_text("host-shm\n")
    shm.chmod(0o644)
    try:
        yield services, shm
    finally:
        for s in services:
            s.close()
        shm.unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


# What the child tries: every host socket it was told of, the host's shared memory, the runtime
# dir (another session's control socket, its own); then it uses its own /tmp.
REACH = f'''
echo {RAN}
shm="$1"; shift
for s in "$@"; do
  if out=$(curl -s --max-time 3 --unix-socket "$s" http://host/ 2>&1); then echo "reached:$out"; else echo "unreachable"; fi
done
echo "shm:[$(cat "$shm" 2>&1)]"
echo "runtime:[$(cd "$XDG_RUNTIME_DIR" && find . 2>&1 | sort | tr '\\n' ' ')]"
scratch="/tmp/$(basename "$shm").scratch"
echo scratch > "$scratch" && echo "tmp:$(cat "$scratch")"
'''


def plant_other_session(runtime: Path, owner=None):
    other = runtime / "broker" / "other-session"
    other.mkdir(parents=True)
    for p in (runtime / "broker", other):
        p.chmod(0o700)
    service = HostService(other / "control.sock")
    if owner is not None:
        for p in (runtime / "broker", other, other / "control.sock"):
            os.chown(p, owner, owner)
    return service


def check_no_host_ipc(out: str, services, shm):
    assert RAN in out, out
    assert "reached" not in out, f"a host unix socket answered inside:\n{out}"
    assert out.count("unreachable") == len(services), out
    assert "host-shm" not in out, f"the host's /dev/shm was readable inside:\n{out}"
    runtime = next(x for x in out.splitlines() if x.startswith("runtime:["))
    assert "other-session" not in runtime and "control.sock" not in runtime, out
    assert "ca-bundle.pem" in runtime, out  # the session's own trust bundle stays readable
    assert "tmp:scratch" in out, f"the child's own /tmp must work:\n{out}"
    assert not Path(f"/tmp/{shm.name}.scratch").exists(), "the child's /tmp was the host's"


def test_a_child_cannot_reach_host_unix_sockets(tmp_path, pki, tls_upstream, host_ipc):
    services, shm = host_ipc
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    other = plant_other_session(ws.runtime)
    try:
        sockets = [s.path for s in services] + [other.path]
        r = ws.run("sh", "-c", REACH, "sh", shm, *sockets)
        assert r.returncode == 0, r.describe()
        check_no_host_ipc(r.out, sockets, shm)
        # files.pass binds one through on purpose.
        ws.policy_file.write_text(json.dumps(github_policy({"files": {"pass": [str(services[0].path)]}})))
        r = ws.run("sh", "-c", REACH, "sh", shm, services[0].path)
        assert "reached:host-service" in r.out, r.describe()
    finally:
        other.close()


def test_an_unprivileged_child_cannot_reach_host_unix_sockets(nobody, tls_upstream, host_ipc):
    services, shm = host_ipc
    other = plant_other_session(nobody.dir / "run", NOBODY)
    try:
        sockets = [s.path for s in services] + [other.path]
        r = nobody.run(tls_upstream.port, "sh", "-c", REACH, "sh", shm, *sockets)
        assert r.returncode == 0, r.describe()
        check_no_host_ipc(r.out, sockets, shm)
        nobody.policy.write_text(json.dumps(github_policy({"files": {"pass": [str(services[1].path)]}})))
        r = nobody.run(tls_upstream.port, "sh", "-c", REACH, "sh", shm, services[1].path)
        assert "reached:host-service" in r.out, r.describe()
    finally:
        other.close()


# The child puts its own listener where its session's control socket is, answering every request
# as the broker would ("ok").
HIJACK = r'''
import os, socket, sys, time
path = sys.argv[1]
print("command-ran", flush=True)
# Where the command can see the broker's runtime directory ("wait"): the broker opens its
# control socket once the command runs, so replace that one, not a path that the broker's own
# socket would then take back.
pid_file = os.path.splitext(path)[0] + ".pid"
for _ in range(1200 if sys.argv[2:] == ["wait"] else 0):
    if os.path.exists(path) and os.path.exists(pid_file):
        break
    time.sleep(0.025)
try:
    os.unlink(path)
except OSError:
    pass
os.makedirs(os.path.dirname(path), exist_ok=True)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(4)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    try:
        c.recv(100)
        c.sendall(b'{"ok":true,"session":"x","mode":"wrap","pid":1,"requests":0,"denied":0}\n')
    except OSError:
        pass
    c.close()
'''


def read_until(p, marker: str, timeout=15.0) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([p.stdout], [], [], 0.1)
        if ready:
            chunk = os.read(p.stdout.fileno(), 4096)  # unbuffered: select sees what is left
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    return seen


def hijack_then_kill(wrap_argv, run_as, env, session, uid):
    """Starts the hijacker under `broker wrap` in /tmp (so the host's /tmp is bound through),
    then `broker kill`s the session from outside: the command must end."""
    sock = f"/tmp/broker-{uid}/{session}/control.sock"
    p = subprocess.Popen(run_as + wrap_argv + ["--session", session, "--", PY, "-c", HIJACK, sock],
                         env=env, cwd="/tmp", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        out = read_until(p, "listening")
        assert RAN in out and "listening" in out, (out, p.stderr.read1() if p.poll() else "")
        k = subprocess.run(run_as + [BROKER_BIN, "kill", session], env=env, capture_output=True,
                           text=True, timeout=30)
        assert k.returncode == 0, k.stderr
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("`broker kill` answered ok but the command kept running: the child "
                        "hijacked its control socket")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_child_cannot_hijack_its_control_socket(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    env = ws.env()
    del env["XDG_RUNTIME_DIR"]  # sessions live under /tmp/broker-UID
    argv = ws.argv("true")[:-2]  # everything before "--"
    hijack_then_kill(argv, [], env, f"hijack-{os.getpid()}", os.geteuid())


def test_an_unprivileged_child_cannot_hijack_its_control_socket(nobody, tls_upstream):
    env = dict(nobody.env)
    del env["XDG_RUNTIME_DIR"]
    argv = [BROKER_BIN, "wrap", "--isolate", "netns", "--policy", str(nobody.policy),
            "--upstream-ca", str(nobody.ca), "--log-dir", str(nobody.logs)]
    run_as = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    hijack_then_kill(argv, run_as, env, f"hijack-{os.getpid()}", NOBODY)


def test_status_and_kill_refuse_a_socket_another_process_put_there(tmp_path, pki, tls_upstream):
    """`--isolate env` cannot hide the runtime directory: the command replaces the socket, and
    `broker status|kill` see that its peer is not the session's broker and say so."""
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    session = f"peer-{os.getpid()}"
    sock = ws.runtime / "broker" / session / "control.sock"
    p = subprocess.Popen(ws.argv(PY, "-c", HIJACK, sock, "wait", isolate="env",
                                 extra=["--session", session]),
                         env=ws.env(), cwd=ws.dir, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        out = read_until(p, "listening")
        assert "listening" in out, out
        for command in (["kill", session], ["status", session]):
            r = subprocess.run([BROKER_BIN, *command], env=ws.env(), capture_output=True,
                               text=True, timeout=30)
            assert r.returncode != 0, (command, r.stdout, r.stderr)
            assert "not the session's broker" in r.stderr, r.stderr
            assert "is ending" not in r.stdout, r.stdout
        assert p.poll() is None
    finally:
        p.terminate()
        p.wait(timeout=10)


# In `--isolate env` the log directory is the user's, so the child can reach its log: it refuses
# itself a request, then replaces the log with a re-chained copy without the refusal and with a
# made-up session_end, as the issue found (`--verify` said "ok").
FORGE = r'''
import glob, hashlib, json, os, re, subprocess, sys
print("command-ran", flush=True)
subprocess.run(["curl", "-s", "-o", "/dev/null", "https://refused.example.test/"])
log = glob.glob(os.path.join(sys.argv[1], "*.jsonl"))[0]
lines = [x for x in open(log).read().splitlines() if '"event":"refused"' not in x]
lines.append(lines[-1].replace('"event":"session_start"', '"event":"session_end"'))
prev, out = "0" * 64, ""
for seq, line in enumerate(lines, start=1):
    line = re.sub(r'"seq":\d+', '"seq":%d' % seq, line, count=1)
    line = re.sub(r'"prev":"[0-9a-f]{64}"', '"prev":"%s"' % prev, line, count=1)
    body = line[:line.rindex(',"hash":"')] + "}"
    prev = hashlib.sha256((prev + body).encode()).hexdigest()
    out += body[:-1] + ',"hash":"%s"}\n' % prev
os.unlink(log)
open(log, "w").write(out)
print("forged", flush=True)
'''


def test_a_log_the_child_forged_does_not_verify(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    r = ws.run(PY, "-c", FORGE, ws.logs, isolate="env")
    assert r.returncode == 0 and "forged" in r.out, r.describe()
    assert "was replaced or removed during the session" in r.err, r.err
    [log] = ws.logs.glob("*.jsonl")
    assert '"event":"refused"' not in log.read_text()  # the forgery is in place
    v = subprocess.run([BROKER_BIN, "log", str(log), "--verify"], capture_output=True, text=True,
                       env=ws.env(), timeout=30)
    assert v.returncode == 1, v.stdout + v.stderr
    assert ": unsigned:" in v.stdout, v.stdout


# A root child leaves nothing behind that gives root to someone later: no set-user-ID or
# set-group-ID file (chmod refused), no immutable flags or file capabilities (capabilities gone).
ROOT_LEFTOVERS = f'''
import ctypes, os, sys
print("{RAN}", flush=True)
f = os.path.join(os.getcwd(), "suid-shell")
open(f, "w").write("#!/bin/sh\\n")
for mode in (0o4755, 0o2755, 0o6755):
    try:
        os.chmod(f, mode)
        print("chmod %o: ok" % mode)
    except PermissionError:
        print("chmod %o: refused" % mode)
os.chmod(f, 0o755)
print("plain chmod:", oct(os.stat(f).st_mode & 0o7777))
bounding = int(next(x for x in open("/proc/self/status") if x.startswith("CapBnd:")).split()[1], 16)
for name, bit in (("linux_immutable", 9), ("setfcap", 31), ("sys_time", 25), ("chown", 0)):
    print("cap %s: %s" % (name, "kept" if bounding >> bit & 1 else "dropped"))
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root broker gives the child root")
def test_a_root_child_cannot_leave_setuid_files_or_immutable_ones(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    r = ws.run(PY, "-c", ROOT_LEFTOVERS)
    assert r.returncode == 0 and RAN in r.out, r.describe()
    for mode in ("4755", "2755", "6755"):
        assert f"chmod {mode}: refused" in r.out, r.out
    assert "plain chmod: 0o755" in r.out, r.out
    assert (ws.dir / "suid-shell").stat().st_mode & 0o6000 == 0
    for cap in ("linux_immutable", "setfcap", "sys_time"):
        assert f"cap {cap}: dropped" in r.out, r.out
    assert "cap chown: kept" in r.out, r.out  # everyday file work stays possible


# Other calls that make a set-user-ID file than the chmod family (each one works on today's
# kernels for root): open, openat and creat with the mode bits, mknod of a regular file, and
# the calls whose arguments a filter cannot read (openat2, io_uring).
SETID_DOORS = f'''
import ctypes, errno, os, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
print("{RAN}", flush=True)
d = os.getcwd()
def report(what, call):
    try:
        call()
        print(what + ": made")
    except OSError as e:
        print(what + ": " + errno.errorcode.get(e.errno, str(e.errno)))
def syscall(nr, *args):
    rc = libc.syscall(nr, *args)
    if rc < 0:
        raise OSError(ctypes.get_errno(), "")
    return rc
report("open 4755", lambda: os.close(os.open(d + "/o1", os.O_CREAT | os.O_WRONLY, 0o4755)))
report("open 2755", lambda: os.close(os.open(d + "/o2", os.O_CREAT | os.O_WRONLY, 0o2755)))
report("creat 4755", lambda: os.close(syscall(85, (d + "/o3").encode(), 0o4755)))
report("openat 6755", lambda: os.close(syscall(257, -100, (d + "/o4").encode(),
                                                 os.O_CREAT | os.O_WRONLY, 0o6755)))
report("mknod 4755", lambda: os.mknod(d + "/o5", stat.S_IFREG | 0o4755))
report("plain open", lambda: os.close(os.open(d + "/o6", os.O_CREAT | os.O_WRONLY, 0o755)))
report("openat2", lambda: syscall(437, -100, (d + "/o7").encode(), ctypes.c_void_p(0), 24))
params = ctypes.create_string_buffer(120)
report("io_uring_setup", lambda: syscall(425, 4, params))
for f in sorted(os.listdir(d)):
    if f.startswith("o"):
        print("left %s %o" % (f, os.stat(d + "/" + f).st_mode & 0o7777))
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root broker gives the child root")
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the script uses x86_64 numbers")
def test_a_root_child_cannot_make_setuid_files_by_any_call(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    r = ws.run(PY, "-c", SETID_DOORS)
    assert r.returncode == 0 and RAN in r.out, r.describe()
    for what in ("open 4755", "open 2755", "creat 4755", "openat 6755", "mknod 4755"):
        assert f"{what}: EPERM" in r.out, r.out
    assert "plain open: made" in r.out and "left o6 755" in r.out, r.out
    assert "openat2: ENOSYS" in r.out and "io_uring_setup: ENOSYS" in r.out, r.out
    for f in tmp_path.iterdir():
        assert f.stat().st_mode & 0o6000 == 0, f


# What /dev holds inside: the devices a program needs, its own pseudo-terminals, no block
# device and none of the host's terminals.
DEV = f'''
import os, pty, stat
print("{RAN}", flush=True)
print("dev:" + " ".join(sorted(os.listdir("/dev"))))
block = [f for f in os.listdir("/dev") if stat.S_ISBLK(os.stat("/dev/" + f).st_mode)]
print("block:" + " ".join(block))
print("pts:" + " ".join(sorted(os.listdir("/dev/pts"))))
open("/dev/null", "w").write("x")
print("urandom:%d" % len(open("/dev/urandom", "rb").read(16)))
master, slave = pty.openpty()
os.write(slave, b"ping\\n")
print("pty:" + os.read(master, 16).decode().strip())
'''


def check_dev(out: str):
    assert RAN in out, out
    lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    listed = set(lines["dev"].split())
    assert listed >= {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm",
                      "fd", "stdin", "stdout", "stderr"}, listed
    assert listed <= {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm",
                      "fd", "stdin", "stdout", "stderr", "console"}, listed
    assert lines["block"] == "", out
    assert lines["pts"].split() == ["ptmx"], out  # a new instance: no host terminal in it
    assert lines["urandom"] == "16" and lines["pty"] == "ping", out


def test_a_child_gets_a_minimal_private_dev(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    r = ws.run(PY, "-c", DEV)
    assert r.returncode == 0, r.describe()
    check_dev(r.out)


def test_an_unprivileged_child_gets_a_minimal_private_dev(nobody, tls_upstream):
    r = nobody.run(tls_upstream.port, PY, "-c", DEV)
    assert r.returncode == 0, r.describe()
    check_dev(r.out)


# The host's System V IPC: a shared memory segment the test makes outside, looked up inside.
SYSV = f'''
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
print("{RAN}", flush=True)
segment = libc.shmget(int(sys.argv[1]), 0, 0)
print("host segment:", "reached" if segment >= 0 else "absent")
'''


@pytest.fixture
def host_segment():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x6272_0000 + os.getpid() % 0xffff
    shmid = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT
    assert shmid >= 0, ctypes.get_errno()
    try:
        yield key
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


def test_a_child_cannot_reach_host_sysv_ipc(tmp_path, pki, tls_upstream, host_segment):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    r = ws.run(PY, "-c", SYSV, str(host_segment))
    assert r.returncode == 0 and RAN in r.out, r.describe()
    assert "host segment: absent" in r.out, r.out


def test_an_unprivileged_child_cannot_reach_host_sysv_ipc(nobody, tls_upstream, host_segment):
    r = nobody.run(tls_upstream.port, PY, "-c", SYSV, str(host_segment))
    assert r.returncode == 0 and RAN in r.out, r.describe()
    assert "host segment: absent" in r.out, r.out
