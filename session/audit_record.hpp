// The records of a session's audit log (docs/audit-log.md), built in one place for serve and wrap
// alike: one per exchange, tunnel or refusal, and the session's start, policy reloads and end. The
// log (audit_log.hpp) adds ts, session, seq and the hash chain around these fields.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/boxed.hpp"
#include "base/json_text.hpp"
#include "config/policy_set.hpp"
#include "config/program_identity.hpp"

namespace broker::session {

// One exchange, tunnel or refusal as the proxy saw it.
struct audit_entry {
  std::string event;  // "request" | "tunnel" | "refused" | "exfiltration_blocked" | "dns"
  std::string method;
  std::string scheme;  // "http" | "https" | "" (unknown, e.g. a tunnel or a bad request)
  std::string host;
  std::uint16_t port = 0;
  std::string target;  // raw path and query; redacted on the way into the record
  int status = 0;      // 0 = none (tunnels)
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
  // An upgraded (WebSocket) connection's data messages each way (docs/security-model.md); unset
  // otherwise.
  std::optional<std::uint64_t> ws_messages_out;
  std::optional<std::uint64_t> ws_messages_in;
  double ms = 0;
  bool allowed = true;
  std::string rule;
  // Allowed, but an audit-only layer would have refused it: that layer's rule (docs/policy.md).
  std::string would_deny;
  // wrap --learn let it through although the policy refused it (`rule`: the refusal).
  bool learned = false;
  std::string error;                    // refusal code, when any
  std::string credential;               // the credential swapped in (or found, for a refusal)
  std::int64_t credential_expires = 0;  // a minted one's expiry (Unix seconds); 0: not minted
  std::uint64_t bytes_charged_out = 0;  // already charged to the budget (tunnels)
  std::uint64_t bytes_charged_in = 0;
  std::optional<std::uint64_t> llm_tokens;  // an LLM API response's input + output tokens
  bool llm_estimated = false;               // ... counted from its text, not reported
  double llm_cost_usd = 0;  // ... priced by the session's table ("cost_usd" when above 0)
  int pid = 0;              // the client socket's owner; 0 = unknown
  std::string exe;
  // Every process attribution found holding the client socket (pid and exe are the first's):
  // for "programs" (docs/policy.md), and in the record as "holders" when there is more than one.
  std::shared_ptr<const config::client_identity> client;
  // Reached the broker by transparent capture (docs/architecture.md), not through the proxy
  // variables.
  bool captured = false;
  bool http2 = false;  // a stream of an HTTP/2 connection (the record says "http": "2")
  // A request read as MCP (docs/audit-log.md): its first call.
  struct mcp_call {
    std::string method;            // "tools/call", "initialize", ...; "" for a response
    std::string kind;              // "tool" | "resource" | "prompt" | "" (what target names)
    std::string target;            // the tool or prompt name, or the resource URI
    std::string arguments_sha256;  // of a tool call's arguments, compact JSON
    std::size_t messages = 1;      // in the body: more than one is a batch
    std::size_t tools_hidden = 0;  // tools a tools/list answer lost to the rules and pins
    // Of them, those that changed since the session first listed them: "name (description)".
    std::vector<std::string> tools_changed;
    // What came of the request (one, not a batch): "ok", "tool_error", "error" (a JSON-RPC
    // error from the server, `error_code`), "refused" (by the broker); "" when no answer said.
    std::string outcome;
    std::optional<long long> error_code;
  };
  base::boxed<mcp_call> mcp;  // on the heap: most exchanges have none
  // A tunnel an ssh rule allowed (docs/audit-log.md, "SSH"): the server's host key, read from the
  // key exchange, and the key the session's agent signed with for it and the user it
  // authenticated as (empty: it signed nothing for this connection).
  struct ssh_connection {
    std::string host_key;
    std::string key;
    std::string user;
  };
  base::boxed<ssh_connection> ssh;
};

// Text a client or upstream chose (host, path) with every real secret value replaced by its
// dummy, before it goes into a record.
using scrub_text = std::function<std::string(std::string_view)>;

// Written on every request, so straight to text (base/json_text.hpp).
base::json_members exchange_record(const audit_entry& e, const scrub_text& scrub);

// What the session's SSH agent refused a client inside (docs/audit-log.md, "SSH"): a message
// off its allowlist ("message", `message` names it), a signature (`sign`), or keys it left out
// of a list for the host the connection is bound to ("key_hidden", `hidden` of them).
struct ssh_agent_event {
  std::string refused;
  std::string message;
  std::string key;       // sign: the key asked for
  std::string host_key;  // the host key the connection is bound to; empty: unbound
  std::string host;      // the tunnel that carried that connection; empty: none did (a jump)
  std::uint16_t port = 0;
  std::string user;
  std::uint32_t hidden = 0;
  int pid = 0;  // the client's, from the socket
  std::string exe;
};
nlohmann::ordered_json ssh_agent_record(const ssh_agent_event& e);

// The session's first record. Fields left empty (0 for pid) are not written: serve names its
// listener and policy files, wrap its isolation, command and child.
struct session_start {
  std::string mode;  // "serve" | "wrap"
  std::string listen;
  std::string isolation;
  // wrap netns: whether transparent capture is on (docs/architecture.md).
  std::optional<bool> capture;
  std::string command;
  int pid = 0;
  std::optional<nlohmann::ordered_json> policy;  // the layers' sources and digests
  std::vector<std::string> credentials;          // names, never values
};
nlohmann::ordered_json start_record(const session_start& s);

// A request held while a person is asked about it (docs/policy.md): the request as an exchange
// record names it (decision "ask", the rule that refused it), with the ask's id and how long it
// waits at most.
base::json_members ask_record(const std::string& id, const audit_entry& request, long timeout_s,
                              const scrub_text& scrub);

// What was decided about an ask: "approve", "deny" or "timeout"; who decided (the person's uid
// and the deciding process, an admin credential's name, or nobody); the scope ("once",
// "session", "always") and the rule an approval added; an MCP call's name; the held requests it
// released.
struct approval {
  std::string id;
  std::string decision;
  std::string who;
  std::string scope;
  std::string rule;
  std::string host;
  std::uint16_t port = 0;
  std::string path_prefix;
  std::string call;  // an MCP call's ask: its method and tool ("tools/call create_issue")
  std::vector<std::string> released;
};
nlohmann::ordered_json approval_record(const approval& a);

nlohmann::ordered_json policy_reload_record(nlohmann::ordered_json policy);

// Something done on a gateway's admin side, in the gateway's own log (docs/gateway.md): a request
// to the admin API refused for want of a valid admin credential (decision "deny", its status, the
// method, path and peer, why), or an admin token made or revoked (decision "token_create" /
// "token_revoke", its id and operator name, who did it).
struct admin_action {
  std::string decision;
  std::string who;
  int status = 0;
  std::string method;
  std::string path;
  std::string peer;
  std::string reason;
  std::string token_id;
  std::string token_name;
};
nlohmann::ordered_json admin_record(const admin_action& a);

// Something the wrapped command changed that was kept out of the host (docs/security-model.md): the
// real path it would have reached, why not, where the session's version was set aside ("" for
// none), and the change: "set_aside", "removed" (the session removed what the host keeps) or
// "dropped" (a cache's changes, thrown away).
nlohmann::ordered_json kept_out_record(const std::string& path, const std::string& reason,
                                       const std::string& kept, const std::string& change);

// A session's layers as its start and reload records name them: [{"source", "sha256"}].
nlohmann::ordered_json policy_sources(const config::policy_set& set);

// The session's last record: its counts, its usage against the budgets, and the command's exit
// status (wrap; null for serve).
struct session_end {
  std::uint64_t requests = 0;
  std::uint64_t denied = 0;
  std::uint64_t would_deny = 0;  // allowed, and an audit-only layer would have refused
  nlohmann::ordered_json usage;
  std::optional<int> exit;
};
nlohmann::ordered_json end_record(const session_end& s);

}  // namespace broker::session
