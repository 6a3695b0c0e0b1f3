// CIDR blocks ("10.20.0.0/16", "fd00::/8", a bare address = host route).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/address.hpp"

namespace broker::config {

class cidr {
 public:
  // nullopt on malformed text, prefix out of range, or host bits set below the prefix.
  static std::optional<cidr> parse(std::string_view text);
  cidr(ip_address network, int prefix_len);

  // An IPv4 block does not contain IPv6 addresses (v4-mapped ones included) and vice versa.
  bool contains(const ip_address& address) const;
  const ip_address& network() const { return network_; }
  int prefix_len() const { return prefix_len_; }
  std::string to_string() const;

 private:
  ip_address network_;
  int prefix_len_;
};

}  // namespace broker::config
