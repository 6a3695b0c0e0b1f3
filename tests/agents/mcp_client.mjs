// node mcp_client.mjs URL STEPS [--token-env VAR] [--transport streamable|sse] — a real MCP
// client, built with @modelcontextprotocol/sdk, for the tests that put broker between an MCP
// client and an MCP server over HTTP. It connects to URL (initialize + notifications/initialized),
// runs STEPS in order and prints what each did. It uses the URL as given: inside `broker wrap`
// the host name resolves to the broker and NODE_EXTRA_CA_CERTS trusts its CA. Node's built-in
// fetch (undici) makes every request, which ignores HTTPS_PROXY.
//
// URL         https://HOST[:PORT]/mcp (the Streamable HTTP endpoint) or, with --transport sse,
//             the deprecated HTTP+SSE transport's event stream URL (https://HOST/sse).
// STEPS       a JSON array of {"op": ...}:
//               {"op": "list"}                      tools/list -> "tools": [names],
//                                                   "descriptions": {name: description}
//               {"op": "list_resources"}            -> "resources": [uris]
//               {"op": "list_prompts"}              -> "prompts": [names]
//               {"op": "call", "tool": T, "args": {...}}
//                                                   tools/call -> "text" (the text content
//                                                   items joined with \n), "isError" (bool)
//               {"op": "read", "uri": U}            resources/read -> "text", "mimeType"
//               {"op": "prompt", "name": N, "args": {...}}
//                                                   prompts/get -> "text" (messages' texts)
//               {"op": "request", "method": M, "params": {...}}
//                                                   any JSON-RPC request -> "result"
//               {"op": "ping"}                      ping
//               {"op": "touch", "path": P}          make the empty file P (a test's rendezvous)
//               {"op": "wait_file", "path": P}      wait until P exists (at most 30 s)
//               {"op": "raw", "body": TEXT}         POST TEXT as is, with the session's headers
//                                                   -> "status", "body" (the answer's text)
//               {"op": "terminate"}                 DELETE the session (Streamable HTTP)
// --token-env VAR   send `Authorization: Bearer $VAR` on every request (requestInit headers;
//                   VAR unset or empty: no header).
// --transport       streamable (default: StreamableHTTPClientTransport) or sse (the older
//                   SSEClientTransport: GET URL for the stream, POSTs to its endpoint event).
// Each step (and the connect) has a timeout of 20 s (the SDK's request timeout).
//
// The SDK comes from $BROKER_MCP_DIR (scripts/install-agents.sh puts it in
// ${BROKER_AGENTS_DIR:-/var/cache/broker-agents}/mcp), not from any node_modules near here.
//
// Prints ONE line `RESULT {json}` on stdout and exits 0, whatever happened:
//   {"connect": {"ok": true, "session": Mcp-Session-Id | null, "protocol": version,
//                "server": {"name", "version"}} | {"ok": false, <error>},
//    "steps": [{"op": ..., "ok": true, ...outcome} | {"op": ..., "ok": false, <error>}],
//    "transport_errors": [<error>...]}  (what the transport reported: a failed request's error
//                                        again, and others, e.g. the GET stream refused)
// <error> = "error": message (with its causes), "name": McpError | StreamableHTTPError |
// SseError | UnauthorizedError | TypeError ..., "code": a JSON-RPC error code (McpError:
// -32602, -32001 for a timeout, ...) or an HTTP status (StreamableHTTPError, SseError) or a
// system code ("ECONNREFUSED") or null, "data": the JSON-RPC error's data or null.
// When connect fails, steps is empty. The value of the --token-env variable never appears in the
// output: it is replaced with [redacted] (so echo_auth of mcp_server.mjs answering the client's
// own token reads "Bearer [redacted]"; use tokens that are not words). Exits 1 only on a usage error (on stderr).

import { existsSync, writeFileSync } from 'node:fs';
import { importFromPrefix } from './prefix_import.mjs';

const TIMEOUT_MS = 20000;
const OPS = ['list', 'list_resources', 'list_prompts', 'call', 'read', 'prompt', 'request',
             'ping', 'raw', 'touch', 'wait_file', 'terminate'];

function usage(message) {
  process.stderr.write(`mcp_client: ${message}\nusage: node mcp_client.mjs URL STEPS_JSON ` +
                       '[--token-env VAR] [--transport streamable|sse]\n' +
                       '(BROKER_MCP_DIR: the MCP SDK\'s prefix)\n');
  process.exit(1);
}

const positional = [];
let tokenEnv = null;
let transportKind = 'streamable';
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i];
  if (arg === '--token-env' || arg === '--transport') {
    if (i + 1 >= argv.length) usage(`${arg} needs a value`);
    if (arg === '--token-env') tokenEnv = argv[++i];
    else transportKind = argv[++i];
  } else if (arg.startsWith('--')) {
    usage(`unknown option ${arg}`);
  } else {
    positional.push(arg);
  }
}
if (positional.length !== 2) usage('expected URL and STEPS');
if (!['streamable', 'sse'].includes(transportKind)) usage(`bad --transport '${transportKind}'`);
let url;
try {
  url = new URL(positional[0]);
} catch {
  usage(`bad URL '${positional[0]}'`);
}
let steps;
try {
  steps = JSON.parse(positional[1]);
} catch (err) {
  usage(`STEPS is not JSON: ${err.message}`);
}
if (!Array.isArray(steps)) usage('STEPS must be a JSON array');
for (const step of steps) {
  if (step == null || typeof step !== 'object' || !OPS.includes(step.op)) {
    usage(`bad step ${JSON.stringify(step)} (op: ${OPS.join('|')})`);
  }
}

const token = tokenEnv == null ? '' : process.env[tokenEnv] ?? '';

