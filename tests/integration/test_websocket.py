"""WebSocket inspection (docs/security-model.md): after a 101 on an intercepted connection the broker reads
frames both ways. Client messages get the canary and real-secret checks (a hit closes with 1008,
audited), server messages are scrubbed, compression stays off, bytes pipelined behind the
upgrade are inspected like the rest, and Responses API usage over a WebSocket is metered and
budgeted. A real client (websocket_peer.Client) talks through the broker to a fake TLS upstream
that records every frame it read."""

import json
import time

import pytest

from conftest import connect_to_arg, run_broker_cli
from websocket_peer import (BINARY, CLOSE, CONT, PING, PONG, TEXT, Client, WebSocketUpstream,
                            close_payload, echo, encode_frame)

GITHUB, OPENAI = "api.github.com", "api.openai.com"
GH_REAL = "ghp_R3alT0kenF0rTestsOnly0123456789abcd"
AI_REAL = "sk-proj-" + "W3bS0cketT3stRealKey0123456789abcdefXYZ"


def policy(port, budgets=None):
    p = {"version": 1,
         "allow": [{"host": GITHUB, "ports": [port]}, {"host": OPENAI, "ports": [port]}],
         "credentials": {
             "github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB]},
             "openai": {"type": "bearer", "env": ["OPENAI_API_KEY"], "hosts": [OPENAI]}}}
    if budgets:
        p["budgets"] = budgets
    return p


@pytest.fixture
def ws_broker(broker_factory, pki):
    """ws_broker(handler=, status=, extra_headers=, budgets=, args=) -> (broker, upstream)."""
    upstreams = []

    def make(handler=None, status=101, extra_headers=(), budgets=None, args=()):
        up = WebSocketUpstream(pki, handler, status, extra_headers)
        upstreams.append(up)
        b = broker_factory(policy=policy(up.port, budgets), upstream_ca=pki.ca_cert,
                           connect_to=[connect_to_arg(GITHUB, up.port), connect_to_arg(OPENAI, up.port)],
                           env={"GITHUB_TOKEN": GH_REAL, "OPENAI_API_KEY": AI_REAL}, env_file=True,
                           args=args)
        b.env_vars = b.session_env()
        return b, up

    yield make
    for up in upstreams:
        up.close()


def open_ws(b, up, host=GITHUB, headers=(), extra=b"", path="/socket"):
    c = Client.connect(b.port, host, up.port, b.ca_cert, headers=headers, extra=extra, path=path)
    assert c.head.startswith("HTTP/1.1 101"), c.head
    return c


def ws_record(b, predicate=lambda r: True, timeout=5.0):
    recs = b.wait_for_records(lambda r: r.get("status") == 101 and predicate(r), 1, timeout)
    assert recs, f"no record of the upgraded connection: {b.records()}\n{b.stderr[-2000:]}"
    return recs[0]


def expect_close(c, code):
    """Reads up to the close frame (after any other frames); returns the frames before it."""
    before = []
    while True:
        f = c.recv_frame()
        if f.opcode == CLOSE:
            assert f.close_code == code, (f, before)
            assert not f.masked
            return before, f
        before.append(f)


def test_messages_pings_and_fragments_pass_both_ways_reframed(ws_broker):
    b, up = ws_broker()
    c = open_ws(b, up, headers=[f"Authorization: Bearer {b.env_vars['GITHUB_TOKEN']}"])
    c.send_message(TEXT, "hello")
    got = c.recv_message()
    assert (got.opcode, got.payload, got.masked) == (TEXT, b"hello", False)
    # A fragmented binary message with a ping between its fragments.
    blob = bytes(range(256)) * 300  # 76800 bytes: the 64-bit length form on the wire
    c.send_frame(BINARY, blob[:1000], mask=True, fin=False)
    c.send_frame(PING, b"are you there", mask=True)
    c.send_frame(CONT, blob[1000:50000], mask=True, fin=False)
    c.send_frame(CONT, blob[50000:], mask=True, fin=True)
    got = [c.recv_message() for _ in range(2)]
    assert [(f.opcode, f.payload) for f in got] == [(PONG, b"are you there"), (BINARY, blob)]
    assert not any(f.masked for f in got)  # the broker's frames to the client are unmasked
    c.send_frame(CLOSE, close_payload(1000, "bye"), mask=True)
    f = c.recv_frame()
    assert f.opcode == CLOSE and f.close_code == 1000
    c.close()

    conn = up.wait()
    assert all(f.masked for f in conn.frames), conn.frames  # masked toward the upstream
    assert [(m.opcode, m.payload) for m in conn.messages] == [(TEXT, b"hello"), (BINARY, blob)]
    assert [f.opcode for f in conn.frames if f.opcode >= 0x8] == [PING, CLOSE]
    assert GH_REAL in conn.head  # the upgrade request went through the brokers
    rec = ws_record(b)
    assert rec["event"] == "request" and rec["decision"] == "allow" and rec["method"] == "GET"
    assert rec["credential"] == "github" and rec.get("error") is None, rec
    assert rec["ws_messages_out"] == 2 and rec["ws_messages_in"] == 2, rec
    assert rec["bytes_out"] > len(blob) and rec["bytes_in"] > len(blob), rec


