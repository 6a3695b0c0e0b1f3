#include "proxy/proxy_context.hpp"

#include "base/text.hpp"
#include "proxy/ask_desk.hpp"
#include "proxy/shared_admission.hpp"

#include <cctype>

namespace broker::proxy {

proxy_context::proxy_context(proxy_options options,
                             std::shared_ptr<const config::policy_set> policy,
                             std::unique_ptr<session::audit_log> audit,
                             std::shared_ptr<const brokers::credential_set> credentials,
                             std::shared_ptr<tls_contexts> tls, context_attachments attached)
    : options_(std::move(options)),
      policy_(std::move(policy)),
      audit_(std::move(audit)),
      credentials_(std::move(credentials)),
      tls_(std::move(tls)),
      attached_(std::move(attached)) {
  if (attached_.asks) asks_ = std::make_unique<ask_desk>(*this, *attached_.asks);
}

proxy_context::~proxy_context() = default;

std::string proxy_context::scrub(std::string_view text) const {
  std::string out(text);
  const auto& patterns = credentials_->response_patterns();
  if (patterns.empty()) return out;  // no credentials: nothing to look for on every record
  brokers::scrub_value(out, patterns);
  // Host names arrive lower-cased: a real value in one is found case-insensitively.
  std::string folded = base::lower(out);
  for (const auto& p : patterns) {
    std::string needle = base::lower(p.find);
    for (auto at = folded.find(needle); at != std::string::npos;
         at = folded.find(needle, at + needle.size()))
      out.replace(at, p.replacement.size(), p.replacement);
    base::wipe(needle);
  }
  base::wipe(folded);
  return out;
}

void proxy_context::charge(audit_entry& e) {
  auto* budget = attached_.budget.get();
  if (!budget) return;
  budget->add_bytes(e.host, e.bytes_out - e.bytes_charged_out, e.bytes_in - e.bytes_charged_in);
  e.bytes_charged_out = e.bytes_out;
  e.bytes_charged_in = e.bytes_in;
}

bool proxy_context::record(const audit_entry& e, bool staged) {
  ++requests_;
  if (!e.allowed) ++denied_;
  if (e.allowed && !e.would_deny.empty()) ++would_deny_;
  if (e.allowed && e.learned) ++learned_;
  const auto fields =
      session::exchange_record(e, [this](std::string_view text) { return scrub(text); });
  const bool written = staged ? audit_->stage(fields) : audit_->write(fields);
  if (attached_.shared) attached_.shared->recorded(e);
  if (attached_.observer) attached_.observer(session_id(), e);
  return written;
}

bool proxy_context::record_dns(const audit_entry& e) {
  return audit_->write(
      session::exchange_record(e, [this](std::string_view text) { return scrub(text); }));
}

nlohmann::ordered_json session_status(const proxy::proxy_context& ctx, const std::string& mode,
                                      int pid) {
  nlohmann::ordered_json j;
  j["session"] = ctx.session_id();
  j["mode"] = mode;
  j["pid"] = pid;
  j["requests"] = ctx.requests();
  j["denied"] = ctx.denied();
  j["would_deny"] = ctx.would_deny();
  if (auto* budget = ctx.budget()) j["budgets"] = budget->report(std::chrono::steady_clock::now());
  return j;
}

session::session_end session_end_of(const proxy::proxy_context& ctx, std::optional<int> exit) {
  session::session_end end;
  end.requests = ctx.requests();
  end.denied = ctx.denied();
  end.would_deny = ctx.would_deny();
  if (auto* budget = ctx.budget())
    end.usage = budget->report(std::chrono::steady_clock::now())["usage"];
  end.exit = exit;
  return end;
}

}  // namespace broker::proxy
