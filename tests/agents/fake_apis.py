"""Local fakes of the model APIs the real agents talk to (pure stdlib), for the tests that run
Codex, Claude Code and Gemini CLI inside `broker wrap` (tests/integration/test_real_agents.py),
and of the few endpoints tests/agents/sdk_call.mjs calls through the official Node SDKs
(openai, @anthropic-ai/sdk, @octokit/rest) and Node's fetch.

One threaded HTTPS server answers for every host (the test's leaf certificate names them all;
broker's `--connect-to HOST:443=127.0.0.1:PORT` sends each host here and `--upstream-ca` makes
broker trust the test CA). It listens on 127.0.0.1, on an ephemeral port unless `port` says
which. It routes on the Host header:

- api.openai.com: POST /v1/responses (SSE when the body says "stream": true, else the JSON
  Response object: a message with output_text content, and usage; the openai SDK's
  `responses.create` without streaming), GET /v1/responses upgraded to a WebSocket
  (Codex's default transport: `response.create` in, the same events out as text messages; see
  fake_ws.py) or refused with `ws="refuse"` so that Codex falls back to HTTP; GET /v1/models.
- chatgpt.com: /backend-api/codex/responses (the same, for Codex's ChatGPT login).
- api.anthropic.com: POST /v1/messages (SSE or JSON), /v1/messages/count_tokens,
  /api/oauth/profile; any other path 404 (Claude Code's settings, bootstrap, event logging).
  /api/hello there and /v1/oauth/hello at platform.claude.com answer 200 (Claude Code's first
  interactive run checks both and stops when either fails).
  (@anthropic-ai/sdk >= 1.0 sends an API key as `Authorization: Bearer KEY`, not x-api-key:
  a test of that SDK registers the key in the anthropic_bearer realm.)
- generativelanguage.googleapis.com: /v1beta/models/M:generateContent,
  :streamGenerateContent (?alt=sse or a JSON array), :countTokens.
- cloudcode-pa.googleapis.com (Gemini CLI's Google login): /v1internal:loadCodeAssist,
  :onboardUser, :generateContent, :streamGenerateContent, :countTokens (the Gemini response
  wrapped in {"response": ...}).
- www.googleapis.com: /oauth2/v2/userinfo.
- auth.openai.com, platform.claude.com, oauth2.googleapis.com: the token endpoints of
  fake_oauth.py, when the test registers them.
- api.github.com (realm github: `Authorization: Bearer X` or `token X`, the form Octokit
  sends): GET /user -> {"login": "octocat-fake"}; any other GET path -> {"path": PATH}; 401
  without the registered value; other methods 404. (test_real_agents.py sends a dummy here to
  see it caught: no github value is registered there, so nothing gets through.)

Every model endpoint ACCEPTS ONLY THE REAL credential values the test registered (`accept()`)
and answers 401 otherwise, records every request (host, method, path, headers, body, status,
WebSocket messages), and returns usage (input/output token counts) so that broker meters
llm_tokens. `tool_call` makes the first answer of a conversation a tool call instead of text
(so that the agent sends a second request: what a budget test needs): `echo tool-ran`, or the
shell command `tool_call` holds when it is a string. For the Messages API it may also be a list
of {"name", "input"}: one tool call a turn, in order (an MCP tool is "mcp__SERVER__TOOL"), then
the answer.

- docs.agent.test (no credential): GET -> text/plain DOCS_PAGE; a host no policy of the
  agents' tests allows (what an agent's tool fetches while a person is asked).
"""

import json
import re
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit
import ssl

import fake_ws

ANSWER = "The fake model says: PINEAPPLE-42."
INPUT_TOKENS, OUTPUT_TOKENS = 1234, 56

# The host names the fakes answer for (the test's leaf certificate must carry them all).
HOSTS = ["api.openai.com", "chatgpt.com", "auth.openai.com", "api.anthropic.com",
         "platform.claude.com", "generativelanguage.googleapis.com",
         "cloudcode-pa.googleapis.com", "oauth2.googleapis.com", "www.googleapis.com",
         "api.github.com", "docs.agent.test"]
