"""Shared fixtures for the broker integration tests.

Everything here is real: the `broker` binary, TLS with a test CA made by the openssl CLI,
threaded HTTP(S) upstreams on loopback, curl as the client, raw sockets for exact bytes.
Only ephemeral ports and per-test temporary directories are used, so test files can run in
parallel.
"""

import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

BROKER_BIN = os.environ.get("BROKER_BIN") or "/work/main/build/broker"
READY_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0
READY_LINE = re.compile(r"^broker: listening on (http://(127\.0\.0\.1|\[::1\]):(\d+)) session=(\S+)$")

# DNS names every test leaf certificate carries.
TEST_NAMES = ["api.example.test", "other.example.test", "api.github.com", "github.com",
              "api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com",
              "localhost", "platform.claude.com", "auth.openai.com", "chatgpt.com",
              "oauth2.googleapis.com", "cloudcode-pa.googleapis.com"]


def clean_env(extra=None):
    """The environment for child processes: no proxy variables leak in from the caller."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    if extra:
        env.update(extra)
    return env


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pattern_bytes(n: int) -> bytes:
    """Deterministic, non-repeating-looking payload of n bytes (what /bytes/N serves)."""
    block = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(2048))  # 64 KiB
    reps, rest = divmod(n, len(block))
    return block * reps + block[:rest]


def closed_port() -> int:
    """A loopback port nothing listens on (bound then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --------------------------------------------------------------------------------------------
# Test CA and leaf certificates (openssl CLI)
# --------------------------------------------------------------------------------------------


class Fields(dict):
    """Header fields as an upstream got them, looked up whatever the case of their names (a
    request that came over HTTP/2 has lower-case names; HTTP/1.1 names are case-insensitive)."""

    def _name(self, key):
        if dict.__contains__(self, key):
            return key
        return next((k for k in dict.keys(self) if k.lower() == key.lower()), key)

    def __getitem__(self, key):
        return dict.__getitem__(self, self._name(key))

    def __contains__(self, key):
        return dict.__contains__(self, self._name(key))

    def get(self, key, default=None):
        return dict.get(self, self._name(key), default)


@dataclass
class Pki:
    ca_cert: Path
    leaf_cert: Path
    leaf_key: Path


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(directory: Path, names) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=broker test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", f"/CN={names[0]}", cwd=directory)
    san = ",".join(f"DNS:{n}" for n in names)
    (directory / "leaf.ext").write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={san}\n")
    _openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext",
             cwd=directory)
    return Pki(directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key")


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), TEST_NAMES)


# --------------------------------------------------------------------------------------------
# Local upstream
# --------------------------------------------------------------------------------------------


def read_request_body(handler: BaseHTTPRequestHandler, sink=None):
    """Reads the body of the request `handler` is serving: chunked (extensions and trailers
    dropped) or as long as its Content-Length. Each piece goes to `sink(piece)` as it arrives
    (for bodies too large to hold) and None is returned; without a sink, the bytes are.
    A body cut short raises ConnectionError, a malformed chunk size ValueError."""
    out = bytearray()
    put = sink or out.extend

    def copy(length, what):
        remaining = length
        while remaining:
            piece = handler.rfile.read(min(remaining, 1 << 16))
            if not piece:
                raise ConnectionError(f"EOF in {what} after {length - remaining} of {length} bytes")
            put(piece)
            remaining -= len(piece)

    if "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower():
        while True:
            line = handler.rfile.readline(1024)
            if not line:
                raise ConnectionError("EOF in chunk size")
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline(8192) not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                break
            copy(size, "chunk")
            handler.rfile.readline(16)
    else:
        copy(int(handler.headers.get("Content-Length") or 0), "body")
    return None if sink else bytes(out)


