// A certificate authority that signs the leaves the MITM loop presents: ECDSA P-256, generated
// in memory for a session (its key never touches disk), or the persistent CA of `broker serve`
// kept in a directory (docs/cli.md `broker ca`).
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <openssl/evp.h>
#include <openssl/x509.h>

namespace broker::certs {

// Every failure: a bad or unsafe CA directory, an OpenSSL error. what() names the file.
// X.520's upper bound for a commonName (RFC 5280 Appendix A: ub-common-name).
inline constexpr std::size_t max_common_name = 64;

class ca_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct x509_deleter {
  void operator()(X509* p) const { X509_free(p); }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using x509_ptr = std::unique_ptr<X509, x509_deleter>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_deleter>;

// Generates a fresh ECDSA P-256 key.
pkey_ptr generate_ec_key();

class certificate_authority {
 public:
  // A new self-signed CA (basicConstraints CA:TRUE critical, keyUsage keyCertSign+cRLSign),
  // valid from one day ago for `valid_days`; `common_name` becomes its subject CN.
  static certificate_authority generate(const std::string& common_name, int valid_days = 3650);

  // The CA files in a directory.
  static std::filesystem::path cert_path(const std::filesystem::path& dir);  // dir/ca.pem
  static std::filesystem::path key_path(const std::filesystem::path& dir);   // dir/ca.key
  // Loads dir/ca.pem and dir/ca.key. Refuses (ca_error) a key file that is a symlink or is
  // readable or writable by group or others, a key that does not match the certificate, and a
  // certificate that is not a CA.
  static certificate_authority load(const std::filesystem::path& dir);
  // Writes dir/ca.pem (0644) and dir/ca.key (0600), each atomically (temp file + rename); creates
  // dir with 0700 when missing. Refuses a symlinked key path.
  void save(const std::filesystem::path& dir) const;

  X509* certificate() const { return cert_.get(); }
  EVP_PKEY* key() const { return key_.get(); }
  std::string certificate_pem() const;
  // "SHA256 AB:CD:..." of the DER certificate, for `broker ca show`.
  std::string fingerprint() const;
  std::string subject() const;    // one line, e.g. "CN=broker session CA s-7f3a"
  std::string not_after() const;  // "2036-11-27 20:15:06 UTC"

 private:
  certificate_authority(x509_ptr cert, pkey_ptr key);
  x509_ptr cert_;
  pkey_ptr key_;
};

// The default persistent CA directory: $XDG_CONFIG_HOME/broker/ca, else ~/.config/broker/ca.
std::filesystem::path default_ca_dir();

}  // namespace broker::certs
