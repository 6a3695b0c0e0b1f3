// Transparent capture, the kernel side: inside the child's network namespace every address is
// local and every TCP connection the command makes, whatever it was aimed at, lands on the
// broker's listener there. Programs that ignore the proxy variables are caught this way.
//
// Everything is done over netlink (rtnetlink for addresses and routes, nfnetlink for nftables
// through libnftnl and libmnl), with no helper binary, so it works the same as real root in a
// fresh network namespace and unprivileged in a user namespace that owns one.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace broker::sandbox {

// The synthetic ranges the broker hands out as answers for names inside the namespace
// (198.18.0.0/15 is RFC 2544's benchmarking range, never routed on the internet; the IPv6 one is
// a ULA /64 whose bytes spell "brk").
inline constexpr in_addr_t synthetic_ipv4_net = 0xc6120000;  // 198.18.0.0, host order
inline constexpr unsigned synthetic_ipv4_prefix = 15;
inline constexpr in6_addr synthetic_ipv6_net = {
    {{0xfd, 0x62, 0x72, 0x6b, 0x72, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}};  // fd62:726b:7200::
inline constexpr unsigned synthetic_ipv6_prefix = 64;

// The namespace's own addresses, on lo: getaddrinfo's AI_ADDRCONFIG counts an address family as
// configured only when a non-loopback address of it exists, and without these it would make
// programs skip A or AAAA lookups altogether.
inline constexpr in_addr_t namespace_ipv4 = 0xc6120001;  // 198.18.0.1/32, host order
inline constexpr in6_addr namespace_ipv6 = {
    {{0xfd, 0x62, 0x72, 0x6b, 0x72, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}};  // fd62:726b:7200::1/128

// The nftables table set_up_capture makes (family inet) and its one chain.
inline constexpr const char* capture_table = "broker_capture";
inline constexpr const char* capture_chain = "output";

// Call inside the fresh network namespace, with CAP_NET_ADMIN there, after loopback is up.
// Sets up:
//  1. the two addresses above on lo (the IPv6 one without duplicate address detection, so it
//     is usable at once);
//  2. routes of type local for 0.0.0.0/0 and ::/0 on lo: every address is local, so a connect()
//     to any address no longer fails with ENETUNREACH, UDP to any address:53 reaches a socket
//     bound to [::]:53 in the namespace, and UDP to other ports gets ECONNREFUSED;
//  3. the nftables table `inet broker_capture` with a nat chain on the output hook at priority
//     -100 (dstnat), policy accept, whose rules are, in order:
//       ip daddr 127.0.0.0/8 return
//       ip6 daddr ::1 return
//       meta l4proto tcp th dport 53 return
//       meta l4proto tcp redirect to :redirect_port
//     sent as one nfnetlink batch, so it is made whole or not at all. A second call replaces
//     the table rather than adding a second set of rules.
// A redirected connection arrives at 127.0.0.1 or ::1 on redirect_port; its original
// destination is the accepted socket's SO_ORIGINAL_DST (IPv4, also on a dual-stack listener)
// or IP6T_SO_ORIGINAL_DST (IPv6). Its source address is chosen before the redirect, so it is
// not loopback's: for an IPv4 destination the kernel takes the destination itself (a client of
// 8.8.8.8:80 connects from 8.8.8.8), for IPv6 the namespace's fd62:726b:7200::1.
// Returns "" on success, otherwise one sentence saying which step failed and the errno text;
// never throws, never exits.
// `netfilter_socket`: when given, receives the nfnetlink socket the rules went over (close-on-
// exec; -1 when none), left open for the caller to close once other work is under way. Closing
// it waits for the kernel to finish freeing the committed transaction (an RCU grace period,
// ~15 ms on this VM: nft_rcv_nl_event flushes nf_tables' destroy work), which would otherwise
// sit on every `wrap` start.
std::string set_up_capture(std::uint16_t redirect_port, int* netfilter_socket = nullptr);

}  // namespace broker::sandbox
