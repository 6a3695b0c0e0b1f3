// Leaf certificates for intercepted hosts, minted on first use and kept in a bounded LRU cache.
// Every leaf of a session shares one ECDSA P-256 key, so minting is one signature.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "certs/ca.hpp"

namespace broker::certs {

class leaf_cache {
 public:
  // The CA must outlive the cache. A capacity of 0 is taken as 1.
  explicit leaf_cache(const certificate_authority& ca, std::size_t capacity = 1024);

  // The leaf for a host name (DNS SAN) or an IP literal (IP SAN; IPv6 without brackets), valid
  // from one day ago for 30 days (never past the CA's notAfter), serverAuth EKU, subject CN = the
  // host (truncated to 64 bytes). Thread-safe. Throws ca_error on an OpenSSL failure.
  std::shared_ptr<X509> get(std::string_view host);

  // The key every leaf certifies.
  EVP_PKEY* key() const { return key_.get(); }
  std::size_t size() const;
  std::size_t capacity() const { return capacity_; }
  // How many leaves were minted so far (cache misses), for tests.
  std::size_t minted() const;

 private:
  std::shared_ptr<X509> mint(const std::string& host) const;

  const certificate_authority& ca_;
  pkey_ptr key_;
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::string> order_;  // most recently used first
  struct entry {
    std::shared_ptr<X509> cert;
    std::list<std::string>::iterator position;
  };
  std::unordered_map<std::string, entry> entries_;
  std::size_t minted_ = 0;
};

}  // namespace broker::certs