function redact(value) {
  if (value == null) return null;
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const out = token === '' ? text : text.split(token).join('[redacted]');
  return typeof value === 'string' ? out : JSON.parse(out);
}

// An error as {error, name, code, data}: the messages down its cause chain, the first code.
function describe(err) {
  const messages = [];
  let code = null;
  const seen = new Set();
  for (let e = err; e != null && !seen.has(e) && seen.size < 8; e = e.cause) {
    seen.add(e);
    if (typeof e !== 'object') {
      messages.push(String(e));
      break;
    }
    const message = e.message || String(e);
    if (message && !messages.includes(message)) messages.push(message);
    if (code == null && e.code != null && e.code !== '') code = e.code;
  }
  return {
    error: redact(messages.join(': ')),
    // (StreamableHTTPError and SseError leave name 'Error': the class's name says more.)
    name: (err?.name === 'Error' ? err?.constructor?.name : err?.name) ?? typeof err,
    code: typeof code === 'number' ? code : redact(code == null ? null : String(code)),
    data: err?.data === undefined ? null : redact(err.data),
  };
}

const load = (name) => importFromPrefix('BROKER_MCP_DIR', name, usage);

const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await load('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { SSEClientTransport } = await load('@modelcontextprotocol/sdk/client/sse.js');
const { ResultSchema } = await load('@modelcontextprotocol/sdk/types.js');

function emit(doc) {
  // stdout to a pipe or a file is written synchronously on Linux: exiting right after is safe
  // (and does not wait for the open GET stream).
  process.stdout.write('RESULT ' + JSON.stringify(doc) + '\n');
  process.exit(0);
}

const texts = (items) => (items ?? []).filter((c) => c?.type === 'text').map((c) => c.text);
const requestOptions = { timeout: TIMEOUT_MS };

const run = {
  async list(client) {
    const { tools } = await client.listTools(undefined, requestOptions);
    return { tools: tools.map((t) => t.name),
             descriptions: Object.fromEntries(tools.map((t) => [t.name, t.description ?? null])) };
  },
  async list_resources(client) {
    const { resources } = await client.listResources(undefined, requestOptions);
    return { resources: resources.map((r) => r.uri) };
  },
  async list_prompts(client) {
    const { prompts } = await client.listPrompts(undefined, requestOptions);
    return { prompts: prompts.map((p) => p.name) };
  },
  async call(client, step) {
    const result = await client.callTool({ name: step.tool, arguments: step.args ?? {} },
                                         undefined, requestOptions);
    return { text: redact(texts(result.content).join('\n')), isError: result.isError === true };
  },
  async read(client, step) {
    const { contents } = await client.readResource({ uri: step.uri }, requestOptions);
    return { text: redact(contents.map((c) => c.text ?? '').join('\n')),
             mimeType: contents[0]?.mimeType ?? null };
  },
  async prompt(client, step) {
    const { messages } = await client.getPrompt({ name: step.name, arguments: step.args },
                                                requestOptions);
    return { text: redact(texts(messages.map((m) => m.content)).join('\n')) };
  },
  async request(client, step) {
    const result = await client.request({ method: step.method, params: step.params },
                                        ResultSchema, requestOptions);
    return { result: redact(result) };
  },
  async ping(client) {
    await client.ping(requestOptions);
    return {};
  },
  // A body of the test's own, POSTed as this session's client would (its headers): what a
  // client whose JSON the SDK would never write sends.
  async raw(_client, step, transport) {
    const h = { ...headers, 'Content-Type': 'application/json',
                Accept: 'application/json, text/event-stream' };
    if (transport.sessionId) h['mcp-session-id'] = transport.sessionId;
    if (transport.protocolVersion) h['mcp-protocol-version'] = transport.protocolVersion;
    const response = await fetch(url, { method: 'POST', headers: h, body: step.body,
                                        signal: AbortSignal.timeout(TIMEOUT_MS) });
    return { status: response.status, body: redact(await response.text()) };
  },
  // A test's rendezvous: a file made for it to see, and one it waits for (up to 30 s).
  async touch(_client, step) {
    writeFileSync(step.path, '');
    return {};
  },
  async wait_file(_client, step) {
    const deadline = Date.now() + 30000;
    while (!existsSync(step.path)) {
      if (Date.now() > deadline) throw new Error(`${step.path} did not appear within 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return {};
  },
  async terminate(_client, _step, transport) {
    if (typeof transport.terminateSession !== 'function') throw new Error('not Streamable HTTP');
    await transport.terminateSession();
    return {};
  },
};

const headers = token === '' ? {} : { Authorization: `Bearer ${token}` };
const transport = transportKind === 'sse'
  ? new SSEClientTransport(url, { requestInit: { headers }, eventSourceInit: {} })
  : new StreamableHTTPClientTransport(url, { requestInit: { headers } });
const client = new Client({ name: 'broker-test-mcp-client', version: '1.0.0' });
const transportErrors = [];
client.onerror = (err) => {
  if (transportErrors.length < 20) transportErrors.push(describe(err));
};

const doc = { connect: null, steps: [], transport_errors: transportErrors };
try {
  await client.connect(transport, requestOptions);
  doc.connect = { ok: true, session: transport.sessionId ?? null,
                  protocol: transport.protocolVersion ?? transport._protocolVersion ?? null,
                  server: client.getServerVersion() ?? null };
} catch (err) {
  doc.connect = { ok: false, ...describe(err) };
  emit(doc);
}
for (const step of steps) {
  try {
    doc.steps.push({ op: step.op, ok: true, ...(await run[step.op](client, step, transport)) });
  } catch (err) {
    doc.steps.push({ op: step.op, ok: false, ...describe(err) });
  }
}
emit(doc);
