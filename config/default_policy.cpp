// The embedded default policy (docs/policy.md), used when no --policy is given and printed by
// `broker policy default` as a starting point for a custom one.
#include "config/policy.hpp"

namespace broker::config {
namespace {

constexpr std::string_view default_text = R"json({
  // broker default policy: the official API hosts of the brokered credentials and the common
  // package registries, HTTPS only, every request intercepted and audited. Everything else is
  // denied. Copy it (`broker policy default > policy.json`) to start your own.
  "version": 1,
  "allow": [
    // GitHub: API, git over HTTPS, raw content, release and archive downloads.
    { "host": "api.github.com", "ports": [443] },
    { "host": "github.com", "ports": [443] },
    { "host": "*.githubusercontent.com", "ports": [443] },
    { "host": "codeload.github.com", "ports": [443] },

    // LLM APIs: OpenAI (Codex), Anthropic (Claude Code), Google's Gemini API (Gemini CLI).
    { "host": "api.openai.com", "ports": [443] },
    { "host": "api.anthropic.com", "ports": [443] },
    { "host": "generativelanguage.googleapis.com", "ports": [443] },
    // The agents' own logins: Codex with ChatGPT (its backend and token endpoint), Claude Code's
    // token endpoint, Gemini CLI with Google (Code Assist and Google's token endpoint). Their
    // telemetry hosts are denied below.
    { "host": "chatgpt.com", "ports": [443], "paths": ["/backend-api/*"] },
    { "host": "auth.openai.com", "ports": [443], "methods": ["POST"], "paths": ["/oauth/token"] },
    { "host": "platform.claude.com", "ports": [443], "methods": ["POST"],
      "paths": ["/v1/oauth/token"] },
    // Claude Code's first interactive run checks that it can reach both of its hosts (and
    // stops, "Unable to connect to Anthropic services", when either answers other than 200).
    { "host": "platform.claude.com", "ports": [443], "methods": ["GET"],
      "paths": ["/v1/oauth/hello"] },
    { "host": "console.anthropic.com", "ports": [443], "methods": ["POST"],
      "paths": ["/v1/oauth/token"] },
    { "host": "cloudcode-pa.googleapis.com", "ports": [443] },
    { "host": "oauth2.googleapis.com", "ports": [443], "methods": ["POST"],
      "paths": ["/token", "/tokeninfo"] },
    { "host": "www.googleapis.com", "ports": [443], "methods": ["GET"],
      "paths": ["/oauth2/v2/userinfo"] },

    // AWS service endpoints (regional and global).
    { "host": "*.amazonaws.com", "ports": [443] },

    // Package registries: npm/yarn, PyPI, crates.io, Go modules, RubyGems, Maven Central, Debian.
    { "host": "registry.npmjs.org", "ports": [443] },
    { "host": "registry.yarnpkg.com", "ports": [443] },
    { "host": "pypi.org", "ports": [443] },
    { "host": "files.pythonhosted.org", "ports": [443] },
    { "host": "crates.io", "ports": [443] },
    { "host": "static.crates.io", "ports": [443] },
    { "host": "index.crates.io", "ports": [443] },
    { "host": "proxy.golang.org", "ports": [443] },
    { "host": "sum.golang.org", "ports": [443] },
    { "host": "rubygems.org", "ports": [443] },
    { "host": "repo.maven.apache.org", "ports": [443] },
    { "host": "repo1.maven.org", "ports": [443] },
    { "host": "deb.debian.org", "ports": [443] }
  ],
  // The agents' telemetry and self-updates (they work without them): on hosts allowed above,
  // and their own hosts, denied by rule so that `wrap --ask` never asks about them.
  "deny": [
    { "host": "api.anthropic.com", "paths": ["/api/event_logging/*", "/api/eval/*"] },
    { "host": "chatgpt.com", "paths": ["/backend-api/codex/analytics-events/*"] },
    { "host": "ab.chatgpt.com" },
    { "host": "statsig.anthropic.com" },
    { "host": "*.statsig.com" },
    { "host": "*.sentry.io" },
    { "host": "play.googleapis.com" },
    // Claude Code's downloads host: its model catalog, plugin listings and its own updates. It
    // works without them, and an agent that updated itself from inside a session would leave a
    // program behind that runs outside it.
    { "host": "downloads.claude.ai" }
  ],
  "credentials": {
    "github": {
      "type": "github",
      "env": ["GITHUB_TOKEN", "GH_TOKEN"],
      "hosts": ["github.com", "api.github.com", "*.githubusercontent.com"]
    },
    "openai": {
      "type": "bearer",
      "env": ["OPENAI_API_KEY"],
      "hosts": ["api.openai.com"]
    },
    // Codex reads CODEX_API_KEY (codex exec) as well as OPENAI_API_KEY.
    "codex": {
      "type": "bearer",
      "env": ["CODEX_API_KEY"],
      "hosts": ["api.openai.com"]
    },
    // The SDKs before 1.0 (and Claude Code) send the key as x-api-key, @anthropic-ai/sdk 1.x as
    // Authorization: Bearer.
    "anthropic": {
      "type": "header",
      "header": "x-api-key",
      "also_bearer": true,
      "env": ["ANTHROPIC_API_KEY"],
      "hosts": ["api.anthropic.com"]
    },
    // Claude Code sends these as Authorization: Bearer (a gateway token, a subscription's
    // long-lived OAuth token from `claude setup-token`).
    "anthropic_auth_token": {
      "type": "bearer",
      "env": ["ANTHROPIC_AUTH_TOKEN"],
      "hosts": ["api.anthropic.com"]
    },
    "claude_oauth_token": {
      "type": "bearer",
      "env": ["CLAUDE_CODE_OAUTH_TOKEN"],
      "hosts": ["api.anthropic.com"]
    },
    // Gemini CLI and Google's SDKs send the key as x-goog-api-key, older clients as ?key=.
    "gemini": {
      "type": "header",
      "header": "x-goog-api-key",
      "query": ["key"],
      "env": ["GEMINI_API_KEY"],
      "hosts": ["generativelanguage.googleapis.com"]
    },
    "google_api_key": {
      "type": "header",
      "header": "x-goog-api-key",
      "query": ["key"],
      "env": ["GOOGLE_API_KEY"],
      "hosts": ["generativelanguage.googleapis.com"]
    },
    // The agents' login files (docs/agents.md), brokered where they exist: the child sees a copy
    // with dummies, and a refresh rotates the real login outside.
    "codex_login": {
      "type": "bearer",
      "file": "~/.codex/auth.json",
      "fields": ["OPENAI_API_KEY", "tokens.access_token", "tokens.id_token"],
      "refresh": {
        "url": "https://auth.openai.com/oauth/token",
        "token": "tokens.refresh_token",
        "response": { "access_token": "tokens.access_token",
                      "refresh_token": "tokens.refresh_token", "id_token": "tokens.id_token" }
      },
      "hosts": ["api.openai.com", "chatgpt.com", "auth.openai.com"]
    },
    "claude_login": {
      "type": "bearer",
      "file": "~/.claude/.credentials.json",
      "fields": ["claudeAiOauth.accessToken"],
      "refresh": {
        "url": "https://platform.claude.com/v1/oauth/token",
        "token": "claudeAiOauth.refreshToken",
        "response": { "access_token": "claudeAiOauth.accessToken",
                      "refresh_token": "claudeAiOauth.refreshToken" },
        "expires_at_ms": "claudeAiOauth.expiresAt"
      },
      "hosts": ["api.anthropic.com", "platform.claude.com"]
    },
    "gemini_login": {
      "type": "bearer",
      "file": "~/.gemini/oauth_creds.json",
      "fields": ["access_token", "id_token"],
      "refresh": {
        "url": "https://oauth2.googleapis.com/token",
        "token": "refresh_token",
        "response": { "access_token": "access_token", "refresh_token": "refresh_token",
                      "id_token": "id_token" },
        "expires_at_ms": "expiry_date"
      },
      "hosts": ["cloudcode-pa.googleapis.com", "oauth2.googleapis.com", "www.googleapis.com",
                "generativelanguage.googleapis.com"]
    },
    // gh keeps its token in hosts.yml when no system keyring is there.
    "gh_login": {
      "type": "github",
      "file": "~/.config/gh/hosts.yml",
      "fields": ["oauth_token"],
      "hosts": ["github.com", "api.github.com", "*.githubusercontent.com"]
    },
    "aws": {
      "type": "aws-sigv4",
      "env": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"],
      "hosts": ["*.amazonaws.com"]
    }
  }
}
)json";

}  // namespace

std::string_view default_policy_text() {
  return default_text;
}

}  // namespace broker::config
