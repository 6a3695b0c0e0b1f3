// The names a wrap child resolved through the broker's DNS (docs/architecture.md), each given one
// address from each of the session's synthetic ranges, so that a captured connection to that
// address can be taken back to the name it was made for. Thread-safe: the DNS responder assigns,
// captured connections look up, on any of the server's threads.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/address.hpp"

namespace broker::capture {

class synthetic_addresses {
 public:
  // Names past this many get no address (the DNS answer is SERVFAIL): a child resolving endless
  // names under an allowed wildcard must not grow the broker without bound.
  static constexpr std::size_t max_names = 65536;

  // `v4_base` and `v6_base`: the first address of a /15 and of a /64 (its last four bytes zero);
  // the first two of each are never handed out (the network's and the namespace's own address).
  synthetic_addresses(config::ip_address v4_base, config::ip_address v6_base);

  struct pair {
    config::ip_address v4;
    config::ip_address v6;
  };
  // The addresses for `name` (normalized), the same for the whole session once given; nullopt
  // when max_names names have addresses already.
  std::optional<pair> assign(const std::string& name);
  // The name an address was given to (IPv4, IPv6, or IPv4 as v4-mapped IPv6); nullopt when it
  // is not one handed out.
  std::optional<std::string> name_of(const config::ip_address& address) const;
  // Is this address in one of the ranges (handed out or not)?
  bool in_range(const config::ip_address& address) const;

 private:
  std::optional<std::size_t> index_of(const config::ip_address& address) const;

  config::ip_address v4_base_, v6_base_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<std::string> names_;  // by index
};

}  // namespace broker::capture
