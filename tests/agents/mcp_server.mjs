// node mcp_server.mjs --cert CERT.pem --key KEY.pem [options] — a real MCP server, built with
// @modelcontextprotocol/sdk, for the tests that put broker between an MCP client and an MCP
// server over HTTP. It serves the Streamable HTTP transport (POST/GET/DELETE on --path,
// default /mcp) over HTTPS (node:https), and the deprecated HTTP+SSE transport too (GET /sse
// opens the event stream, whose `endpoint` event names POST /messages?sessionId=...), on
// 127.0.0.1. Every session or request gets its own McpServer (the SDK connects one transport
// per server).
//
// Options (each may also come from the environment variable named after it):
//   --cert FILE, --key FILE   PEM certificate chain and key (MCP_SERVER_CERT, MCP_SERVER_KEY).
//                             Both or neither: neither serves plain HTTP.
//   --port N                  (MCP_SERVER_PORT) default 0: the kernel picks one.
//   --path P                  (MCP_SERVER_PATH) the Streamable HTTP endpoint, default /mcp.
//   --token T                 (MCP_SERVER_TOKEN) every request must carry
//                             `Authorization: Bearer T`, else 401
//                             {"error": "unauthorized", "detail": ...} (application/json) with
//                             `WWW-Authenticate: Bearer`. Without it nothing is checked.
//   --also-token T            (MCP_SERVER_ALSO_TOKEN) a second token accepted as well (a write
//                             token beside a read one); its requests are logged with it.
//   --json-response           (MCP_SERVER_JSON_RESPONSE=1) POSTs carrying requests are answered
//                             with one application/json body (the SDK's enableJsonResponse)
//                             instead of a text/event-stream.
//   --stateless               (MCP_SERVER_STATELESS=1) no Mcp-Session-Id: a new server and
//                             transport per POST; GET and DELETE answer 405. Default: stateful
//                             (the initialize answer carries Mcp-Session-Id; an unknown id gets
//                             404, a missing one on anything but initialize 400).
//   --resumable               (MCP_SERVER_RESUMABLE=1) give the transport an in-memory event
//                             store, as server-everything does: SSE events then carry `id:`
//                             lines, and a stream opens with a priming event `id: X\ndata: \n\n`
//                             (protocol >= 2025-11-25).
//   --description-suffix S    (MCP_SERVER_DESCRIPTION_SUFFIX) appended to every tool's
//                             description (a server whose descriptions changed after a
//                             restart).
//   --log FILE                (MCP_SERVER_LOG) append one JSON line per HTTP request received:
//                             {"time", "method", "path" (with the query), "authorization"
//                             (the header's value or null), "session" (Mcp-Session-Id or null),
//                             "authorized" (false when --token refused it), "rpc": [JSON-RPC
//                             methods in the body, a batch gives several], "tools": [params.name
//                             of each tools/call], "body": the body text or null}.
//                             Written synchronously, before the request is handled.
//
// Tools: get_issue {owner, repo, number} and create_issue {owner, repo, title} and
// delete_repo {owner, repo} answer one line of text; get_issue with number 0 answers
// isError: true ("issue not found"); echo_auth {} answers the Authorization header this
// request arrived with ("(none)" without one). Resource file:///docs/readme.md (text/markdown).
// Prompt review {topic?}. Reading another resource or getting another prompt is a JSON-RPC error
// (-32602); calling an unknown tool is NOT one: the SDK's McpServer turns it into a tool
// result with isError: true ("MCP error -32602: Tool x not found").
//
// The SDK comes from $BROKER_MCP_DIR (scripts/install-agents.sh puts it in
// ${BROKER_AGENTS_DIR:-/var/cache/broker-agents}/mcp), not from any node_modules near here.
//
// Prints `READY {"port": N}` on stdout once listening; errors go to stderr. Exits 1 on a usage
// error. Stops on SIGTERM/SIGINT.