class _EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    timeout = 30  # an abandoned connection does not hold a thread forever
    # Its head and body are separate writes: with Nagle's algorithm the body would wait for the
    # broker's delayed ACK (40 ms a response on a keep-alive connection).
    disable_nagle_algorithm = True

    def log_message(self, *args):  # quiet
        pass

    def setup(self):
        super().setup()
        with self.server.lock:
            self.server.peers.append(self.client_address[1])

    def _read_body(self):
        """(length, sha256 hex) of the request body, read without holding it."""
        h = hashlib.sha256()
        length = 0

        def sink(piece):
            nonlocal length
            h.update(piece)
            length += len(piece)

        read_request_body(self, sink)
        return length, h.hexdigest()

    def _handle(self):
        try:
            body_len, body_sha = self._read_body()
        except (ConnectionError, ValueError, OSError):
            self.close_connection = True
            return
        with self.server.lock:
            self.server.requests.append({"method": self.command, "path": self.path,
                                         "peer": self.client_address[1],
                                         "headers": Fields(self.headers.items())})
        c = re.fullmatch(r"/chunked/(\d+)", self.path.split("?")[0])
        if c:
            # HTTP/1.1 gets a chunked body; an HTTP/1.0 request gets one delimited by close.
            data = pattern_bytes(int(c.group(1)))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            if self.request_version == "HTTP/1.1":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, len(data), 1000):
                    piece = data[i:i + 1000]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True
            return
        s = re.search(r"/sleep/(\d+)$", self.path.split("?")[0])
        if s:  # an upstream slow to answer: silent for N seconds, then 200
            time.sleep(int(s.group(1)))
        if self.path.split("?")[0] == "/gzip":
            import gzip
            data = gzip.compress(b"compressed whatever the request asked for")
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        r = re.fullmatch(r"/reflect/(chunked|length)/(\d+)", self.path.split("?")[0])
        if r:
            # Sends the request's Authorization back (a header and the body, the body in
            # chunks of N bytes), as an upstream that leaks what it received would.
            seen = (self.headers.get("Authorization") or "").encode()
            data = b"<html>" + b"x" * 7 + seen + b"|" + seen * 3 + b"</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("X-Seen-Authorization", seen.decode())
            size = int(r.group(2))
            if r.group(1) == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, len(data), size):
                    piece = data[i:i + size]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            return
        m = re.fullmatch(r"/bytes/(\d+)", self.path.split("?")[0])
        if m:
            n = int(m.group(1))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            if self.command != "HEAD":
                data = pattern_bytes(n)
                view = memoryview(data)
                for i in range(0, n, 1 << 18):
                    self.wfile.write(view[i:i + (1 << 18)])
            return
        payload = json.dumps({
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body_length": body_len,
            "body_sha256": body_sha,
            "peer_port": self.client_address[1],
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("X-Upstream", "echo")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle


class LoopbackHttpServer(ThreadingHTTPServer):
    """A threaded HTTP server on 127.0.0.1:<ephemeral>, HTTPS when given an SSL context, serving
    from its own thread once start() is called. `.lock` guards what handlers record."""
    daemon_threads = True
    block_on_close = False

    def __init__(self, handler, ssl_context=None):
        self.ssl_context = ssl_context
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler)
        self.port = self.server_address[1]

    def start(self):
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def finish_request(self, request, client_address):
        # The TLS handshake runs in the connection's own thread, never in the accept loop.
        if self.ssl_context is not None:
            request.settimeout(30)
            try:
                request = self.ssl_context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):  # a client going away is not news
        pass


def tls_server_context(pki: "Pki") -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.leaf_cert, pki.leaf_key)
    return ctx


class _Server(LoopbackHttpServer):
    def __init__(self, ssl_context=None):
        self.peers = []
        self.requests = []
        super().__init__(_EchoHandler, ssl_context)


