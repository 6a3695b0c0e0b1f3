#include "certs/openssl_util.hpp"

#include <array>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

namespace broker::certs {

void throw_openssl(const std::string& what) {
  // The earliest queued error is the innermost cause; the later ones only repeat the call chain.
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) throw ca_error(what);
  std::array<char, 256> reason{};
  ERR_error_string_n(code, reason.data(), reason.size());
  throw ca_error(what + ": " + reason.data());
}

bio_ptr new_memory_bio() {
  bio_ptr bio(BIO_new(BIO_s_mem()));
  if (!bio) throw_openssl("cannot allocate a memory BIO");
  return bio;
}

std::string memory_bio_text(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return size > 0 ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

void set_random_serial(X509* cert) {
  std::array<unsigned char, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    throw_openssl("cannot draw a random serial number");
  // BN_bin2bn reads unsigned big-endian, so the serial is positive; DER adds a leading zero octet
  // when the top bit is set, which still fits RFC 5280's 20-octet limit. Zero is not a valid
  // serial.
  if (bytes == std::array<unsigned char, 16>{}) bytes.back() = 1;
  BIGNUM* number = BN_bin2bn(bytes.data(), static_cast<int>(bytes.size()), nullptr);
  ASN1_INTEGER* serial = number != nullptr ? BN_to_ASN1_INTEGER(number, nullptr) : nullptr;
  const bool ok = serial != nullptr && X509_set_serialNumber(cert, serial) == 1;
  ASN1_INTEGER_free(serial);
  BN_free(number);
  if (!ok) throw_openssl("cannot set the serial number");
}

void set_not_before_yesterday(X509* cert) {
  if (X509_time_adj_ex(X509_getm_notBefore(cert), -1, 0, nullptr) == nullptr)
    throw_openssl("cannot set notBefore");
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value);
  if (extension == nullptr) throw_openssl(std::string("cannot build the extension ") + value);
  const int added = X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
  if (added != 1) throw_openssl(std::string("cannot add the extension ") + value);
}

}  // namespace broker::certs
