// OpenSSL plumbing shared by the CA and the leaf minting: error text, BIOs, serials, extensions.
#pragma once

#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/x509.h>

#include "certs/ca.hpp"

namespace broker::certs {

struct bio_deleter {
  void operator()(BIO* p) const { BIO_free_all(p); }
};
using bio_ptr = std::unique_ptr<BIO, bio_deleter>;

// Throws ca_error("what: OpenSSL's reason"), emptying this thread's error queue so a later failure
// does not report a stale reason.
[[noreturn]] void throw_openssl(const std::string& what);

// A new memory BIO; throws when OpenSSL is out of memory.
bio_ptr new_memory_bio();
// Everything written to a memory BIO.
std::string memory_bio_text(BIO* bio);

// Sets a random positive 128-bit serial. RFC 5280 §4.1.2.2 wants serials unique per issuer; an
// unpredictable one also keeps a chosen-prefix collision from being prepared ahead of time.
void set_random_serial(X509* cert);

// notBefore one day ago, so a client whose clock lags a little still accepts the certificate.
void set_not_before_yesterday(X509* cert);

// Adds an extension given as OpenSSL config text ("critical,CA:TRUE"). `issuer` is the context
// authorityKeyIdentifier reads; for a self-signed certificate it is `cert` itself.
void add_extension(X509* cert, X509* issuer, int nid, const char* value);

}  // namespace broker::certs
