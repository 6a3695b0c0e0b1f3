"""Bodies the broker must read whole (an AWS request whose signature covers the body's hash)
are counted against one process-wide allowance: many large ones at once get 503 beyond it
instead of growing the broker's memory without bound."""

import socket
import ssl
import threading
import time
from pathlib import Path

from conftest import assert_refusal, connect_to_arg

S3 = "s3.amazonaws.com"
KEY_ID = "AKIAREALKEYFORTESTS0X"
SECRET = "Re4lSecretF0rTests/0123456789+abcdefghij"
MiB = 1024 * 1024
ALLOWANCE = 256 * MiB  # proxy/limits.hpp max_held_body_bytes
BODY = 32 * MiB
CLIENTS = 16


def _peak_rss(pid) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _sanitized(pid) -> bool:
    return "libasan" in Path(f"/proc/{pid}/maps").read_text()


def _aws_session(broker_factory, tls_upstream, pki):
    """A broker with an aws-sigv4 credential bound to S3 (mapped onto the local upstream): the
    broker, the dummy key id the child holds, and the CONNECT target."""
    policy = {"version": 1, "allow": [{"host": S3, "ports": [tls_upstream.port]}],
              "credentials": {"aws": {"type": "aws-sigv4", "hosts": [S3]}}}
    b = broker_factory(policy=policy, connect_to=[connect_to_arg(S3, tls_upstream.port)],
                       upstream_ca=pki.ca_cert, env_file=True,
                       env={"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET})
    return b, b.session_env()["AWS_ACCESS_KEY_ID"], f"{S3}:{tls_upstream.port}"


def _tls_through_connect(b, target):
    raw = socket.create_connection(("127.0.0.1", b.port), timeout=60)
    raw.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    ctx = ssl.create_default_context(cafile=str(b.ca_cert))
    return ctx.wrap_socket(raw, server_hostname=S3)


def _bogus_signed_put(b, target, dummy_key_id, results, i, heads_sent=None):
    """A PUT signed (badly) with the session's dummy key id and no x-amz-content-sha256: the
    broker must read its body whole to hash it before it can even tell the signature is bad.
    `heads_sent`: a barrier every client meets after its head, before its body, so that all the
    bodies are announced (and their bytes reserved) at once however fast the broker reads."""
    status = None
    try:
        s = _tls_through_connect(b, target)
        s.sendall((f"PUT /bucket/key{i} HTTP/1.1\r\nHost: {target}\r\n"
                   "X-Amz-Date: 20261201T000000Z\r\n"
                   f"Authorization: AWS4-HMAC-SHA256 Credential={dummy_key_id}/20261201/"
                   "us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, "
                   f"Signature={'0' * 64}\r\n"
                   f"Content-Length: {BODY}\r\n\r\n").encode())
        if heads_sent is not None:
            try:
                heads_sent.wait(timeout=60)
            except threading.BrokenBarrierError:
                pass
            time.sleep(0.2)  # the broker reads the last heads
        piece = b"x" * MiB
        for _ in range(BODY // MiB):
            s.sendall(piece)
        head = b""
        while b"\r\n\r\n" not in head:
            data = s.recv(4096)
            if not data:
                break
            head += data
        status = int(head.split()[1]) if head else None
        s.close()
    except (OSError, ssl.SSLError):
        pass  # refused before the whole body was sent: the broker closed on it
    results[i] = status


def test_bodies_read_whole_share_one_allowance(broker_factory, tls_upstream, pki):
    b, dummy_key_id, target = _aws_session(broker_factory, tls_upstream, pki)
    before = _peak_rss(b.proc.pid)

    results = [None] * CLIENTS
    heads_sent = threading.Barrier(CLIENTS)
    threads = [threading.Thread(target=_bogus_signed_put,
                                args=(b, target, dummy_key_id, results, i, heads_sent))
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    grown = _peak_rss(b.proc.pid) - before

    # 512 MiB were in flight; at most the allowance (plus buffers) was ever held. (An ASan
    # build keeps freed memory in quarantine, so its RSS says nothing about what was held.)
    if not _sanitized(b.proc.pid):
        assert grown < ALLOWANCE + 64 * MiB, f"broker RSS grew by {grown // MiB} MiB"
    assert set(results) <= {403, 503, None}, results
    assert 403 in results, results  # the ones within the allowance were read and checked
    assert tls_upstream.requests == []  # nothing unverified went on
    records = b.records()
    assert any(r.get("error") == "signature_invalid" for r in records)
    assert any(r.get("error") == "overloaded" and r.get("status") == 503 for r in records)


def test_a_declared_length_over_the_limit_is_refused_before_it_is_read(broker_factory,
                                                                      tls_upstream, pki):
    b, dummy_key_id, target = _aws_session(broker_factory, tls_upstream, pki)
    s = _tls_through_connect(b, target)
    s.sendall((f"PUT /bucket/huge HTTP/1.1\r\nHost: {target}\r\nX-Amz-Date: 20261201T000000Z\r\n"
               f"Authorization: AWS4-HMAC-SHA256 Credential={dummy_key_id}/20261201/us-east-1/"
               f"s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={'0' * 64}\r\n"
               "Expect: 100-continue\r\n"
               f"Content-Length: {8 * 1024 * MiB}\r\n\r\n").encode())
    data = b""
    while b"\r\n\r\n" not in data:
        got = s.recv(4096)
        assert got, data
        data += got
    # Answered at once, without a 100 Continue and without waiting for 8 GiB.
    assert data.startswith(b"HTTP/1.1 400"), data[:200]
    head, _, body = data.partition(b"\r\n\r\n")
    while len(body) < int(dict(l.split(": ", 1) for l in head.decode().split("\r\n")[1:]
                               )["Content-Length"]):
        body += s.recv(4096)
    headers = {l.split(": ", 1)[0].lower(): l.split(": ", 1)[1]
               for l in head.decode().split("\r\n")[1:]}
    assert_refusal(400, headers, body, "bad_request", 400)
    s.close()
