// secret: a real credential's bytes in one heap block that is zeroed before it is released.
#include "base/secret.hpp"

#include <cstring>
#include <utility>

#include <openssl/crypto.h>

namespace broker::base {

secret::secret(std::string&& value) {
  if (!value.empty()) {
    data_ = std::make_unique<char[]>(value.size());
    std::memcpy(data_.get(), value.data(), value.size());
    size_ = value.size();
  }
  base::wipe(value);
}

secret::~secret() {
  wipe();
}

secret::secret(secret&& other) noexcept
    : data_(std::move(other.data_)), size_(std::exchange(other.size_, 0)) {}

secret& secret::operator=(secret&& other) noexcept {
  if (this != &other) {
    wipe();
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void secret::wipe() noexcept {
  if (data_) OPENSSL_cleanse(data_.get(), size_);
  data_.reset();
  size_ = 0;
}

void wipe(std::string& s) noexcept {
  // The whole allocation, not just size(): bytes past the end may be left over from a longer
  // value (a trimmed read buffer). resize() within capacity never reallocates.
  s.resize(s.capacity());
  OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

}  // namespace broker::base