DOCS_PAGE = "The docs page says: MANGO-17."

GITHUB_LOGIN = "octocat-fake"


def _now_id(prefix):
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class Record(dict):
    """One request the fake received (a dict: host, method, path, query, headers (lower-case
    names), body (bytes), status, ws_in (client messages), ws_out (server messages))."""

    def json(self):
        try:
            return json.loads(self["body"] or b"null")
        except ValueError:
            return None


class FakeApis:
    def __init__(self, leaf_cert, leaf_key, answer=ANSWER, ws="accept",
                 usage=(INPUT_TOKENS, OUTPUT_TOKENS), tool_call=False, port=0):
        self.answer, self.ws, self.usage, self.tool_call = answer, ws, usage, tool_call
        self.lock = threading.Lock()
        self.records = []
        # realm -> accepted real values; realms: openai (Bearer at api.openai.com), chatgpt
        # (Bearer at chatgpt.com), anthropic_key (x-api-key), anthropic_bearer (Authorization:
        # Bearer at api.anthropic.com), gemini_key (x-goog-api-key or key=), google_bearer
        # (Bearer at cloudcode-pa / www.googleapis.com), github (Bearer or token at
        # api.github.com).
        self.accepted = {}
        self.token_endpoints = {}  # host -> fake_oauth.TokenEndpoint
        self.chatgpt_account_id = "acct-fake0001"
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(leaf_cert), str(leaf_key))
        ctx.set_alpn_protocols(["http/1.1"])
        self.server = _Server(self, ctx, port)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    # ---- configuration -------------------------------------------------------------------

    def accept(self, realm: str, value: str):
        with self.lock:
            self.accepted.setdefault(realm, set()).add(value)

    def add_token_endpoint(self, host: str, endpoint):
        self.token_endpoints[host] = endpoint

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    # ---- what arrived --------------------------------------------------------------------

    def requests(self, host=None, path_prefix=None):
        with self.lock:
            out = list(self.records)
        return [r for r in out if (host is None or r["host"] == host)
                and (path_prefix is None or r["path"].startswith(path_prefix))]

    def model_requests(self):
        """The requests that reached a model endpoint (answered or refused)."""
        return [r for r in self.requests() if r.get("model_call")]

    def _ok(self, realm: str, value) -> bool:
        with self.lock:
            return value is not None and value in self.accepted.get(realm, set())


# --------------------------------------------------------------------------------------------
# Answers in each API's shape
# --------------------------------------------------------------------------------------------


def _conversation_has_tool_result(doc) -> bool:
    """True once the request carries the result of a tool call (the second turn of a budget
    test), in any of the three APIs' shapes."""
    text = json.dumps(doc)
    return any(k in text for k in ('"function_call_output"', '"custom_tool_call_output"',
                                   '"tool_result"',
                                   '"functionResponse"'))


def tool_command(fake) -> str:
    return fake.tool_call if isinstance(fake.tool_call, str) else "echo tool-ran"


