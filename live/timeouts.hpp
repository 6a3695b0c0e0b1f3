// The proxy's deadlines. Every wait has one; `serve --timeout NAME=DURATION` can
// change each.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace broker::base {
template <class Waiting>
class deadline;
}  // namespace broker::base

namespace broker::live {

struct timeouts {
  using duration = std::chrono::steady_clock::duration;
  duration head = std::chrono::seconds(30);       // a request head, from its first byte
  duration idle = std::chrono::seconds(120);      // a kept-alive client between requests
  duration dns = std::chrono::seconds(10);        // resolving an upstream name
  duration connect = std::chrono::seconds(10);    // the upstream TCP handshake
  duration tls = std::chrono::seconds(10);        // a TLS handshake, with a client or upstream
  duration upstream = std::chrono::seconds(120);  // silence from an upstream mid-response
  duration body = std::chrono::seconds(60);       // silence from a client mid-body
  duration tunnel = std::chrono::seconds(600);    // a tunnel with no byte either way
  duration drain = std::chrono::seconds(10);      // open connections after SIGTERM
  duration ask = std::chrono::seconds(120);       // a held request waiting for a person
};

// Applies "NAME=DURATION" ("upstream=5s", "tunnel=1h"). Throws std::invalid_argument naming the
// option and the accepted names when the spec is malformed or the duration is not positive.
void set_timeout(timeouts& t, std::string_view spec);

// What a connection waits for while its deadline runs: which of the timeouts applies, and what
// the log says when it passes.
enum class waiting_for { client_head, client_idle, request_body, upstream, tunnel, approval };
using connection_deadline = base::deadline<waiting_for>;

}  // namespace broker::live