class Upstream:
    """A threaded HTTP/1.1 (or HTTPS) echo server on 127.0.0.1:<ephemeral>.

    GET/POST/... any path: JSON {method, path, headers, body_length, body_sha256, peer_port}.
    /bytes/N: N bytes of pattern_bytes(N).
    /gzip: a gzip body with Content-Encoding: gzip, whatever Accept-Encoding said.
    /reflect/chunked/N, /reflect/length/0: the request's Authorization sent back in a response
    header (X-Seen-Authorization) and body (chunked in N-byte pieces, or with Content-Length).
    .connections: number of TCP connections accepted so far (distinct client ports seen).
    """

    def __init__(self, tls: Pki = None):
        self.server = _Server(tls_server_context(tls) if tls is not None else None).start()
        self.port = self.server.port

    @property
    def peers(self):
        with self.server.lock:
            return list(self.server.peers)

    @property
    def connections(self) -> int:
        return len(set(self.peers))

    @property
    def requests(self):
        with self.server.lock:
            return list(self.server.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream():
    u = Upstream()
    yield u
    u.close()


@pytest.fixture
def tls_upstream(pki):
    u = Upstream(tls=pki)
    yield u
    u.close()


# --------------------------------------------------------------------------------------------
# The broker
# --------------------------------------------------------------------------------------------


def run_broker_cli(*args, timeout=30, cwd=None):
    """Runs a one-shot broker subcommand; returns the CompletedProcess (text mode)."""
    return subprocess.run([BROKER_BIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=clean_env())


def allow_policy(*hosts, ports=None, tunnel=False, **extra):
    """{"version":1,"allow":[{"host":h,"ports":ports}...]} plus extra top-level keys.

    tunnel=True makes every rule a "tunnel": true rule (not intercepted)."""
    rules = []
    for h in hosts:
        r = {"host": h}
        if ports is not None:
            r["ports"] = list(ports)
        if tunnel:
            r["tunnel"] = True
        rules.append(r)
    return {"version": 1, "allow": rules, **extra}


class Broker:
    """`broker serve` on 127.0.0.1:0 with a policy written into its own temp dir."""

    def __init__(self, directory: Path, policy=None, policies=None, args=(), log_dir=None,
                 session=None, connect_to=(), start=True, upstream_ca=None, env=None,
                 env_file=False, ca_dir=None):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir) if log_dir is not None else self.dir / "logs"
        self.policy_files = []
        if policy is not None:
            policies = [policy]
        for i, p in enumerate(policies or []):
            path = self.dir / f"policy{i}.json"
            path.write_text(p if isinstance(p, str) else json.dumps(p, indent=2))
            self.policy_files.append(path)
        # Its own persistent CA (never ~/.config), trusted by the clients of intercepted hosts.
        self.ca_dir = Path(ca_dir) if ca_dir is not None else self.dir / "ca"
        self.args = [BROKER_BIN, "serve", "--listen", "127.0.0.1:0", "--log-dir", str(self.log_dir),
                     "--ca-dir", str(self.ca_dir)]
        # Its own HOME too: the audit key it makes (~/.config/broker/audit-key) is the test's.
        self.home = self.dir / "home"
        self.env = {"HOME": str(self.home), **(env or {})}
        self.env_file = self.dir / "session.env" if env_file else None
        if self.env_file is not None:
            self.args += ["--env-file", str(self.env_file)]
        if upstream_ca is not None:
            self.args += ["--upstream-ca", str(upstream_ca)]
        for f in self.policy_files:
            self.args += ["--policy", str(f)]
        for c in connect_to:
            self.args += ["--connect-to", c]
        if session is not None:
            self.args += ["--session", session]
        self.args += [str(a) for a in args]
        self.stderr_path = self.dir / "broker.stderr"
        self.proc = None
        self.port = None
        self.url = None
        self.session = None
        self.returncode = None
        if start:
            self.start()

    def start(self):
        self._stderr_file = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self._stderr_file,
                                     stdin=subprocess.DEVNULL, env=clean_env(self.env))
        line = self._read_line(READY_TIMEOUT)
        m = READY_LINE.match(line.strip()) if line else None
        if not m:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker did not print its ready line; stdout={line!r} "
                                 f"exit={self.proc.returncode} stderr={self.stderr!r}")
        self.url, self.port, self.session = m.group(1), int(m.group(3)), m.group(4)

    def _read_line(self, timeout):
        fd = self.proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
        return buf.decode(errors="replace")

    @property
    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def proxy(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ca_cert(self) -> Path:
        """The CA that signs the leaves of intercepted hosts."""
        return self.ca_dir / "ca.pem"

    def session_env(self) -> dict:
        """The --env-file variables as a dict."""
        out = {}
        for line in self.env_file.read_text().splitlines():
            k, _, v = line.partition("=")
            out[k] = v
        return out

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.session}.jsonl"

    def records(self):
        """The audit records written so far (parsed JSONL; a half-written last line is skipped)."""
        out = []
        try:
            text = self.log_path.read_text()
        except FileNotFoundError:
            return out
        for line in text.splitlines():
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return out

    def wait_for_records(self, predicate, count=1, timeout=5.0):
        """Polls the log until `count` records match `predicate`; returns the matching ones."""
        deadline = time.monotonic() + timeout
        while True:
            found = [r for r in self.records() if predicate(r)]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT) -> int:
        """Signals the broker and waits; returns its exit status (kills it after `timeout`)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.returncode = "killed after timeout"
        if self.returncode is None:
            self.returncode = self.proc.returncode
        self.proc.stdout.close()
        self._stderr_file.close()
        return self.returncode


@pytest.fixture
def broker_factory(tmp_path):
    """broker_factory(policy=..., connect_to=[...], args=[...]) -> started Broker.

    Teardown SIGTERMs every broker still running and asserts that each exited with 0.
    """
    brokers = []

    def make(**kwargs):
        b = Broker(tmp_path / f"broker{len(brokers)}", **kwargs)
        brokers.append(b)
        return b

    yield make
    problems = []
    for b in brokers:
        rc = b.stop() if b.returncode is None else b.returncode
        if rc != 0:
            problems.append(f"broker {b.session} exited with {rc!r}; stderr tail: {b.stderr[-2000:]}")
    assert not problems, "\n".join(problems)


def connect_to_arg(host: str, port: int, target_port: int = None) -> str:
    return f"{host}:{port}:127.0.0.1:{target_port or port}"


# --------------------------------------------------------------------------------------------
# curl
# --------------------------------------------------------------------------------------------


@dataclass
class CurlResult:
    returncode: int
    status: int                    # of the last transfer (0 when none completed)
    headers: dict                  # lower-case names, of the last response (CONNECT excluded)
    body: bytes                    # of the last transfer (single-URL form only)
    stderr: str
    statuses: list = field(default_factory=list)        # one per transfer
    new_connections: list = field(default_factory=list)  # curl's %{num_connects} per transfer
    versions: list = field(default_factory=list)  # curl's %{http_version} per transfer ("1.1", "2")

    def json(self):
        return json.loads(self.body)


def _parse_header_blocks(raw: bytes):
    """curl -D output: one block per response (CONNECT, 1xx, final); returns the last block."""
    blocks = [b for b in raw.replace(b"\r\n", b"\n").split(b"\n\n") if b.strip()]
    if not blocks:
        return {}
    headers = {}
    for line in blocks[-1].decode(errors="replace").split("\n")[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return headers


def curl(*urls, proxy=None, args=(), timeout=30, cacert=None, data_file=None, tmp=None, env=None,
         http="1.1"):
    """Runs curl once for one or more URLs (one invocation, so connections are reused).

    `http`: "1.1" (the default: the tests of HTTP/1.1 behaviour stay on it whatever the broker
    offers), "2" (--http2: h2 where the broker offers it), or None (curl's own choice).
    Returns a CurlResult; the body and headers are those of the last URL.
    """
    own_tmp = tmp is None
    tmpdir = Path(tempfile.mkdtemp(prefix="curl-")) if own_tmp else Path(tmp)
    try:
        header_file = tmpdir / "headers"
        cmd = ["curl", "-sS", "--max-time", str(timeout), "-D", str(header_file),
               "-w", "%{http_code} %{num_connects} %{http_version}\\n"]
        if http == "1.1":
            cmd.append("--http1.1")
        elif http == "2":
            cmd.append("--http2")
        if proxy is not None:
            cmd += ["--proxy", proxy]
        if cacert is not None:
            cmd += ["--cacert", str(cacert)]
        if data_file is not None:
            cmd += ["--data-binary", f"@{data_file}"]
        cmd += [str(a) for a in args]
        body_file = tmpdir / "body"
        if len(urls) == 1:
            cmd += ["-o", str(body_file), urls[0]]
        else:
            config = tmpdir / "urls.cfg"
            config.write_text("".join(f'url = "{u}"\noutput = "/dev/null"\n' for u in urls))
            cmd += ["-K", str(config)]
        p = subprocess.run(cmd, capture_output=True, timeout=timeout + 15,
                           env=clean_env(env))
        statuses, connects, versions = [], [], []
        for line in p.stdout.decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0].isdigit():
                statuses.append(int(parts[0]))
                connects.append(int(parts[1]))
                versions.append(parts[2])
        raw_headers = header_file.read_bytes() if header_file.exists() else b""
        body = body_file.read_bytes() if body_file.exists() else b""
        return CurlResult(p.returncode, statuses[-1] if statuses else 0,
                          _parse_header_blocks(raw_headers), body,
                          p.stderr.decode(errors="replace"), statuses, connects, versions)
    finally:
        if own_tmp:
            shutil.rmtree(tmpdir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Raw sockets
# --------------------------------------------------------------------------------------------


@dataclass
class RawResponse:
    status: int
    reason: str
    headers: dict   # lower-case names
    body: bytes
    raw_head: bytes

    def json(self):
        return json.loads(self.body)


class RawClient:
    """A TCP connection to the proxy for sending exact bytes and reading HTTP responses."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.timeout = timeout

    def send(self, data: bytes):
        """Sends everything it can; a peer that answered early and closed is not an error here."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _fill(self) -> bool:
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return False
        self.buf += chunk
        return True

    def read_response(self, head_only=False) -> RawResponse:
        """Reads one response: head, then a Content-Length or chunked body (or until close)."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise ConnectionError(f"connection closed before a response head; got {self.buf!r}")
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        version, status, *reason = lines[0].split(" ", 2)
        assert version.startswith("HTTP/1."), lines[0]
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        status = int(status)
        body = b""
        if head_only or status in (204, 304) or 100 <= status < 200:
            pass
        elif "content-length" in headers:
            n = int(headers["content-length"])
            while len(self.buf) < n:
                if not self._fill():
                    raise ConnectionError("connection closed mid-body")
            body, self.buf = self.buf[:n], self.buf[n:]
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                while b"\r\n" not in self.buf:
                    if not self._fill():
                        raise ConnectionError("connection closed in chunked body")
                size_line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(self.buf) < size + 2:
                    if not self._fill():
                        raise ConnectionError("connection closed in chunk")
                body += self.buf[:size]
                self.buf = self.buf[size + 2:]
                if size == 0:
                    break
        else:
            while self._fill():
                pass
            body, self.buf = self.buf, b""
        return RawResponse(status, reason[0] if reason else "", headers, body, head)

    def is_closed_by_peer(self, wait=2.0) -> bool:
        """True when the peer closes (EOF or reset) within `wait` seconds without sending more."""
        self.sock.settimeout(wait)
        try:
            chunk = self.sock.recv(1)
            return chunk == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(self.timeout)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def tls_through_connect(b, target, server_name, ca):
    """A TLS connection through the broker: CONNECT to `target`, then a handshake naming
    `server_name` that trusts `ca` (the broker's, for an intercepted host)."""
    raw = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    raw.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(1)
    assert head.startswith(b"HTTP/1.1 200")
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    return ctx.wrap_socket(raw, server_hostname=server_name)


def raw_exchange(port: int, data: bytes, timeout=10.0) -> RawResponse:
    """Sends `data` on a fresh connection to the proxy and reads one response."""
    with RawClient(port, timeout=timeout) as c:
        c.send(data)
        return c.read_response()


# --------------------------------------------------------------------------------------------
# Assertions shared by the test files
# --------------------------------------------------------------------------------------------

REFUSAL_FIELDS = {"error", "message", "host", "rule", "session"}


def assert_refusal(status, headers, body, code, expected_status, session=None, host=None):
    """A broker refusal: the status, Content-Type JSON, X-Broker-Error and the JSON body fields."""
    assert status == expected_status, f"expected {expected_status} {code}, got {status}: {body[:500]!r}"
    assert headers.get("content-type", "").startswith("application/json"), headers
    assert headers.get("x-broker-error") == code, headers
    doc = json.loads(body)
    assert REFUSAL_FIELDS <= set(doc), f"refusal body lacks fields: {doc}"
    assert doc["error"] == code, doc
    assert isinstance(doc["message"], str) and doc["message"], doc
    if session is not None:
        assert doc["session"] == session, doc
    if host is not None:
        assert doc["host"] == host, doc
    return doc


def assert_broker_binary():
    assert os.path.isfile(BROKER_BIN) and os.access(BROKER_BIN, os.X_OK), \
        f"broker binary not found at {BROKER_BIN} (set BROKER_BIN)"


@pytest.fixture(autouse=True, scope="session")
def _broker_binary_exists():
    assert_broker_binary()
