// The layered policy of a session: a destination passes only if every layer with egress rules
// allows it (DESIGN §4), so adding a layer can only narrow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/address.hpp"
#include "config/policy.hpp"

namespace broker::config {

struct destination {
  std::string host;                     // normalized host name, or the IP literal's canonical text
  std::optional<ip_address> ip;         // set when the request named an IP literal
  std::uint16_t port = 0;
};

struct verdict {
  bool allowed = false;
  // Which rule decided: "allow[0]" / "deny[1]", prefixed with "<layer source>#" when the set has
  // more than one layer; "default_deny" when no allow rule matched.
  std::string rule;
  // True only if every layer's deciding allow rule says "tunnel": true (tunnelling skips
  // inspection, so it is a loosening every layer must agree to).
  bool tunnel = false;
};

class policy_set {
 public:
  explicit policy_set(std::vector<policy> layers);

  // Connection-level decision (CONNECT, or before a plain request's method/path are known):
  // host/port rules only. An allow rule with methods/paths still admits the connection; a deny
  // rule with methods/paths does not refuse it. Host names match host rules, IP literals match
  // cidr rules only.
  verdict check_connect(const destination& dest) const;

  // Full decision for one HTTP request; `path` is the raw request target's path (normalized here).
  verdict check_request(const destination& dest, std::string_view method,
                        std::string_view path) const;

  // For an address a host name resolved to: refused if any layer has a matching cidr deny rule.
  // `private_ok` reports whether every layer with egress rules has a cidr allow rule covering
  // (address, port) - the only way to reach private ranges.
  struct address_verdict {
    bool denied = false;
    std::string rule;                   // the deny rule when denied
    bool private_ok = false;
  };
  address_verdict check_address(const ip_address& address, std::uint16_t port) const;

  const std::vector<policy>& layers() const { return layers_; }

 private:
  std::vector<policy> layers_;
};

}  // namespace broker::config
