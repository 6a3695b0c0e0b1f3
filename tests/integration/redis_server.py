"""A real redis-server on a free loopback port, for the gateway's replica tests."""
import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """redis-server with its data in `directory` (append-only, so a restart keeps the sessions;
    fsync each second: an fsync per write stalls every client for as long as a busy disk takes)."""

    def __init__(self, directory: Path):
        assert shutil.which("redis-server"), "redis-server is not installed (scripts/install-deps.sh)"
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(self.dir),
             "--daemonize", "no", "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.command("PING") == "+PONG":
                return
            time.sleep(0.05)
        raise AssertionError(f"redis-server did not start: {(self.dir / 'redis.log').read_text()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def command(self, *args) -> str:
        """One command over RESP; the reply's first line ('' when nothing answers)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                out = f"*{len(args)}\r\n".encode()
                for a in args:
                    a = str(a).encode()
                    out += b"$%d\r\n%s\r\n" % (len(a), a)
                s.sendall(out)
                return s.recv(65536).decode(errors="replace").split("\r\n")[0]
        except OSError:
            return ""
