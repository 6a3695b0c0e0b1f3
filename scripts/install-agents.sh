#!/usr/bin/env bash
# Installs the real coding agents that tests/integration/test_real_agents.py runs inside
# `broker wrap`: OpenAI Codex CLI, Claude Code and Gemini CLI, at pinned versions, from the npm
# registry into one prefix (default /var/cache/broker-agents; BROKER_AGENTS_DIR overrides).
#
# It also installs the official Node SDKs of the same services, openai, @anthropic-ai/sdk and
# @octokit/rest, pinned, into a prefix of their own, $dir/sdk (its own package.json): the tests
# run tests/agents/sdk_call.mjs with BROKER_SDK_DIR=$dir/sdk inside `broker wrap` to check that
# plain SDK calls to the real host names with default base URLs (and Node's built-in fetch,
# which ignores the proxy variables) are captured and get the real credentials.
#
# And the MCP packages, pinned, into a third prefix, $dir/mcp (its own package.json):
# @modelcontextprotocol/sdk, which tests/agents/mcp_server.mjs and mcp_client.mjs load with
# BROKER_MCP_DIR=$dir/mcp (a real MCP server and client over Streamable HTTP), zod (the schema
# library the SDK's tools are declared with; pinned here since mcp_server.mjs imports it too),
# and @modelcontextprotocol/server-everything, the reference server
# ($dir/mcp/node_modules/.bin/mcp-server-everything streamableHttp; see tests/agents/NOTES.md).
#
# Quick and silent about npm when the pinned versions are already there (it reads the installed
# package.json files, runs each agent's --version and loads each SDK; npm is called only for the
# prefix whose packages are missing or different: with the agents there and the SDKs missing it
# installs only the SDKs). Never reads stdin. Prints each agent's, each SDK's and each MCP
# package's version. Exits non-zero with a sentence saying what failed.
#
# Codex and Claude Code are native binaries shipped in per-platform optional packages
# (@openai/codex-linux-x64, @anthropic-ai/claude-code-linux-x64); the script checks that the
# binary landed and runs, since npm skips a failed optional dependency without an error.
# Claude Code's package says node >= 22, but its CLI is the native binary and runs without Node;
# npm's engine warning on Node 20 is expected.
set -euo pipefail

CODEX_VERSION=0.171.0
CLAUDE_VERSION=2.1.332
GEMINI_VERSION=0.61.0
# The SDKs. openai's package says node >= 22, yet it loads and runs on Node 20 (checked below).
OPENAI_SDK_VERSION=7.59.0
ANTHROPIC_SDK_VERSION=1.15.0
OCTOKIT_VERSION=22.0.1
# The MCP packages. server-everything wants zod ^4 and the SDK zod ^3.25 || ^4: one zod 4.
MCP_SDK_VERSION=1.32.2
MCP_EVERYTHING_VERSION=2026.8.31
ZOD_VERSION=4.6.7

dir=${BROKER_AGENTS_DIR:-/var/cache/broker-agents}
bin=$dir/node_modules/.bin
sdk=$dir/sdk
mcp=$dir/mcp

fail() {
  echo "install-agents: $*" >&2
  exit 1
}

command -v node >/dev/null || fail "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null || fail "npm is not installed (apt-get install npm)"

# The version in an installed package's package.json (in prefix $2, default $dir), or nothing.
installed_version() {
  local manifest=${2:-$dir}/node_modules/$1/package.json
  [[ -f $manifest ]] || return 0
  node -e 'try { process.stdout.write(require(process.argv[1]).version || "") } catch (e) {}' \
    "$manifest"
}

# 0 when every agent is at its pinned version and its binary answers --version.
all_installed() {
  [[ $(installed_version @openai/codex) == "$CODEX_VERSION" ]] || return 1
  [[ $(installed_version @openai/codex-linux-x64) == "$CODEX_VERSION-linux-x64" ]] || return 1
  [[ $(installed_version @anthropic-ai/claude-code) == "$CLAUDE_VERSION" ]] || return 1
  [[ $(installed_version @anthropic-ai/claude-code-linux-x64) == "$CLAUDE_VERSION" ]] || return 1
  [[ $(installed_version @google/gemini-cli) == "$GEMINI_VERSION" ]] || return 1
  [[ -x $bin/codex && -x $bin/claude && -x $bin/gemini ]]
}

