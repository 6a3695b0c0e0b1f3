// bench/streams: long streamed model answers by the thousand, for the gateway scale benchmark
// (bench/gateway_streams.py). Its two roles, each one thread of Asio coroutines, are the fake
// model host (streams_serve.cpp) and the agents' streams through the gateway (streams_run.cpp);
// streams.cpp has the command line and what both use.
#pragma once

#include <cstdint>
#include <string>

#include <nghttp2/nghttp2.h>

#include "load_client.hpp"

namespace bench {

struct serve_options {
  std::string listen = "127.0.0.1:0";
  std::string cert, key;
  int events = 60;
  double interval = 1.0;
  unsigned max_streams = 100;
};
// The fake api.openai.com until SIGTERM (streams.cpp's usage says what it answers).
int serve(const serve_options& o);

struct run_options : route {
  std::string proxy, ca, sessions_file;
  int per_session = 10;
  double duration = 300;
  int concurrency = 64;
  bool h2 = false;  // a session's streams on one HTTP/2 connection (ALPN h2 in the tunnel)
};

// The streams through the proxy for the run's duration (streams.cpp's usage says what they do).
int run(run_options& o);

// CLOCK_MONOTONIC in ns: the moment an event is written, and read, on one machine.
std::int64_t monotonic_ns();
clock_type::duration seconds(double s);
// Sends what an HTTP/2 session has to say until `ended`, the session is done, or the socket
// fails; waits on `wake` (cancelled by whoever gives the session more to say) when it has nothing.
asio::awaitable<void> send_h2_output(nghttp2_session* session, ssl::stream<tcp::socket>& s,
                                     asio::steady_timer& wake, const bool& ended);

}  // namespace bench
