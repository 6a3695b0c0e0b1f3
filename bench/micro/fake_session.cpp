#include "bench/micro/fake_session.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>

#include "base/secret.hpp"
#include "config/policy.hpp"

namespace broker::bench {
namespace {

std::string random_text(std::mt19937& rng, std::size_t size) {
  static constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  while (out.size() < size) out += alphabet[rng() % alphabet.size()];
  return out;
}

// What the texts of a conversation about code are made of.
constexpr std::string_view words[] = {
    " the",     " request", " function", " returns", " a",      " value",  " when",
    " parser",  " header",  " body",     " is",      " not",    " of",     " and",
    " tests",   " build",   " with",     " error",   " file",   " line",   " change",
    " should",  " we",      " can",      " this",    " code",   " to",     " in",
    " because", " then",    " config",   " string",  " client", " server", "\\n",
    "```",      "cpp",      " {",        " }",       " std",    "::",      "vector"};

brokers::credential_set load(const std::string& policy_text, std::string_view name) {
  std::vector<config::policy> layers;
  layers.push_back(config::parse_policy(policy_text, std::string(name)));
  return brokers::credential_set::load(layers);
}

// N bearer credentials and the real values they were loaded from (kept as secrets, as the
// session keeps them: texts that must carry one read it through expose()).
struct bearer_session {
  std::vector<base::secret> reals;
  brokers::credential_set set;
};

bearer_session make_bearer_session(std::size_t count) {
  // Prefixes of tokens agents are given, so that the patterns do not all start alike.
  static constexpr std::string_view prefixes[] = {
      "ghp_", "sk-proj-", "sk-ant-api03-",        "xoxb-",   "glpat-",        "AIza",
      "hf_",  "npm_",     "pypi-AgEIcHlwaS5vcmc", "dop_v1_", "github_pat_11", "sk_live_"};
  std::mt19937 rng(static_cast<unsigned>(count));
  bearer_session s;
  std::string text = R"({ "version": 1, "credentials": {)";
  for (std::size_t i = 0; i < count; ++i) {
    const std::string variable = "BROKER_BENCH_TOKEN_" + std::to_string(i);
    std::string value(prefixes[i % std::size(prefixes)]);
    const std::size_t length = 40 + rng() % 24;  // every prefix is shorter than 40
    value += random_text(rng, length - value.size());
    ::setenv(variable.c_str(), value.c_str(), 1);
    s.reals.emplace_back(std::move(value));
    text += std::string(i ? "," : "") + R"( "bench_)" + std::to_string(i) +
            R"(": { "type": "bearer", "env": [")" + variable + R"("], "hosts": ["api)" +
            std::to_string(i) + R"(.bench.example"] })";
  }
  text += "} }";
  s.set = load(text, "<bench>");
  if (s.set.size() != count) throw std::runtime_error("bench: a bearer credential was skipped");
  return s;
}

const bearer_session& bearer_session_of(std::size_t count) {
  static std::mutex mutex;
  static std::map<std::size_t, bearer_session> sessions;
  std::lock_guard lock(mutex);
  auto it = sessions.find(count);
  if (it == sessions.end()) it = sessions.emplace(count, make_bearer_session(count)).first;
  return it->second;
}

}  // namespace

const brokers::credential_set& default_credentials() {
  static const brokers::credential_set set = [] {
    const std::pair<const char*, const char*> values[] = {
        {"GITHUB_TOKEN", "ghp_Bench0Token0Value0123456789abcdefAB"},
        {"OPENAI_API_KEY", "sk-proj-Bench0OpenAI0Key0123456789abcdefghijklmnopqrstuvwxyzAB"},
        {"CODEX_API_KEY", "sk-proj-Bench0Codex00Key0123456789abcdefghijklmnopqrstuvwxyzAB"},
        {"ANTHROPIC_API_KEY", "sk-ant-api03-Bench0Anthropic0Key0123456789abcdefghijklmnopqrstu"},
        {"ANTHROPIC_AUTH_TOKEN", "sk-ant-oat01-Bench0Auth0Token0123456789abcdefghijklmnopqrstu"},
        {"CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-Bench0Claude0Token0123456789abcdefghijklmnopq"},
        {"GEMINI_API_KEY", "AIzaSyBench0Gemini0Key0123456789abcdefg"},
        {"GOOGLE_API_KEY", "AIzaSyBench0Google0Key0123456789abcdefg"},
        {"AWS_ACCESS_KEY_ID", "ASIABENCH0KEY0ID0123"},
        {"AWS_SECRET_ACCESS_KEY", "Bench0Secret0Access0Key0123456789abcdefgh"},
        {"AWS_SESSION_TOKEN",
         "IQoJb3JpZ2luX2VjEBench0Session0Token0123456789abcdefghijklmnopqrstuvwxyz+/ABCDEFGHIJKLMN"
         "OPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz=="},
    };
    for (const auto& [name, value] : values) ::setenv(name, value, 1);
    return load(std::string(config::default_policy_text()), "<default>");
  }();
  return set;
}

