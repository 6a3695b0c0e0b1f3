#include "config/cidr.hpp"

#include <algorithm>

namespace broker::config {
namespace {

int max_prefix(const ip_address& a) {
  return a.v4 ? 32 : 128;
}

// Keeps the first `prefix_len` bits of the address and zeroes the rest.
ip_address masked(ip_address a, int prefix_len) {
  for (int byte = 0; byte < 16; ++byte) {
    int keep = std::clamp(prefix_len - byte * 8, 0, 8);
    auto mask = static_cast<std::uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
    a.bytes[static_cast<std::size_t>(byte)] &= mask;
  }
  return a;
}

}  // namespace

std::optional<cidr> cidr::parse(std::string_view text) {
  std::size_t slash = text.find('/');
  auto address = ip_address::parse(text.substr(0, slash));
  if (!address) return std::nullopt;
  int prefix = max_prefix(*address);
  if (slash != std::string_view::npos) {
    std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    prefix = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      prefix = prefix * 10 + (c - '0');
    }
    // "/08" is refused like a leading-zero octet: one spelling per block.
    if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
    if (prefix > max_prefix(*address)) return std::nullopt;
  }
  // "10.0.0.1/8" is almost always a typo for a host or for "10.0.0.0/8"; refusing it beats
  // guessing which one was meant.
  if (!(masked(*address, prefix) == *address)) return std::nullopt;
  return cidr(*address, prefix);
}

// Out-of-range prefixes are clamped and host bits cleared, so every cidr value is canonical.
cidr::cidr(ip_address network, int prefix_len)
    : network_(), prefix_len_(std::clamp(prefix_len, 0, max_prefix(network))) {
  network_ = masked(network, prefix_len_);
}

bool cidr::contains(const ip_address& address) const {
  if (address.v4 != network_.v4) return false;
  return masked(address, prefix_len_) == network_;
}

std::string cidr::to_string() const {
  return network_.to_string() + "/" + std::to_string(prefix_len_);
}

}  // namespace broker::config
