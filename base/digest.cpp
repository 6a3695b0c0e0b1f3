#include "base/digest.hpp"

#include <openssl/evp.h>

#include <stdexcept>

#include "base/text.hpp"

namespace broker::base {

std::array<unsigned char, 32> sha256(std::string_view data) {
  std::array<unsigned char, 32> digest{};
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1 ||
      length != digest.size())
    throw std::runtime_error("EVP_Digest(sha256) failed");
  return digest;
}

std::string sha256_hex(std::string_view data) {
  const auto digest = sha256(data);
  return hex_encode(digest.data(), digest.size());
}

}  // namespace broker::base
