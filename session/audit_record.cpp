#include "session/audit_record.hpp"

#include <cmath>

#include "session/redact.hpp"

namespace broker::session {
namespace {

using record_json = nlohmann::ordered_json;

record_json text_or_null(const std::string& s) {
  return s.empty() ? record_json() : record_json(s);
}

}  // namespace

namespace {

// The fields of an exchange record; an ask (docs/policy.md) names the request the same way, with
// decision "ask", its id and timeout, and none of what only an answered request has.
struct ask_fields {
  const std::string& id;
  long timeout_s;
};

base::json_members exchange_fields(const audit_entry& e, const scrub_text& scrub,
                                   const ask_fields* ask) {
  base::json_members j;
  j.add("event", ask ? std::string_view("ask") : std::string_view(e.event));
  if (e.pid > 0) {
    j.add("pid", e.pid).add_text_or_null("exe", e.exe);
  } else {
    j.add_null("pid").add_null("exe");
  }
  // A socket several processes hold (inherited, passed): every one of them.
  if (e.client && e.client->holders.size() > 1) {
    auto holders = nlohmann::ordered_json::array();
    for (const auto& h : e.client->holders)
      holders.push_back({{"pid", h.pid}, {"exe", text_or_null(h.exe)}});
    j.add_json("holders", holders);
  }
  j.add_text_or_null("method", e.method).add_text_or_null("scheme", e.scheme);
  j.add("host", scrub(e.host)).add("port", unsigned{e.port});
  if (e.target.empty()) {
    j.add_null("path");
  } else {
    j.add("path", redact_target(scrub(e.target)));
  }
  if (!ask) {
    if (e.status) {
      j.add("status", e.status);
    } else {
      j.add_null("status");
    }
    j.add("bytes_out", e.bytes_out).add("bytes_in", e.bytes_in);
    if (e.ws_messages_out) j.add("ws_messages_out", *e.ws_messages_out);
    if (e.ws_messages_in) j.add("ws_messages_in", *e.ws_messages_in);
    j.add("ms", std::round(e.ms * 10.0) / 10.0);
  }
  if (ask) {
    j.add("decision", "ask").add_text_or_null("rule", e.rule);
  } else if (e.allowed && e.learned) {
    // wrap --learn: refused by `rule`, let through to be learned (docs/policy.md).
    j.add("decision", "learned").add_text_or_null("rule", e.rule);
  } else if (e.allowed && !e.would_deny.empty()) {
    // An audit-only layer's refusal: its rule, and the enforcing rule that let it go.
    j.add("decision", "would_deny").add("rule", e.would_deny);
    j.add_text_or_null("allowed_by", e.rule);
  } else {
    j.add("decision", e.allowed ? "allow" : "deny").add_text_or_null("rule", e.rule);
  }
  if (!ask) {
    j.add_text_or_null("credential", e.credential);
    if (e.credential_expires) j.add("credential_expires", e.credential_expires);
    if (e.llm_tokens) {
      j.add("llm_tokens", *e.llm_tokens);
      // Priced by the session's table: what the console's spend charts sum (docs/gateway.md).
      if (e.llm_cost_usd > 0) j.add("cost_usd", e.llm_cost_usd);
    } else {
      j.add_null("llm_tokens");
    }
  }
  if (e.llm_estimated) j.add("estimated", true);
  if (e.captured) j.add("captured", true);
  if (e.http2) j.add("http", "2");
  if (e.mcp) {
    nlohmann::ordered_json m;
    m["method"] = e.mcp->method;
    // A resource URI's query may hold anything: it is redacted as a path's is.
    if (!e.mcp->kind.empty())
      m[e.mcp->kind] =
          e.mcp->kind == "resource" ? redact_target(scrub(e.mcp->target)) : scrub(e.mcp->target);
    if (!e.mcp->arguments_sha256.empty()) m["arguments_sha256"] = e.mcp->arguments_sha256;
    if (e.mcp->messages > 1) m["messages"] = e.mcp->messages;
    if (e.mcp->tools_hidden) m["tools_hidden"] = e.mcp->tools_hidden;
    if (!e.mcp->tools_changed.empty()) {
      auto& changed = m["tools_changed"] = nlohmann::ordered_json::array();
      for (const auto& t : e.mcp->tools_changed) changed.push_back(scrub(t));
    }
    if (!e.mcp->outcome.empty()) m["outcome"] = e.mcp->outcome;
    if (e.mcp->error_code) m["error_code"] = *e.mcp->error_code;
    j.add_json("mcp", m);
  }
  if (e.ssh) {
    nlohmann::ordered_json m;
    m["host_key"] = text_or_null(e.ssh->host_key);
    m["key"] = text_or_null(e.ssh->key);
    m["user"] = text_or_null(e.ssh->user);
    j.add_json("ssh", m);
  }
  if (!e.error.empty()) j.add("error", e.error);
  if (ask) j.add("id", ask->id).add("timeout_s", std::int64_t{ask->timeout_s});
  return j;
}

}  // namespace

base::json_members exchange_record(const audit_entry& e, const scrub_text& scrub) {
  return exchange_fields(e, scrub, nullptr);
}

base::json_members ask_record(const std::string& id, const audit_entry& request, long timeout_s,
                              const scrub_text& scrub) {
  const ask_fields ask{id, timeout_s};
  return exchange_fields(request, scrub, &ask);
}

record_json start_record(const session_start& s) {
  record_json j;
  j["event"] = "session_start";
  j["version"] = BROKER_VERSION;
  j["mode"] = s.mode;
  if (!s.listen.empty()) j["listen"] = s.listen;
  if (!s.isolation.empty()) j["isolation"] = s.isolation;
  if (s.capture) j["capture"] = *s.capture;
  if (!s.command.empty()) j["command"] = s.command;
  if (s.pid > 0) j["pid"] = s.pid;
  if (s.policy) j["policy"] = *s.policy;
  j["credentials"] = s.credentials;
  return j;
}

record_json approval_record(const approval& a) {
  record_json j;
  j["event"] = "approval";
  j["id"] = a.id;
  j["decision"] = a.decision;
  j["who"] = a.who;
  j["scope"] = text_or_null(a.scope);
  j["rule"] = text_or_null(a.rule);
  j["host"] = a.host;
  j["port"] = a.port;
  j["path_prefix"] = text_or_null(a.path_prefix);
  if (!a.call.empty()) j["call"] = a.call;
  j["released"] = a.released;
  return j;
}

record_json policy_reload_record(record_json policy) {
  record_json j;
  j["event"] = "policy_reload";
  j["policy"] = std::move(policy);
  return j;
}

record_json admin_record(const admin_action& a) {
  record_json j;
  j["event"] = "admin";
  j["decision"] = a.decision;
  j["who"] = text_or_null(a.who);
  if (a.status) j["status"] = a.status;
  if (!a.method.empty()) j["method"] = a.method;
  if (!a.path.empty()) j["path"] = a.path;
  if (!a.peer.empty()) j["peer"] = a.peer;
  if (!a.reason.empty()) j["reason"] = a.reason;
  if (!a.token_id.empty()) j["token"] = a.token_id;
  if (!a.token_name.empty()) j["name"] = a.token_name;
  return j;
}

record_json kept_out_record(const std::string& path, const std::string& reason,
                            const std::string& kept, const std::string& change) {
  record_json j;
  j["event"] = "kept_out";
  j["path"] = path;
  j["reason"] = reason;
  j["kept"] = kept;
  j["change"] = change;
  return j;
}

record_json ssh_agent_record(const ssh_agent_event& e) {
  record_json j;
  j["event"] = "ssh_agent";
  j["pid"] = e.pid > 0 ? record_json(e.pid) : record_json();
  j["exe"] = text_or_null(e.exe);
  j["decision"] = "deny";
  j["refused"] = e.refused;
  if (!e.message.empty()) j["message"] = e.message;
  j["key"] = text_or_null(e.key);
  j["host_key"] = text_or_null(e.host_key);
  j["host"] = text_or_null(e.host);
  j["port"] = e.port ? record_json(e.port) : record_json();
  j["user"] = text_or_null(e.user);
  if (e.hidden) j["hidden"] = e.hidden;
  return j;
}

record_json end_record(const session_end& s) {
  record_json j;
  j["event"] = "session_end";
  j["requests"] = s.requests;
  j["denied"] = s.denied;
  j["would_deny"] = s.would_deny;
  j["usage"] = s.usage;
  j["exit"] = s.exit ? record_json(*s.exit) : record_json();
  return j;
}

nlohmann::ordered_json policy_sources(const config::policy_set& set) {
  auto list = nlohmann::ordered_json::array();
  for (const auto& layer : set.layers())
    list.push_back({{"source", layer.source}, {"sha256", layer.sha256}});
  return list;
}

}  // namespace broker::session
