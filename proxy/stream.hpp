// A byte stream that is a TCP socket or TLS over one, so the HTTP request loop runs unchanged on
// plain http://, on an intercepted CONNECT (TLS toward the client) and toward an upstream.
#pragma once

#include <boost/asio/ssl/context.hpp>

#include <span>
#include <string_view>
#include <tuple>
#include <variant>

#include "base/asio.hpp"
#include "proxy/tls_socket.hpp"

namespace broker::proxy {

class stream {
 public:
  explicit stream(tcp::socket socket) : s_(std::move(socket)) {}

  // Puts TLS over the socket (before the handshake).
  void start_tls(asio::ssl::context& ctx) {
    tcp::socket socket = std::move(std::get<tcp::socket>(s_));
    s_.template emplace<tls_socket>(std::move(socket), ctx.native_handle());
  }
  bool is_tls() const { return std::holds_alternative<tls_socket>(s_); }
  tls_socket& tls() { return std::get<tls_socket>(s_); }
  SSL* native_tls() { return tls().native_handle(); }

  tcp::socket& socket() {
    if (auto* t = std::get_if<tls_socket>(&s_)) return t->socket();
    return std::get<tcp::socket>(s_);
  }
  asio::any_io_executor get_executor() { return socket().get_executor(); }

  // Not coroutines themselves: they hand over the awaitable of the one underneath, one frame
  // fewer for every read and write.
  asio::awaitable<std::tuple<error_code, std::size_t>> read_some(std::span<char> into) {
    if (auto* t = std::get_if<tls_socket>(&s_)) return t->read_some(into);
    return std::get<tcp::socket>(s_).async_read_some(asio::buffer(into.data(), into.size()),
                                                     use_tuple);
  }

  asio::awaitable<std::tuple<error_code, std::size_t>> write(std::string_view data) {
    if (auto* t = std::get_if<tls_socket>(&s_)) return t->write(data);
    return asio::async_write(std::get<tcp::socket>(s_), asio::buffer(data.data(), data.size()),
                             use_tuple);
  }

  // Ends the stream: TLS close_notify (waiting for the peer's, so the caller bounds it with a
  // deadline), then a TCP half-close. Errors are ignored: the peer may be gone already.
  asio::awaitable<void> shutdown() {
    if (auto* t = std::get_if<tls_socket>(&s_)) co_await t->shutdown();
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  void close() {
    error_code ignored;
    socket().close(ignored);
  }

 private:
  std::variant<tcp::socket, tls_socket> s_;
};

// Writes all of `data`; a failure throws (the connection ends, caught once in its run()).
inline asio::awaitable<void> write_all(stream& s, std::string_view data) {
  auto [ec, n] = co_await s.write(data);
  if (ec) throw boost::system::system_error(ec);
}

}  // namespace broker::proxy
