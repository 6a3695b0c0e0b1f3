"""Session budgets (docs/policy.md "budgets", 429 budget_exhausted) and LLM token accounting
(the audit record's `llm_tokens`), end to end: `broker serve` / `broker wrap` as subprocesses, a fake
OpenAI / Anthropic HTTPS upstream on loopback (reached with --connect-to, trusted with
--upstream-ca), python-requests, curl and raw sockets as clients.
"""

import json
import os
import re
import signal
import subprocess
import time
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests

from conftest import (BROKER_BIN, LoopbackHttpServer, RawClient, assert_refusal, clean_env,
                      make_pki, pattern_bytes, sha256, tls_server_context)

OPENAI, ANTHROPIC, OTHER, TUNNEL = ("api.openai.com", "api.anthropic.com", "api.example.test",
                                    "tunnel.example.test")
GEMINI = "generativelanguage.googleapis.com"
CHAT = f"https://{OPENAI}/v1/chat/completions"
MESSAGES = f"https://{ANTHROPIC}/v1/messages"
GPT, CLAUDE = "gpt-4o-mini-2024-07-18", "claude-3-5-haiku-20241022"
WORDS = "lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 8  # streamed, no usage


# ---- The fake LLM upstream -----------------------------------------------------------------


def sse(obj, event=None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()


def openai_stream(include_usage: bool):
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": GPT}
    extra = {"usage": None} if include_usage else {}  # OpenAI sends "usage": null until the end
    yield sse({**base, **extra, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                   "content": ""}}]})
    for word in WORDS.split(" "):
        yield sse({**base, **extra, "choices": [{"index": 0, "delta": {"content": word + " "},
                                                 "finish_reason": None}]})
    yield sse({**base, **extra, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if include_usage:
        yield sse({**base, "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 50,
                                                    "total_tokens": 150}})
    yield sse("[DONE]")


def gemini_chunks():
    """streamGenerateContent: text in pieces, usageMetadata cumulative, the last one final."""
    for i, word in enumerate(("Hello", " from", " Gemini")):
        usage = {"promptTokenCount": 70, "totalTokenCount": 70}
        if i == 2:
            usage = {"promptTokenCount": 70, "candidatesTokenCount": 20, "thoughtsTokenCount": 30,
                     "totalTokenCount": 120}
        yield {"candidates": [{"content": {"parts": [{"text": word}], "role": "model"}}],
               "usageMetadata": usage, "modelVersion": "gemini-2.5-flash"}


def anthropic_stream():
    yield sse({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": CLAUDE, "content": [],
        "stop_reason": None, "usage": {"input_tokens": 40, "output_tokens": 1}}}, "message_start")
    yield sse({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}, "content_block_start")
    yield sse({"type": "ping"}, "ping")
    for word in ("Hello", " there", ", friend."):
        yield sse({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": word}}, "content_block_delta")
    yield sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    yield sse({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
               "usage": {"output_tokens": 60}}, "message_delta")
    yield sse({"type": "message_stop"}, "message_stop")


class _LlmHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def _whole(self, status, doc):
        """Head and JSON body in one write, as many servers send a small answer."""
        body = json.dumps(doc).encode()
        self.wfile.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    def _stream(self, events):
        """SSE, chunked, each event in two separately flushed pieces split mid-line."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for ev in events:
            for piece in (ev[:len(ev) // 2], ev[len(ev) // 2:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                time.sleep(0.002)
        self.wfile.write(b"0\r\n\r\n")

    def _handle(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        req = json.loads(body) if body.startswith(b"{") else {}
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/bytes/(\d+)", path)
        if m:
            data = pattern_bytes(int(m.group(1)))
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif self.command == "POST" and req.get("fail"):
            self._whole(400, {"error": {"message": "bad", "type": "invalid_request_error"}})
        elif self.command == "POST" and path == "/v1/chat/completions":
            if req.get("stream"):
                usage = bool((req.get("stream_options") or {}).get("include_usage"))
                return self._stream(openai_stream(usage))
            self._whole(200, {"id": "chatcmpl-1", "object": "chat.completion",
                              "model": req.get("model", GPT), "choices": [{
                                  "index": 0, "message": {"role": "assistant", "content": "Hi!"},
                                  "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 100, "completion_tokens": 50,
                                        "total_tokens": 150}})
        elif self.command == "POST" and path == "/v1/responses":
            self._whole(200, {"id": "resp_1", "object": "response", "model": GPT,
                              "status": "completed", "output": [],
                              "usage": {"input_tokens": 30, "output_tokens": 20,
                                        "total_tokens": 50}})
        elif self.command == "POST" and path.endswith(":streamGenerateContent"):
            if "alt=sse" in self.path:
                return self._stream(sse(chunk) for chunk in gemini_chunks())
            self._whole(200, list(gemini_chunks()))
        elif self.command == "POST" and path == "/v1/messages":
            if req.get("stream"):
                return self._stream(anthropic_stream())
            self._whole(200, {"id": "msg_1", "type": "message", "role": "assistant",
                              "model": CLAUDE, "content": [{"type": "text", "text": "Hi!"}],
                              "stop_reason": "end_turn",
                              "usage": {"input_tokens": 40, "output_tokens": 60}})
        else:
            self._whole(200, {"path": self.path, "method": self.command})

    do_GET = do_POST = _handle


@pytest.fixture(scope="module")
def llm_pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("llm-pki"), [OPENAI, ANTHROPIC, GEMINI, OTHER, TUNNEL])


@pytest.fixture(scope="module")
def llm(llm_pki):
    """The fake upstream over TLS (llm.port) and over plain HTTP (llm.plain_port)."""
    servers = [LoopbackHttpServer(_LlmHandler, tls_server_context(llm_pki)).start(),
               LoopbackHttpServer(_LlmHandler).start()]
    servers[0].plain_port = servers[1].port
    yield servers[0]
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.fixture
def start(broker_factory, llm, llm_pki):
    """start(budgets, tunnel=, credentials=, env=) -> (broker, requests.Session through it)."""

    def make(budgets, tunnel=False, credentials=None, env=None):
        allow = [{"host": h} for h in (OPENAI, ANTHROPIC, GEMINI, OTHER)]
        if tunnel:
            allow.append({"host": TUNNEL, "tunnel": True})
        policy = {"version": 1, "allow": allow, "budgets": budgets}
        if credentials:
            policy["credentials"] = credentials
        b = broker_factory(policy=policy, upstream_ca=llm_pki.ca_cert, env=env,
                           connect_to=[f"{h}:443:127.0.0.1:{llm.port}"
                                       for h in (OPENAI, ANTHROPIC, GEMINI, OTHER, TUNNEL)]
                           + [f"{OTHER}:80:127.0.0.1:{llm.plain_port}"])
        bundle = b.dir / "clients-ca.pem"  # the broker's CA (intercepted) + the test CA (tunnel)
        bundle.write_bytes(b.ca_cert.read_bytes() + llm_pki.ca_cert.read_bytes())
        s = requests.Session()
        s.trust_env = False
        s.proxies = {"http": b.proxy, "https": b.proxy}
        s.verify = str(bundle)
        sessions.append(s)
        return b, s

    sessions = []
    yield make
    for s in sessions:  # idle keep-alive connections closed before the broker stops
        s.close()


def chat(s, stream=False, include_usage=False, **extra):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hi"}], **extra}
    if stream:
        body["stream"] = True
        if include_usage:
            body["stream_options"] = {"include_usage": True}
    return s.post(CHAT, json=body, timeout=15)


def refusal(r, b, budget, limit=None, used=None):
    """Checks a 429 budget_exhausted response; returns its JSON body."""
    doc = assert_refusal(r.status_code, r.headers, r.content, "budget_exhausted", 429,
                         session=b.session)
    assert doc.get("budget") == budget, doc
    if limit is not None:
        assert doc.get("limit") == limit, doc
    if used is not None:
        assert doc.get("used") == used, doc
    return doc


def requests_of(b, count, timeout=5.0):
    recs = b.wait_for_records(lambda r: r.get("event") in ("request", "refused"), count, timeout)
    assert len(recs) >= count, f"expected {count} records, got {recs}\n{b.stderr[-2000:]}"
    return recs


def refused_budget_records(b):
    return [r for r in b.records()
            if r.get("event") == "refused" and r.get("error") == "budget_exhausted"]


# ---- LLM metering (no budget: only the audit record) ---------------------------------------


def test_llm_responses_are_metered_into_the_audit_record(start):
    b, s = start({})
    r = chat(s)
    assert r.status_code == 200 and r.json()["usage"]["total_tokens"] == 150, r.text
    r = chat(s, stream=True, include_usage=True)
    assert r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]"), r.text[-300:]
    assert '"total_tokens": 150' in r.text  # the stream reached the client intact
    r = chat(s, stream=True)
    assert r.status_code == 200 and r.text.count("data: ") == len(WORDS.split(" ")) + 3, r.text
    r = s.post(MESSAGES, json={"model": "claude", "max_tokens": 64, "messages": []}, timeout=15)
    assert r.status_code == 200 and r.json()["usage"]["output_tokens"] == 60, r.text
    r = s.post(MESSAGES, json={"model": "claude", "stream": True, "messages": []}, timeout=15)
    assert r.status_code == 200 and "event: message_stop" in r.text, r.text[-300:]
    r = s.post(f"https://{OPENAI}/v1/responses", json={"model": "gpt-4o-mini", "input": "hi"},
               timeout=15)
    assert r.status_code == 200, r.text
    assert s.get(f"https://{OPENAI}/v1/models", timeout=15).status_code == 200  # not an LLM call
    assert chat(s, fail=True).status_code == 400  # an error answer: no usage, not counted

    recs = requests_of(b, 8)
    got = [(r["path"], r["status"], r["llm_tokens"], r.get("estimated", False)) for r in recs]
    assert [g[2] for g in got[:2]] == [150, 150], got
    assert not got[0][3] and not got[1][3], got
    assert got[2][3] is True and got[2][2] > 0, f"a stream without usage is estimated: {got[2]}"
    assert got[3][2:] == (100, False) and got[4][2:] == (100, False), got
    assert got[5][2:] == (50, False), got
    assert got[6][2] is None and got[7][2] is None, got
    assert all(r["event"] == "request" for r in recs[:8]), recs


@pytest.mark.parametrize("credential", [False, True], ids=["no-credentials", "with-credential"])
def test_a_stream_without_usage_is_estimated_from_its_text(start, credential):
    creds = {"openai": {"type": "bearer", "env": ["OPENAI_API_KEY"], "hosts": [OPENAI]}}
    b, s = start({"llm_tokens": 1000}, credentials=creds if credential else None,
                 env={"OPENAI_API_KEY": "sk-proj-" + "Budg3tT3stRealKey0123456789abcdefXYZ"})
    req_body = json.dumps({"model": "gpt-4o-mini", "stream": True, "messages": [
        {"role": "user", "content": "Say hi"}]}).encode()
    r = s.post(CHAT, data=req_body, headers={"Content-Type": "application/json"}, timeout=15)
    text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content", "")
                   for line in r.text.splitlines() if line.startswith("data: {"))
    assert r.status_code == 200 and text == WORDS + " ", r.text[-500:]
    rec = requests_of(b, 1)[0]
    assert rec.get("estimated") is True, rec
    low = len(WORDS) // 4  # at least the generated text at ~4 bytes a token
    high = (len(WORDS) + len(req_body) + 1024) // 4 + 2  # at most that plus the whole request
    assert low <= rec["llm_tokens"] <= high, f"estimate {rec['llm_tokens']} not in [{low}, {high}]"
    r = chat(s)  # the estimate (a few hundred tokens) leaves most of the 1000
    assert r.status_code == 200, (r.status_code, r.text)


# ---- Budgets under `broker serve` ----------------------------------------------------------


def test_llm_token_budget_refuses_once_reported_usage_reaches_it(start):
    b, s = start({"llm_tokens": 400})
    for i in range(3):  # 150, 300, 450: the third is admitted at 300 < 400
        r = chat(s)
        assert r.status_code == 200, (i, r.status_code, r.text, b.stderr[-1500:])
    r = chat(s)
    refusal(r, b, "llm_tokens", "400", "450")
    assert r.headers.get("Retry-After") is None
    # A non-LLM request is refused too: the session's token budget is spent.
    refusal(s.get(f"https://{OTHER}/x", timeout=15), b, "llm_tokens")
    recs = requests_of(b, 5)
    assert [r["llm_tokens"] for r in recs[:3]] == [150, 150, 150], recs
    ref = refused_budget_records(b)
    assert len(ref) == 2 and ref[0]["status"] == 429 and ref[0]["host"] == OPENAI, ref
    assert ref[0]["path"] == "/v1/chat/completions" and ref[0]["decision"] == "deny", ref


def test_anthropic_stream_tokens_count_against_the_budget(start):
    b, s = start({"llm_tokens": 150})
    for _ in range(2):  # 100, 200
        r = s.post(MESSAGES, json={"model": "claude", "stream": True, "messages": []}, timeout=15)
        assert r.status_code == 200, r.text
    refusal(s.post(MESSAGES, json={"model": "claude", "messages": []}, timeout=15), b,
            "llm_tokens", "150", "200")


def test_gemini_streams_are_metered_and_count_against_the_budget(start):
    """Gemini CLI's streamGenerateContent, SSE and JSON-array forms: 70 in, 20 + 30 thinking out."""
    b, s = start({"llm_tokens": 200})
    url = f"https://{GEMINI}/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    r = s.post(url + "?alt=sse", json=body, timeout=15)
    assert r.status_code == 200 and r.text.count("data: ") == 3, r.text
    r = s.post(url, json=body, timeout=15)
    assert r.status_code == 200 and len(r.json()) == 3, r.text
    refusal(s.post(url + "?alt=sse", json=body, timeout=15), b, "llm_tokens", "200", "240")
    recs = requests_of(b, 3)
    assert [(r["llm_tokens"], r.get("estimated", False)) for r in recs[:2]] == \
        [(120, False), (120, False)], recs


def test_requests_budget_counts_https_plain_http_and_tunnels(start):
    b, s = start({"requests": 3}, tunnel=True)
    assert s.get(f"https://{OPENAI}/v1/models", timeout=15).status_code == 200
    r = s.get(f"http://{OTHER}/plain", timeout=15)
    assert r.status_code == 200 and r.json()["path"] == "/plain", r.text
    r = s.get(f"https://{TUNNEL}/tunneled", timeout=15)  # not intercepted: one CONNECT
    assert r.status_code == 200 and r.json()["path"] == "/tunneled", r.text
    refusal(s.get(f"https://{OPENAI}/v1/models", timeout=15), b, "requests", "3", "3")
    refusal(s.get(f"http://{OTHER}/plain", timeout=15), b, "requests", "3", "3")
    with RawClient(b.port) as c:  # a refused tunnel: the CONNECT response itself
        c.send(f"CONNECT {TUNNEL}:443 HTTP/1.1\r\nHost: {TUNNEL}:443\r\n\r\n".encode())
        resp = c.read_response()
    assert_refusal(resp.status, resp.headers, resp.body, "budget_exhausted", 429)
    assert json.loads(resp.body)["budget"] == "requests"
    assert len(refused_budget_records(b)) == 3, b.records()


def test_per_host_requests_budget_limits_only_its_host(start):
    b, s = start({"per_host": {OPENAI: {"requests": 2}}})
    for _ in range(2):
        assert chat(s).status_code == 200
    refusal(chat(s), b, f"per_host[{OPENAI}].requests", "2", "2")
    for _ in range(3):  # another host is not limited by it
        r = s.get(f"https://{OTHER}/still-open", timeout=15)
        assert r.status_code == 200, (r.status_code, r.text)
    refusal(chat(s), b, f"per_host[{OPENAI}].requests")


def test_rate_budget_refuses_a_burst_and_recovers(start):
    b, s = start({"rate": "2/s"})
    rs = [s.get(f"https://{OTHER}/burst/{i}", timeout=15) for i in range(5)]
    ok = [r for r in rs if r.status_code == 200]
    limited = [r for r in rs if r.status_code != 200]
    assert 2 <= len(ok) <= 3 and len(limited) >= 2, [r.status_code for r in rs]
    for r in limited:
        refusal(r, b, "rate", "2/s")
        assert r.headers.get("Retry-After", "").isdigit(), dict(r.headers)
        assert 1 <= int(r.headers["Retry-After"]) <= 2, dict(r.headers)
    time.sleep(1.1)
    for i in range(2):
        r = s.get(f"https://{OTHER}/again/{i}", timeout=15)
        assert r.status_code == 200, (i, r.status_code, r.text)


def test_cost_budget_refuses_once_priced_usage_reaches_it(start):
    # 100 input + 50 output tokens at $100 / $200 per Mtok = $0.02 a call.
    # The policy's prices win over the built-in list prices (Claude's here: free).
    prices = {"gpt-4o-mini*": {"input_per_mtok": 100, "output_per_mtok": 200},
              "gpt-4o*": {"input_per_mtok": 0.001, "output_per_mtok": 0.001},
              "claude-3-5-haiku*": {"input_per_mtok": 0, "output_per_mtok": 0}}
    b, s = start({"cost_usd": 0.03, "prices": prices})
    for _ in range(3):
        assert s.post(MESSAGES, json={"model": "claude", "messages": []},
                      timeout=15).status_code == 200
    assert chat(s).status_code == 200   # $0.02
    assert chat(s).status_code == 200   # admitted at $0.02 < $0.03; now $0.04
    refusal(chat(s), b, "cost_usd", "$0.03", "$0.04")


def test_bytes_in_budget_lets_a_transfer_finish_then_refuses(start):
    b, s = start({"bytes_in": "100KB"})
    r = s.get(f"https://{OTHER}/bytes/200000", timeout=15)
    assert r.status_code == 200 and sha256(r.content) == sha256(pattern_bytes(200000))
    doc = refusal(s.get(f"https://{OTHER}/bytes/10", timeout=15), b, "bytes_in", "100 KB")
    m = re.fullmatch(r"([\d.]+) KB", doc["used"])
    assert m and 200 <= float(m.group(1)) < 201, doc


# ---- `broker wrap`: a spent budget ends the command ----------------------------------------


def host_processes_with(needle: bytes):
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def run_wrap(tmp_path, llm, llm_pki, budgets, script, timeout=15):
    home, run, logs = tmp_path / "home", tmp_path / "run", tmp_path / "logs"
    home.mkdir()
    run.mkdir(mode=0o700)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"version": 1, "allow": [{"host": OPENAI}], "budgets": budgets}))
    argv = [BROKER_BIN, "wrap", "--policy", str(policy), "--upstream-ca", str(llm_pki.ca_cert),
            "--connect-to", f"{OPENAI}:443:127.0.0.1:{llm.port}", "--log-dir", str(logs),
            "--", "sh", "-c", script]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
                       stdin=subprocess.DEVNULL,
                       env=clean_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(run)}))
    recs = [json.loads(line) for f in sorted(logs.glob("*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]
    return p, time.monotonic() - t0, recs


def sleep_tag():
    return f"{600 + uuid.uuid4().int % 300}.{uuid.uuid4().int % 10**6:06d}"


def test_wrap_kills_the_command_tree_when_a_kill_budget_refuses(tmp_path, llm, llm_pki):
    tag = sleep_tag()
    mine = f"sleep\0{tag}\0".encode()
    script = (f"sleep {tag} >/dev/null 2>&1 &\n"
              "for i in 1 2 3 4 5 6; do\n"
              f"  curl -sS -o /dev/null -w '%{{http_code}}\\n' https://{OPENAI}/v1/models\n"
              "done\n"
              f"sleep {tag}\n")
    try:
        p, elapsed, recs = run_wrap(tmp_path, llm, llm_pki,
                                    {"requests": 2, "on_exhaust": "kill"}, script)
        assert p.returncode == 137, f"exit={p.returncode}\n{p.stdout}\n{p.stderr}"
        assert elapsed < 10, elapsed
        codes = p.stdout.split()
        assert codes[:2] == ["200", "200"] and codes.count("200") == 2, p.stdout
        ended = [l for l in p.stderr.splitlines() if " ended: " in l]
        assert len(ended) == 1 and re.fullmatch(
            r"broker: session \S+ ended: the requests budget is spent \(limit 2, used 2\)",
            ended[0]), p.stderr
        assert not host_processes_with(mine), "a process of the command outlived the session"
        assert any(r.get("error") == "budget_exhausted" for r in recs), recs
        end = [r for r in recs if r.get("event") == "session_end"]
        assert len(end) == 1 and end[0]["exit"] == 137, end
    finally:
        for pid in host_processes_with(mine):
            os.kill(pid, signal.SIGKILL)


def test_wrap_ends_the_command_when_its_duration_is_spent(tmp_path, llm, llm_pki):
    tag = sleep_tag()
    try:
        p, elapsed, recs = run_wrap(tmp_path, llm, llm_pki, {"duration": "1s"}, f"sleep {tag}")
        assert p.returncode == 137, f"exit={p.returncode}\n{p.stderr}"
        assert 0.9 <= elapsed < 3.5, elapsed
        assert re.search(r"^broker: session \S+ ended: the duration budget is spent "
                         r"\(limit 1s, used \ds\)$", p.stderr, re.M), p.stderr
        assert not host_processes_with(f"sleep\0{tag}\0".encode())
        end = [r for r in recs if r.get("event") == "session_end"]
        assert len(end) == 1 and end[0]["exit"] == 137, recs
    finally:
        for pid in host_processes_with(f"sleep\0{tag}\0".encode()):
            os.kill(pid, signal.SIGKILL)


def test_a_wrapped_client_gets_429_once_its_token_budget_is_spent(tmp_path, llm, llm_pki):
    post = (f"curl -sS -o /dev/null -w '%{{http_code}}\\n' -H 'Content-Type: application/json' "
            f"https://{OPENAI}/v1/chat/completions -d ")
    plain = post + "'{\"model\":\"gpt-4o-mini\",\"messages\":[]}'"
    streamed = post + ("'{\"model\":\"gpt-4o-mini\",\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true},\"messages\":[]}'")
    p, _, recs = run_wrap(tmp_path, llm, llm_pki, {"llm_tokens": 400},
                          "\n".join([plain, streamed, plain, plain]))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["200", "200", "200", "429"], p.stdout
    assert [r["llm_tokens"] for r in recs if r.get("event") == "request"] == [150, 150, 150]
    refused = [r for r in recs if r.get("error") == "budget_exhausted"]
    assert len(refused) == 1 and refused[0]["exe"].endswith("/curl"), refused
