// What every family shares: exact-token swaps, opted-in query parameters, base64 for Basic, and
// the factory that picks a family by the credential's type.
#include "brokers/credential_broker.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "brokers/families.hpp"
#include "brokers/secret.hpp"

namespace broker::brokers {

int credential_broker::swap_exact(std::string& value) const {
  if (value != dummy_) return 0;
  value.assign(real_);
  return 1;
}

int credential_broker::swap_query(std::string& target) const {
  if (spec_.query.empty()) return 0;
  const std::size_t question = target.find('?');
  if (question == std::string::npos) return 0;
  int swapped = 0;
  std::size_t at = question + 1;
  for (;;) {
    std::size_t end = target.find_first_of("&#", at);
    if (end == std::string::npos) end = target.size();
    std::string_view param = std::string_view(target).substr(at, end - at);
    const std::size_t eq = param.find('=');
    if (eq != std::string_view::npos) {
      std::string name = percent_decode(param.substr(0, eq));
      std::string_view value = param.substr(eq + 1);
      if (std::find(spec_.query.begin(), spec_.query.end(), name) != spec_.query.end() &&
          (value == dummy_ || percent_decode(value) == dummy_)) {
        std::string encoded = percent_encode(real_);
        const std::size_t value_at = at + eq + 1, value_size = value.size();
        target.replace(value_at, value_size, encoded);
        end = value_at + encoded.size();
        wipe(encoded);
        ++swapped;
      }
    }
    if (end >= target.size() || target[end] == '#') break;
    at = end + 1;
  }
  return swapped;
}

std::unique_ptr<credential_broker> make_broker(const config::credential_spec& spec,
                                               std::string_view dummy, std::string_view real) {
  if (dummy.size() != real.size())
    throw std::invalid_argument("credential " + spec.name + ": dummy and real differ in length");
  if (spec.type == "github") return make_github_broker(spec, dummy, real);
  if (spec.type == "bearer") return make_bearer_broker(spec, dummy, real);
  if (spec.type == "header") return make_header_broker(spec, dummy, real);
  if (spec.type == "basic") return make_basic_broker(spec, dummy, real);
  if (spec.type == "aws-sigv4") return make_aws_part_broker(spec, dummy, real);
  throw std::invalid_argument("credential " + spec.name + ": type \"" + spec.type +
                              "\" is not brokered yet");
}

// ---- base64 (RFC 4648 §4) ----

namespace {

constexpr std::string_view alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<signed char, 256> make_reverse() {
  std::array<signed char, 256> r{};
  for (auto& v : r) v = -1;
  for (std::size_t i = 0; i < alphabet.size(); ++i)
    r[static_cast<unsigned char>(alphabet[i])] = static_cast<signed char>(i);
  return r;
}
constexpr std::array<signed char, 256> reverse = make_reverse();

}  // namespace

std::string base64_encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(data[i]) << 16 |
                 static_cast<unsigned char>(data[i + 1]) << 8 |
                 static_cast<unsigned char>(data[i + 2]);
    out.push_back(alphabet[v >> 18 & 63]);
    out.push_back(alphabet[v >> 12 & 63]);
    out.push_back(alphabet[v >> 6 & 63]);
    out.push_back(alphabet[v & 63]);
  }
  const std::size_t rest = data.size() - i;
  if (rest > 0) {
    unsigned v = static_cast<unsigned char>(data[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(data[i + 1]) << 8;
    out.push_back(alphabet[v >> 18 & 63]);
    out.push_back(alphabet[v >> 12 & 63]);
    out.push_back(rest == 2 ? alphabet[v >> 6 & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// Padding is accepted but not required (some clients omit it); anything outside the alphabet,
// padding in the middle, or a dangling single character is an error.
std::optional<std::string> base64_decode(std::string_view text) {
  std::size_t pad = 0;
  while (pad < 2 && !text.empty() && text.back() == '=') {
    text.remove_suffix(1);
    ++pad;
  }
  if ((pad > 0 && (text.size() + pad) % 4 != 0) || text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  unsigned acc = 0;
  int bits = 0;
  for (char c : text) {
    const int v = reverse[static_cast<unsigned char>(c)];
    if (v < 0) {
      wipe(out);
      return std::nullopt;
    }
    acc = (acc << 6 | static_cast<unsigned>(v)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>(acc >> bits & 0xff));
    }
  }
  return out;
}

}  // namespace broker::brokers
