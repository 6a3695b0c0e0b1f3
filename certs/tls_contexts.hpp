// The TLS configuration of a session: the server side presented to intercepted clients (a leaf
// per host from the session CA, ALPN http/1.1) and the client side used toward upstreams (system
// roots plus --upstream-ca, peer and host name verified, SNI).
#pragma once

#include <boost/asio/ssl/context.hpp>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "certs/leaf_cache.hpp"

namespace broker::certs {

class tls_contexts {
 public:
  // Throws std::runtime_error naming an --upstream-ca file that cannot be loaded.
  tls_contexts(std::shared_ptr<certs::leaf_cache> leaves,
               const std::vector<std::filesystem::path>& upstream_cas);

  boost::asio::ssl::context& server() { return server_; }
  // Lets an intercepted connection negotiate h2 (ALPN, before its handshake); whether it did.
  static void offer_h2(SSL* ssl);
  static bool chose_h2(SSL* ssl);
  const certs::leaf_cache& leaves() const { return *leaves_; }
  // Thread-safe; the system roots are loaded on first use.
  boost::asio::ssl::context& client();

  // Before the handshake with an intercepted client: the leaf for `host`.
  void use_leaf(SSL* ssl, const std::string& host);
  // Before the handshake with an upstream: SNI (names only) and what the certificate must name.
  static bool expect_peer(SSL* ssl, const std::string& host, bool is_ip);

 private:
  std::shared_ptr<certs::leaf_cache> leaves_;
  boost::asio::ssl::context server_;
  boost::asio::ssl::context client_;
  std::once_flag system_roots_loaded_;
};

// Why the last handshake of `ssl` failed, for the 502 message: the verification error when
// there was one, else `fallback`.
std::string tls_failure(SSL* ssl, std::string_view fallback);

}  // namespace broker::certs
