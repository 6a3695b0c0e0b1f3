// RSA keys and RS256 JWTs for the tests of the families that sign with them (gcp service
// accounts, GitHub Apps).
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

namespace broker::test::rsa {

struct pkey_free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;

// PEM text of `key`, encrypted with `passphrase` when one is given.
inline std::string to_pem(EVP_PKEY* key, const char* passphrase = nullptr) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  REQUIRE(bio);
  const EVP_CIPHER* cipher = passphrase ? EVP_aes_256_cbc() : nullptr;
  auto* pass = reinterpret_cast<unsigned char*>(const_cast<char*>(passphrase));
  const int pass_length = passphrase ? static_cast<int>(std::strlen(passphrase)) : 0;
  REQUIRE(PEM_write_bio_PrivateKey(bio.get(), key, cipher, pass, pass_length, nullptr, nullptr) ==
          1);
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(length));
}

// One RSA key for the whole file: generating it is the slow part.
inline EVP_PKEY* rsa_key() {
  static pkey_ptr key(EVP_RSA_gen(2048));
  REQUIRE(key);
  return key.get();
}

inline std::optional<std::string> base64url_decode(std::string_view text) {
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (char c : text) {
    const std::size_t v = alphabet.find(c);
    if (v == std::string_view::npos) return std::nullopt;
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

inline std::vector<std::string> split_dots(const std::string& jwt) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (;;) {
    const std::size_t dot = jwt.find('.', at);
    parts.push_back(jwt.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) return parts;
    at = dot + 1;
  }
}

inline bool verify_rs256(EVP_PKEY* key, std::string_view input, std::string_view signature) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(input.data()),
                          input.size()) == 1;
}

}  // namespace broker::test::rsa