def test_a_real_secret_in_a_client_message_closes_with_1008_and_never_leaves(ws_broker):
    b, up = ws_broker()
    c = open_ws(b, up)
    c.send_message(TEXT, "first")
    assert c.recv_message().payload == b"first"
    c.send_message(TEXT, json.dumps({"note": f"my key is {GH_REAL}"}))
    before, close = expect_close(c, 1008)
    assert before == [] and close.payload[2:] == b"real_secret_blocked"
    assert c.closed_by_peer()
    conn = up.wait()
    assert [m.payload for m in conn.messages] == [b"first"]
    assert GH_REAL.encode() not in conn.raw_after_head
    assert any(f.opcode == CLOSE for f in conn.frames)  # the upstream was told too
    rec = ws_record(b)
    assert (rec["event"], rec["decision"], rec["error"]) == ("refused", "deny",
                                                             "real_secret_blocked"), rec
    assert rec["credential"] == "github" and rec["ws_messages_out"] == 1, rec
    assert GH_REAL not in b.log_path.read_text()


def test_a_bound_dummy_passes_as_is_and_an_unbound_one_is_the_canary(ws_broker):
    b, up = ws_broker()
    ai_dummy, gh_dummy = b.env_vars["OPENAI_API_KEY"], b.env_vars["GITHUB_TOKEN"]
    c = open_ws(b, up, host=OPENAI, path="/v1/other")
    c.send_message(TEXT, f"bearer {ai_dummy}")  # its own host: passes, and is not swapped
    assert c.recv_message().payload == f"bearer {ai_dummy}".encode()
    c.send_message(BINARY, f"github {gh_dummy}".encode())  # another credential's dummy
    _, close = expect_close(c, 1008)
    assert close.payload[2:] == b"credential_not_bound"
    c.close()
    conn = up.wait()
    assert [m.payload for m in conn.messages] == [f"bearer {ai_dummy}".encode()]
    assert AI_REAL.encode() not in conn.raw_after_head
    assert gh_dummy.encode() not in conn.raw_after_head
    rec = ws_record(b)
    assert (rec["event"], rec["decision"], rec["error"], rec["credential"]) == (
        "exfiltration_blocked", "deny", "credential_not_bound", "github"), rec


def test_a_real_secret_in_a_server_message_reaches_the_client_as_its_dummy(ws_broker):
    def leak(peer, conn):
        peer.recv_message()
        peer.send_frame(TEXT, f'{{"token":"{GH_REAL}"}}')
        echo(peer, conn)

    b, up = ws_broker(leak)
    c = open_ws(b, up)
    c.send_message(TEXT, "tell me")
    got = c.recv_message()
    assert got.payload == f'{{"token":"{b.env_vars["GITHUB_TOKEN"]}"}}'.encode(), got
    c.close()


def test_compression_is_kept_off(ws_broker):
    b, up = ws_broker()
    c = open_ws(b, up, headers=["Sec-WebSocket-Extensions: permessage-deflate; "
                                "client_max_window_bits"])
    assert "sec-websocket-extensions" not in c.head.lower()
    # A frame with RSV1 (compressed) from the client is a protocol error: nothing was agreed.
    c.send_frame(TEXT, b"\xf2H\xcd\xc9\xc9\x07\x00", mask=True, rsv1=True)
    expect_close(c, 1002)
    c.close()
    conn = up.wait()
    assert "sec-websocket-extensions" not in conn.head.lower(), conn.head
    assert conn.messages == []
    assert ws_record(b)["error"] == "websocket_protocol_error"


def test_an_upstream_agreeing_to_compression_anyway_is_refused(ws_broker):
    b, up = ws_broker(extra_headers=["Sec-WebSocket-Extensions: permessage-deflate"])
    c = Client.connect(b.port, GITHUB, up.port, b.ca_cert,
                       headers=["Sec-WebSocket-Extensions: permessage-deflate"])
    assert c.head.startswith("HTTP/1.1 502"), c.head
    c.close()


@pytest.mark.parametrize("pipelined", ["frame", "http"])
def test_bytes_pipelined_behind_the_upgrade_are_inspected_not_relayed(ws_broker, pipelined):
    """Sent in the same write as the upgrade request, before any 101: a masked frame carrying
    a real token (refused: 1008), or a second HTTP request carrying one (not frames: 1002)."""
    b, up = ws_broker()
    if pipelined == "frame":
        extra, code = encode_frame(TEXT, f"token={GH_REAL}", mask=True), 1008
    else:
        extra = (f"GET /user HTTP/1.1\r\nHost: {GITHUB}\r\n"
                 f"Authorization: Bearer {GH_REAL}\r\n\r\n").encode()
        code = 1002
    c = open_ws(b, up, extra=extra)
    expect_close(c, code)
    c.close()
    conn = up.wait()
    assert GH_REAL.encode() not in conn.raw_after_head, conn.raw_after_head
    assert conn.messages == []


