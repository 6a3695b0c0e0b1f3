"""Every wait has a deadline: a silent upstream, a slow client, an idle tunnel or keep-alive
connection each end in bounded time (shortened here with --timeout NAME=DURATION)."""

import socket
import threading
import time

from conftest import (RawClient, allow_policy, assert_refusal, connect_to_arg, curl,
                      run_broker_cli)


class SilentServer:
    """Accepts connections and reads whatever comes, never answering."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.conns = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(c)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def test_silent_upstream_gets_504_upstream_timeout(broker_factory):
    silent = SilentServer()
    try:
        b = broker_factory(policy=allow_policy("api.example.test", ports=[silent.port]),
                           connect_to=[connect_to_arg("api.example.test", silent.port)],
                           args=["--timeout", "upstream=1s"])
        t0 = time.monotonic()
        r = curl(f"http://api.example.test:{silent.port}/hang", proxy=b.proxy, timeout=20)
        elapsed = time.monotonic() - t0
        assert_refusal(r.status, r.headers, r.body, "upstream_timeout", 504, session=b.session)
        assert elapsed < 8, elapsed
        assert silent.accepted == 1
        rec = b.wait_for_records(lambda r: r.get("error") == "upstream_timeout")
        assert rec and rec[0]["status"] == 504 and rec[0]["path"] == "/hang", b.records()
    finally:
        silent.close()


def test_client_that_never_finishes_its_head_is_dropped(broker_factory):
    b = broker_factory(policy=allow_policy("api.example.test"), args=["--timeout", "head=1s"])
    with RawClient(b.port) as c:
        c.send(b"GET http://api.example.test/ HTTP/1.1\r\nHost: api.exa")
        assert c.is_closed_by_peer(wait=6.0)


def test_idle_keepalive_connection_is_closed(broker_factory, upstream):
    b = broker_factory(policy=allow_policy("api.example.test", ports=[upstream.port]),
                       connect_to=[connect_to_arg("api.example.test", upstream.port)],
                       args=["--timeout", "idle=1s"])
    with RawClient(b.port) as c:
        c.send(f"GET http://api.example.test:{upstream.port}/one HTTP/1.1\r\n"
               f"Host: api.example.test:{upstream.port}\r\n\r\n".encode())
        assert c.read_response().status == 200
        assert c.is_closed_by_peer(wait=6.0)


def test_idle_tunnel_is_closed_and_audited(broker_factory):
    silent = SilentServer()
    try:
        b = broker_factory(policy=allow_policy("api.example.test", ports=[silent.port],
                                               tunnel=True),
                           connect_to=[connect_to_arg("api.example.test", silent.port)],
                           args=["--timeout", "tunnel=1s"])
        with RawClient(b.port) as c:
            c.send(f"CONNECT api.example.test:{silent.port} HTTP/1.1\r\n"
                   f"Host: api.example.test:{silent.port}\r\n\r\n".encode())
            assert c.read_response(head_only=True).status == 200
            c.send(b"hello upstream")
            assert c.is_closed_by_peer(wait=6.0)
        rec = b.wait_for_records(lambda r: r.get("event") == "tunnel")
        assert rec, b.records()
        assert rec[0]["bytes_out"] == len(b"hello upstream")
        assert rec[0]["host"] == "api.example.test" and rec[0]["port"] == silent.port
    finally:
        silent.close()


def test_bad_timeout_option_is_a_usage_error(tmp_path):
    for bad in ["upstream", "upstream=soon", "nosuch=1s", "head=0s"]:
        r = run_broker_cli("serve", "--listen", "127.0.0.1:0", "--log-dir", tmp_path,
                           "--timeout", bad)
        assert r.returncode == 2, (bad, r.returncode, r.stderr)
        assert "--timeout" in r.stderr, r.stderr


def test_a_client_gone_right_after_connect_is_let_go_at_once(broker_factory):
    """A client that half-closes (or closes) right after `200 Connection Established`, before
    any TLS, is let go of at once: before, each such connection was held in CLOSE-WAIT until
    the 30 s head deadline (issue 15)."""
    b = broker_factory(policy=allow_policy("api.example.test", ports=[443]))
    socks = []
    for _ in range(10):
        s = socket.create_connection(("127.0.0.1", b.port), timeout=5)
        s.sendall(b"CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n")
        assert s.recv(1000).startswith(b"HTTP/1.1 200"), "no 200 for the CONNECT"
        s.shutdown(socket.SHUT_WR)
        socks.append(s)
    for s in socks:
        s.settimeout(3)
        assert s.recv(1000) == b"", "the broker sent something after the client left"
        s.close()
