#include "config/host_pattern.hpp"

#include <algorithm>

#include "config/punycode.hpp"

namespace broker::config {
namespace {

constexpr std::size_t max_label = 63;    // RFC 1035 §2.3.4
constexpr std::size_t max_host = 253;    // 255 octets on the wire, minus length bytes
constexpr std::size_t max_input = 1024;  // UTF-8 input bound, well above any valid name

// Decodes UTF-8, refusing overlong forms, surrogates and values past U+10FFFF.
std::optional<std::u32string> decode_utf8(std::string_view text) {
  std::u32string out;
  for (std::size_t i = 0; i < text.size();) {
    auto b0 = static_cast<unsigned char>(text[i]);
    int extra;
    char32_t cp;
    if (b0 < 0x80) {
      extra = 0;
      cp = b0;
    } else if (b0 >= 0xc2 && b0 <= 0xdf) {
      extra = 1;
      cp = b0 & 0x1f;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      extra = 2;
      cp = b0 & 0x0f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      extra = 3;
      cp = b0 & 0x07;
    } else {
      return std::nullopt;
    }
    if (i + static_cast<std::size_t>(extra) >= text.size()) return std::nullopt;
    for (int k = 1; k <= extra; ++k) {
      auto b = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((b & 0xc0) != 0x80) return std::nullopt;
      cp = cp << 6 | (b & 0x3f);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return std::nullopt;
    out += cp;
    i += static_cast<std::size_t>(extra) + 1;
  }
  return out;
}

// A small subset of the UTS #46 mapping: lower-casing for the Latin, Greek and Cyrillic
// letters most IDNs use, and fullwidth ASCII folded to ASCII. Full Unicode case folding needs
// tables this project does not carry; names outside the subset still normalize, just without
// upper-to-lower mapping, so an upper-case spelling of them fails closed (matches nothing).
char32_t fold(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 0x20;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 0x20;
  if (c == 0x130) return c;  // dotless/dotted I: no one-to-one lower case
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) return c | 1;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c & 1) ? c + 1 : c;
  if (c == 0x178) return 0xff;
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 0x20;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 0x25;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 0x3f;
  if (c >= 0x410 && c <= 0x42f) return c + 0x20;
  if (c >= 0x400 && c <= 0x40f) return c + 0x50;
  if (c >= 0xff21 && c <= 0xff3a) return c - 0xff21 + 'a';
  if (c >= 0xff41 && c <= 0xff5a) return c - 0xff41 + 'a';
  if (c >= 0xff10 && c <= 0xff19) return c - 0xff10 + '0';
  return c;
}

// UTS #46 maps these to '.', so a client may have meant them as label separators.
bool is_dot(char32_t c) {
  return c == '.' || c == 0x3002 || c == 0xff0e || c == 0xff61;
}

// Controls, spaces and invisible characters: UTS #46 drops or forbids them, and a name that
// renders like another one must not normalize to something a rule author cannot type.
bool is_forbidden(char32_t c) {
  return (c >= 0x80 && c <= 0xa0) || c == 0xad || c == 0x34f || c == 0x115f || c == 0x1160 ||
         c == 0x1680 || (c >= 0x180b && c <= 0x180e) || (c >= 0x2000 && c <= 0x200f) ||
         (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x206f) || c == 0x3000 ||
         c == 0x3164 || (c >= 0xfe00 && c <= 0xfe0f) || c == 0xfeff || c == 0xffa0 ||
         (c >= 0xfff0 && c <= 0xffff) || (c >= 0xe0000 && c <= 0xe0fff);
}

bool is_ascii_label_char(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::optional<std::string> normalize_label(std::u32string_view label) {
  std::u32string folded;
  bool ascii = true;
  for (char32_t c : label) {
    c = fold(c);
    if (c < 0x80) {
      if (!is_ascii_label_char(c)) return std::nullopt;
    } else {
      if (is_forbidden(c)) return std::nullopt;
      ascii = false;
    }
    folded += c;
  }
  std::string out;
  if (ascii) {
    for (char32_t c : folded) out += static_cast<char>(c);
  } else {
    auto encoded = punycode_encode(folded);
    if (!encoded) return std::nullopt;
    out = "xn--" + *encoded;
  }
  if (out.empty() || out.size() > max_label) return std::nullopt;
  return out;
}

// True when the last label is all digits or "0x..." hex: URL parsers (WHATWG) read such a name
// as an IPv4 address in some form ("127.1", "0x7f.1"), so it is never a host name here.
bool ipv4_like(std::string_view host) {
  std::string_view last = host.substr(host.rfind('.') + 1);
  if (last.empty()) return false;
  std::size_t start = 0;
  if (last.size() >= 2 && last[0] == '0' && last[1] == 'x') start = 2;
  for (std::size_t i = start; i < last.size(); ++i) {
    char c = last[i];
    bool digit = c >= '0' && c <= '9';
    bool hex = start == 2 && c >= 'a' && c <= 'f';
    if (!digit && !hex) return false;
  }
  return true;
}

// normalize_host for a name that is all ASCII (nearly every one): the same rules, without
// decoding to code points.
std::optional<std::string> normalize_ascii_host(std::string_view host) {
  if (host.back() == '.') host.remove_suffix(1);
  if (host.empty()) return std::nullopt;
  std::string out(host);
  std::size_t label = 0;  // the length of the label so far
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '.') {
      if (label == 0) return std::nullopt;
      label = 0;
    } else if (!is_ascii_label_char(static_cast<char32_t>(c)) || ++label > max_label) {
      return std::nullopt;
    }
  }
  if (label == 0 || out.size() > max_host || ipv4_like(out)) return std::nullopt;
  return out;
}

}  // namespace

