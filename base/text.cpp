// Hex; percent-encoding and form parameters, for queries, form bodies and SigV4's canonical
// forms; base64 (Basic credentials, JWS) and base64 fragments, for finding a value hidden in
// base64 text.
#include "base/text.hpp"

#include <algorithm>
#include <array>

#include "base/secret.hpp"

namespace broker::base {

namespace {
constexpr std::string_view lower_hex_digits = "0123456789abcdef";
// The two base64 alphabets (RFC 4648 §4 and §5).
constexpr std::string_view standard_digits =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view url_digits =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string hex_encode(std::string_view bytes) {
  std::string out;
  out.reserve(2 * bytes.size());
  append_hex(out, bytes);
  return out;
}

void append_hex(std::string& out, std::string_view bytes) {
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(lower_hex_digits[b >> 4]);
    out.push_back(lower_hex_digits[b & 15]);
  }
}

std::optional<std::string> hex_decode(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out(text.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int high = hex_value(text[2 * i]), low = hex_value(text[2 * i + 1]);
    if (high < 0 || low < 0) {
      wipe(out);
      return std::nullopt;
    }
    out[i] = static_cast<char>(high << 4 | low);
  }
  return out;
}

int escaped_byte(std::string_view text, std::size_t at) {
  if (text[at] != '%' || at + 2 >= text.size()) return -1;
  const int high = hex_value(text[at + 1]), low = hex_value(text[at + 2]);
  return high < 0 || low < 0 ? -1 : high << 4 | low;
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_percent_decoded(out, text);
  return out;
}

void append_percent_decoded(std::string& out, std::string_view text) {
  while (!text.empty()) {
    const std::size_t percent = std::min(text.find('%'), text.size());
    out.append(text.substr(0, percent));  // the run up to the next escape, at once
    text.remove_prefix(percent);
    if (text.empty()) break;
    int hi = -1, lo = -1;
    if (text.size() > 2 && (hi = hex_value(text[1])) >= 0 && (lo = hex_value(text[2])) >= 0) {
      out.push_back(static_cast<char>(hi * 16 + lo));
      text.remove_prefix(3);
    } else {
      out.push_back('%');
      text.remove_prefix(1);
    }
  }
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      auto b = static_cast<unsigned char>(c);
      out += {'%', hex[b >> 4], hex[b & 15]};
    }
  }
  return out;
}

std::string percent_escape(std::string_view text, bool keep_unreserved, bool lower_hex) {
  const char* hex = lower_hex ? "0123456789abcdef" : "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (char c : text) {
    if (keep_unreserved &&
        ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~')) {
      out.push_back(c);
      continue;
    }
    auto b = static_cast<unsigned char>(c);
    out += {'%', hex[b >> 4], hex[b & 15]};
  }
  return out;
}

std::string base64_fragment(std::string_view value, std::size_t offset, base64_alphabet alphabet) {
  const std::string_view digits =
      alphabet == base64_alphabet::standard ? standard_digits : url_digits;
  // Bit positions in the encoded data: the value occupies [8 * offset, 8 * (offset + size)),
  // character i covers [6 * i, 6 * i + 6). Only characters inside the value's bits are kept.
  offset %= 3;
  const std::size_t begin_bit = 8 * offset, end_bit = 8 * (offset + value.size());
  const std::size_t first = (begin_bit + 5) / 6, last = end_bit / 6;
  std::string out;
  if (last <= first) return out;
  out.reserve(last - first);
  auto byte_at = [&](std::size_t i) -> unsigned {  // byte i of the encoded data
    return i < offset || i - offset >= value.size() ? 0u
                                                    : static_cast<unsigned char>(value[i - offset]);
  };
  for (std::size_t c = first; c < last; ++c) {
    const std::size_t bit = 6 * c, at = bit / 8;
    const unsigned window = byte_at(at) << 8 | byte_at(at + 1);
    out.push_back(digits[window >> (10 - bit % 8) & 63]);
  }
  return out;
}

std::string form_value(std::string_view params, std::string_view name) {
  for (std::size_t at = 0; at < params.size();) {
    const std::size_t amp = params.find('&', at);
    const std::size_t end = amp == std::string_view::npos ? params.size() : amp;
    const std::string_view param = params.substr(at, end - at);
    const std::size_t eq = param.find('=');
    if (percent_decode(param.substr(0, eq)) == name)
      return eq == std::string_view::npos ? std::string() : percent_decode(param.substr(eq + 1));
    at = end + 1;
  }
  return {};
}

// ---- base64 (RFC 4648 §4) ----

namespace {

constexpr std::array<signed char, 256> make_reverse() {
  std::array<signed char, 256> r{};
  for (auto& v : r) v = -1;
  for (std::size_t i = 0; i < standard_digits.size(); ++i)
    r[static_cast<unsigned char>(standard_digits[i])] = static_cast<signed char>(i);
  return r;
}
constexpr std::array<signed char, 256> reverse = make_reverse();

}  // namespace

std::string base64_encode(std::string_view data, base64_alphabet alphabet, bool pad) {
  const std::string_view digits =
      alphabet == base64_alphabet::standard ? standard_digits : url_digits;
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  unsigned bits = 0;
  int held = 0;  // bits of `bits` not yet written
  for (char c : data) {
    bits = (bits << 8 | static_cast<unsigned char>(c)) & 0xFFFF;
    held += 8;
    while (held >= 6) {
      held -= 6;
      out.push_back(digits[bits >> held & 63]);
    }
  }
  if (held > 0) out.push_back(digits[bits << (6 - held) & 63]);
  while (pad && out.size() % 4 != 0) out.push_back('=');
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

}  // namespace broker::base
