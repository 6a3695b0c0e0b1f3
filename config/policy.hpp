// One policy layer (docs/policy.md): parsed from JSON with // comments, every error naming
// file, line and key.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/cidr.hpp"
#include "config/credential_scope.hpp"
#include "config/host_pattern.hpp"
#include "config/mcp_rules.hpp"
#include "config/path_pattern.hpp"
#include "config/units.hpp"

namespace broker::config {

// what() is "FILE:LINE: KEY: message", e.g. "policy.json:12: allow[3].ports: expected array of
// integers". For a JSON syntax error KEY is the innermost key being read (or "(document)").
// A file that cannot be read has line 0 and no key: what() is then "FILE: message".
class policy_error : public std::runtime_error {
 public:
  policy_error(std::string file, int line, std::string key, std::string message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  std::string key_;
  std::string message_;
};

struct rule {
  std::string name;                  // "allow[0]", "deny[2]"
  int line = 0;                      // where the rule object starts
  std::optional<host_pattern> host;  // exactly one of host / cidr is set
  std::optional<cidr> net;
  std::vector<std::uint16_t> ports;  // allow rules: default {80, 443}; deny rules: empty = any
  std::vector<std::string> methods;  // upper-case tokens; empty = any method
  std::vector<path_pattern> paths;   // empty = any path
  bool tunnel = false;               // allow rules only; with tunnel, methods/paths are an error
  // Allow rules only: false keeps an intercepted connection to the host on HTTP/1.1 (no ALPN
  // h2 offered to the client; docs/architecture.md), for a client or server that misbehaves on h2.
  bool http2 = true;
  // Allow rules only: the programs whose connections it admits, absolute paths or globs on the
  // executable's path ('*' matches any run, '/' too), matched by program_matches
  // (program_identity.hpp). Empty = any program. A connection broker could not attribute
  // matches none (docs/policy.md).
  std::vector<std::string> programs;
  std::vector<int> program_lines;  // where each of `programs` is, for policy check's errors
  // An allow rule a person approved (docs/policy.md): for the running session, or read from
  // approved.json. It never admits a host a layer lists under "approvals": {"never": [...]}.
  bool approved = false;
  // Allow rules only: the JSON-RPC of MCP servers on the host is read and judged by these rules
  // (docs/policy.md, "MCP"); never with "tunnel".
  std::optional<mcp_rules> mcp;
  // Allow rules only: "ssh": true (docs/policy.md, "SSH"): a tunnel to one named host (ports
  // default to 22) that ssh and git use through the session's agent, whose keys sign only for
  // the hosts such rules allow; the connection's record names the key that signed.
  bool ssh = false;

