// One connection to an upstream, as the dialer opens it and the pool keeps it: its byte stream
// (TLS or plain), what it was opened for, and the bytes read from it and not yet parsed.
#pragma once

#include <chrono>
#include <string>

#include "proxy/read_buffer.hpp"
#include "proxy/stream.hpp"

namespace broker::proxy {

struct upstream_connection {
  upstream_connection(stream s, std::string k, bool lb);
  stream io;
  std::string key;  // "https://host:port": what it was opened for
  read_buffer in;
  bool loopback = false;  // dialed a loopback address
  std::chrono::steady_clock::time_point idle_since{};
};

}  // namespace broker::proxy
