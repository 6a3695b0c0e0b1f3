#include "capture/synthetic_addresses.hpp"

namespace broker::capture {

namespace {

// Index 0 and 1 are the range's network and the namespace's own address on its loopback.
constexpr std::size_t first_handed_out = 2;

// A dual-stack listener shows an IPv4 target as v4-mapped IPv6.
config::ip_address unmapped(const config::ip_address& a) {
  return config::unwrap_v4_mapped(a).value_or(a);
}

}  // namespace

synthetic_addresses::synthetic_addresses(config::ip_address v4_base, config::ip_address v6_base)
    : v4_base_(v4_base), v6_base_(v6_base) {}

std::optional<synthetic_addresses::pair> synthetic_addresses::assign(const std::string& name) {
  std::size_t index;
  {
    std::lock_guard lock(mutex_);
    auto found = index_.find(name);
    if (found != index_.end()) {
      index = found->second;
    } else {
      if (names_.size() >= max_names) return std::nullopt;
      index = names_.size();
      names_.push_back(name);
      index_.emplace(name, index);
    }
  }
  const std::uint32_t offset = static_cast<std::uint32_t>(index + first_handed_out);
  pair out{config::ip_address::from_v4(v4_base_.v4_value() + offset), v6_base_};
  for (int i = 0; i < 4; ++i) out.v6.bytes[15 - i] = static_cast<std::uint8_t>(offset >> (8 * i));
  return out;
}

std::optional<std::size_t> synthetic_addresses::index_of(const config::ip_address& raw) const {
  const auto a = unmapped(raw);
  std::uint64_t offset = 0;
  if (a.v4) {
    if (!v4_base_.v4) return std::nullopt;
    const std::uint32_t value = a.v4_value(), base = v4_base_.v4_value();
    if (value < base || value - base >= max_names + first_handed_out) return std::nullopt;
    offset = value - base;
  } else {
    // The /64 prefix and the zero bytes above the counter must be the base's.
    for (std::size_t i = 0; i < 12; ++i)
      if (a.bytes[i] != v6_base_.bytes[i]) return std::nullopt;
    for (std::size_t i = 12; i < 16; ++i) offset = (offset << 8) | a.bytes[i];
    if (offset >= max_names + first_handed_out) return std::nullopt;
  }
  if (offset < first_handed_out) return std::nullopt;
  return static_cast<std::size_t>(offset - first_handed_out);
}

std::optional<std::string> synthetic_addresses::name_of(const config::ip_address& address) const {
  const auto index = index_of(address);
  if (!index) return std::nullopt;
  std::lock_guard lock(mutex_);
  if (*index >= names_.size()) return std::nullopt;
  return names_[*index];
}

bool synthetic_addresses::in_range(const config::ip_address& raw) const {
  const auto a = unmapped(raw);
  if (a.v4) return (a.v4_value() >> 17) == (v4_base_.v4_value() >> 17);
  for (std::size_t i = 0; i < 8; ++i)
    if (a.bytes[i] != v6_base_.bytes[i]) return false;
  return true;
}

}  // namespace broker::capture
