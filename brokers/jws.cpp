// RS256 compact JWS with OpenSSL's EVP interface (brokers/jws.hpp).
#include "brokers/jws.hpp"

#include <climits>
#include <memory>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "base/secret.hpp"
#include "base/text.hpp"
#include "brokers/secret_source.hpp"

namespace broker::brokers {
namespace {

struct openssl_free {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};

// An encrypted key would make OpenSSL's default callback prompt on the terminal: refuse instead.
int no_passphrase(char*, int, int, void*) {
  return 0;
}

std::string sign_rs256(std::string_view pem, std::string_view input, const std::string& who) {
  auto fail = [&](std::string_view what) {
    ERR_clear_error();  // leave no stale errors for the next TLS call on this thread
    return source_error(who + ": " + std::string(what));
  };
  if (pem.size() > INT_MAX) throw fail("the private key is too large");
  std::unique_ptr<BIO, openssl_free> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) throw fail("cannot read the private key");
  std::unique_ptr<EVP_PKEY, openssl_free> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  bio.reset();
  if (!key) throw fail("the private key is not an unencrypted PEM private key");
  if (!EVP_PKEY_is_a(key.get(), "RSA")) throw fail("the private key is not an RSA key (RS256)");

  std::unique_ptr<EVP_MD_CTX, openssl_free> ctx(EVP_MD_CTX_new());
  std::size_t length = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(input.data());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &length, data, input.size()) != 1)
    throw fail("cannot sign with the private key");
  std::string signature(length, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length, data,
                     input.size()) != 1)
    throw fail("cannot sign with the private key");
  signature.resize(length);
  return signature;
}

}  // namespace

std::string jws_part(std::string_view data) {
  return base::base64_encode(data, base::base64_alphabet::url, false);
}

std::string rs256_jws(std::string_view private_key_pem, const nlohmann::ordered_json& header,
                      const nlohmann::ordered_json& claims, const std::string& who) {
  std::string signing_input = jws_part(header.dump()) + "." + jws_part(claims.dump());
  const std::string signature = sign_rs256(private_key_pem, signing_input, who);
  return signing_input + "." + jws_part(signature);
}

}  // namespace broker::brokers
