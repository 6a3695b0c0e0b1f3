// A byte stream that is a TCP socket or TLS over one, so the HTTP request loop runs unchanged on
// plain http://, on an intercepted CONNECT (TLS toward the client) and toward an upstream.
#pragma once

#include <boost/asio/ssl/stream.hpp>

#include <span>
#include <string_view>
#include <tuple>
#include <variant>

#include "proxy/asio.hpp"

namespace broker::proxy {

using tls_stream = asio::ssl::stream<tcp::socket>;

class stream {
 public:
  explicit stream(tcp::socket socket) : s_(std::move(socket)) {}

  // Puts TLS over the socket (before the handshake).
  void start_tls(asio::ssl::context& ctx) {
    tcp::socket socket = std::move(std::get<tcp::socket>(s_));
    s_.template emplace<tls_stream>(std::move(socket), ctx);
  }
  bool is_tls() const { return std::holds_alternative<tls_stream>(s_); }
  tls_stream& tls() { return std::get<tls_stream>(s_); }
  SSL* native_tls() { return tls().native_handle(); }

  tcp::socket& socket() {
    if (auto* t = std::get_if<tls_stream>(&s_)) return t->next_layer();
    return std::get<tcp::socket>(s_);
  }
  asio::any_io_executor get_executor() { return socket().get_executor(); }

  asio::awaitable<std::tuple<error_code, std::size_t>> read_some(std::span<char> into) {
    const auto buffer = asio::buffer(into.data(), into.size());
    if (auto* t = std::get_if<tls_stream>(&s_))
      co_return co_await t->async_read_some(buffer, use_tuple);
    co_return co_await std::get<tcp::socket>(s_).async_read_some(buffer, use_tuple);
  }

  asio::awaitable<std::tuple<error_code, std::size_t>> write(std::string_view data) {
    const auto buffer = asio::buffer(data.data(), data.size());
    if (auto* t = std::get_if<tls_stream>(&s_))
      co_return co_await asio::async_write(*t, buffer, use_tuple);
    co_return co_await asio::async_write(std::get<tcp::socket>(s_), buffer, use_tuple);
  }

  // Ends the stream: TLS close_notify (waiting for the peer's, so the caller bounds it with a
  // deadline), then a TCP half-close. Errors are ignored: the peer may be gone already.
  asio::awaitable<void> shutdown() {
    if (auto* t = std::get_if<tls_stream>(&s_)) co_await t->async_shutdown(use_tuple);
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  void close() {
    error_code ignored;
    socket().close(ignored);
  }

 private:
  std::variant<tcp::socket, tls_stream> s_;
};

// Writes all of `data`; a failure throws (the connection ends, caught once in its run()).
inline asio::awaitable<void> write_all(stream& s, std::string_view data) {
  auto [ec, n] = co_await s.write(data);
  if (ec) throw boost::system::system_error(ec);
}

}  // namespace broker::proxy
