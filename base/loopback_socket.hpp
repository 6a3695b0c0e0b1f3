// A listening TCP socket on 127.0.0.1 as a plain descriptor, for what hands it on (wrap's proxy
// in env mode, the demo's upstream) rather than accept on it with Asio here.
#pragma once

#include <cstdint>

namespace broker::base {

// Listens on 127.0.0.1, any free port (written to `port`); returns the descriptor. Throws
// std::runtime_error.
int loopback_listener(std::uint16_t& port);

}  // namespace broker::base
