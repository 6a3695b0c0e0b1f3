// Transparent capture (docs/architecture.md): in a wrap child's network namespace every TCP
// connection to a non-loopback address is redirected to the broker's capture listener; the address
// and port the client dialed are what netfilter's connection tracking recorded before the redirect.
#pragma once

#include <optional>
#include <string>

#include "base/asio.hpp"
#include "config/policy_set.hpp"

namespace broker::capture {
class synthetic_addresses;
}  // namespace broker::capture

namespace broker::proxy {

// The destination `socket` (accepted on the capture listener) was dialed to, before the
// redirect (SO_ORIGINAL_DST); nullopt when the kernel has no record of one.
std::optional<tcp::endpoint> original_destination(tcp::socket& socket);

// The target of a connection that dialed `dialed`: the name a synthetic address was given to
// (`names`: the session's, null when it has none), or the address itself. nullopt when it is a
// synthetic address that was never handed out; `address` then holds it as text.
std::optional<config::destination> captured_target(const tcp::endpoint& dialed,
                                                   const capture::synthetic_addresses* names,
                                                   std::string& address);

}  // namespace broker::proxy
