// The values a request was rewritten with (dummies swapped for real values, a request signed
// again), each with what the client had sent in its place: the response stage turns an upstream
// echoing one of them back into the client's form (an API that reflects the Authorization
// header). The rewritten values hold real ones, so they live only here, as secrets, and are
// wiped with the holder however the exchange ends.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/secret.hpp"
#include "brokers/scrub_index.hpp"

namespace broker::brokers {

class swapped_values {
 public:
  // `sent` replaced `original`. Only a pair of equal lengths is kept: scrubbing keeps lengths
  // (dummies have their real value's length, so a swapped value usually keeps its length too).
  void add(std::string_view sent, std::string_view original);
  // Each rewritten value → the client's form, for the response's scrubber. The views stay
  // valid as long as this holder.
  void patterns(std::vector<scrub_pattern>& out) const;
  bool empty() const { return values_.empty(); }

 private:
  std::vector<std::pair<base::secret, std::string>> values_;
};

}  // namespace broker::brokers
