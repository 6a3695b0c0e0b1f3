#!/usr/bin/env python3
"""A model's streamed answer, direct and through `broker serve`: time to first byte, the delay
each event gains on the way, and the broker's CPU per event.

A fake api.openai.com (TLS, on loopback) answers POST /v1/chat/completions with an SSE stream of
EVENTS chat.completion.chunk events, one every INTERVAL ms, the last with the usage fields the
meter reads. The client reads it with keep-alive, directly (HTTP/1.1) and through each broker
given (intercepted: the OpenAI key bound to the host and swapped, its real value scrubbed from
the response, the usage metered, the audit log durable with `--audit-sync batch`), over
HTTP/1.1 and, with --h2, over HTTP/2 to the broker as well (the broker goes on to the upstream
over HTTP/1.1, as the direct client does). Each event's delay is when the client has it whole
less when the upstream wrote it (one machine, one monotonic clock). The broker's CPU is its
threads' run time (/proc/PID/task/*/schedstat, in ns) over the stream, per event.

  bench/sse_stream.py [--events N] [--interval MS] [--rounds R] [--h2] [--tunnel] BROKER...

--tunnel adds each broker's tunnel (no interception, the bytes relayed untouched): the floor one
more loopback hop sets on this machine, which the goals' added delay includes.

Prints, per contender and round: TTFB (request sent → first body byte) and the events' delay
(p50, p99, max); then each broker's added TTFB and added delay per event (p50, p99, max) against
direct, medians over the rounds, and its CPU µs per event, beside the goals (TTFB within 1 ms,
p99 ≤ 0.3 ms). Two brokers (a binary before and after a change) are measured in turn, round by
round."""

import argparse
import json
import os
import re
import select
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST = "api.openai.com"
REAL_KEY = "sk-proj-" + "R3alKeyForTheBenchOnly" * 3  # never a real key


def make_pki(d: Path):
    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench CA")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", f"/CN={HOST}")
    (d / "ext").write_text(f"subjectAltName=DNS:{HOST}\n")
    run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "ext")


class Stream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
        self.wfile.flush()
        sent = self.server.sent = []
        n, interval = self.server.events, self.server.interval
        start = time.monotonic()
        for i in range(n):
            chunk = {"id": "chatcmpl-b", "object": "chat.completion.chunk", "model": "gpt-4o",
                     "choices": [{"index": 0, "delta": {"content": f"tok{i} "}}]}
            if i == n - 1:
                chunk["usage"] = {"prompt_tokens": 12, "completion_tokens": n,
                                  "total_tokens": 12 + n}
            data = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            if i == n - 1:
                data += b"data: [DONE]\n\n"
            # Paced from the start, so one late write does not shift the rest.
            time.sleep(max(0.0, start + i * interval - time.monotonic()))
            sent.append(time.monotonic())
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Upstream(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pki: Path, events: int, interval: float):
        super().__init__(("127.0.0.1", 0), Stream)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki / "leaf.pem", pki / "leaf.key")
        self.socket = ctx.wrap_socket(self.socket, server_side=True)
        self.events, self.interval, self.sent = events, interval, []
        threading.Thread(target=self.serve_forever, daemon=True).start()


def read_some(sock):
    """(bytes, when they came) of the next read of a TLS socket; the stream must not end."""
    if not sock.pending():
        select.select([sock], [], [], 30)
    piece = sock.recv(65536)
    if not piece:
        raise RuntimeError("connection closed mid-stream")
    return piece, time.monotonic()