import { appendFileSync, readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { randomUUID } from 'node:crypto';
import { importFromPrefix } from './prefix_import.mjs';

function usage(message) {
  process.stderr.write(`mcp_server: ${message}\nusage: node mcp_server.mjs --cert CERT.pem ` +
                       '--key KEY.pem [--port N] [--path /mcp] [--token T] [--also-token T] [--json-response] ' +
                       '[--stateless] [--resumable] [--description-suffix S] [--log FILE]\n' +
                       '(BROKER_MCP_DIR: the MCP SDK\'s prefix)\n');
  process.exit(1);
}

// Options: the flags without a value, the ones with one.
const FLAGS = ['json-response', 'stateless', 'resumable'];
const VALUED = ['cert', 'key', 'port', 'path', 'token', 'also-token', 'description-suffix', 'log'];
const envName = (name) => 'MCP_SERVER_' + name.toUpperCase().replace(/-/g, '_');
const opts = {};
for (const name of VALUED) if (process.env[envName(name)] != null) opts[name] = process.env[envName(name)];
for (const name of FLAGS) opts[name] = ['1', 'true', 'yes'].includes(process.env[envName(name)] ?? '');
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i];
  if (!arg.startsWith('--')) usage(`unexpected argument '${arg}'`);
  const name = arg.slice(2);
  if (FLAGS.includes(name)) opts[name] = true;
  else if (VALUED.includes(name)) {
    if (i + 1 >= argv.length) usage(`${arg} needs a value`);
    opts[name] = argv[++i];
  } else usage(`unknown option ${arg}`);
}
if ((opts.cert == null) !== (opts.key == null)) usage('give both --cert and --key, or neither');
const port = Number(opts.port ?? 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) usage(`bad --port '${opts.port}'`);
const mcpPath = opts.path ?? '/mcp';
if (!mcpPath.startsWith('/')) usage(`--path must start with / ('${mcpPath}')`);
const suffix = opts['description-suffix'] ?? '';

const load = (name) => importFromPrefix('BROKER_MCP_DIR', name, usage);

const { McpServer } = await load('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = await load('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { SSEServerTransport } = await load('@modelcontextprotocol/sdk/server/sse.js');
const { z } = await load('zod');

const README = '# Demo repository\n\nA README served as an MCP resource by tests/agents/mcp_server.mjs.\n';

function createServer() {
  const server = new McpServer({ name: 'broker-test-mcp', version: '1.0.0' },
                               { capabilities: { logging: {} } });
  const text = (t) => ({ content: [{ type: 'text', text: t }] });
  server.registerTool('get_issue', {
    description: 'Get an issue of a repository.' + suffix,
    inputSchema: { owner: z.string(), repo: z.string(), number: z.number().int() },
    annotations: { readOnlyHint: true },
  }, async ({ owner, repo, number }) => number === 0
    ? { ...text(`issue not found: ${owner}/${repo}#0`), isError: true }
    : text(`issue ${owner}/${repo}#${number}: Crash on start (open)`));
  server.registerTool('create_issue', {
    description: 'Create an issue in a repository.' + suffix,
    inputSchema: { owner: z.string(), repo: z.string(), title: z.string() },
  }, async ({ owner, repo, title }) => text(`created issue ${owner}/${repo}#42: ${title}`));
  server.registerTool('delete_repo', {
    description: 'Delete a repository.' + suffix,
    inputSchema: { owner: z.string(), repo: z.string() },
    annotations: { destructiveHint: true },
  }, async ({ owner, repo }) => text(`deleted repository ${owner}/${repo}`));
  server.registerTool('echo_auth', {
    description: 'Echo the Authorization header the server received.' + suffix,
    inputSchema: {},
  }, async (_args, extra) => text(extra?.requestInfo?.headers?.authorization ?? '(none)'));
  server.registerResource('readme', 'file:///docs/readme.md',
                          { title: 'README', description: 'The demo README',
                            mimeType: 'text/markdown' },
                          async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/markdown',
                                                         text: README }] }));
  server.registerPrompt('review', {
    description: 'Review a change.',
    argsSchema: { topic: z.string().optional() },
  }, ({ topic }) => ({
    messages: [{ role: 'user',
                 content: { type: 'text', text: `Please review ${topic ?? 'this change'}.` } }],
  }));
  return server;
}

// The event store of --resumable: like server-everything's, enough for ids and replays.
class EventStore {
  events = new Map();
  async storeEvent(streamId, message) {
    const id = `${streamId}_${randomUUID()}`;
    this.events.set(id, { streamId, message });
    return id;
  }
  async getStreamIdForEventId(eventId) {
    return this.events.get(eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const entry = this.events.get(lastEventId);
    if (entry == null) return '';
    let found = false;
    for (const [id, { streamId, message }] of this.events) {
      if (found && streamId === entry.streamId && Object.keys(message).length > 0) await send(id, message);
      if (id === lastEventId) found = true;
    }
    return entry.streamId;
  }
}

function transportOptions(stateful) {
  return {
    sessionIdGenerator: stateful ? () => randomUUID() : undefined,
    enableJsonResponse: opts['json-response'],
    eventStore: opts.resumable ? new EventStore() : undefined,
  };
}

function sendJson(res, status, doc, headers = {}) {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(doc));
}

const rpcError = (code, message) => ({ jsonrpc: '2.0', error: { code, message }, id: null });