versions() {
  local c k g
  c=$(timeout 30 "$bin/codex" --version </dev/null) || return 1
  k=$(timeout 30 "$bin/claude" --version </dev/null) || return 1
  g=$(timeout 60 "$bin/gemini" --version </dev/null) || return 1
  printf '%s\n' "codex: $c" "claude: $k" "gemini: $g"
}

# 0 when every SDK in $sdk is at its pinned version.
sdks_installed() {
  [[ $(installed_version openai "$sdk") == "$OPENAI_SDK_VERSION" ]] || return 1
  [[ $(installed_version @anthropic-ai/sdk "$sdk") == "$ANTHROPIC_SDK_VERSION" ]] || return 1
  [[ $(installed_version @octokit/rest "$sdk") == "$OCTOKIT_VERSION" ]]
}

# Loads each SDK from the prefix in argv[1] the way sdk_call.mjs does; prints its version.
read -r -d '' LOAD_SDKS <<'JS' || true
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
const modules = path.join(process.argv[1], 'node_modules');
const require = createRequire(path.join(modules, 'index.js'));
for (const [name, klass] of [['openai', 'OpenAI'], ['@anthropic-ai/sdk', 'Anthropic'],
                             ['@octokit/rest', 'Octokit']]) {
  const mod = await import(pathToFileURL(require.resolve(name)).href);
  if (typeof (mod[klass] ?? mod.default) !== 'function') throw new Error(`${name}: no ${klass}`);
  const manifest = JSON.parse(readFileSync(path.join(modules, name, 'package.json'), 'utf8'));
  console.log(`sdk ${name}: ${manifest.version}`);
}
JS

sdk_versions() {
  timeout 60 node --input-type=module -e "$LOAD_SDKS" "$sdk" </dev/null
}

# 0 when every MCP package in $mcp is at its pinned version and the reference server's bin is
# there.
mcp_installed() {
  [[ $(installed_version @modelcontextprotocol/sdk "$mcp") == "$MCP_SDK_VERSION" ]] || return 1
  [[ $(installed_version @modelcontextprotocol/server-everything "$mcp") == \
     "$MCP_EVERYTHING_VERSION" ]] || return 1
  [[ $(installed_version zod "$mcp") == "$ZOD_VERSION" ]] || return 1
  [[ -x $mcp/node_modules/.bin/mcp-server-everything ]]
}

# Loads the MCP SDK's client and server modules (and zod) from the prefix in argv[1] the way
# mcp_server.mjs and mcp_client.mjs do; prints the versions. (server-everything is not
# imported: importing it starts a server.)
read -r -d '' LOAD_MCP <<'JS' || true
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
const modules = path.join(process.argv[1], 'node_modules');
const require = createRequire(path.join(modules, 'index.js'));
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const version = (name) =>
  JSON.parse(readFileSync(path.join(modules, name, 'package.json'), 'utf8')).version;
const checks = [['@modelcontextprotocol/sdk/client/index.js', 'Client'],
                ['@modelcontextprotocol/sdk/client/streamableHttp.js',
                 'StreamableHTTPClientTransport'],
                ['@modelcontextprotocol/sdk/client/sse.js', 'SSEClientTransport'],
                ['@modelcontextprotocol/sdk/server/mcp.js', 'McpServer'],
                ['@modelcontextprotocol/sdk/server/streamableHttp.js',
                 'StreamableHTTPServerTransport'],
                ['zod', 'z']];
for (const [name, member] of checks) {
  const mod = await load(name);
  if (mod[member] == null) throw new Error(`${name}: no ${member}`);
}
for (const name of ['@modelcontextprotocol/sdk', '@modelcontextprotocol/server-everything', 'zod'])
  console.log(`mcp ${name}: ${version(name)}`);
JS

mcp_versions() {
  timeout 60 node --input-type=module -e "$LOAD_MCP" "$mcp" </dev/null
}

[[ $(uname -m) == x86_64 ]] || fail "only linux-x64 is pinned here (this machine is $(uname -m))"

