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

record_json exchange_record(const audit_entry& e, const scrub_text& scrub) {
  record_json j;
  j["event"] = e.event;
  j["pid"] = e.pid > 0 ? record_json(e.pid) : record_json();
  j["exe"] = e.pid > 0 ? text_or_null(e.exe) : record_json();
  j["method"] = text_or_null(e.method);
  j["scheme"] = text_or_null(e.scheme);
  j["host"] = scrub(e.host);
  j["port"] = e.port;
  j["path"] = e.target.empty() ? record_json() : record_json(redact_target(scrub(e.target)));
  j["status"] = e.status ? record_json(e.status) : record_json();
  j["bytes_out"] = e.bytes_out;
  j["bytes_in"] = e.bytes_in;
  if (e.ws_messages_out) j["ws_messages_out"] = *e.ws_messages_out;
  if (e.ws_messages_in) j["ws_messages_in"] = *e.ws_messages_in;
  j["ms"] = std::round(e.ms * 10.0) / 10.0;
  if (e.allowed && e.learned) {
    // wrap --learn: refused by `rule`, let through to be learned (DESIGN §13).
    j["decision"] = "learned";
    j["rule"] = text_or_null(e.rule);
  } else if (e.allowed && !e.would_deny.empty()) {
    // An audit-only layer's refusal: its rule, and the enforcing rule that let it go.
    j["decision"] = "would_deny";
    j["rule"] = e.would_deny;
    j["allowed_by"] = text_or_null(e.rule);
  } else {
    j["decision"] = e.allowed ? "allow" : "deny";
    j["rule"] = text_or_null(e.rule);
  }
  j["credential"] = text_or_null(e.credential);
  j["llm_tokens"] = e.llm_tokens ? record_json(*e.llm_tokens) : record_json();
  if (e.llm_estimated) j["estimated"] = true;
  if (e.captured) j["captured"] = true;
  if (e.http2) j["http"] = "2";
  if (!e.error.empty()) j["error"] = e.error;
  return j;
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

record_json ask_record(const std::string& id, const audit_entry& request, long timeout_s,
                       const scrub_text& scrub) {
  record_json j = exchange_record(request, scrub);
  j["event"] = "ask";
  j["decision"] = "ask";
  j["id"] = id;
  j["timeout_s"] = timeout_s;
  for (const char* unused : {"status", "bytes_out", "bytes_in", "ms", "credential", "llm_tokens"})
    j.erase(unused);
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
                            const std::string& kept) {
  record_json j;
  j["event"] = "kept_out";
  j["path"] = path;
  j["reason"] = reason;
  j["kept"] = kept;
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
