"""What `wrap` keeps out of the host (DESIGN §8.1): a login file's directory view (Codex's
~/.codex) goes back to the real directory when the command ends, but only regular files and
directories, within a size and time budget. A hostile command leaves an 8 GiB sparse file, a
FIFO, links: each is kept out, set aside under the log directory, named in one stderr block and
one `kept_out` audit record, and `broker keep` takes one in anyway, recorded in the log."""

import json
import os
import subprocess

from conftest import BROKER_BIN, clean_env
from test_wrap import assert_clean

OPENAI = "sk-proj-" + "K3ptOutFileKeyAbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
RAN = "command-ran"

LEAVE = f'''
set -e
echo {RAN}
c="$HOME/.codex"
echo notes > "$c/notes.txt"
truncate -s 8G "$c/huge.bin"
mkfifo "$c/pipe"
ln -s /etc/passwd "$c/link"
mkdir "$c/newdir"
echo a > "$c/newdir/a.txt"
ln -s /etc/shadow "$c/newdir/evil"
echo "big:$(stat -c %s "$c/big.log")"
'''


def codex_home(tmp_path):
    home = tmp_path / "home"
    codex = home / ".codex"
    (codex / "sessions").mkdir(parents=True)
    (codex / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": OPENAI, "tokens": None}))
    # Too large to copy into the view: the child sees the real one, live.
    with open(codex / "big.log", "wb") as f:
        f.truncate(300 << 20)
    return home


def wrap(tmp_path, home, *cmd):
    argv = [BROKER_BIN, "wrap", "--log-dir", str(tmp_path / "logs"), "--", *cmd]
    p = subprocess.run(argv, env=clean_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path)}),
                       capture_output=True, timeout=120, cwd=tmp_path)
    return p, p.stdout.decode(), p.stderr.decode()


def records(logs):
    return [json.loads(x) for f in sorted(logs.glob("*.jsonl"))
            for x in f.read_text().splitlines() if x.strip()]


def test_what_cannot_go_back_is_kept_out_named_and_can_be_taken_in(tmp_path):
    home = codex_home(tmp_path)
    codex, logs = home / ".codex", tmp_path / "logs"
    p, out, err = wrap(tmp_path, home, "sh", "-c", LEAVE)
    assert p.returncode == 0 and RAN in out, out + err
    assert f"big:{300 << 20}" in out, out
    # Regular files and directories went back; the rest did not reach the home.
    assert (codex / "notes.txt").read_text() == "notes\n"
    assert (codex / "newdir" / "a.txt").read_text() == "a\n"
    for gone in ("huge.bin", "pipe", "link", "newdir/evil"):
        assert not os.path.lexists(codex / gone), gone
    assert (codex / "big.log").stat().st_size == 300 << 20
    # One line each on stderr, with where it was set aside, and how to take it anyway.
    session = next(r["session"] for r in records(logs))
    kept_root = logs / f"{session}.kept"
    lines = [x for x in err.splitlines() if x.startswith("broker: kept out of your home: ")]
    named = {x.split(": ", 2)[2].split(" (")[0]: x for x in lines}
    assert set(named) == {str(codex / n) for n in ("huge.bin", "pipe", "link", "newdir/evil")}, err
    assert "larger than 256 MiB" in named[str(codex / "huge.bin")], err
    assert "not a regular file" in named[str(codex / "pipe")], err
    assert named[str(codex / "huge.bin")].endswith(f"-> {kept_root}{codex}/huge.bin"), err
    assert f"broker keep {session} PATH" in err, err
    kept = [r for r in records(logs) if r["event"] == "kept_out"]
    assert sorted(r["path"] for r in kept) == sorted(named), kept
    huge = kept_root / str(codex / "huge.bin").lstrip("/")
    assert huge.stat().st_size == 8 << 30 and huge.stat().st_blocks == 0  # still sparse
    assert not (logs / f"{session}.views").exists()
    # Taken in anyway, on purpose; the log says so and still verifies.
    k = subprocess.run([BROKER_BIN, "keep", "--log-dir", str(logs), session,
                        str(codex / "huge.bin")], capture_output=True, text=True,
                       env=clean_env({"HOME": str(home)}))
    assert k.returncode == 0, k.stdout + k.stderr
    assert (codex / "huge.bin").stat().st_size == 8 << 30 and not huge.exists()
    assert [r for r in records(logs) if r["event"] == "kept"][0]["path"] == str(codex / "huge.bin")
    assert records(logs)[-1]["event"] == "session_end"
    v = subprocess.run([BROKER_BIN, "log", "--log-dir", str(logs), session, "--verify"],
                       capture_output=True, text=True, env=clean_env({"HOME": str(home)}))
    assert v.returncode == 0 and "ok" in v.stdout, v.stdout + v.stderr
    again = subprocess.run([BROKER_BIN, "keep", "--log-dir", str(logs), session,
                            str(codex / "huge.bin")], capture_output=True, text=True,
                           env=clean_env({"HOME": str(home)}))
    assert again.returncode == 1 and "nothing was kept out" in again.stderr, again.stderr
    assert_clean((out + err).encode(), "wrap output", OPENAI)


def test_nothing_kept_out_prints_nothing(tmp_path):
    home = codex_home(tmp_path)
    p, out, err = wrap(tmp_path, home, "sh", "-c", "echo x > $HOME/.codex/notes.txt")
    assert p.returncode == 0, err
    assert "kept out" not in err and "broker keep" not in err, err
    assert not [r for r in records(tmp_path / "logs") if r["event"] == "kept_out"]
    assert (home / ".codex" / "notes.txt").read_text() == "x\n"
