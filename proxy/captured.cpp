// A captured connection, served as if it had sent "CONNECT <what it dialed>": a synthetic
// address stands for the name the broker's DNS gave it to, and the rest of the way (policy, TLS
// interception with SNI checked against that name, plain HTTP, tunnel rules, the address guard
// for literal IPs) is a CONNECT's, without the CONNECT line and its 200.
#include "proxy/captured.hpp"

#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "capture/synthetic_addresses.hpp"

namespace broker::proxy {

std::optional<tcp::endpoint> original_destination(tcp::socket& socket) {
  const int fd = socket.native_handle();
  sockaddr_in v4{};
  socklen_t length = sizeof v4;
  // An IPv4 client on the dual-stack listener: IPv4's connection tracking has its tuple.
  if (::getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &v4, &length) == 0 && v4.sin_family == AF_INET) {
    asio::ip::address_v4::bytes_type bytes;
    std::memcpy(bytes.data(), &v4.sin_addr, 4);
    return tcp::endpoint(asio::ip::address_v4(bytes), ntohs(v4.sin_port));
  }
  sockaddr_in6 v6{};
  length = sizeof v6;
  if (::getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &v6, &length) == 0 &&
      v6.sin6_family == AF_INET6) {
    asio::ip::address_v6::bytes_type bytes;
    std::memcpy(bytes.data(), &v6.sin6_addr, 16);
    return tcp::endpoint(asio::ip::address_v6(bytes), ntohs(v6.sin6_port));
  }
  return std::nullopt;
}

std::optional<config::destination> captured_target(const tcp::endpoint& dialed,
                                                   const capture::synthetic_addresses* names,
                                                   std::string& address) {
  // original_destination gives IPv4 targets as IPv4 (the tuple IPv4's tracking recorded).
  address = dialed.address().to_string();
  const auto ip = config::ip_address::parse(address);
  if (!ip) return std::nullopt;
  if (names && names->in_range(*ip)) {
    auto name = names->name_of(*ip);
    if (!name) return std::nullopt;
    return config::destination{std::move(*name), std::nullopt, dialed.port()};
  }
  return config::destination{ip->to_string(), ip, dialed.port()};
}

}  // namespace broker::proxy