def test_an_oversized_message_closes_with_1009(ws_broker):
    b, up = ws_broker()
    c = open_ws(b, up)
    # Announced by its length alone (16 MiB + 1); the broker need not wait for the rest.
    c.send(encode_frame(BINARY, b"x" * 1024, mask=True, length=16 * 1024 * 1024 + 1)[:1024])
    expect_close(c, 1009)
    c.close()
    conn = up.wait()
    assert conn.messages == [] and [f.close_code for f in conn.frames] == [1009]
    assert ws_record(b)["error"] == "websocket_message_too_big"


def test_an_idle_websocket_ends_at_the_tunnel_timeout(ws_broker):
    b, up = ws_broker(args=["--timeout", "tunnel=1s"])
    c = open_ws(b, up)
    start = time.monotonic()
    assert c.closed_by_peer(timeout=5.0)
    assert time.monotonic() - start < 4.0
    assert ws_record(b)["error"] == "timeout"


# ---- Responses API over a WebSocket (Codex) -------------------------------------------------


def responses_server(usage=(100, 50)):
    """Answers each response.create with created, a delta and completed (with `usage`)."""

    def handler(peer, conn):
        n = 0
        while True:
            f = peer.recv_message()
            if f.opcode == CLOSE:
                peer.send_frame(CLOSE, f.payload)
                return
            if f.opcode != TEXT or json.loads(f.payload).get("type") != "response.create":
                continue
            n += 1
            rid = f"resp_{n}"
            for event in ({"type": "response.created", "response": {"id": rid, "model": "gpt-5"}},
                          {"type": "response.output_text.delta", "delta": "Hello"},
                          {"type": "response.completed",
                           "response": {"id": rid, "model": "gpt-5", "status": "completed",
                                        "usage": {"input_tokens": usage[0],
                                                  "output_tokens": usage[1],
                                                  "total_tokens": sum(usage)}}}):
                peer.send_frame(TEXT, json.dumps(event))

    return handler


def create(c, text="hi"):
    c.send_message(TEXT, json.dumps({"type": "response.create", "model": "gpt-5",
                                     "input": [{"type": "message", "role": "user",
                                                "content": [{"type": "input_text",
                                                             "text": text}]}]}))


def read_response(c):
    events = []
    while not events or events[-1]["type"] not in ("response.completed", "error"):
        events.append(json.loads(c.recv_message().payload))
    return events


def test_responses_usage_is_metered_and_a_spent_budget_stops_the_next_request(ws_broker):
    b, up = ws_broker(responses_server(), budgets={"llm_tokens": 200})
    c = open_ws(b, up, host=OPENAI, path="/v1/responses",
                headers=[f"Authorization: Bearer {b.env_vars['OPENAI_API_KEY']}"])
    for _ in range(2):  # 150, then 300: the second is admitted at 150 < 200
        create(c)
        assert read_response(c)[-1]["type"] == "response.completed"
    create(c)
    before, _ = expect_close(c, 1008)
    assert len(before) == 1 and before[0].opcode == TEXT, before
    event = json.loads(before[0].payload)
    assert event["type"] == "error", event
    assert event["error"]["type"] == event["error"]["code"] == "budget_exhausted", event
    assert event["error"]["message"] == \
        "the session's llm_tokens budget is spent (limit 200, used 300)", event
    c.close()

    conn = up.wait()
    assert len(conn.messages) == 2  # the third request never reached the upstream
    assert AI_REAL in conn.head
    usage = b.wait_for_records(lambda r: r.get("method") == "WS", 2)
    assert [(r["llm_tokens"], r.get("estimated", False)) for r in usage] == [(150, False)] * 2
    assert all(r["host"] == OPENAI and r["path"] == "/v1/responses" and r["event"] == "request"
               and r["credential"] == "openai" for r in usage), usage
    rec = ws_record(b)
    assert (rec["event"], rec["decision"], rec["error"]) == ("refused", "deny",
                                                             "budget_exhausted"), rec
    assert rec["ws_messages_out"] == 2 and rec["ws_messages_in"] == 6, rec
    assert b.stop() == 0
    end = [r for r in b.records() if r.get("event") == "session_end"][0]
    assert end["usage"]["llm_tokens"] == 300, end
    # The extra records are links of the one chain.
    key = b.home / ".config" / "broker" / "audit-key"
    verified = run_broker_cli("log", b.session, "--log-dir", b.log_dir, "--verify", "--key", key)
    assert verified.returncode == 0, verified.stdout + verified.stderr
