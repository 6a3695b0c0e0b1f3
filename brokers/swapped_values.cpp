#include "brokers/swapped_values.hpp"

namespace broker::brokers {

void swapped_values::add(std::string_view sent, std::string_view original) {
  if (sent.size() != original.size() || sent == original || sent.empty()) return;
  values_.emplace_back(base::secret(std::string(sent)), std::string(original));
}

void swapped_values::patterns(std::vector<scrub_pattern>& out) const {
  for (const auto& [sent, original] : values_) out.push_back({sent.expose(), original});
}

}  // namespace broker::brokers
