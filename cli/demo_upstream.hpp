// The stand-in for api.github.com that `broker demo` talks to: HTTPS on loopback with a CA of its
// own, one endpoint (GET /user) that says 200 only when the request carries the real token. It
// proves the swap from the other side: the command never held the value the upstream accepts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <openssl/ssl.h>

#include "base/secret.hpp"
#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"

namespace broker::cli {

class demo_upstream {
 public:
  // Listens on 127.0.0.1 (a free port) with a leaf for `host` and serves from a background
  // thread until destroyed. Throws std::runtime_error when it cannot listen or set up TLS.
  explicit demo_upstream(const std::string& host);
  ~demo_upstream();
  demo_upstream(const demo_upstream&) = delete;
  demo_upstream& operator=(const demo_upstream&) = delete;

  std::uint16_t port() const { return port_; }
  // The token this upstream accepts: real-shaped (ghp_ + 36 alphanumerics), made for this run.
  const base::secret& real_token() const { return real_token_; }
  // The CA that signed the upstream's leaf, for `--upstream-ca`.
  std::string ca_pem() const { return ca_.certificate_pem(); }
  // Requests that arrived with the real token (answered 200).
  std::size_t answered_real() const { return answered_real_; }

 private:
  struct ssl_ctx_deleter {
    void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
  };

  void serve();
  void answer(int fd);
  bool carries_real_token(const std::string& head) const;

  certs::certificate_authority ca_;
  certs::leaf_cache leaves_;  // refers to ca_: declared after it
  base::secret real_token_;
  std::unique_ptr<SSL_CTX, ssl_ctx_deleter> tls_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> answered_real_{0};
  std::thread thread_;
};

}  // namespace broker::cli
