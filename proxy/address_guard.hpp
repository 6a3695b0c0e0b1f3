// The SSRF guard's address classification (docs/cli.md private_address_blocked).
#pragma once

#include <string_view>

#include "config/address.hpp"

namespace broker::proxy {

enum class address_class {
  global,        // routable public unicast: the only class dialed without a cidr rule
  unspecified,   // 0.0.0.0/8, ::
  loopback,      // 127.0.0.0/8, ::1
  private_use,   // RFC 1918: 10/8, 172.16/12, 192.168/16
  link_local,    // 169.254/16 (incl. 169.254.169.254 metadata), fe80::/10
  cgnat,         // 100.64.0.0/10
  unique_local,  // fc00::/7 (and deprecated site-local fec0::/10)
  multicast,     // 224.0.0.0/4, ff00::/8
  reserved,      // other special-purpose ranges: 192.0.0.0/24, TEST-NETs, 198.18/15, 240/4,
                 // broadcast, 2001:db8::/32, 100::/64 ...
};

// IPv6 forms that embed an IPv4 address - v4-mapped (::ffff:0:0/96), v4-compatible (::/96),
// NAT64 (64:ff9b::/96, 64:ff9b:1::/48), 6to4 (2002::/16) and Teredo (2001::/32, server and
// client address) - are classified by the embedded IPv4 address (the worst class when two are
// embedded), because that is where the packets end up. "Worst": any non-global class beats
// global; then loopback > unspecified > link-local > private > unique-local > cgnat > multicast >
// reserved. The local-use NAT64 prefix 64:ff9b:1::/48 has no fixed v4 placement, so every
// RFC 6052 placement that fits in it is checked. IPv6 outside 2000::/3 that matches nothing more
// specific is reserved.
address_class classify(const config::ip_address& address);

std::string_view to_string(address_class c);  // "loopback", "private", "link-local", ...

}  // namespace broker::proxy
