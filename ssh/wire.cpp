#include "ssh/wire.hpp"

#include "base/digest.hpp"
#include "base/text.hpp"

namespace broker::ssh {

std::optional<std::uint32_t> wire_reader::u32() {
  if (!ok_ || rest_.size() < 4) {
    ok_ = false;
    return std::nullopt;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(rest_.data());
  const std::uint32_t v = (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) |
                          (std::uint32_t(p[2]) << 8) | std::uint32_t(p[3]);
  rest_.remove_prefix(4);
  return v;
}

std::optional<std::uint8_t> wire_reader::byte() {
  if (!ok_ || rest_.empty()) {
    ok_ = false;
    return std::nullopt;
  }
  const auto v = static_cast<std::uint8_t>(rest_.front());
  rest_.remove_prefix(1);
  return v;
}

std::optional<std::string_view> wire_reader::string() {
  const auto n = u32();
  if (!n || *n > rest_.size()) {
    ok_ = false;
    return std::nullopt;
  }
  const auto v = rest_.substr(0, *n);
  rest_.remove_prefix(*n);
  return v;
}

void put_u32(std::string& out, std::uint32_t value) {
  out.push_back(static_cast<char>(value >> 24));
  out.push_back(static_cast<char>(value >> 16));
  out.push_back(static_cast<char>(value >> 8));
  out.push_back(static_cast<char>(value));
}

void put_string(std::string& out, std::string_view value) {
  put_u32(out, static_cast<std::uint32_t>(value.size()));
  out.append(value);
}

std::string fingerprint(std::string_view key_blob) {
  const auto digest = base::sha256(key_blob);
  return "SHA256:" +
         base::base64_encode(
             std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()),
             base::base64_alphabet::standard, false);
}

std::string_view key_type(std::string_view key_blob) {
  wire_reader r(key_blob);
  return r.string().value_or(std::string_view());
}

}  // namespace broker::ssh
