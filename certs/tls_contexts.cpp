#include "certs/tls_contexts.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <stdexcept>

namespace broker::certs {

namespace ssl = boost::asio::ssl;

namespace {

constexpr unsigned char alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
constexpr unsigned char alpn_h2_http11[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// The SSL ex_data slot that says "this connection may speak HTTP/2" (tls_contexts::offer_h2).
int h2_slot() {
  static const int slot = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return slot;
}

constexpr const char* tls13_suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
// TLS 1.2: forward-secret AEAD suites only.
constexpr const char* tls12_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// h2 where the connection may speak it and the client offers it, else HTTP/1.1; a client that
// offers neither gets no ALPN and falls back to HTTP/1.1 (RFC 7301 §3.2 allows the server to
// ignore it).
int select_protocol(SSL* ssl, const unsigned char** out, unsigned char* out_len,
                    const unsigned char* in, unsigned int in_len, void*) {
  const bool h2 = SSL_get_ex_data(ssl, h2_slot()) != nullptr;
  const unsigned char* ours = h2 ? alpn_h2_http11 : alpn_http11;
  const unsigned int size = h2 ? sizeof alpn_h2_http11 : sizeof alpn_http11;
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, ours, size, in, in_len) == OPENSSL_NPN_NEGOTIATED &&
      selected) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

tls_contexts::tls_contexts(std::shared_ptr<certs::leaf_cache> leaves,
                           const std::vector<std::filesystem::path>& upstream_cas)
    : leaves_(std::move(leaves)),
      server_(ssl::context::tls_server),
      client_(ssl::context::tls_client) {
  SSL_CTX* s = server_.native_handle();
  SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
  // AES-128-GCM first, on both sides of the broker: as strong as anything a client would pick
  // here, and every byte of an intercepted exchange is decrypted and encrypted twice, so the
  // cheaper cipher is most of the cost of a bulk transfer.
  SSL_CTX_set_ciphersuites(s, tls13_suites);
  SSL_CTX_set_cipher_list(s, tls12_ciphers);
  SSL_CTX_set_options(s, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_alpn_select_cb(s, select_protocol, nullptr);
  // OpenSSL's record buffers (~34 KiB a connection) are freed whenever a connection has nothing
  // in flight, so an idle kept-alive connection does not hold them.
  SSL_CTX_set_mode(s, SSL_MODE_RELEASE_BUFFERS);
  // One recv takes all that has arrived (up to a record buffer) rather than each record's 5-byte
  // header and then its body: half the system calls on a busy connection. Bytes read ahead wait in
  // OpenSSL, and tls_socket always asks OpenSSL before it waits for the socket.
  SSL_CTX_set_read_ahead(s, 1);
  // Session tickets (on by default) let a reconnecting client skip the full handshake.
  SSL_CTX_set_session_id_context(s, reinterpret_cast<const unsigned char*>("broker"), 6);

  SSL_CTX* c = client_.native_handle();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_ciphersuites(c, tls13_suites);
  SSL_CTX_set_cipher_list(c, tls12_ciphers);
  SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);  // idle pooled upstreams too
  SSL_CTX_set_read_ahead(c, 1);
  for (const auto& file : upstream_cas) {
    if (SSL_CTX_load_verify_locations(c, file.c_str(), nullptr) != 1) {
      ERR_clear_error();
      throw std::runtime_error("--upstream-ca " + file.string() +
                               ": cannot load certificates from it");
    }
  }
  client_.set_verify_mode(ssl::verify_peer);
  SSL_CTX_set_alpn_protos(c, alpn_http11, sizeof alpn_http11);
}

boost::asio::ssl::context& tls_contexts::client() {
  // The system roots are ~150 certificates to parse (tens of milliseconds): a session that never
  // goes upstream over TLS, like `broker wrap -- true`, does not pay for them.
  std::call_once(system_roots_loaded_, [this] { client_.set_default_verify_paths(); });
  return client_;
}

void tls_contexts::offer_h2(SSL* ssl) {
  SSL_set_ex_data(ssl, h2_slot(), reinterpret_cast<void*>(1));
}

bool tls_contexts::chose_h2(SSL* ssl) {
  const unsigned char* chosen = nullptr;
  unsigned int size = 0;
  SSL_get0_alpn_selected(ssl, &chosen, &size);
  return size == 2 && chosen[0] == 'h' && chosen[1] == '2';
}

void tls_contexts::use_leaf(SSL* ssl, const std::string& host) {
  auto leaf = leaves_->get(host);
  if (SSL_use_certificate(ssl, leaf.get()) != 1 || SSL_use_PrivateKey(ssl, leaves_->key()) != 1) {
    ERR_clear_error();
    throw std::runtime_error("cannot use the leaf certificate for " + host);
  }
}

bool tls_contexts::expect_peer(SSL* ssl, const std::string& host, bool is_ip) {
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (is_ip) {
    // RFC 6066 §3: SNI carries host names only.
    return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  }
  return SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
}

std::string tls_failure(SSL* ssl, std::string_view fallback) {
  const long result = SSL_get_verify_result(ssl);
  if (result != X509_V_OK)
    return std::string("certificate verification failed: ") + X509_verify_cert_error_string(result);
  return std::string(fallback);
}

}  // namespace broker::certs
