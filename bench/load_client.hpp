// The client side the load generators share (bench/loadgen.cpp, bench/streams.cpp): a connection
// to an HTTP proxy, a CONNECT tunnel through it and TLS in the tunnel, each step under a deadline;
// error counts; and the small helpers of their reports. Bench-only: Asio in a header is fine here.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace bench {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using error_code = boost::system::error_code;

// Where a connection goes: the proxy, and the tunnel's target through it.
struct route {
  tcp::endpoint proxy_endpoint;
  std::string target = "api.example.test:8443";  // CONNECT target HOST:PORT
  std::string host;                              // from target: SNI and the name checked
  std::string proxy_authorization;               // the Proxy-Authorization value; empty: none
  bool tls = false;                              // TLS through the tunnel
  bool plain = false;                            // no CONNECT: requests go to the proxy as they are
  double step_timeout = 30;  // each step of a connection (connect, CONNECT, TLS, a request)
};

// The proxy refused the CONNECT (503 at its connection limit, 403 by policy...).
struct connect_refused : std::runtime_error {
  explicit connect_refused(unsigned status)
      : std::runtime_error("CONNECT answered " + std::to_string(status)) {}
};

struct counters {
  long ok = 0, errors = 0, refused = 0, dropped = 0;
  std::string first_error;  // one sample, for the report: "STEP: what"
  void fail(const std::exception& e, const char* step, bool timed_out);
};

// One client connection. The TLS stream exists even when unused (the loadgen's own memory is not
// what is measured).
struct connection {
  connection(asio::io_context& io, ssl::context& tls) : stream(io, tls), watchdog(io) {}
  ssl::stream<tcp::socket> stream;
  boost::beast::flat_buffer buffer;
  asio::steady_timer watchdog;
  unsigned generation = 0;
  bool secured = false;
  bool timed_out = false;
  const char* step = "connect";  // for the error report

  tcp::socket& socket() { return stream.next_layer(); }
  void close() {
    boost::system::error_code ignored;
    socket().close(ignored);
  }
};

// Every step has a deadline: past it the watchdog closes the socket, which fails the step.
void arm(const std::shared_ptr<connection>& c, double seconds);
void disarm(const std::shared_ptr<connection>& c);

// Connects to the proxy and, unless r.plain, opens a CONNECT tunnel to the target through it
// (then TLS with r.tls). A plain connection's requests go to the proxy as they are.
asio::awaitable<void> open_connection(const std::shared_ptr<connection>& c, const route& r);

double ms(clock_type::duration d);
// Nearest-rank percentile of sorted samples, in ms.
double percentile(const std::vector<clock_type::duration>& sorted, double p);
// The process's own CPU seconds (user + system): near the wall time, it is the bottleneck.
double cpu_seconds();
// `,"errors":N,"refused":N,"first_error":"..."` on stdout, for a JSON line.
void print_errors(const counters& k);

tcp::endpoint parse_endpoint(const std::string& text);
// `Basic base64(ID:TOKEN)` (RFC 7617), the value of Proxy-Authorization.
std::string basic_credentials(const std::string& id_token);
// Raises the soft fd limit to the hard one; warns when that is below `wanted`.
void raise_fd_limit(long wanted);

}  // namespace bench
