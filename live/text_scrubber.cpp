#include "live/text_scrubber.hpp"

#include "base/text.hpp"
#include "brokers/scrubber.hpp"

namespace broker::live {

text_scrubber::text_scrubber(const brokers::credential_set& set)
    : patterns_(set.response_patterns()) {
  if (patterns_.empty()) return;
  index_.emplace(patterns_, brokers::scrub_index::search::direct);
  folded_.reserve(patterns_.size());
  for (const auto& p : patterns_) folded_.push_back(base::lower(p.find));
}

text_scrubber::~text_scrubber() {
  for (auto& f : folded_) base::wipe(f);
}

std::string text_scrubber::operator()(std::string_view text) const {
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

}  // namespace broker::live
