#include "proxy/address_guard.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace broker::proxy {
namespace {

using bytes16 = std::array<std::uint8_t, 16>;

// How bad a class is as an SSRF destination, for combining the addresses one IPv6 address
// embeds. Any non-global class must beat global; among the rest, the ones closest to this host
// (and to cloud metadata) rank highest so the reported reason is the most telling one.
int severity(address_class c) {
  switch (c) {
    case address_class::global:
      return 0;
    case address_class::reserved:
      return 1;
    case address_class::multicast:
      return 2;
    case address_class::cgnat:
      return 3;
    case address_class::unique_local:
      return 4;
    case address_class::private_use:
      return 5;
    case address_class::link_local:
      return 6;
    case address_class::unspecified:
      return 7;
    case address_class::loopback:
      return 8;
  }
  return 9;
}

address_class worst(address_class a, address_class b) {
  return severity(a) >= severity(b) ? a : b;
}

constexpr bool in_v4(std::uint32_t a, std::uint32_t network, int prefix) {
  std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
  return (a & mask) == network;
}

constexpr std::uint32_t v4(int a, int b, int c, int d) {
  return (std::uint32_t(a) << 24) | (std::uint32_t(b) << 16) | (std::uint32_t(c) << 8) |
         std::uint32_t(d);
}

// IANA IPv4 Special-Purpose Address Registry (RFC 6890 and successors).
address_class classify_v4(std::uint32_t a) {
  if (in_v4(a, v4(0, 0, 0, 0), 8)) return address_class::unspecified;
  if (in_v4(a, v4(10, 0, 0, 0), 8)) return address_class::private_use;
  if (in_v4(a, v4(100, 64, 0, 0), 10)) return address_class::cgnat;
  if (in_v4(a, v4(127, 0, 0, 0), 8)) return address_class::loopback;
  if (in_v4(a, v4(169, 254, 0, 0), 16)) return address_class::link_local;
  if (in_v4(a, v4(172, 16, 0, 0), 12)) return address_class::private_use;
  if (in_v4(a, v4(192, 0, 0, 0), 24)) return address_class::reserved;    // IETF protocol
  if (in_v4(a, v4(192, 0, 2, 0), 24)) return address_class::reserved;    // TEST-NET-1
  if (in_v4(a, v4(192, 88, 99, 0), 24)) return address_class::reserved;  // 6to4 relay anycast
  if (in_v4(a, v4(192, 168, 0, 0), 16)) return address_class::private_use;
  if (in_v4(a, v4(198, 18, 0, 0), 15)) return address_class::reserved;    // benchmarking
  if (in_v4(a, v4(198, 51, 100, 0), 24)) return address_class::reserved;  // TEST-NET-2
  if (in_v4(a, v4(203, 0, 113, 0), 24)) return address_class::reserved;   // TEST-NET-3
  if (in_v4(a, v4(224, 0, 0, 0), 4)) return address_class::multicast;
  if (in_v4(a, v4(240, 0, 0, 0), 4)) return address_class::reserved;  // incl. 255.255.255.255
  return address_class::global;
}

std::uint32_t v4_at(const bytes16& b, std::initializer_list<int> positions) {
  std::uint32_t out = 0;
  for (int i : positions) out = (out << 8) | b[static_cast<std::size_t>(i)];
  return out;
}

bool prefix_is(const bytes16& b, std::initializer_list<std::uint8_t> prefix) {
  return std::equal(prefix.begin(), prefix.end(), b.begin());
}

bool all_zero(const bytes16& b, std::size_t from, std::size_t to) {
  return std::all_of(b.begin() + from, b.begin() + to, [](std::uint8_t x) { return x == 0; });
}

// IANA IPv6 Special-Purpose Address Registry; embedded IPv4 forms are unwrapped.
address_class classify_v6(const bytes16& b) {
  if (all_zero(b, 0, 10)) {
    if (b[10] == 0xff && b[11] == 0xff) return classify_v4(v4_at(b, {12, 13, 14, 15}));  // mapped
    if (b[10] == 0 && b[11] == 0) {
      if (all_zero(b, 12, 15)) {
        if (b[15] == 0) return address_class::unspecified;
        if (b[15] == 1) return address_class::loopback;
      }
      // Deprecated v4-compatible (RFC 4291 2.5.5.1): stacks that still honour it send to the v4.
      return classify_v4(v4_at(b, {12, 13, 14, 15}));
    }
  }
  // NAT64 well-known prefix, RFC 6052: the v4 address is the last 32 bits.
  if (prefix_is(b, {0x00, 0x64, 0xff, 0x9b}) && all_zero(b, 4, 12)) {
    return classify_v4(v4_at(b, {12, 13, 14, 15}));
  }
  // NAT64 local-use prefix, RFC 8215: the operator picks a /48../96 inside it and with it the
  // RFC 6052 placement of the v4 address, which we cannot know; every placement is checked and
  // the worst wins (a cidr rule can still allow such a network).
  if (prefix_is(b, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01})) {
    address_class c = classify_v4(v4_at(b, {12, 13, 14, 15}));  // /96
    c = worst(c, classify_v4(v4_at(b, {9, 10, 11, 12})));       // /64
    c = worst(c, classify_v4(v4_at(b, {7, 9, 10, 11})));        // /56 (byte 8 is the u octet)
    return worst(c, classify_v4(v4_at(b, {6, 7, 9, 10})));      // /48
  }
  if (prefix_is(b, {0x01, 0x00, 0, 0, 0, 0, 0, 0})) return address_class::reserved;  // discard
  if (prefix_is(b, {0x20, 0x01, 0x00, 0x00})) {
    // Teredo, RFC 4380 4: server v4 in bits 32..63, client v4 inverted in bits 96..127. Either
    // can be made to point inside; packets may be relayed to both.
    address_class server = classify_v4(v4_at(b, {4, 5, 6, 7}));
    address_class client = classify_v4(~v4_at(b, {12, 13, 14, 15}));
    return worst(server, client);
  }
  if (prefix_is(b, {0x20, 0x01, 0x00, 0x02, 0x00, 0x00})) return address_class::reserved;  // bench
  if (prefix_is(b, {0x20, 0x01, 0x00}) && (b[3] >> 4 == 1 || b[3] >> 4 == 2)) {
    return address_class::reserved;  // ORCHID 2001:10::/28, ORCHIDv2 2001:20::/28
  }
  if (prefix_is(b, {0x20, 0x01, 0x0d, 0xb8})) return address_class::reserved;  // documentation
  if (b[0] == 0x3f && b[1] == 0xff && (b[2] & 0xf0) == 0x00) {
    return address_class::reserved;  // documentation, RFC 9637 3fff::/20
  }
  if (b[0] == 0x20 && b[1] == 0x02) return classify_v4(v4_at(b, {2, 3, 4, 5}));  // 6to4
  if ((b[0] & 0xfe) == 0xfc) return address_class::unique_local;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return address_class::unique_local;  // site-local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return address_class::link_local;
  if (b[0] == 0xff) return address_class::multicast;
  // Only 2000::/3 is allocated as global unicast; everything else left here is unassigned or
  // reserved by the IETF and has no business being a destination.
  if ((b[0] & 0xe0) != 0x20) return address_class::reserved;
  return address_class::global;
}

}  // namespace

address_class classify(const config::ip_address& address) {
  if (address.v4) return classify_v4(v4_at(address.bytes, {0, 1, 2, 3}));
  return classify_v6(address.bytes);
}

std::string_view to_string(address_class c) {
  switch (c) {
    case address_class::global:
      return "global";
    case address_class::unspecified:
      return "unspecified";
    case address_class::loopback:
      return "loopback";
    case address_class::private_use:
      return "private";
    case address_class::link_local:
      return "link-local";
    case address_class::cgnat:
      return "cgnat";
    case address_class::unique_local:
      return "unique-local";
    case address_class::multicast:
      return "multicast";
    case address_class::reserved:
      return "reserved";
  }
  return "unknown";
}

}  // namespace broker::proxy
