"""A real agent's TUI inside `broker wrap`, driven as a person drives it: a tmux pane of a tmux
server of its own, keys sent with send-keys, the screen read with capture-pane (the harness of
tests/integration/test_interactive_agents.py).

The pane runs a small shell script: it records `stty -a` and waits for the test to say go (so the
test can read the pane's modes before anything ran), runs `broker wrap ... -- AGENT`, records the
exit status and `stty -a` again, and then stays (so the pane's modes after the agent can be read
too: alternate screen, mouse reporting, cursor, keypad).
"""

import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

# The pane modes a program can leave behind (tmux's format variables), each 0 or 1.
PANE_MODES = ("alternate_on", "cursor_flag", "insert_flag", "keypad_cursor_flag", "keypad_flag",
              "mouse_any_flag", "mouse_button_flag", "mouse_standard_flag", "mouse_sgr_flag",
              "origin_flag", "wrap_flag")


class Terminal:
    """One `broker wrap -- AGENT` in a W x H tmux pane. `argv`, `env` and `cwd` are the wrap
    command's (agent_run.AgentSessions.command with interactive=True)."""

    def __init__(self, argv, env, cwd, size=(120, 40), term="xterm-256color"):
        self.dir = Path(tempfile.mkdtemp(prefix="bw-tty-"))  # short: a socket path < 108 bytes
        self.sock = self.dir / "s"
        self.env = dict(env)
        self.go, self.rc_file = self.dir / "go", self.dir / "rc"
        self.stty_before, self.stty_after = self.dir / "stty.before", self.dir / "stty.after"
        self.ended = self.dir / "ended"
        q = shlex.quote
        script = (f"stty -a > {q(str(self.stty_before))}; "
                  f"while [ ! -e {q(str(self.go))} ]; do sleep 0.05; done; "
                  f"{shlex.join(str(a) for a in argv)}; echo $? > {q(str(self.rc_file))}; "
                  f"stty -a > {q(str(self.stty_after))}; touch {q(str(self.ended))}; "
                  "exec sleep 3600")
        # No user configuration; the pane's TERM is the terminal a person would have.
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "agent", "-x", str(size[0]),
                  "-y", str(size[1]), "-c", str(cwd), "sh", "-c", script)
        self.tmux("set-option", "-g", "window-size", "manual")
        self.tmux("set-option", "-g", "default-terminal", term)
        self.tmux("set-option", "-g", "remain-on-exit", "on")
        self.modes_before = None

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-S", str(self.sock), *args], env=self.env, check=check,
                              capture_output=True, timeout=15, text=True)

    # ---- the person's side -------------------------------------------------------------------

    def start(self):
        """Starts the wrap command once the shell has recorded the terminal's state."""
        wait_until(self.stty_before.exists, 10, "the pane's shell did not start")
        self.modes_before = self.modes()
        self.go.touch()

    def screen(self) -> str:
        """What the pane shows now, one line per row, trailing blanks trimmed."""
        return self.tmux("capture-pane", "-p", "-t", "agent").stdout

    def history(self) -> str:
        """Everything the pane showed, its scrollback too."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "agent").stdout

    def wait_for_any(self, *texts, timeout=60.0) -> str:
        """Waits until the screen shows one of `texts`; returns that one. Fails with the last
        screen."""
        last, found = "", None

        def shows():
            nonlocal last, found
            last = self.screen()
            flat = " ".join(last.split())
            found = next((t for t in texts if " ".join(t.split()) in flat), None)
            return found is not None
        if not wait_until(shows, timeout):
            raise AssertionError(f"the screen never showed any of {texts!r} in {timeout:.0f} s; "
                                 f"it shows:\n{last}")
        return found

    def wait_for(self, *texts, timeout=60.0, gone=()):
        """Waits until the screen shows every one of `texts` (and none of `gone`); returns it.
        Fails with the last screen."""
        last = ""

        def shows():
            nonlocal last
            last = self.screen()
            flat = " ".join(last.split())
            return (all(" ".join(t.split()) in flat for t in texts)
                    and not any(" ".join(g.split()) in flat for g in gone))
        if not wait_until(shows, timeout):
            raise AssertionError(f"the screen never showed {texts!r} (without {gone!r}) in "
                                 f"{timeout:.0f} s; it shows:\n{last}")
        return last

    def keys(self, *keys, pause=0.4):
        """tmux key names ("Enter", "C-c", "Up", "Escape"...), one at a time with a person's
        pause before each (a screen just drawn may not take keys yet)."""
        for key in keys:
            time.sleep(pause)
            self.tmux("send-keys", "-t", "agent", key)

    def press(self, key, *texts, tries=3, each=20.0):
        """Presses `key` until the screen shows every one of `texts`, at most `tries` times, each
        waited on for `each` s; returns the screen. For a screen drawn by a process that may
        still be starting (Gemini CLI draws its menu again after restarting itself, and a key
        sent before the new one reads its terminal is lost)."""
        for attempt in range(tries):
            self.keys(key)
            try:
                return self.wait_for(*texts, timeout=each)
            except AssertionError:
                if attempt == tries - 1:
                    raise

    def type(self, text: str):
        """Types `text` literally, a character at a time as a person would (no paste)."""
        for ch in text:
            self.tmux("send-keys", "-t", "agent", "-l", ch)
        time.sleep(0.2)

    def resize(self, width: int, height: int):
        self.tmux("resize-window", "-t", "agent", "-x", str(width), "-y", str(height))

    def size(self):
        w, h = self.tmux("display-message", "-p", "-t", "agent",
                         "#{pane_width} #{pane_height}").stdout.split()
        return int(w), int(h)

    def modes(self) -> dict:
        fmt = " ".join("#{%s}" % m for m in PANE_MODES)
        values = self.tmux("display-message", "-p", "-t", "agent", fmt).stdout.split()
        return dict(zip(PANE_MODES, values))

    # ---- the end -----------------------------------------------------------------------------

    def wait_exit(self, timeout=30.0) -> int:
        """The wrap command's exit status, once it ended; fails with the screen otherwise."""
        if not wait_until(self.ended.exists, timeout):
            raise AssertionError(f"the agent did not end in {timeout:.0f} s; the screen:\n"
                                 f"{self.screen()}")
        return int(self.rc_file.read_text().strip())

    def sane_afterwards(self):
        """[] when the terminal is as it was before the agent ran (`stty -a`, and the pane's
        modes: no alternate screen, mouse reporting or keypad mode left on, cursor shown); else
        what differs."""
        bad = []
        # The size is the window's, which the test may have changed.
        before, after = (re.sub(r"rows \d+; columns \d+;", "", f.read_text())
                         for f in (self.stty_before, self.stty_after))
        if before != after:
            bad.append(f"stty -a before:\n{before}\nafter:\n{after}")
        modes = self.modes()
        for m, v in (self.modes_before or {}).items():
            if modes.get(m) != v:
                bad.append(f"{m}: {v} before, {modes.get(m)} after")
        return bad

    def close(self):
        self.tmux("kill-server", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_until(predicate, timeout, message=None, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    ok = predicate()
    if not ok and message:
        raise AssertionError(message)
    return ok
