"""Debian's OpenSSH server on loopback, posing as github.com and friends (docs/testing.md):
its own host key, its own authorized_keys, started by a test and ended with it."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-agent")


def keygen(path: Path, comment="test") -> str:
    """An unencrypted ed25519 key at PATH; its public line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)
    return path.with_suffix(".pub").read_text().strip()


def fingerprint(pub_line: str) -> str:
    p = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", "-"], input=pub_line.encode(),
                       capture_output=True, check=True)
    return p.stdout.decode().split()[1]


class SshServer:
    """sshd -D on 127.0.0.1:port, accepting the keys in `authorized` for the running user."""

    def __init__(self, directory: Path, authorized: list, name="sshd"):
        self.dir = Path(directory) / name
        self.dir.mkdir(parents=True)
        self.host_pub = keygen(self.dir / "host_ed25519", comment=name)
        (self.dir / "authorized_keys").write_text("\n".join(authorized) + "\n")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = self.dir / "sshd_config"
        config.write_text(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.dir / 'host_ed25519'}
PidFile none
AuthorizedKeysFile {self.dir / 'authorized_keys'}
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
AllowAgentForwarding yes
LogLevel VERBOSE
""")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.log = open(self.dir / "sshd.log", "wb")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError("sshd did not start: " + (self.dir / "sshd.log").read_text())

    def known_hosts_line(self, name: str) -> str:
        kind, blob = self.host_pub.split()[:2]
        return f"{name} {kind} {blob}"

    @property
    def host_key_fingerprint(self) -> str:
        return fingerprint(self.host_pub)

    def accepted(self) -> list:
        """The 'Accepted publickey ...' lines sshd logged."""
        text = (self.dir / "sshd.log").read_text(errors="replace")
        return [line for line in text.splitlines() if "Accepted publickey" in line]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
