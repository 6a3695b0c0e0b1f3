#include "live/live_session.hpp"

#include "base/text.hpp"
#include "brokers/scrub_index.hpp"
#include "brokers/scrubber.hpp"
#include "live/ask_desk.hpp"
#include "live/shared_admission.hpp"

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
      attached_(std::move(attached)) {
  if (attached_.asks) asks_ = std::make_unique<ask_desk>(*this, *attached_.asks);
}

live_session::~live_session() = default;

namespace {

// The real values texts are scrubbed of (DESIGN §7: what the broker writes holds none), gathered
// once for all the texts of one record: the set's patterns (with the tokens rotated in now), one
// index and their lower-case forms.
class text_scrubber {
 public:
  explicit text_scrubber(const brokers::credential_set& set) : patterns_(set.response_patterns()) {
    if (patterns_.empty()) return;
    index_.emplace(patterns_, brokers::scrub_index::search::direct);
    folded_.reserve(patterns_.size());
    for (const auto& p : patterns_) folded_.push_back(base::lower(p.find));
  }
  ~text_scrubber() {
    for (auto& f : folded_) base::wipe(f);
  }
  text_scrubber(const text_scrubber&) = delete;
  text_scrubber& operator=(const text_scrubber&) = delete;

  std::string operator()(std::string_view text) const {
    std::string out(text);
    if (patterns_.empty()) return out;  // no credentials: nothing to look for on every record
    brokers::scrub_value(out, *index_);
    // Host names arrive lower-cased: a real value in one is found case-insensitively.
    std::string folded = base::lower(out);
    for (std::size_t i = 0; i < patterns_.size(); ++i) {
      const std::string& needle = folded_[i];
      const std::string_view replacement = patterns_[i].replacement;
      for (auto at = folded.find(needle); at != std::string::npos;
           at = folded.find(needle, at + needle.size()))
        out.replace(at, replacement.size(), replacement);
    }
    base::wipe(folded);
    return out;
  }

 private:
  std::vector<brokers::scrub_pattern> patterns_;
  std::optional<brokers::scrub_index> index_;
  std::vector<std::string> folded_;
};

}  // namespace

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
  ++requests_;
  if (!e.allowed) ++denied_;
  if (e.allowed && !e.would_deny.empty()) ++would_deny_;
  if (e.allowed && e.learned) ++learned_;
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
