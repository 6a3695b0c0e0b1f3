#include "load_client.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include <openssl/evp.h>
#include <boost/beast/http.hpp>

namespace bench {

void counters::fail(const std::exception& e, const char* step, bool timed_out) {
  const bool was_refused = dynamic_cast<const connect_refused*>(&e) != nullptr;
  if (was_refused) ++refused;
  ++errors;
  if (!first_error.empty()) return;
  std::string what = e.what();
  if (was_refused) {
    first_error = what;
    return;
  }
  if (const auto* system = dynamic_cast<const boost::system::system_error*>(&e))
    what = system->code().message();  // without Boost's source location
  first_error = std::string(step) + ": " + (timed_out ? "timed out" : what);
}

// Every step has a deadline: past it the watchdog closes the socket, which fails the step. The
// generation guards against an expiry already queued when the step finished in time.
void arm(const std::shared_ptr<connection>& c, double seconds) {
  const unsigned generation = ++c->generation;
  c->watchdog.expires_after(
      std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds)));
  c->watchdog.async_wait([c, generation](error_code ec) {
    if (!ec && c->generation == generation) {
      c->timed_out = true;
      c->close();
    }
  });
}
void disarm(const std::shared_ptr<connection>& c) {
  ++c->generation;
  c->watchdog.cancel();
}

// Connects to the proxy and, unless --plain, opens a CONNECT tunnel to the target through it
// (then TLS with --tls). A plain connection's requests go to the proxy as they are.
asio::awaitable<void> open_connection(const std::shared_ptr<connection>& c, const route& o) {
  arm(c, o.step_timeout);
  co_await c->socket().async_connect(o.proxy_endpoint, asio::use_awaitable);
  c->socket().set_option(tcp::no_delay(true));
  if (o.plain) {
    disarm(c);
    co_return;
  }
  std::string request = "CONNECT " + o.target + " HTTP/1.1\r\nHost: " + o.target + "\r\n";
  if (!o.proxy_authorization.empty())
    request += "Proxy-Authorization: " + o.proxy_authorization + "\r\n";
  request += "\r\n";
  c->step = "CONNECT";
  co_await asio::async_write(c->socket(), asio::buffer(request), asio::use_awaitable);
  http::response_parser<http::empty_body> head;
  head.skip(true);  // a 2xx answer to CONNECT has no body (RFC 9110 §9.3.6)
  co_await http::async_read_header(c->socket(), c->buffer, head, asio::use_awaitable);
  if (head.get().result_int() != 200) throw connect_refused(head.get().result_int());
  if (o.tls) {
    c->step = "TLS";
    if (!SSL_set_tlsext_host_name(c->stream.native_handle(), o.host.c_str()))
      throw std::runtime_error("SNI");
    c->stream.set_verify_callback(ssl::host_name_verification(o.host));
    co_await c->stream.async_handshake(ssl::stream_base::client, asio::use_awaitable);
    c->secured = true;
  }
  disarm(c);
}

double ms(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Nearest-rank percentile of sorted samples, in ms.
double percentile(const std::vector<clock_type::duration>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(sorted.size()));
  return ms(sorted[std::min(rank, sorted.size() - 1)]);
}

// The loadgen's own CPU seconds (user + system): near the wall time, the loadgen is the bottleneck.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

void print_errors(const counters& k) {
  std::printf(",\"errors\":%ld,\"refused\":%ld,\"first_error\":\"", k.errors, k.refused);
  for (char ch : k.first_error)
    if (ch != '"' && ch != '\\' && static_cast<unsigned char>(ch) >= 0x20) std::putchar(ch);
  std::printf("\"");
}

tcp::endpoint parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("--proxy wants HOST:PORT");
  return {asio::ip::make_address(text.substr(0, colon)),
          static_cast<unsigned short>(std::stoi(text.substr(colon + 1)))};
}

// `Basic base64(ID:TOKEN)` (RFC 7617), the value of Proxy-Authorization.
std::string basic_credentials(const std::string& id_token) {
  if (id_token.find(':') == std::string::npos)
    throw std::invalid_argument("--proxy-auth wants ID:TOKEN");
  std::string encoded(4 * ((id_token.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                reinterpret_cast<const unsigned char*>(id_token.data()),
                                static_cast<int>(id_token.size()));
  encoded.resize(static_cast<std::size_t>(n));
  return "Basic " + encoded;
}

// Each connection is one fd (two while a TLS stream is set up); the default soft limit of 1024
// would cap an idle test long before the proxy's own limit.
void raise_fd_limit(long wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  if (static_cast<long>(limit.rlim_cur) < wanted)
    std::fprintf(stderr, "loadgen: fd limit %ld is below the %ld connections asked for\n",
                 static_cast<long>(limit.rlim_cur), wanted);
}

}  // namespace bench