std::optional<std::string> normalize_host(std::string_view host) {
  if (host.empty() || host.size() > max_input) return std::nullopt;
  if (std::all_of(host.begin(), host.end(), [](char c) { return (c & 0x80) == 0; }))
    return normalize_ascii_host(host);
  auto points = decode_utf8(host);
  if (!points) return std::nullopt;
  if (!points->empty() && is_dot(points->back())) points->pop_back();
  if (points->empty()) return std::nullopt;

  std::string out;
  std::u32string label;
  auto flush = [&]() -> bool {
    auto ascii = normalize_label(label);
    if (!ascii) return false;
    if (!out.empty()) out += '.';
    out += *ascii;
    label.clear();
    return true;
  };
  for (char32_t c : *points) {
    if (is_dot(c)) {
      if (!flush()) return std::nullopt;
    } else {
      label += c;
    }
  }
  if (!flush()) return std::nullopt;
  if (out.size() > max_host || ipv4_like(out)) return std::nullopt;
  return out;
}

std::optional<host_pattern> host_pattern::parse(std::string_view text) {
  host_pattern p;
  if (text == "*") {
    p.any_ = true;
    p.text_ = "*";
    return p;
  }
  std::string_view rest = text;
  bool wildcard = false;
  if (text.substr(0, 2) == "*.") {
    wildcard = true;
    rest = text.substr(2);
  }
  if (rest.find('*') != std::string_view::npos) return std::nullopt;
  auto host = normalize_host(rest);
  if (!host) return std::nullopt;
  if (wildcard) {
    p.suffix_ = "." + *host;
    p.text_ = "*" + p.suffix_;
  } else {
    p.text_ = *host;
  }
  return p;
}

bool host_pattern::matches(std::string_view normalized_host) const {
  // Defensive: a caller that passes an IP literal's text must still never match a name rule.
  if (normalized_host.empty() || normalized_host.find(':') != std::string_view::npos ||
      ipv4_like(normalized_host))
    return false;
  if (any_) return true;
  if (!suffix_.empty())
    return normalized_host.size() > suffix_.size() && normalized_host.ends_with(suffix_);
  return normalized_host == text_;
}

}  // namespace broker::config
