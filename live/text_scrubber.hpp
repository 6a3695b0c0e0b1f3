// The real values a text the broker writes is scrubbed of (docs/audit-log.md: what the broker
// writes holds none), gathered once for all the texts of one record: the credential set's patterns
// (with the tokens rotated in now), one index and their lower-case forms. Each real value in a
// text becomes its dummy, found case-insensitively too (host names arrive lower-cased).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/credential_set.hpp"
#include "brokers/scrub_index.hpp"

namespace broker::live {

class text_scrubber {
 public:
  explicit text_scrubber(const brokers::credential_set& set);
  ~text_scrubber();
  text_scrubber(const text_scrubber&) = delete;
  text_scrubber& operator=(const text_scrubber&) = delete;

  std::string operator()(std::string_view text) const;

 private:
  std::vector<brokers::scrub_pattern> patterns_;
  std::optional<brokers::scrub_index> index_;
  std::vector<std::string> folded_;
};

}  // namespace broker::live