const brokers::credential_set& bearer_credentials(std::size_t count) {
  return bearer_session_of(count).set;
}

std::string_view bearer_real_value(std::size_t count, std::size_t i) {
  return bearer_session_of(count).reals.at(i).expose();
}

std::string dummy_in(const brokers::credential_set& set, std::string_view variable) {
  for (const auto& [name, value] : set.dummy_environment())
    if (name == variable) return value;
  throw std::runtime_error("bench: no dummy in " + std::string(variable));
}

std::string llm_request_head(std::string_view host, std::string_view bearer,
                             std::size_t content_length) {
  return "POST /v1/chat/completions HTTP/1.1\r\n"
         "Host: " +
         std::string(host) +
         "\r\n"
         "Accept-Encoding: gzip, deflate\r\n"
         "Connection: keep-alive\r\n"
         "Accept: application/json\r\n"
         "Content-Type: application/json\r\n"
         "User-Agent: OpenAI/Python 1.54.3\r\n"
         "X-Stainless-Lang: python\r\n"
         "X-Stainless-Package-Version: 1.54.3\r\n"
         "X-Stainless-OS: Linux\r\n"
         "X-Stainless-Runtime-Version: 3.11.2\r\n"
         "Authorization: Bearer " +
         std::string(bearer) +
         "\r\n"
         "x-stainless-retry-count: 0\r\n"
         "Content-Length: " +
         std::to_string(content_length) + "\r\n\r\n";
}

std::string llm_response_head(bool chunked, std::size_t content_length) {
  return std::string(
             "HTTP/1.1 200 OK\r\n"
             "Date: Tue, 01 Dec 2026 23:40:12 GMT\r\n"
             "Content-Type: text/event-stream; charset=utf-8\r\n") +
         (chunked ? "Transfer-Encoding: chunked\r\n"
                  : "Content-Length: " + std::to_string(content_length) + "\r\n") +
         "Connection: keep-alive\r\n"
         "access-control-expose-headers: X-Request-ID\r\n"
         "openai-organization: user-q8bench0org0abcdefghij\r\n"
         "openai-processing-ms: 312\r\n"
         "openai-version: 2020-10-01\r\n"
         "x-ratelimit-limit-requests: 10000\r\n"
         "x-ratelimit-remaining-requests: 9999\r\n"
         "x-ratelimit-reset-requests: 6ms\r\n"
         "x-request-id: req_5f0c6d2b8e9a4e1f9d3c7b6a5e4d3c2b\r\n"
         "strict-transport-security: max-age=31536000; includeSubDomains; preload\r\n"
         "cf-cache-status: DYNAMIC\r\n"
         "Server: cloudflare\r\n"
         "cf-ray: 8ebench0a1b2c3d4-FRA\r\n"
         "alt-svc: h3=\":443\"; ma=86400\r\n\r\n";
}

std::string llm_request_body(std::size_t size) {
  const std::string_view head =
      R"({"model":"gpt-4o","stream":true,"messages":[{"role":"system","content":"You are a )"
      R"(coding agent working in a C++ repository."},{"role":"user","content":")";
  const std::string_view tail = R"("}]})";
  std::mt19937 rng(11);
  std::string out(head);
  while (out.size() + tail.size() < size) out += words[rng() % std::size(words)];
  out.resize(size - tail.size());
  out += tail;
  return out;
}

std::string llm_stream_text(std::size_t size) {
  std::mt19937 rng(7);
  std::string out;
  while (out.size() < size) {
    out +=
        R"(data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk",)"
        R"("created":1733097612,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7f6be3efb0",)"
        R"("choices":[{"index":0,"delta":{"content":")";
    for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n)
      out += words[rng() % std::size(words)];
    out += R"("},"logprobs":null,"finish_reason":null}]})"
           "\n\n";
  }
  out.resize(size);
  return out;
}

}  // namespace broker::bench
