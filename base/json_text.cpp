#include "base/json_text.hpp"

#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

namespace broker::base {
namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

bool continuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// The length of the valid UTF-8 sequence that starts `s` (a byte >= 0x80), or 0 when it is not
// one; then `*bad` is how many bytes to replace with one U+FFFD: the lead byte and the
// continuation bytes that were still possible (Unicode's "maximal subpart").
std::size_t sequence_length(std::string_view s, std::size_t* bad) {
  const auto lead = static_cast<unsigned char>(s[0]);
  std::size_t size = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    size = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    size = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    size = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing past U+10FFFF
  } else {
    *bad = 1;
    return 0;
  }
  std::size_t i = 1;
  for (; i < size && i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool ok = i == 1 ? (c >= low && c <= high) : continuation(c);
    if (!ok) break;
  }
  if (i == size) return size;
  *bad = i;
  return 0;
}

template <typename Number>
void append_number(std::string& out, Number n) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, r.ptr);
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  std::size_t run = 0;  // start of the bytes not yet copied
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      std::size_t bad = 0;
      if (const std::size_t n = sequence_length(text.substr(i), &bad); n > 0) {
        i += n;
        continue;
      }
      out.append(text.substr(run, i - run));
      out += replacement;
      i += bad;
      run = i;
      continue;
    }
    out.append(text.substr(run, i - run));
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default: {
        constexpr char hex[] = "0123456789abcdef";
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 0xF];
      }
    }
    ++i;
    run = i;
  }
  out.append(text.substr(run));
  out += '"';
}

void json_members::key(std::string_view k) {
  if (!text_.empty()) text_ += ',';
  append_json_string(text_, k);
  text_ += ':';
}

json_members& json_members::add(std::string_view k, std::string_view text) {
  key(k);
  append_json_string(text_, text);
  return *this;
}

json_members& json_members::add(std::string_view k, std::int64_t number) {
  key(k);
  append_number(text_, number);
  return *this;
}

json_members& json_members::add(std::string_view k, std::uint64_t number) {
  key(k);
  append_number(text_, number);
  return *this;
}

json_members& json_members::add(std::string_view k, double number) {
  key(k);
  if (!std::isfinite(number)) {
    text_ += "null";
    return *this;
  }
  const auto start = text_.size();
  append_number(text_, number);
  // JSON readers take 3 as an integer; nlohmann writes a double 3 as 3.0, and so do we.
  if (text_.find_first_of(".eE", start) == std::string::npos) text_ += ".0";
  return *this;
}

json_members& json_members::add(std::string_view k, bool value) {
  key(k);
  text_ += value ? "true" : "false";
  return *this;
}

json_members& json_members::add_null(std::string_view k) {
  key(k);
  text_ += "null";
  return *this;
}

json_members& json_members::add_text_or_null(std::string_view k, std::string_view text) {
  return text.empty() ? add_null(k) : add(k, text);
}

json_members& json_members::add_json(std::string_view k, const nlohmann::ordered_json& value) {
  key(k);
  text_ += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return *this;
}

}  // namespace broker::base
