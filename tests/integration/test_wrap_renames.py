"""Protections that survive renames (docs/security-model.md, issue 26 A and B). A hostile command inside
`broker wrap` renames, removes or replaces a directory above a protected path, hoping the
protection moves away with it (a mount over a file moves with its renamed directory) and its own
file takes the old one's place:

- a login file's dummy copy: the broker would write the rotated real tokens into the child's
  new file; and, when something outside renames the directory, it must not refresh at all;
- read-only files (ssh and git configuration, files.readonly), the broker's own hidden files
  (a planted audit key would sign later sessions' logs).

Each test first proves the command ran, then that the attack got nothing, as root and as an
unprivileged user where both apply.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BROKER_BIN, clean_env
from test_login_files import ACCESS, REFRESH, anthropic  # noqa: F401
from test_wrap import NOBODY, REAL, WrapSession, assert_clean, github_policy, nobody  # noqa: F401

RAN = "command-ran"


def claude_login(home: Path, owner=None) -> Path:
    real = home / ".claude" / ".credentials.json"
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_text(json.dumps({"claudeAiOauth": {
        "accessToken": ACCESS, "refreshToken": REFRESH, "expiresAt": 1700000000000,
        "scopes": ["user:inference"], "subscriptionType": "max"}}))
    real.chmod(0o600)
    if owner is not None:
        for p in (real.parent, real):
            os.chown(p, owner, owner)
    return real


def run_claude_session(tmp_path, pki, anthropic, script, *args, timeout=60):  # noqa: F811
    home = tmp_path / "home"
    port = anthropic.server_address[1]
    argv = [BROKER_BIN, "wrap", "--upstream-ca", str(pki.ca_cert), "--log-dir",
            str(tmp_path / "logs"),
            "--connect-to", f"api.anthropic.com:443:127.0.0.1:{port}",
            "--connect-to", f"platform.claude.com:443:127.0.0.1:{port}",
            "--", "python3", "-c", script, *map(str, args)]
    env = clean_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path)})
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tmp_path)


def tree_holds(root: Path, *values, skip=()):
    """Every file under root (but `skip`) that holds one of the values."""
    found = []
    for f in root.rglob("*"):
        if f.is_file() and not f.is_symlink() and f not in skip:
            data = f.read_bytes()
            if any(v.encode() in data for v in values):
                found.append(f)
    return found


REFRESH_CHILD = r'''
import json, os, subprocess, sys, time
home = os.path.expanduser("~")
copy = json.load(open(home + "/.claude/.credentials.json"))["claudeAiOauth"]
print("%s" % sys.argv[1], flush=True)
def attempt(what, *cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    print("%s:%s" % (what, "ok" if p.returncode == 0 else "refused"), flush=True)
if sys.argv[2] == "inside":
    # The attack: the login's directory away, a new one in its place with an empty login.
    attempt("rename", "mv", home + "/.claude", home + "/.claude.o")
    attempt("remove", "rm", "-f", home + "/.claude/.credentials.json")
    os.makedirs(home + "/.claude", exist_ok=True)
    open(home + "/.claude/.credentials.json", "w").write("{}")
else:
    # Something outside renames the directory, then says so in the working directory.
    deadline = time.monotonic() + 20
    while not os.path.exists("moved") and time.monotonic() < deadline:
        time.sleep(0.05)
    print("moved:%s" % os.path.exists("moved"), flush=True)
form = json.dumps({"grant_type": "refresh_token", "refresh_token": copy["refreshToken"]})
p = subprocess.run(["curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}",
                    "https://platform.claude.com/v1/oauth/token", "-H",
                    "Content-Type: application/json", "-d", form], capture_output=True, text=True)
body, _, status = p.stdout.rpartition("\n")
print("refresh:" + status, flush=True)
print("body:" + body.replace("\n", " "), flush=True)
'''


def test_renaming_the_login_files_directory_inside_sends_no_real_token_to_the_child(
        tmp_path, pki, anthropic):  # noqa: F811
    home = tmp_path / "home"
    real = claude_login(home)
    p = run_claude_session(tmp_path, pki, anthropic, REFRESH_CHILD, RAN, "inside")
    out, err = (x.decode() for x in p.communicate(timeout=90))
    assert p.returncode == 0, f"{out}\n{err}"
    assert RAN in out, out
    lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    # The dummy copy is the session's own, in its layer: whatever the command does with it and
    # the directory above, the broker writes the rotated login only through the real file it
    # opened before the command started, and nothing of the command's reaches the home.
    assert "rename" in lines and "remove" in lines, out
    assert not (home / ".claude.o").exists()
    # The refresh went as usual: the child got dummies, the user's real file the new login.
    assert lines["refresh"] == "200", out
    assert anthropic.spent == [REFRESH]
    saved = json.loads(real.read_text())["claudeAiOauth"]
    assert saved["refreshToken"] == anthropic.refresh and saved["accessToken"] == anthropic.access
    # No real value, old or new, anywhere in the home but the user's real login file.
    reals = [ACCESS, REFRESH] + anthropic.issued
    assert tree_holds(home, *reals, skip={real}) == []
    assert_clean((out + err).encode(), "wrap output", *reals)


def test_an_unprivileged_child_renaming_the_login_files_directory_gets_no_real_token(
        nobody, anthropic):  # noqa: F811
    home = nobody.home
    real = claude_login(home, NOBODY)
    port = anthropic.server_address[1]
    extra = ["--connect-to", f"api.anthropic.com:443:127.0.0.1:{port}",
             "--connect-to", f"platform.claude.com:443:127.0.0.1:{port}"]
    r = nobody.run(port, "python3", "-c", REFRESH_CHILD, RAN, "inside", extra=extra,
                   default_policy=True, timeout=60)
    assert r.returncode == 0 and RAN in r.out, r.describe()
    lines = dict(line.split(":", 1) for line in r.out.splitlines() if ":" in line)
    assert "rename" in lines and "remove" in lines, r.out
    assert not (home / ".claude.o").exists()
    assert lines["refresh"] == "200" and anthropic.spent == [REFRESH], r.out
    saved = json.loads(real.read_text())["claudeAiOauth"]
    assert saved["refreshToken"] == anthropic.refresh
    reals = [ACCESS, REFRESH] + anthropic.issued
    assert tree_holds(home, *reals, skip={real}) == []
    assert_clean(r.stdout + r.stderr, "wrap output", *reals)


def test_a_login_file_renamed_away_outside_is_not_refreshed_into_its_successor(
        tmp_path, pki, anthropic):  # noqa: F811
    """Something outside the session (here the test, standing for anything the child could not
    be stopped from doing) moves the login's directory and puts a new login file in its place:
    the broker redeems nothing, and writes nothing there."""
    home = tmp_path / "home"
    claude_login(home)
    p = run_claude_session(tmp_path, pki, anthropic, REFRESH_CHILD, RAN, "outside")
    assert p.stdout.readline().decode().strip() == RAN
    (home / ".claude").rename(home / ".claude.o")
    (home / ".claude").mkdir()
    successor = home / ".claude" / ".credentials.json"
    successor.write_text("{}")
    (tmp_path / "moved").touch()
    out, err = (x.decode() for x in p.communicate(timeout=90))
    assert p.returncode == 0, f"{out}\n{err}"
    lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert lines["moved"] == "True", out
    # The dummy went up unswapped, so the token endpoint refused it; nothing was spent.
    assert lines["refresh"] == "400", out
    assert anthropic.spent == []
    assert successor.read_text() == "{}"
    moved = json.loads((home / ".claude.o" / ".credentials.json").read_text())["claudeAiOauth"]
    assert moved["refreshToken"] == REFRESH
    assert "no longer the file the session began with" in err, err
    assert_clean((out + err).encode(), "wrap output", ACCESS, REFRESH)


# Renaming a directory above read-only and hidden paths, then planting files in a new one.
RENAMES = f'''
echo {RAN}
h="$HOME"
try() {{ if "$@" 2>/dev/null; then echo "$1 $2:ok"; else echo "$1 $2:refused"; fi; }}
try mv "$h/.ssh" "$h/.ssh.o"
try mv "$h/.config" "$h/.config.o"
try mv "$h/.config/git" "$h/.config/git.o"
try mv "$h/.local" "$h/.local.o"
try mv "$h/.local/bin" "$h/.local/bin.o"
try mv "$h" "$h.o"
try rmdir "$h/.config/git"
mkdir -p "$h/.ssh" "$h/.config/broker" "$h/.config/git" "$h/.local/bin"
(echo 'Match exec "touch /tmp/pwned"' > "$h/.ssh/config") 2>/dev/null
(echo '[core]\n\tfsmonitor = touch /tmp/pwned' > "$h/.config/git/config") 2>/dev/null
(echo forged > "$h/.config/broker/audit-key") 2>/dev/null
(printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > "$h/.local/bin/tool") 2>/dev/null
# Ordinary work in the same directories goes on.
echo host >> "$h/.ssh/known_hosts" && echo "known_hosts:ok"
mkdir -p "$h/.config/newapp" && echo state > "$h/.config/newapp/state" && echo "newapp:ok"
'''
PLANTED = {".ssh/config": "Host *\n", ".config/git/config": "[core]\n",
           ".local/bin/tool": "#!/bin/sh\necho tool\n"}
READONLY = github_policy({"files": {"readonly": ["~/.local/bin"]}})


def plant(home: Path, owner=None):
    for rel, text in PLANTED.items():
        f = home / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    if owner is not None:
        for f in [home, *home.rglob("*")]:
            os.chown(f, owner, owner)


def check_renames_held(out: str, home: Path, key_before: str):
    assert RAN in out, out
    # Above a read-only or hidden path, and the home itself: no rename. (Elsewhere in the home a
    # rename is the session's own, like every other change there.)
    for what in ("mv " + str(home / p) for p in (".config", ".local", ".local/bin", "")):
        assert f"{what.rstrip('/')}:refused" in out, f"{what} was renamed inside:\n{out}"
    assert f"rmdir {home}/.config/git:refused" in out, out
    assert "known_hosts:ok" in out and "newapp:ok" in out, out
    # The planted files, the renamed directories and the ordinary work all stayed in the
    # session; the audit key is the user's.
    for rel, text in PLANTED.items():
        assert (home / rel).read_text() == text, rel
    for moved in (".ssh.o", ".config.o", ".local.o", ".config/git.o", ".local/bin.o"):
        assert not (home / moved).exists(), moved
    assert not Path(str(home) + ".o").exists()
    assert (home / ".config/broker/audit-key").read_text() == key_before
    assert not (home / ".config/newapp").exists()


def test_renaming_a_parent_does_not_lift_read_only_or_hidden_paths(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port, policy=READONLY)
    plant(ws.home)
    first = ws.run("true")  # makes the audit key
    assert first.returncode == 0, first.describe()
    key = (ws.home / ".config/broker/audit-key").read_text()
    r = ws.run("sh", "-c", RENAMES)
    assert r.returncode == 0, r.describe()
    check_renames_held(r.out, ws.home, key)
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)


def test_an_unprivileged_child_cannot_lift_protections_by_renaming(nobody, tls_upstream):  # noqa: F811
    plant(nobody.home, NOBODY)
    nobody.policy.write_text(json.dumps(READONLY))
    first = nobody.run(tls_upstream.port, "true")
    assert first.returncode == 0, first.describe()
    key = (nobody.home / ".config/broker/audit-key").read_text()
    r = nobody.run(tls_upstream.port, "sh", "-c", RENAMES)
    assert r.returncode == 0, r.describe()
    check_renames_held(r.out, nobody.home, key)


# The workspace's repository: a hook, a config command or an exclude planted inside would act
# at the user's next git command outside. Everyday git keeps working.
GIT = f'''
echo {RAN}
try() {{ if "$@" 2>/dev/null; then echo "$1 $2:ok"; else echo "$1 $2:refused"; fi; }}
plant() {{ if (printf '#!/bin/sh\\ntouch pwned\\n' > "$1" && chmod +x "$1") 2>/dev/null; then echo "$1:planted"; else echo "$1:refused"; fi; }}
plant .git/hooks/post-checkout
plant .git/hooks/pre-commit
try git config core.fsmonitor "touch pwned"
try git config core.hooksPath /tmp
try mv .git .git.o
try mv .git/hooks .git/hooks.o
if (echo '*.evil' >> .git/info/exclude) 2>/dev/null; then echo "exclude:written"; else echo "exclude:refused"; fi
echo work > work.txt
git add work.txt && git commit -qm work && echo "commit:ok"
git checkout -q -b feature && echo "branch:ok"
git fetch -q origin && echo "fetch:ok"
git push -q origin feature && echo "push:ok"
# A repository cloned inside: its hooks and config are the command's to write, and stay out.
git clone -q ../remotes/origin.git sub && echo "clone:ok"
plant sub/.git/hooks/post-checkout
git -C sub config core.fsmonitor "touch pwned" && echo "sub config:ok"
'''


def make_repo(where: Path, owner=None):
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x",
           "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    def git(*a, cwd=where):
        subprocess.run(["git", *a], cwd=cwd, env=env, check=True, capture_output=True)
    where.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "--bare", str(where / "remotes" / "origin.git"))
    repo = where / "repo"
    git("init", "-q", "-b", "main", str(repo))
    git("config", "user.name", "u", cwd=repo)
    git("config", "user.email", "u@x", cwd=repo)
    (repo / "README").write_text("hello\n")
    git("add", "README", cwd=repo)
    git("commit", "-qm", "first", cwd=repo)
    git("remote", "add", "origin", str(where / "remotes" / "origin.git"), cwd=repo)
    git("push", "-q", "origin", "main", cwd=repo)
    if owner is not None:
        for f in [where, *where.rglob("*")]:
            os.chown(f, owner, owner, follow_symlinks=False)
    return repo


def check_git(out: str, err: str, repo: Path, config_before: str):
    assert RAN in out, out
    for hook in ("post-checkout", "pre-commit"):
        assert f".git/hooks/{hook}:refused" in out, out
        assert not (repo / ".git" / "hooks" / hook).exists()
    assert "git config:refused" in out and "git config:ok" not in out, out
    assert "mv .git:refused" in out and "mv .git/hooks:refused" in out, out
    assert "exclude:refused" in out, out
    assert (repo / ".git" / "config").read_text() == config_before
    assert not (repo / "pwned").exists()
    for step in ("commit", "branch", "fetch", "push"):
        assert f"{step}:ok" in out, f"git {step} failed inside:\n{out}"
    assert "clone:ok" in out and "sub config:ok" in out, out
    assert not (repo / "sub" / ".git" / "hooks" / "post-checkout").exists()
    # The clone keeps where it comes from, not the command in its config.
    sub_config = (repo / "sub" / ".git" / "config").read_text()
    assert "origin.git" in sub_config and "fsmonitor" not in sub_config, sub_config
    named = {x.split(": ", 2)[2].split(" (")[0]: x for x in err.splitlines()
             if x.startswith("broker: kept out: ")}
    assert "(a git hook)" in named[str(repo / "sub/.git/hooks/post-checkout")], err
    assert "(git configuration (core.fsmonitor))" in named[str(repo / "sub/.git/config")], err
    log = subprocess.run(["git", "-c", "safe.directory=*", "-C",
                          str(repo.parent / "remotes" / "origin.git"),
                          "log", "--format=%s",
                          "feature"], capture_output=True, text=True)
    assert log.stdout.split() == ["work", "first"], log


def test_the_workspaces_git_hooks_and_config_cannot_be_planted(tmp_path, pki, tls_upstream):
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    repo = make_repo(ws.home / "w")  # the remote beside it, a workspace of its own
    config = (repo / ".git" / "config").read_text()
    p = subprocess.run(ws.argv("sh", "-c", GIT, extra=["--workspace", repo.parent / "remotes"]),
                       env=ws.env(), capture_output=True, timeout=60, cwd=repo)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 0, out + err
    check_git(out, err, repo, config)


def test_an_unprivileged_childs_git_hooks_and_config_cannot_be_planted(nobody, tls_upstream):  # noqa: F811
    repo = make_repo(nobody.home / "w", NOBODY)
    config = (repo / ".git" / "config").read_text()
    r = nobody.run(tls_upstream.port, "sh", "-c", GIT, cwd=repo,
                   extra=["--workspace", str(repo.parent / "remotes")])
    assert r.returncode == 0, r.describe()
    check_git(r.out, r.err, repo, config)


def test_relative_paths_from_the_working_directory_pass_beneath_no_protection(
        tmp_path, pki, tls_upstream):
    """The command starts in its working directory; the mounts made above it (its private /tmp,
    the masks) hold for paths relative to it too: the audit log directory under it stays hidden."""
    ws = WrapSession(tmp_path, pki, tls_upstream.port)
    r = ws.run("sh", "-c", f"echo {RAN}; echo \"logs:[$(ls -A logs 2>&1)]\"; "
                           "(echo forged > logs/forged.jsonl) 2>/dev/null && echo plant:ok; true")
    assert r.returncode == 0 and RAN in r.out, r.describe()
    assert "logs:[]" in r.out and "plant:ok" not in r.out, r.out
    assert not (ws.logs / "forged.jsonl").exists()
