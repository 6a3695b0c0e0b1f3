// Transparent capture (DESIGN §11): in a wrap child's network namespace every TCP connection to
// a non-loopback address is redirected to the broker's capture listener; the address and port
// the client dialed are what netfilter's connection tracking recorded before the redirect.
#pragma once

#include <optional>

#include "base/asio.hpp"

namespace broker::proxy {

// The destination `socket` (accepted on the capture listener) was dialed to, before the
// redirect (SO_ORIGINAL_DST); nullopt when the kernel has no record of one.
std::optional<tcp::endpoint> original_destination(tcp::socket& socket);

}  // namespace broker::proxy
