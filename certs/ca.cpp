#include "certs/ca.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certs/openssl_util.hpp"

namespace broker::certs {

pkey_ptr generate_ec_key() {
  pkey_ptr key(EVP_EC_gen("P-256"));
  if (!key) throw_openssl("cannot generate an ECDSA P-256 key");
  return key;
}

certificate_authority::certificate_authority(x509_ptr cert, pkey_ptr key)
    : cert_(std::move(cert)), key_(std::move(key)) {}

certificate_authority certificate_authority::generate(const std::string& common_name,
                                                      int valid_days) {
  if (common_name.empty() || common_name.size() > max_common_name)
    throw ca_error("the CA common name must be 1 to 64 bytes long: \"" + common_name + "\"");
  if (valid_days < 1) throw ca_error("the CA must be valid for at least one day");
  auto key = generate_ec_key();
  x509_ptr cert(X509_new());
  if (!cert) throw_openssl("cannot allocate the CA certificate");
  X509* c = cert.get();
  if (X509_set_version(c, X509_VERSION_3) != 1) throw_openssl("cannot set the CA version");
  set_random_serial(c);

  X509_NAME* name = X509_get_subject_name(c);  // owned by the certificate
  const auto* cn = reinterpret_cast<const unsigned char*>(common_name.data());
  const auto* org = reinterpret_cast<const unsigned char*>("broker");
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, org, -1, -1, 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, cn,
                                 static_cast<int>(common_name.size()), -1, 0) != 1)
    throw_openssl("cannot set the CA subject \"" + common_name + "\"");
  if (X509_set_issuer_name(c, name) != 1) throw_openssl("cannot set the CA issuer");

  set_not_before_yesterday(c);
  if (X509_time_adj_ex(X509_getm_notAfter(c), valid_days, 0, nullptr) == nullptr)
    throw_openssl("cannot set the CA notAfter");
  if (X509_set_pubkey(c, key.get()) != 1) throw_openssl("cannot set the CA public key");

  // pathlen:0: this CA signs leaves only, so a leaf key can never act as an intermediate.
  add_extension(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  add_extension(c, c, NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(c, c, NID_subject_key_identifier, "hash");
  if (X509_sign(c, key.get(), EVP_sha256()) <= 0) throw_openssl("cannot sign the CA certificate");
  return certificate_authority(std::move(cert), std::move(key));
}

std::string certificate_authority::certificate_pem() const {
  auto bio = new_memory_bio();
  if (PEM_write_bio_X509(bio.get(), cert_.get()) != 1)
    throw_openssl("cannot encode the CA certificate");
  return memory_bio_text(bio.get());
}

std::string certificate_authority::fingerprint() const {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (X509_digest(cert_.get(), EVP_sha256(), digest.data(), &size) != 1)
    throw_openssl("cannot hash the CA certificate");
  std::string text = "SHA256 ";
  for (unsigned int i = 0; i < size; ++i) {
    std::array<char, 4> hex{};
    std::snprintf(hex.data(), hex.size(), i == 0 ? "%02X" : ":%02X", digest[i]);
    text += hex.data();
  }
  return text;
}

std::string certificate_authority::subject() const {
  auto bio = new_memory_bio();
  // RFC 2253 order (most specific first), but UTF-8 printed as is rather than \-escaped.
  const unsigned long flags = XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB;
  if (X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert_.get()), 0, flags) < 0)
    throw_openssl("cannot print the CA subject");
  return memory_bio_text(bio.get());
}

std::string certificate_authority::not_after() const {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert_.get()), &tm) != 1)
    throw_openssl("cannot read the CA notAfter");
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text.data();
}

std::filesystem::path default_ca_dir() {
  // XDG Base Directory spec: a relative $XDG_CONFIG_HOME is invalid and must be ignored.
  const char* config = std::getenv("XDG_CONFIG_HOME");
  if (config != nullptr && config[0] == '/') return std::filesystem::path(config) / "broker" / "ca";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/')
    return std::filesystem::path(home) / ".config" / "broker" / "ca";
  return {};
}

}  // namespace broker::certs
