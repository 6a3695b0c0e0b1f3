// Percent-encoding and form parameters, for queries, form bodies and SigV4's canonical forms;
// base64 fragments, for finding a value hidden in base64 text.
#include "brokers/text.hpp"

#include <algorithm>

namespace broker::brokers {

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
  const char* digits = alphabet == base64_alphabet::standard
                           ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                           : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
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
  while (!params.empty()) {
    const std::size_t end = std::min(params.find('&'), params.size());
    const std::string_view param = params.substr(0, end);
    const std::size_t eq = param.find('=');
    if (percent_decode(param.substr(0, eq)) == name)
      return eq == std::string_view::npos ? std::string() : percent_decode(param.substr(eq + 1));
    params.remove_prefix(std::min(end + 1, params.size()));
  }
  return {};
}

}  // namespace broker::brokers