function logRequest(req, authorized, bodyText, parsed) {
  if (!opts.log) return;
  const messages = parsed == null ? [] : Array.isArray(parsed) ? parsed : [parsed];
  const isObj = (m) => m != null && typeof m === 'object';
  const line = {
    time: new Date().toISOString(),
    method: req.method,
    path: req.url,
    authorization: req.headers.authorization ?? null,
    session: req.headers['mcp-session-id'] ?? null,
    authorized,
    rpc: messages.filter((m) => isObj(m) && typeof m.method === 'string').map((m) => m.method),
    tools: messages.filter((m) => isObj(m) && m.method === 'tools/call')
      .map((m) => m.params?.name ?? null),
    body: bodyText === '' ? null : bodyText,
  };
  appendFileSync(opts.log, JSON.stringify(line) + '\n');
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const sessions = new Map(); // Mcp-Session-Id -> StreamableHTTPServerTransport (stateful)
const sseSessions = new Map(); // sessionId -> SSEServerTransport (the deprecated transport)

async function handleStreamable(req, res, parsed) {
  const sessionId = req.headers['mcp-session-id'];
  if (opts.stateless) {
    if (req.method !== 'POST') {
      return sendJson(res, 405, rpcError(-32000, 'Method not allowed (stateless server).'),
                      { allow: 'POST' });
    }
    const server = createServer();
    const transport = new StreamableHTTPServerTransport(transportOptions(false));
    res.on('close', () => {
      transport.close().catch(() => {});
      server.close().catch(() => {});
    });
    await server.connect(transport);
    return transport.handleRequest(req, res, parsed);
  }
  if (sessionId != null) {
    const transport = sessions.get(sessionId);
    if (transport == null) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
    return transport.handleRequest(req, res, parsed);
  }
  if (req.method !== 'POST') {
    return sendJson(res, 400, rpcError(-32000, 'Bad Request: Mcp-Session-Id header is required'));
  }
  // No session yet: a new server and transport; the SDK answers anything but initialize 400,
  // and the transport is kept only when a session starts.
  const server = createServer();
  const transport = new StreamableHTTPServerTransport({
    ...transportOptions(true),
    onsessioninitialized: (id) => sessions.set(id, transport),
    onsessionclosed: (id) => sessions.delete(id),
  });
  transport.onclose = () => {
    if (transport.sessionId != null) sessions.delete(transport.sessionId);
  };
  await server.connect(transport);
  return transport.handleRequest(req, res, parsed);
}

async function handleLegacySse(req, res, url, parsed) {
  if (req.method === 'GET' && url.pathname === '/sse') {
    const server = createServer();
    const transport = new SSEServerTransport('/messages', res);
    sseSessions.set(transport.sessionId, transport);
    res.on('close', () => sseSessions.delete(transport.sessionId));
    await server.connect(transport);
    return;
  }
  if (req.method === 'POST' && url.pathname === '/messages') {
    const transport = sseSessions.get(url.searchParams.get('sessionId') ?? '');
    if (transport == null) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
    return transport.handlePostMessage(req, res, parsed);
  }
  return sendJson(res, 405, rpcError(-32000, 'Method not allowed.'));
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://localhost');
  const bodyText = await readBody(req);
  let parsed;
  let parseFailed = false;
  if (bodyText !== '') {
    try {
      parsed = JSON.parse(bodyText);
    } catch {
      parseFailed = true;
    }
  }
  const authorized = opts.token == null || req.headers.authorization === `Bearer ${opts.token}` ||
    (opts['also-token'] != null && req.headers.authorization === `Bearer ${opts['also-token']}`);
  logRequest(req, authorized, bodyText, parsed);
  if (!authorized) {
    return sendJson(res, 401, { error: 'unauthorized',
                                detail: req.headers.authorization == null
                                  ? 'no Authorization header' : 'wrong bearer token' },
                    { 'www-authenticate': 'Bearer' });
  }
  if (parseFailed) return sendJson(res, 400, rpcError(-32700, 'Parse error'));
  if (url.pathname === mcpPath) return handleStreamable(req, res, parsed);
  if (url.pathname === '/sse' || url.pathname === '/messages') {
    return handleLegacySse(req, res, url, parsed);
  }
  return sendJson(res, 404, { error: 'not_found', path: url.pathname });
}

function onRequest(req, res) {
  handle(req, res).catch((err) => {
    process.stderr.write(`mcp_server: ${req.method} ${req.url}: ${err?.stack ?? err}\n`);
    sendJson(res, 500, rpcError(-32603, 'Internal server error'));
  });
}

const httpServer = opts.cert != null
  ? https.createServer({ cert: readFileSync(opts.cert), key: readFileSync(opts.key) }, onRequest)
  : http.createServer(onRequest);
httpServer.on('error', (err) => {
  process.stderr.write(`mcp_server: ${err.message}\n`);
  process.exit(1);
});
httpServer.listen(port, '127.0.0.1', () => {
  process.stdout.write(`READY ${JSON.stringify({ port: httpServer.address().port })}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
