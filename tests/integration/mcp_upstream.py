"""tests/agents/mcp_server.mjs as an upstream for the MCP tests (test_mcp.py,
test_mcp_agents.py): a real MCP server built with @modelcontextprotocol/sdk, on a loopback port,
with a test CA's leaf, wanting one bearer token, logging every request it receives."""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

AGENTS = Path(__file__).resolve().parent.parent / "agents"
MCP_DIR = Path(os.environ.get("BROKER_AGENTS_DIR", "/var/cache/broker-agents")) / "mcp"


def sdk_installed():
    if not (MCP_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(f"the MCP SDK is not installed in {MCP_DIR}: run scripts/install-agents.sh")


class McpServer:
    """mcp_server.mjs with `pki`'s leaf, wanting `token`; `options` as the script takes them."""

    def __init__(self, directory: Path, pki, token, *options):
        directory.mkdir(parents=True, exist_ok=True)
        self.log = directory / "server.log"
        self.proc = subprocess.Popen(
            ["node", str(AGENTS / "mcp_server.mjs"), "--cert", str(pki.leaf_cert), "--key",
             str(pki.leaf_key), "--token", token, "--log", str(self.log), *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env={**os.environ, "BROKER_MCP_DIR": str(MCP_DIR)}, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("READY "), f"mcp_server.mjs did not start: {line!r} " \
                                          f"{self.proc.stderr.read() if self.proc.poll() else ''}"
        self.port = json.loads(line[len("READY "):])["port"]

    def requests(self):
        if not self.log.exists():
            return []
        return [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class EverythingServer:
    """@modelcontextprotocol/server-everything, the MCP reference server, in streamable-HTTP mode
    (plain HTTP on a loopback port), behind tests/agents/tls_front.mjs with `pki`'s leaf: `port`
    is the TLS front's. It wants no token."""

    def __init__(self, directory: Path, pki):
        package = MCP_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything"
        if not (package / "dist" / "index.js").is_file():
            pytest.fail(f"server-everything is not installed in {MCP_DIR}: run "
                        "scripts/install-agents.sh")
        directory.mkdir(parents=True, exist_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            plain = s.getsockname()[1]
        self.stderr = open(directory / "everything.stderr", "w+")
        self.server = subprocess.Popen(
            ["node", str(package / "dist" / "index.js"), "streamableHttp"],
            stdout=subprocess.DEVNULL, stderr=self.stderr, stdin=subprocess.DEVNULL,
            env={**os.environ, "PORT": str(plain)})
        self.front = subprocess.Popen(
            ["node", str(AGENTS / "tls_front.mjs"), str(pki.leaf_cert), str(pki.leaf_key),
             str(plain)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True)
        line = self.front.stdout.readline()
        assert line.startswith("READY "), f"tls_front.mjs did not start: {line!r}"
        self.port = json.loads(line[len("READY "):])["port"]
        deadline = time.monotonic() + 30
        while "listening on port" not in (directory / "everything.stderr").read_text():
            assert self.server.poll() is None and time.monotonic() < deadline, \
                "server-everything did not start: " + (directory / "everything.stderr").read_text()
            time.sleep(0.1)

    def close(self):
        for p in (self.front, self.server):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.stderr.close()