def openai_events(fake, doc):
    """The Responses API event sequence (dicts) for one `response.create` / POST."""
    rid = _now_id("resp")
    model = (doc or {}).get("model", "gpt-fake")
    inp, out = fake.usage
    usage = {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": inp + out}
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "in_progress", "output": []}
    if (doc or {}).get("generate") is False:  # Codex's WebSocket prewarm: no output
        usage = {**usage, "output_tokens": 0, "total_tokens": inp}
        done = {**base, "status": "completed", "usage": usage}
        events = [{"type": "response.created", "response": base},
                  {"type": "response.completed", "response": done}]
        for i, e in enumerate(events):
            e["sequence_number"] = i
        return events
    if fake.tool_call and not _conversation_has_tool_result(doc):
        if isinstance(fake.tool_call, str):
            # Codex's code mode: one `exec` tool whose JavaScript calls its nested tools.
            script = (f"const r = await tools.exec_command({{cmd: {json.dumps(fake.tool_call)}}});"
                      " text(typeof r === 'string' ? r : JSON.stringify(r));")
            item = {"type": "custom_tool_call", "id": _now_id("ctc"), "call_id": _now_id("call"),
                    "name": "exec", "input": script, "status": "completed"}
        else:
            item = {"type": "function_call", "id": _now_id("fc"), "call_id": _now_id("call"),
                    "name": "shell", "arguments": json.dumps({"command": ["echo", "tool-ran"]}),
                    "status": "completed"}
    else:
        item = {"type": "message", "id": _now_id("msg"), "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": fake.answer, "annotations": []}]}
    events = [{"type": "response.created", "response": base},
              {"type": "response.in_progress", "response": base},
              {"type": "response.output_item.added", "output_index": 0,
               "item": {**item, "status": "in_progress",
                        **({"content": []} if item["type"] == "message" else {})}}]
    if item["type"] == "message":
        events += [{"type": "response.content_part.added", "item_id": item["id"],
                    "output_index": 0, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}},
                   {"type": "response.output_text.delta", "item_id": item["id"],
                    "output_index": 0, "content_index": 0, "delta": fake.answer},
                   {"type": "response.output_text.done", "item_id": item["id"],
                    "output_index": 0, "content_index": 0, "text": fake.answer},
                   {"type": "response.content_part.done", "item_id": item["id"],
                    "output_index": 0, "content_index": 0, "part": item["content"][0]}]
    events += [{"type": "response.output_item.done", "output_index": 0, "item": item},
               {"type": "response.completed",
                "response": {**base, "status": "completed", "output": [item], "usage": usage}}]
    for i, e in enumerate(events):
        e["sequence_number"] = i
    return events


def anthropic_events(fake, doc):
    model = (doc or {}).get("model", "claude-fake")
    inp, out = fake.usage
    mid = _now_id("msg")
    start = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": inp, "output_tokens": 1,
                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
    # A list of {"name", "input"}: one tool call a turn, in order, then the answer.
    script = fake.tool_call if isinstance(fake.tool_call, list) else None
    call = None
    if script is not None:
        done = json.dumps(doc).count('"tool_result"')
        call = script[done] if done < len(script) else None
    elif fake.tool_call and not _conversation_has_tool_result(doc):
        call = {"name": "Bash", "input": {"command": tool_command(fake),
                                          "description": "run the tool"}}
    if call:
        block = {"type": "tool_use", "id": _now_id("toolu"), "name": call["name"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call["input"])}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": fake.answer}
        stop = "end_turn"
    return [("message_start", {"type": "message_start", "message": start}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block}),
            ("ping", {"type": "ping"}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": out}}),
            ("message_stop", {"type": "message_stop"})]


def anthropic_message(fake, doc):
    """The non-streaming Messages answer (what the events above add up to)."""
    events = anthropic_events(fake, doc)
    msg = dict(events[0][1]["message"])
    block = dict(events[1][1]["content_block"])
    delta = events[3][1]["delta"]
    if block["type"] == "text":
        block["text"] = delta["text"]
    else:
        block["input"] = json.loads(delta["partial_json"])
    msg.update(content=[block], stop_reason=events[5][1]["delta"]["stop_reason"])
    msg["usage"] = {**msg["usage"], "output_tokens": fake.usage[1]}
    return msg


def _from_schema(schema):
    """A value that fits a (Gemini or JSON) schema: the first enum value, 10 for numbers, a short
    string, every property of an object."""
    schema = schema or {}
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        return {k: _from_schema(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_from_schema(schema.get("items"))]
    if kind in ("integer", "number"):
        return 10
    if kind == "boolean":
        return False
    return "a simple request"


def gemini_response(fake, doc, model):
    """One generateContent answer (also each streamed chunk's shape). A request for JSON
    (Gemini CLI's model router, its other helpers) gets JSON fitting its schema."""
    inp, out = fake.usage
    config = (doc or {}).get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        parts = [{"text": json.dumps(_from_schema(schema))}]
    elif fake.tool_call and not _conversation_has_tool_result(doc):
        parts = [{"functionCall": {"name": "list_directory", "args": {"dir_path": "."}}}]
    else:
        parts = [{"text": fake.answer}]
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": inp, "candidatesTokenCount": out,
                              "totalTokenCount": inp + out},
            "modelVersion": model, "responseId": _now_id("gem")}


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, fake, ctx, port=0):
        self.fake, self.ctx = fake, ctx
        super().__init__(("127.0.0.1", port), _Handler)

    def finish_request(self, request, client_address):
        request.settimeout(60)
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass


