// An IP address as plain bytes, so config/ matching needs no networking headers.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace broker::config {

struct ip_address {
  // IPv4 addresses use bytes_[0..3]; IPv6 use all 16. A v4-mapped IPv6 address stays IPv6 here:
  // callers that care (the SSRF guard) unwrap it explicitly.
  std::array<std::uint8_t, 16> bytes{};
  bool v4 = true;

  // Accepts dotted-quad IPv4 and RFC 4291 IPv6 text, optionally in [brackets]; no zone ids.
  static std::optional<ip_address> parse(std::string_view text);
  static ip_address from_v4(std::uint32_t host_order);
  std::uint32_t v4_value() const;  // host order; only meaningful when v4
  std::string to_string() const;   // canonical text (RFC 5952 for IPv6)

  friend bool operator==(const ip_address&, const ip_address&) = default;
};

// The IPv4 address inside a v4-mapped IPv6 one (::ffff:a.b.c.d reaches a.b.c.d; a dual-stack
// socket shows IPv4 peers that way); nullopt for any other address.
std::optional<ip_address> unwrap_v4_mapped(const ip_address& a);

}  // namespace broker::config