install_agents() {
  echo "install-agents: installing codex $CODEX_VERSION, claude-code $CLAUDE_VERSION," \
       "gemini-cli $GEMINI_VERSION into $dir (npm)" >&2
  mkdir -p "$dir" || fail "cannot create $dir"
  # A package.json of our own, so that npm installs into $dir and nowhere above it.
  cat >"$dir/package.json" <<EOF
{ "name": "broker-agents", "private": true, "description": "written by scripts/install-agents.sh" }
EOF
  # --include=optional: the native binaries come as optional platform packages.
  if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --include=optional \
        --save-exact "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION" \
        "@google/gemini-cli@$GEMINI_VERSION" </dev/null >&2; then
    fail "npm install into $dir failed (is the npm registry reachable? see npm's message above)"
  fi
  [[ -d $dir/node_modules/@openai/codex-linux-x64 ]] ||
    fail "npm did not install @openai/codex-linux-x64 (Codex's native binary)"
  [[ -d $dir/node_modules/@anthropic-ai/claude-code-linux-x64 ]] ||
    fail "npm did not install @anthropic-ai/claude-code-linux-x64 (Claude Code's native binary)"
  all_installed || fail "npm did not install the pinned versions into $dir"

  versions || fail "an agent in $dir does not run after npm install (see above)"
  echo "install-agents: agents in $bin"
}

install_sdks() {
  echo "install-agents: installing the SDKs openai $OPENAI_SDK_VERSION, @anthropic-ai/sdk" \
       "$ANTHROPIC_SDK_VERSION, @octokit/rest $OCTOKIT_VERSION into $sdk (npm)" >&2
  mkdir -p "$sdk" || fail "cannot create $sdk"
  # Their own package.json: npm installs into $sdk, apart from the agents' tree above it.
  cat >"$sdk/package.json" <<EOF
{ "name": "broker-sdks", "private": true, "description": "written by scripts/install-agents.sh" }
EOF
  if ! npm install --prefix "$sdk" --no-audit --no-fund --loglevel=error --save-exact \
        "openai@$OPENAI_SDK_VERSION" "@anthropic-ai/sdk@$ANTHROPIC_SDK_VERSION" \
        "@octokit/rest@$OCTOKIT_VERSION" </dev/null >&2; then
    fail "npm install into $sdk failed (is the npm registry reachable? see npm's message above)"
  fi
  sdks_installed || fail "npm did not install the pinned SDK versions into $sdk"
  sdk_versions || fail "an SDK in $sdk does not load on node $(node --version) (see above)"
  echo "install-agents: SDKs in $sdk"
}

install_mcp() {
  echo "install-agents: installing @modelcontextprotocol/sdk $MCP_SDK_VERSION," \
       "@modelcontextprotocol/server-everything $MCP_EVERYTHING_VERSION, zod $ZOD_VERSION" \
       "into $mcp (npm)" >&2
  mkdir -p "$mcp" || fail "cannot create $mcp"
  # Their own package.json, like the SDKs'.
  cat >"$mcp/package.json" <<EOF
{ "name": "broker-mcp", "private": true, "description": "written by scripts/install-agents.sh" }
EOF
  if ! npm install --prefix "$mcp" --no-audit --no-fund --loglevel=error --save-exact \
        "@modelcontextprotocol/sdk@$MCP_SDK_VERSION" \
        "@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION" \
        "zod@$ZOD_VERSION" </dev/null >&2; then
    fail "npm install into $mcp failed (is the npm registry reachable? see npm's message above)"
  fi
  mcp_installed || fail "npm did not install the pinned MCP package versions into $mcp"
  mcp_versions || fail "the MCP SDK in $mcp does not load on node $(node --version) (see above)"
  echo "install-agents: MCP packages in $mcp"
}

if all_installed && out=$(versions 2>&1); then
  printf '%s\n' "$out"
  echo "install-agents: agents in $bin (already installed)"
else
  install_agents
fi

if sdks_installed && out=$(sdk_versions 2>&1); then
  printf '%s\n' "$out"
  echo "install-agents: SDKs in $sdk (already installed)"
else
  install_sdks
fi

if mcp_installed && out=$(mcp_versions 2>&1); then
  printf '%s\n' "$out"
  echo "install-agents: MCP packages in $mcp (already installed)"
else
  install_mcp
fi
