#include "session/audit_key.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "base/atomic_file.hpp"
#include "base/text.hpp"
#include "certs/openssl_util.hpp"
#include "session/audit_log.hpp"

namespace broker::session {

namespace {

// What is signed: the head, under a label no other signature of this key could share.
std::string signed_message(std::string_view head_hex) {
  return "broker audit chain head v1\n" + std::string(head_hex);
}

const unsigned char* bytes_of(const std::string& s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& why) {
  ERR_clear_error();
  throw std::runtime_error(path.string() + ": " + why);
}

// An Ed25519 private key in PKCS#8 (RFC 8410 §7, as OpenSSL writes it) is these 16 bytes, then
// the key's 32.
constexpr unsigned char ed25519_pkcs8_prefix[] = {0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06,
                                                  0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20};

// That form, read without OpenSSL's decoders, whose first use cost 0.6-0.9 ms of every wrap's
// start (this read: ~0.1 ms); null for anything else, which the decoders then read.
certs::pkey_ptr read_plain_ed25519(BIO* in) {
  char* name = nullptr;
  char* header = nullptr;
  unsigned char* der = nullptr;
  long size = 0;
  certs::pkey_ptr key;
  if (PEM_read_bio(in, &name, &header, &der, &size) == 1) {
    if (std::strcmp(name, "PRIVATE KEY") == 0 && header[0] == '\0' &&
        size == static_cast<long>(sizeof ed25519_pkcs8_prefix) + 32 &&
        std::memcmp(der, ed25519_pkcs8_prefix, sizeof ed25519_pkcs8_prefix) == 0)
      key.reset(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr,
                                             der + sizeof ed25519_pkcs8_prefix, 32));
    OPENSSL_cleanse(der, static_cast<std::size_t>(size));
  }
  OPENSSL_free(der);
  OPENSSL_free(header);
  OPENSSL_free(name);
  ERR_clear_error();
  return key;
}

certs::pkey_ptr read_key(const std::filesystem::path& path, bool private_only) {
  certs::bio_ptr in(BIO_new_file(path.c_str(), "r"));
  if (!in) fail(path, std::strerror(errno));
  certs::pkey_ptr key = read_plain_ed25519(in.get());
  if (!key) {
    BIO_reset(in.get());
    key.reset(PEM_read_bio_PrivateKey(in.get(), nullptr, nullptr, nullptr));
  }
  if (!key && !private_only) {
    BIO_reset(in.get());
    ERR_clear_error();
    key.reset(PEM_read_bio_PUBKEY(in.get(), nullptr, nullptr, nullptr));
  }
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    fail(path, private_only ? "not an Ed25519 private key (PEM)" : "not an Ed25519 key (PEM)");
  return key;
}

// A fresh key written to `path` unless one is there already (base::create_file_once).
void create_key(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  ::chmod(path.parent_path().c_str(), 0700);
  certs::pkey_ptr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!key) fail(path, "cannot make an Ed25519 key");
  certs::bio_ptr out(BIO_new(BIO_s_secmem()));
  if (!out ||
      PEM_write_bio_PrivateKey(out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    fail(path, "cannot write the new key");
  char* pem = nullptr;
  const long size = BIO_get_mem_data(out.get(), &pem);
  base::create_file_once(path, std::string_view(pem, static_cast<std::size_t>(size)), 0600);
}

}  // namespace

std::filesystem::path default_audit_key_path() {
  const char* home = std::getenv("HOME");
  if (!home || *home != '/') return {};
  return std::filesystem::path(home) / ".config" / "broker" / "audit-key";
}

audit_key audit_key::load_or_create(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) {
    if (errno != ENOENT) fail(path, std::strerror(errno));
    create_key(path);
    if (::lstat(path.c_str(), &st) < 0) fail(path, std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  if ((st.st_mode & 077) != 0 || st.st_uid != ::geteuid())
    fail(path, "the signing key must be this user's and private (chmod 600)");
  return audit_key(read_key(path, true));
}

audit_key audit_key::load(const std::filesystem::path& path) {
  return audit_key(read_key(path, false));
}

std::string audit_key::public_key_hex() const {
  unsigned char raw[32];
  std::size_t size = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key_.get(), raw, &size) != 1) {
    ERR_clear_error();
    return {};
  }
  return base::hex_encode(raw, size);
}

std::string audit_key::sign_head(std::string_view head_hex) const {
  const std::string message = signed_message(head_hex);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char signature[64];
  std::size_t size = sizeof signature;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), signature, &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    ERR_clear_error();
    throw std::runtime_error("cannot sign the audit chain head");
  }
  return base::hex_encode(signature, size);
}

bool head_signature_valid(std::string_view public_key_hex, std::string_view head_hex,
                          std::string_view signature_hex) {
  const auto raw = base::hex_decode(public_key_hex);
  const auto signature = base::hex_decode(signature_hex);
  if (!raw || raw->size() != 32 || !signature || signature->size() != 64) return false;
  certs::pkey_ptr key(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, bytes_of(*raw), raw->size()));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const std::string message = signed_message(head_hex);
  const bool valid =
      key && ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
      EVP_DigestVerify(ctx.get(), bytes_of(*signature), signature->size(),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  ERR_clear_error();
  return valid;
}

}  // namespace broker::session
