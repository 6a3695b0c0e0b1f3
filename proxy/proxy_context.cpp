#include "proxy/proxy_context.hpp"

#include <cctype>
#include <cmath>

#include "session/redact.hpp"

namespace broker::proxy {

proxy_context::proxy_context(proxy_options options,
                             std::shared_ptr<const config::policy_set> policy,
                             std::unique_ptr<session::audit_log> audit,
                             std::shared_ptr<const brokers::credential_set> credentials,
                             std::shared_ptr<tls_contexts> tls)
    : options_(std::move(options)),
      policy_(std::move(policy)),
      audit_(std::move(audit)),
      credentials_(std::move(credentials)),
      tls_(std::move(tls)) {}

std::string proxy_context::scrub(std::string_view text) const {
  std::string out(text);
  const auto& patterns = credentials_->response_patterns();
  if (patterns.empty()) return out;  // no credentials: nothing to look for on every record
  brokers::scrub_value(out, patterns);
  // Host names arrive lower-cased: a real value in one is found case-insensitively.
  auto lower = [](std::string_view s) {
    std::string l(s);
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l;
  };
  std::string folded = lower(out);
  for (const auto& p : patterns) {
    std::string needle = lower(p.find);
    for (auto at = folded.find(needle); at != std::string::npos;
         at = folded.find(needle, at + needle.size()))
      out.replace(at, p.replacement.size(), p.replacement);
    brokers::wipe(needle);
  }
  brokers::wipe(folded);
  return out;
}

bool proxy_context::record(const audit_entry& e) {
  ++requests_;
  if (!e.allowed) ++denied_;
  if (budget_)
    budget_->add_bytes(e.host, e.bytes_out - e.bytes_charged_out, e.bytes_in - e.bytes_charged_in);
  nlohmann::ordered_json j;
  j["event"] = e.event;
  j["pid"] = e.pid > 0 ? nlohmann::ordered_json(e.pid) : nlohmann::ordered_json();
  j["exe"] = e.pid > 0 && !e.exe.empty() ? nlohmann::ordered_json(e.exe) : nlohmann::ordered_json();
  j["method"] = e.method.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.method);
  j["scheme"] = e.scheme.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.scheme);
  j["host"] = scrub(e.host);
  j["port"] = e.port;
  j["path"] = e.target.empty() ? nlohmann::ordered_json()
                               : nlohmann::ordered_json(session::redact_target(scrub(e.target)));
  j["status"] = e.status ? nlohmann::ordered_json(e.status) : nlohmann::ordered_json();
  j["bytes_out"] = e.bytes_out;
  j["bytes_in"] = e.bytes_in;
  j["ms"] = std::round(e.ms * 10.0) / 10.0;
  j["decision"] = e.allowed ? "allow" : "deny";
  j["rule"] = e.rule.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.rule);
  j["credential"] =
      e.credential.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.credential);
  j["llm_tokens"] = e.llm_tokens ? nlohmann::ordered_json(*e.llm_tokens) : nlohmann::ordered_json();
  if (e.llm_estimated) j["estimated"] = true;
  if (!e.error.empty()) j["error"] = e.error;
  return audit_->write(j);
}

}  // namespace broker::proxy