def _bearer(headers):
    v = headers.get("authorization") or ""
    return v[7:].strip() if v[:7].lower() == "bearer " else None


def _github_token(headers):
    """The value of `Authorization: Bearer X` or `Authorization: token X` (GitHub takes both)."""
    v = headers.get("authorization") or ""
    scheme, _, value = v.partition(" ")
    return value.strip() if scheme.lower() in ("bearer", "token") and value.strip() else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, *args):
        pass

    # -- plumbing --

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline(1024).split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline(16)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send_json(self, status, doc, headers=()):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.rec["status"] = status

    def _start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.rec["status"] = 200

    def _chunk(self, data: bytes):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _unauthorized(self, what):
        self.rec["refused"] = what
        self._send_json(401, {"error": {"code": "invalid_api_key", "type": "authentication_error",
                                        "message": f"the fake accepts only the real {what}"}})

    # -- dispatch --

    def _handle(self):
        fake = self.server.fake
        url = urlsplit(self.path)
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        headers = {k.lower(): v for k, v in self.headers.items()}
        upgrade = fake_ws.is_upgrade(self.headers)
        body = b"" if upgrade else self._body()
        if headers.get("content-encoding") == "zstd":
            # Codex signed in with ChatGPT compresses its request bodies (zstd, Debian's CLI).
            body = subprocess.run(["zstd", "-dc"], input=body, capture_output=True,
                                  check=True).stdout
        self.rec = Record(host=host, method=self.command, path=url.path, query=url.query,
                          headers=headers, body=body, status=None, ws_in=[], ws_out=[],
                          model_call=False)
        with fake.lock:
            fake.records.append(self.rec)
        route = {"api.openai.com": self._openai, "chatgpt.com": self._chatgpt,
                 "api.anthropic.com": self._anthropic,
                 "generativelanguage.googleapis.com": self._gemini,
                 "cloudcode-pa.googleapis.com": self._code_assist,
                 "www.googleapis.com": self._google_www,
                 "oauth2.googleapis.com": self._google_www,
                 "api.github.com": self._github}.get(host)
        if host in fake.token_endpoints and self.command == "POST":
            ep = fake.token_endpoints[host]
            if url.path == ep.path:
                status, doc = ep.handle(headers.get("content-type", ""), body)
                self.rec["token_request"] = True
                return self._send_json(status, doc)
        if host in ("api.anthropic.com", "platform.claude.com") and \
                url.path in ("/api/hello", "/v1/oauth/hello"):
            # Claude Code's first-run check that both hosts are reachable (no credential).
            return self._send_json(200, {"message": "hello"})
        if host == "docs.agent.test" and self.command == "GET":
            data = DOCS_PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.rec["status"] = 200
            return None
        if route is None:
            return self._send_json(404, {"error": "not_found", "host": host})
        return route(fake, url, headers, body, upgrade)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

    # -- OpenAI Responses (api.openai.com, chatgpt.com) --

    def _responses(self, fake, headers, body, upgrade, realm):
        self.rec["model_call"] = True
        if not fake._ok(realm, _bearer(headers)):
            return self._unauthorized(f"{realm} bearer token")
        if upgrade:
            if fake.ws != "accept":
                self.rec["refused"] = "websocket"
                return self._send_json(426, {"error": {"message": "WebSocket not offered here",
                                                       "type": "invalid_request_error"}},
                                       headers=[("Connection", "close")])
            fake_ws.accept(self)
            self.rec["status"] = 101
            ws = fake_ws.WebSocket(self.rfile, self.wfile)
            try:
                while True:
                    msg = ws.receive()
                    self.rec["ws_in"].append(msg)
                    try:
                        doc = json.loads(msg)
                    except ValueError:
                        ws.close(1003, "not JSON")
                        return
                    if doc.get("type") != "response.create":
                        continue
                    for e in openai_events(fake, doc):
                        text = json.dumps(e)
                        self.rec["ws_out"].append(text)
                        ws.send_text(text)
            except (fake_ws.Closed, OSError, ValueError):
                return
        doc = json.loads(body or b"{}")
        if doc.get("stream"):
            self._start_sse()
            for e in openai_events(fake, doc):
                self._chunk(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode())
            return self._end_chunks()
        events = openai_events(fake, doc)
        return self._send_json(200, events[-1]["response"])

    def _openai(self, fake, url, headers, body, upgrade):
        if url.path == "/v1/responses":
            return self._responses(fake, headers, body, upgrade, "openai")
        if url.path == "/v1/models":
            if not fake._ok("openai", _bearer(headers)):
                return self._unauthorized("openai bearer token")
            return self._send_json(200, {"object": "list", "data": [
                {"id": "gpt-fake", "object": "model", "created": 0, "owned_by": "fake"}]})
        return self._send_json(404, {"error": {"message": "not here", "type": "not_found"}})

    def _chatgpt(self, fake, url, headers, body, upgrade):
        if url.path == "/backend-api/codex/responses":
            return self._responses(fake, headers, body, upgrade, "chatgpt")
        if url.path == "/backend-api/wham/accounts/check":
            # Codex's workspace routing discovery (a ChatGPT login needs it before a turn).
            if not fake._ok("chatgpt", _bearer(headers)):
                return self._unauthorized("chatgpt bearer token")
            account = headers.get("chatgpt-account-id") or fake.chatgpt_account_id
            return self._send_json(200, {"accounts": [{
                "id": account, "workspace_backend_origin": "https://chatgpt.com",
                "account_routing_override": "NO_CONSTRAINT"}]})
        return self._send_json(404, {"detail": "Not Found"})

    # -- Anthropic Messages --

    def _anthropic(self, fake, url, headers, body, upgrade):
        key, bearer = headers.get("x-api-key"), _bearer(headers)
        authed = fake._ok("anthropic_key", key) or fake._ok("anthropic_bearer", bearer)
        if url.path == "/v1/messages":
            self.rec["model_call"] = True
            if not authed:
                self.rec["refused"] = "anthropic credential"
                return self._send_json(401, {"type": "error", "error": {
                    "type": "authentication_error", "message": "invalid x-api-key"}})
            doc = json.loads(body or b"{}")
            if not doc.get("stream"):
                return self._send_json(200, anthropic_message(fake, doc))
            self._start_sse()
            for name, e in anthropic_events(fake, doc):
                self._chunk(f"event: {name}\ndata: {json.dumps(e)}\n\n".encode())
            return self._end_chunks()
        if url.path == "/v1/messages/count_tokens":
            if not authed:
                return self._unauthorized("anthropic credential")
            return self._send_json(200, {"input_tokens": fake.usage[0]})
        if url.path == "/api/oauth/profile":
            if not fake._ok("anthropic_bearer", bearer):
                return self._unauthorized("anthropic OAuth access token")
            return self._send_json(200, {
                "account": {"uuid": "00000000-0000-4000-8000-000000000001",
                            "email": "agent@example.test", "display_name": "Agent",
                            "has_claude_max": True, "has_claude_pro": False},
                "organization": {"uuid": "00000000-0000-4000-8000-000000000002",
                                 "organization_type": "claude_max",
                                 "rate_limit_tier": "default_claude_max_20x",
                                 "billing_type": "stripe_subscription"}})
        return self._send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                "message": "not in the fake"}})

    # -- Gemini API and Code Assist --

    def _gemini_answer(self, fake, url, body, model, wrap):
        doc = json.loads(body or b"{}")
        inner = doc.get("request", doc) if wrap else doc
        action = url.path.rsplit(":", 1)[-1]
        if action == "countTokens":
            return self._send_json(200, {"totalTokens": fake.usage[0]})
        answer = gemini_response(fake, inner, model)
        if wrap:
            answer = {"response": answer, "traceId": _now_id("trace")}
        if action == "generateContent":
            return self._send_json(200, answer)
        if action == "streamGenerateContent":
            if parse_qs(url.query).get("alt") == ["sse"]:
                self._start_sse()
                self._chunk(f"data: {json.dumps(answer)}\r\n\r\n".encode())
                return self._end_chunks()
            return self._send_json(200, [answer])
        return self._send_json(404, {"error": {"code": 404, "status": "NOT_FOUND"}})

    def _gemini(self, fake, url, headers, body, upgrade):
        m = re.fullmatch(r"/v1(?:beta|alpha)?/models/([^:/]+):(\w+)", url.path)
        if not m:
            return self._send_json(404, {"error": {"code": 404, "status": "NOT_FOUND"}})
        self.rec["model_call"] = True
        key = headers.get("x-goog-api-key") or (parse_qs(url.query).get("key") or [None])[0]
        if not fake._ok("gemini_key", key):
            self.rec["refused"] = "gemini key"
            return self._send_json(400 if key else 403, {"error": {
                "code": 400, "status": "INVALID_ARGUMENT",
                "message": "API key not valid. Please pass a valid API key."}})
        return self._gemini_answer(fake, url, body, m.group(1), wrap=False)

    def _code_assist(self, fake, url, headers, body, upgrade):
        if not fake._ok("google_bearer", _bearer(headers)):
            return self._send_json(401, {"error": {"code": 401, "status": "UNAUTHENTICATED",
                                                   "message": "the fake accepts only the real "
                                                              "access token"}})
        action = url.path.rsplit(":", 1)[-1]
        if action == "loadCodeAssist":
            return self._send_json(200, {
                "currentTier": {"id": "standard-tier", "name": "Fake Code Assist"},
                "allowedTiers": [{"id": "standard-tier", "isDefault": True}],
                "cloudaicompanionProject": "fake-project-123"})
        if action == "onboardUser":
            return self._send_json(200, {"done": True, "response": {
                "cloudaicompanionProject": {"id": "fake-project-123"}}})
        if action in ("generateContent", "streamGenerateContent", "countTokens"):
            self.rec["model_call"] = True
            doc = json.loads(body or b"{}")
            return self._gemini_answer(fake, url, body, doc.get("model", "gemini-fake"),
                                       wrap=True)
        return self._send_json(200, {})

    def _google_www(self, fake, url, headers, body, upgrade):
        if url.path in ("/tokeninfo", "/oauth2/v3/tokeninfo"):
            # Gemini CLI checks a refreshed token (google-auth-library getTokenInfo).
            token = _bearer(headers) or (parse_qs(body.decode(errors="replace")).get(
                "access_token") or parse_qs(url.query).get("access_token") or [None])[0]
            if not fake._ok("google_bearer", token):
                return self._send_json(400, {"error": "invalid_token",
                                             "error_description": "Invalid Value"})
            return self._send_json(200, {
                "azp": "fake", "aud": "fake", "sub": "1000001", "email": "agent@example.test",
                "email_verified": "true", "expires_in": "3500", "access_type": "offline",
                "scope": "openid https://www.googleapis.com/auth/cloud-platform "
                         "https://www.googleapis.com/auth/userinfo.email "
                         "https://www.googleapis.com/auth/userinfo.profile"})
        if url.path in ("/oauth2/v2/userinfo", "/oauth2/v3/userinfo"):
            if not fake._ok("google_bearer", _bearer(headers)):
                return self._send_json(401, {"error": "invalid_token"})
            return self._send_json(200, {"id": "1000001", "email": "agent@example.test",
                                         "verified_email": True, "name": "Agent"})
        return self._send_json(404, {"error": "not_found"})

    # -- GitHub REST (api.github.com) --

    def _github(self, fake, url, headers, body, upgrade):
        if self.command != "GET":
            return self._send_json(404, {"message": "Not Found"})
        if not fake._ok("github", _github_token(headers)):
            self.rec["refused"] = "github token"
            return self._send_json(401, {"message": "Bad credentials",
                                         "documentation_url": "https://docs.github.com/rest",
                                         "status": "401"})
        if url.path == "/user":
            return self._send_json(200, {"login": GITHUB_LOGIN})
        return self._send_json(200, {"path": url.path})
