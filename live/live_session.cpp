#include "live/live_session.hpp"

#include "mcp/approvals.hpp"
#include "mcp/pins.hpp"

#include "base/text.hpp"
#include "brokers/scrub_index.hpp"
#include "brokers/scrubber.hpp"
#include "live/ask_desk.hpp"
#include "live/shared_admission.hpp"
#include "live/text_scrubber.hpp"

#include <cctype>
#include <functional>
#include <optional>

namespace broker::live {

live_session::live_session(session_options options,
                           std::shared_ptr<const config::policy_set> policy,
                           std::unique_ptr<session::audit_log> audit,
                           std::shared_ptr<const brokers::credential_set> credentials,
                           std::shared_ptr<certs::tls_contexts> tls, session_attachments attached)
    : options_(std::move(options)),
      policy_(std::move(policy)),
      audit_(std::move(audit)),
      credentials_(std::move(credentials)),
      tls_(std::move(tls)),
      attached_(std::move(attached)),
      ending_(options_.session_id, attached_.expires),
      mcp_pins_(std::make_unique<mcp::pin_store>()),
      mcp_approvals_(std::make_unique<mcp::call_approvals>()) {
  if (attached_.asks) asks_ = std::make_unique<ask_desk>(*this, *attached_.asks);
}

live_session::~live_session() = default;

std::string live_session::scrub(std::string_view text) const {
  return text_scrubber(*credentials_)(text);
}

void live_session::charge(audit_entry& e) {
  auto* budget = attached_.budget.get();
  if (!budget) return;
  budget->add_bytes(e.host, e.bytes_out - e.bytes_charged_out, e.bytes_in - e.bytes_charged_in);
  e.bytes_charged_out = e.bytes_out;
  e.bytes_charged_in = e.bytes_in;
}

bool live_session::record(const audit_entry& e, bool staged) {
  counters_.count(e);
  // A request refused because the log cannot be written gets no record: it went nowhere, and
  // its record would only take the room an unavailable log keeps for those that did.
  bool written = false;
  if (e.error != "audit_unavailable") {
    const text_scrubber scrub(*credentials_);
    const auto fields = session::exchange_record(e, std::cref(scrub));
    written = staged ? audit_->stage(fields) : audit_->write(fields);
  }
  if (attached_.shared) attached_.shared->recorded(e);
  if (attached_.observer) attached_.observer(session_id(), e);
  return written;
}

bool live_session::record_dns(const audit_entry& e) {
  const text_scrubber scrub(*credentials_);
  return audit_->write(session::exchange_record(e, std::cref(scrub)));
}

}  // namespace broker::live