  bool has_l7_conditions() const { return !methods.empty() || !paths.empty(); }
};

// Known credential types; the brokers that implement them come with interception.
// An agent's own login file as a credential (docs/agents.md): the child sees a dummy copy at
// `path`, each of `fields` (JSON member paths, "tokens.access_token") replaced by a same-shaped
// dummy that the family carries as usual (a github or bearer token, a header); the refresh token is
// swapped only in the body of a request to the refresh endpoint.
struct login_file_spec {
  std::string path;                 // absolute, or "~/..." (the home directory)
  std::vector<std::string> fields;  // dotted member paths of the values the family carries
  struct refresh_spec {
    std::string url;    // "https://host[:port]/path": the token endpoint
    std::string token;  // the refresh token's member path in the file
    // A token response's member → the file's member path it renews ("access_token" →
    // "tokens.access_token"); the rotated real values are written back to the real file.
    std::vector<std::pair<std::string, std::string>> response;
    std::string expires_at_ms;  // optional: the file's member set from expires_in (ms since 1970)
  };
  std::optional<refresh_spec> refresh;
};

// "type": "github-app" (docs/policy.md, "Minted credentials"): the App installation a short-lived
// token is minted from for each session.
struct github_app_spec {
  std::string app_id;           // the App's id (digits) or its client id ("Iv1.…")
  std::string installation_id;  // digits
  std::string private_key;      // "env:NAME" | "file:PATH" | "cmd:COMMAND": the App's PEM key
  std::string api_url = "https://api.github.com";  // a GitHub Enterprise Server's ".../api/v3"
  std::vector<std::string> repositories;           // names; empty: the installation's
  std::vector<std::pair<std::string, std::string>> permissions;  // name → read|write|admin
};

// aws-sigv4 "assume_role" (docs/policy.md, "Minted credentials"): temporary credentials from STS
// AssumeRole, with an inline session policy, for each session.
struct assume_role_spec {
  std::string arn;                      // the role: "arn:aws:iam::ACCOUNT:role/NAME"
  std::string policy;                   // the session policy, compact JSON; "" for none
  std::chrono::seconds duration{3600};  // 900 s to 12 h
};

struct credential_spec {
  std::string name;  // the key under "credentials"
  int line = 0;
  std::string type;                 // one of config/credential_types.hpp
  std::vector<std::string> env;     // variable names the child sees (dummies); aws-sigv4
                                    // defaults to the three AWS_* names
  std::vector<host_pattern> hosts;  // bound hosts; never empty
  std::string source;        // "env:NAME" | "file:PATH" | "cmd:COMMAND"; defaults to env:<env[0]>
  std::string header;        // type "header": the header name (lower-case)
  std::string prefix;        // type "header": optional value prefix ("Bearer ")
  bool also_bearer = false;  // type "header": `Authorization: Bearer X` is swapped too
  std::vector<std::string> query;  // query parameter names where the credential may appear
  bool allow_plaintext = false;
  // aws-sigv4: the credential scopes a request may be signed for (empty = any).
  std::vector<std::string> regions;
  std::vector<std::string> services;
  // gcp: the OAuth scopes the broker asks for with a service-account key.
  std::vector<std::string> scopes;
  // The programs it is swapped for, as on allow rules. Empty = any program.
  std::vector<std::string> programs;
  std::vector<int> program_lines;
  // github, bearer, header: the values come from a login file (then "source" is unused).
  std::optional<login_file_spec> login_file;
  // Where on its bound hosts it may be swapped (config/credential_scope.hpp); none = anywhere.
  std::optional<credential_scope> scope;
  // github, bearer, header, basic: swapped only in an MCP request that is one tools/call of a
  // tool these globs name (config/mcp_rules.hpp's globs). Sharing a variable with a credential
  // that has none, it stands in for that one on those calls (docs/policy.md, "MCP servers").
  std::optional<std::vector<std::string>> mcp_tools;
  std::optional<github_app_spec> github_app;
  std::optional<assume_role_spec> assume_role;  // aws-sigv4
  // gcp "access_boundary": the Credential Access Boundary every access token is downscoped with,
  // as STS's token exchange takes it ({"accessBoundary": {"accessBoundaryRules": [...]}},
  // compact); "" for none.
  std::string access_boundary;
};

enum class exhaust_action { deny, kill };

// The limits a layer may set for the whole session and, under "per_host", for one host pattern.
// Absent = unlimited. Counts and sizes are totals over the session's life; "requests": 0 refuses
// every request.
struct budget_amounts {
  std::optional<std::uint64_t> requests;
  std::optional<std::uint64_t> bytes_out;   // request bytes the child sends (sizes: "100MB")
  std::optional<std::uint64_t> bytes_in;    // response bytes it receives
  std::optional<std::uint64_t> llm_tokens;  // input + output tokens reported by LLM APIs
  std::optional<double> cost_usd;           // > 0; priced with budget_spec::prices
  std::optional<rate> request_rate;         // key "rate": a token bucket, e.g. "20/s"
};

// USD per million tokens. A model with no price costs 0 and is reported as unpriced, so a
// cost_usd budget does not limit it (list every model the agent may use, or add "*").
struct model_price {
  double input_per_mtok = 0;
  double output_per_mtok = 0;
};

// One "per_host" entry: counted over every host the pattern matches (so "*.example.com" is one
// budget for all its subdomains). Takes the budget_amounts keys only: duration, on_exhaust and
// prices are the session's.
struct host_budget_spec : budget_amounts {
  host_pattern host;
  int line = 0;
};

struct budget_spec : budget_amounts {
  std::optional<std::chrono::milliseconds> duration;  // session lifetime; exhausting it kills
  // Keys are model names, lower-cased, or a prefix ending in "*" ("claude-3-5-sonnet*", "*").
  // An exact name beats a prefix; among prefixes the longest wins.
  std::map<std::string, model_price> prices;
  std::vector<host_budget_spec> per_host;  // one per distinct normalized pattern
  exhaust_action on_exhaust = exhaust_action::deny;
  // A team gateway whose shared state (Redis) cannot be reached: "deny" (the default) refuses
  // the session's requests (503 state_unavailable), "allow" lets them go, counted only here.
  // Unset: not said by this layer.
  std::optional<bool> allow_without_state;
};

struct env_spec {
  std::vector<std::string> pass;
  std::vector<std::string> strip;
};

// "ssh" (docs/policy.md, "SSH"): which of the user's keys the session's agent holds, and host keys
// to trust besides the user's known_hosts.
struct ssh_spec {
  // Private key files, absolute or "~/..."; empty: every key in ~/.ssh whose public half is there.
  std::vector<std::string> keys;
  // known_hosts lines ("github.com ssh-ed25519 AAAA..."), each checked when parsed.
  std::vector<std::string> host_keys;
};

struct files_spec {
  std::vector<std::string> mask;
  std::vector<std::string> pass;
  std::vector<std::string> readonly;  // wrap: more paths the child may read but not change
  // wrap: paths of the built-in floor (startup files, package managers' sources...) the child
  // may change on purpose; only those every layer that lists any agrees on.
  std::vector<std::string> writable;
};

// Whether a layer's host/port/method/path rules refuse (enforce), or only record what they
// would refuse and let the enforcing layers decide (audit; docs/policy.md).
enum class enforcement { enforce, audit };

// What a layer's refusal by host/port/method/path rules leads to (docs/policy.md): "ask" lets a
// person approve it while the request is held; "deny" (a team's hard ceiling) is never asked
// about, not even under `wrap --ask`; unset is "deny" unless `wrap --ask` makes it "ask".
enum class on_deny { unset, deny, ask };

struct policy {
  std::string source;  // file path as given, or "<default>"
  std::string sha256;  // hex digest of the file's bytes
  config::enforcement enforcement = config::enforcement::enforce;
  config::on_deny on_deny = config::on_deny::unset;
  // "approvals": {"never": [...]}: hosts no approval may open, whichever layer approves.
  std::vector<host_pattern> never_approve;
  std::vector<rule> allow;
  std::vector<rule> deny;
  std::map<std::string, credential_spec> credentials;
  budget_spec budgets;
  env_spec env;
  files_spec files;
  ssh_spec ssh;

  bool has_egress_rules() const { return !allow.empty() || !deny.empty(); }
  bool asks() const { return on_deny == config::on_deny::ask; }
};

// Parses one layer. `source` names it in errors (a path or "<default>"). Throws policy_error.
// Unknown keys are errors (a typo must not silently loosen or ignore a rule).
policy parse_policy(std::string_view text, const std::string& source);

// Reads and parses a file; an unreadable file is a policy_error with line 0.
policy load_policy_file(const std::filesystem::path& path);

// The embedded default policy (docs/policy.md): brokers for GitHub, OpenAI, Anthropic and AWS on
// their official hosts; egress to those hosts and the common package registries; everything else
// denied.
std::string_view default_policy_text();

// The normalized layer as JSON (patterns normalized, defaults filled in), for `policy check`.
nlohmann::ordered_json to_json(const policy& layer);

}  // namespace broker::config
