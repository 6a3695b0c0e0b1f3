// node sdk_call.mjs KIND — one real call through an official Node SDK (or Node's built-in
// fetch), for the tests that run it inside `broker wrap` with transparent capture: Node 20's
// fetch (undici, which the SDKs use) ignores HTTPS_PROXY, so the broker must capture the
// connection. Every call goes to the real public host name with the SDK's default base URL;
// inside the sandbox those names resolve to the broker. Nothing here points anywhere else.
//
// KIND:
//   fetch      GET https://api.github.com/capture/fetch, Authorization: Bearer $GITHUB_TOKEN
//              -> text: the body
//   openai     new OpenAI() ($OPENAI_API_KEY), responses.create({model: 'gpt-5', input: 'hi',
//              stream: false}) -> text: output_text
//   anthropic  new Anthropic() ($ANTHROPIC_API_KEY), messages.create({model:
//              'claude-sonnet-4-5', max_tokens: 64, ...}) -> text: the first content block's
//              (@anthropic-ai/sdk >= 1.0, API version 2026-10-21, sends the API key as
//              `Authorization: Bearer KEY`, not as x-api-key as 0.x and Claude Code do)
//   octokit    new Octokit({auth: $GITHUB_TOKEN}), rest.users.getAuthenticated()
//              -> text: data.login
// The SDKs: maxRetries 0, timeout 20 s (fetch and Octokit: an abort signal of 20 s).
//
// The SDKs come from $BROKER_SDK_DIR (scripts/install-agents.sh puts them in
// ${BROKER_AGENTS_DIR:-/var/cache/broker-agents}/sdk), not from any node_modules near here.
//
// Prints ONE line of JSON on stdout and exits 0, whatever the call did:
//   {"kind": K, "ok": true, "status": HTTP status, "text": ...}
//   {"kind": K, "ok": false, "error": "message: cause: cause", "code": "ECONNREFUSED" | null,
//    "status": HTTP status (an SDK's API error) | null}
// (fetch answers any status with ok: true; the SDKs throw on a 4xx/5xx, hence ok: false with
// its status.) The error and code never hold a credential: any substring equal to the value
// of a credential variable is replaced with [redacted] (an API's 401 message may echo a key).
// Exits 1 only on a usage error (a bad KIND, no BROKER_SDK_DIR, an SDK that is not there),
// with a message on stderr.

import { importFromPrefix } from './prefix_import.mjs';

const KINDS = ['fetch', 'openai', 'anthropic', 'octokit'];
const TIMEOUT_MS = 20000;
const CREDENTIAL_VARS = ['GITHUB_TOKEN', 'GH_TOKEN', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY',
                         'ANTHROPIC_AUTH_TOKEN'];

function usage(message) {
  process.stderr.write(`sdk_call: ${message}\nusage: node sdk_call.mjs ${KINDS.join('|')}` +
                       ' (BROKER_SDK_DIR: the SDKs\' prefix, for all but fetch)\n');
  process.exit(1);
}

// Every credential value in the environment, longest first (so that one holding another is
// redacted whole).
const secrets = CREDENTIAL_VARS.map((name) => process.env[name])
  .filter((value) => typeof value === 'string' && value.length > 0)
  .sort((a, b) => b.length - a.length);

function redact(value) {
  if (value == null) return null;
  let text = String(value);
  for (const secret of secrets) text = text.split(secret).join('[redacted]');
  return text;
}

function emit(doc) {
  // stdout to a pipe or a file is written synchronously on Linux: exiting right after is safe
  // (and does not wait for a pooled keep-alive connection to close).
  process.stdout.write(JSON.stringify(doc) + '\n');
  process.exit(0);
}

// The messages down an error's cause chain ("Connection error.: fetch failed: connect
// ECONNREFUSED ..."), its first code, and its HTTP status when an API answered.
function describe(err) {
  const messages = [];
  let code = null;
  let status = null;
  const seen = new Set();
  for (let e = err; e != null && !seen.has(e) && seen.size < 8; e = e.cause) {
    seen.add(e);
    if (typeof e !== 'object') {
      messages.push(String(e));
      break;
    }
    const message = e.message || String(e);
    if (message && !messages.includes(message)) messages.push(message);
    if (code == null && e.code != null && e.code !== '') code = String(e.code);
    // An API's answer (the SDKs' APIError has its headers, Octokit's RequestError its
    // response); Octokit gives a network failure status 500 without a response.
    const answered = e.headers != null || e.response != null;
    if (status == null && answered && Number.isInteger(e.status)) status = e.status;
  }
  return { error: redact(messages.join(': ')), code: redact(code), status };
}

const loadSdk = (name) => importFromPrefix('BROKER_SDK_DIR', name, usage);

const calls = {
  async fetch() {
    const res = await fetch('https://api.github.com/capture/fetch', {
      headers: { authorization: 'Bearer ' + process.env.GITHUB_TOKEN },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    return { status: res.status, text: await res.text() };
  },

  async openai(sdk) {
    const OpenAI = sdk.OpenAI ?? sdk.default;
    const client = new OpenAI({ maxRetries: 0, timeout: TIMEOUT_MS });
    const { data, response } = await client.responses
      .create({ model: 'gpt-5', input: 'hi', stream: false })
      .withResponse();
    return { status: response.status, text: data.output_text };
  },

  async anthropic(sdk) {
    const Anthropic = sdk.Anthropic ?? sdk.default;
    const client = new Anthropic({ maxRetries: 0, timeout: TIMEOUT_MS });
    const { data, response } = await client.messages
      .create({ model: 'claude-sonnet-4-5', max_tokens: 64,
                messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    const block = data.content?.[0];
    return { status: response.status,
             text: block == null ? null : block.type === 'text' ? block.text : block };
  },

  async octokit(sdk) {
    const octokit = new sdk.Octokit({ auth: process.env.GITHUB_TOKEN });
    const res = await octokit.rest.users.getAuthenticated({
      request: { signal: AbortSignal.timeout(TIMEOUT_MS) },
    });
    return { status: res.status, text: res.data.login };
  },
};

const SDK_PACKAGES = { openai: 'openai', anthropic: '@anthropic-ai/sdk', octokit: '@octokit/rest' };

const args = process.argv.slice(2);
if (args.length !== 1 || !KINDS.includes(args[0])) {
  usage(args.length === 1 ? `unknown KIND '${args[0]}'` : 'expected exactly one KIND');
}
const kind = args[0];
const sdk = kind in SDK_PACKAGES ? await loadSdk(SDK_PACKAGES[kind]) : null;
try {
  const { status, text } = await calls[kind](sdk);
  emit({ kind, ok: true, status, text });
} catch (err) {
  emit({ kind, ok: false, ...describe(err) });
}
