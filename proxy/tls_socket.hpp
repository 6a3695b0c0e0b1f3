// TLS over a TCP socket, driven by the proxy's coroutines: OpenSSL reads and writes the socket
// itself (a small BIO of ours), and a would-block waits for the socket's readiness. Compared with
// asio::ssl::stream it keeps no buffers of its own (asio holds 2 x 17 KiB plus a 2 x 17 KiB BIO
// pair for every stream, idle or not) and copies each byte once less; with
// SSL_MODE_RELEASE_BUFFERS an idle connection holds only its SSL object.
// One read and one write may be in flight at once (a WebSocket relays both ways); both run on the
// connection's one thread, so OpenSSL is never entered twice at the same time.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "base/asio.hpp"

namespace broker::proxy {

class tls_socket {
 public:
  // Takes the socket; `ctx` supplies the settings (certificates, verification, ALPN).
  tls_socket(tcp::socket socket, SSL_CTX* ctx);
  ~tls_socket();
  tls_socket(tls_socket&&) noexcept;
  tls_socket& operator=(tls_socket&&) = delete;
  tls_socket(const tls_socket&) = delete;
  tls_socket& operator=(const tls_socket&) = delete;

  tcp::socket& socket() { return socket_; }
  SSL* native_handle() { return ssl_.get(); }

  // The handshake as server or client. `early`: bytes already read off the socket (the start of
  // the ClientHello); OpenSSL reads them before the socket.
  asio::awaitable<error_code> handshake_server(std::string_view early);
  asio::awaitable<error_code> handshake_client();
  // Decrypted bytes into `into`: asio::error::eof after the peer's close_notify, and
  // asio::ssl::error::stream_truncated when the TCP stream ends without one (as asio's stream).
  asio::awaitable<std::tuple<error_code, std::size_t>> read_some(std::span<char> into);
  // All of `data`, or the error that stopped it.
  asio::awaitable<std::tuple<error_code, std::size_t>> write(std::string_view data);
  // Sends close_notify and waits for the peer's (bounded by the caller's deadline).
  asio::awaitable<void> shutdown();

  struct bio_state;  // what our BIO reads first and which socket it reads

 private:
  // Runs `op` (an SSL_* call) once: 0 when it completed (`ec` says how), else the
  // SSL_ERROR_WANT_READ or SSL_ERROR_WANT_WRITE it is waiting for.
  template <typename Op>
  int attempt(Op op, error_code& ec);
  // Waits for what `op` wants, then runs it again, until it completes. Returns the error, if any.
  template <typename Op>
  asio::awaitable<error_code> drive(Op op, int wants);
  // attempt, then drive if it must wait.
  template <typename Op>
  asio::awaitable<error_code> complete(Op op);

  tcp::socket socket_;
  std::unique_ptr<bio_state> bio_;
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl_;
};

}  // namespace broker::proxy