def connect_through(proxy_port: int, port: int):
    """A TCP connection through a broker's CONNECT to HOST:port, answered 200."""
    raw = socket.create_connection(("127.0.0.1", proxy_port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw.sendall(f"CONNECT {HOST}:{port} HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    return raw


class Client:
    """One keep-alive HTTPS connection, directly or through a broker's CONNECT."""

    def __init__(self, port: int, cafile: Path, proxy_port: int = None):
        if proxy_port:
            raw = connect_through(proxy_port, port)
        else:
            raw = socket.create_connection(("127.0.0.1", port))
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ctx = ssl.create_default_context(cafile=str(cafile))
        self.sock = ctx.wrap_socket(raw, server_hostname=HOST)
        self.port = port

    def stream(self, key: str):
        """(TTFB, [when each event was whole]) of one streamed answer."""
        body = json.dumps({"model": "gpt-4o", "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]}).encode()
        req = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n"
               f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        sent = time.monotonic()
        self.sock.sendall(req)
        buf, head_done, ttfb, events, body_bytes = b"", False, None, [], b""
        while True:
            piece, now = read_some(self.sock)
            buf += piece
            if not head_done:
                if b"\r\n\r\n" not in buf:
                    continue
                head, _, buf = buf.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200"), head[:200]
                head_done = True
            # De-chunk what is whole.
            while True:
                line, sep, rest = buf.partition(b"\r\n")
                if not sep:
                    break
                size = int(line.split(b";")[0], 16)
                if len(rest) < size + 2:
                    break
                if size == 0:
                    return ttfb, events, body_bytes
                if ttfb is None:
                    ttfb = now - sent
                body_bytes += rest[:size]
                buf = rest[size + 2:]
                if body_bytes.endswith(b"\n\n") and body_bytes.count(b"data: {") > len(events):
                    events.append(now)  # one write of the upstream's is one event


class H2Client:
    """One HTTP/2 connection through a broker's CONNECT (ALPN h2 with its MITM); a stream each."""

    def __init__(self, port: int, cafile: Path, proxy_port: int):
        import h2.config
        import h2.connection
        raw = connect_through(proxy_port, port)
        ctx = ssl.create_default_context(cafile=str(cafile))
        ctx.set_alpn_protocols(["h2"])
        self.sock = ctx.wrap_socket(raw, server_hostname=HOST)
        assert self.sock.selected_alpn_protocol() == "h2", self.sock.selected_alpn_protocol()
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.port = port

    def stream(self, key: str):
        import h2.events
        body = json.dumps({"model": "gpt-4o", "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]}).encode()
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [(":method", "POST"), (":scheme", "https"),
                                     (":authority", f"{HOST}:{self.port}"),
                                     (":path", "/v1/chat/completions"),
                                     ("authorization", f"Bearer {key}"),
                                     ("content-type", "application/json"),
                                     ("content-length", str(len(body)))])
        self.conn.send_data(sid, body, end_stream=True)
        sent = time.monotonic()
        self.sock.sendall(self.conn.data_to_send())
        ttfb, events, body_bytes = None, [], b""
        while True:
            piece, now = read_some(self.sock)
            for ev in self.conn.receive_data(piece):
                if isinstance(ev, h2.events.ResponseReceived):
                    status = dict(ev.headers).get(b":status")
                    assert status == b"200", ev.headers
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                    if ttfb is None and ev.data:
                        ttfb = now - sent
                    body_bytes += ev.data
                    while body_bytes.count(b"data: {") > len(events) and \
                            body_bytes.endswith(b"\n\n"):
                        events.append(now)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    self.sock.sendall(self.conn.data_to_send())
                    return ttfb, events, body_bytes
            self.sock.sendall(self.conn.data_to_send())


def cpu_ns(pid: int) -> int:
    """The run time of every thread of `pid` so far (ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            pass
    return total


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def start_broker(binary: str, work: Path, port: int, pki: Path, tunnel: bool = False):
    policy = {"version": 1, "allow": [{"host": HOST, "ports": [port]}],
              "credentials": {"openai": {"type": "bearer", "env": ["OPENAI_API_KEY"],
                                         "hosts": [HOST]}}}
    if tunnel:  # the floor: the same hop, its bytes relayed untouched
        policy = {"version": 1, "allow": [{"host": HOST, "ports": [port], "tunnel": True}]}
    work.mkdir(parents=True, exist_ok=True)
    (work / "policy.json").write_text(json.dumps(policy))
    env = {"PATH": os.environ["PATH"], "HOME": str(work), "OPENAI_API_KEY": REAL_KEY}
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--policy", str(work / "policy.json"),
         "--log-dir", str(work / "logs"), "--ca-dir", str(work / "ca"), "--audit-sync", "batch",
         "--env-file", str(work / "session.env"), "--upstream-ca", str(pki / "ca.pem"),
         "--connect-to", f"{HOST}:{port}:127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=open(work / "stderr", "wb"), env=env, text=True)
    line = proc.stdout.readline()
    m = re.search(r"127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        sys.exit(f"{binary} did not start: {line!r} {(work / 'stderr').read_text()[-500:]}")
    dummy = None
    for l in (work / "session.env").read_text().splitlines():
        if l.startswith("OPENAI_API_KEY="):
            dummy = l.split("=", 1)[1]
    return proc, int(m.group(1)), dummy, work / "ca" / "ca.pem"


def measure(client, key: str, upstream: Upstream, pid: int = None):
    before = cpu_ns(pid) if pid else 0
    ttfb, got, body = client.stream(key)
    cpu = (cpu_ns(pid) - before) / upstream.events if pid else 0
    assert len(got) == upstream.events, (len(got), upstream.events)
    assert REAL_KEY.encode() not in body
    delays = [g - s for g, s in zip(got, upstream.sent)]
    return ttfb, delays, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--interval", type=float, default=20.0, help="ms between events")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--h2", action="store_true", help="also through each broker over HTTP/2")
    ap.add_argument("--tunnel", action="store_true",
                    help="also through each broker's tunnel (no interception): the hop's floor")
    ap.add_argument("brokers", nargs="+")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sse-bench-"))
    procs = []
    try:
        make_pki(work)
        up = Upstream(work, args.events, args.interval / 1000)
        port = up.server_address[1]
        # name -> (client, key, broker pid)
        clients = {"direct": (Client(port, work / "ca.pem"), REAL_KEY, None)}
        for i, b in enumerate(args.brokers):
            proc, bport, dummy, ca = start_broker(b, work / f"broker{i}", port, work)
            procs.append(proc)
            label = b if len(args.brokers) > 1 else "broker"
            clients[f"{label} h1"] = (Client(port, ca, bport), dummy, proc.pid)
            if args.h2:
                clients[f"{label} h2"] = (H2Client(port, ca, bport), dummy, proc.pid)
            if args.tunnel:
                proc, tport, _, _ = start_broker(b, work / f"tunnel{i}", port, work, tunnel=True)
                procs.append(proc)
                clients[f"{label} tunnel"] = (Client(port, work / "ca.pem", tport), REAL_KEY,
                                              proc.pid)
        # A first stream each, not counted: every broker has its upstream connection (and the
        # direct client its TLS session) before the measured rounds, as a running agent has.
        for name, (client, key, pid) in clients.items():
            measure(client, key, up, pid)
        results = {name: [] for name in clients}
        for r in range(args.rounds):
            for name, (client, key, pid) in clients.items():
                ttfb, delays, cpu = measure(client, key, up, pid)
                results[name].append((ttfb, delays, cpu))
                print(f"round {r + 1} {name}: TTFB {ttfb * 1e3:.2f} ms, event delay p50 "
                      f"{pct(delays, 50) * 1e3:.3f} p99 {pct(delays, 99) * 1e3:.3f} max "
                      f"{max(delays) * 1e3:.3f} ms" + (f", CPU {cpu / 1e3:.1f} µs/event"
                                                       if pid else ""), flush=True)
        direct = results["direct"]
        print(f"\n{args.events} events every {args.interval:g} ms, {args.rounds} rounds, "
              "added to direct (median over rounds); goals: TTFB within 1 ms, p99 within 0.3 ms")
        for name in list(clients)[1:]:
            added_ttfb = statistics.median(a[0] - d[0] for a, d in zip(results[name], direct))
            added = {p: [] for p in (50, 99, 100)}
            for (_, da, _), (_, dd, _) in zip(results[name], direct):
                diff = [x - y for x, y in zip(da, dd)]
                for p in added:
                    added[p].append(pct(diff, p))
            p99 = statistics.median(added[99])
            cpu = statistics.median(r[2] for r in results[name])
            met = "met" if added_ttfb <= 1e-3 and p99 <= 0.3e-3 else "NOT met"
            print(f"  {name}: TTFB +{added_ttfb * 1e3:.2f} ms; per event "
                  f"p50 +{statistics.median(added[50]) * 1e3:.3f} p99 +{p99 * 1e3:.3f} max "
                  f"+{statistics.median(added[100]) * 1e3:.3f} ms; CPU {cpu / 1e3:.1f} µs/event "
                  f"({met})")
    finally:
        # The clients' connections first: a broker drains what is open before it ends.
        for client, _, _ in locals().get("clients", {}).values():
            client.sock.close()
        for p in procs:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
