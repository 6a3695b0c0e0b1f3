// The DNS server a wrap child's resolver points at (docs/architecture.md): UDP and TCP on port 53
// inside the child's network namespace, answered by the broker itself. No query is ever forwarded:
// a name the policy could allow gets an address from the session's synthetic ranges (which maps
// back to the name when the child connects to it); any other name gets NXDOMAIN and a `dns`
// audit record, so that data encoded in a looked-up name is seen, and goes nowhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "capture/synthetic_addresses.hpp"
#include "config/policy_set.hpp"

namespace boost::asio {
class io_context;
}

namespace broker::live {
class live_session;
}  // namespace broker::live

namespace broker::capture {

// A name the policy refused, for its audit record.
struct refused_name {
  std::string name;  // presentation form, odd bytes as \DDD
  std::string type;  // "A", "TXT", ...
  std::string rule;
};

struct dns_outcome {
  std::string response;  // empty: no answer at all (not even a DNS header could be read)
  std::optional<refused_name> refused;
};

// The answer to one DNS message, as large as its transport allows (UDP: 512 bytes or what EDNS
// advertises, then truncated with TC set; TCP: 65535):
//  - A / AAAA / ANY for a name check_name allows (or, when the session `asks`, one a person may
//    approve): its synthetic address(es), TTL 60 s; other
//    types for it: no records (NOERROR); SERVFAIL once the ranges are used up;
//  - PTR for a synthetic address: the name it was given to;
//  - "localhost" and names under it: loopback (RFC 6761 §6.3);
//  - any other name: NXDOMAIN, reported in `refused`; malformed: FORMERR; opcode other than
//    QUERY: NOTIMP; class other than IN: REFUSED.
dns_outcome answer_dns(std::string_view query, bool over_tcp, const config::policy_set& policy,
                       synthetic_addresses& names, bool asks = false);

// Serves answer_dns on `udp_fd` (a bound datagram socket) and `tcp_fd` (a listening socket,
// length-prefixed messages, RFC 7766), both taking ownership, on `io` until it stops. Refused
// names are audited through `ctx`, whose synthetic_names() hands out the addresses.
void start_dns_responder(boost::asio::io_context& io, int udp_fd, int tcp_fd,
                         std::shared_ptr<live::live_session> ctx);

}  // namespace broker::capture
