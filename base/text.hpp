// The text helpers every room shares: ASCII whitespace, trimming and lower-casing (header
// names, INI keys, command output), hex, percent-encoding, base64 and the base64 fragments that
// find an encoded value. Locale-independent; one copy of each.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace broker::base {

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

// HTTP's optional whitespace between a field's parts (RFC 9110 §5.6.3).
inline bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// A hex digit's value (either case), or -1.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Exactly `length` lower-case hex digits (SigV4 signatures and digests are 64).
inline bool is_lower_hex(std::string_view s, std::size_t length) {
  if (s.size() != length) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
inline bool is_signature(std::string_view s) {
  return is_lower_hex(s, 64);
}

// Reads exactly `count` decimal digits at `at`, advancing it; nullopt (and `at` unchanged)
// when they are not all there.
inline std::optional<int> read_digits(std::string_view text, std::size_t& at, std::size_t count) {
  if (at + count > text.size()) return std::nullopt;
  int value = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const char c = text[at + i];
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  at += count;
  return value;
}

// Lower-case hex of `bytes` (digests, keys, ids). The result is allocated once.
// `s` safe to print on a terminal: control bytes (and DEL) as \xNN, so that text a client chose
// (a path, a program's name) cannot move the cursor or retitle the window.
std::string printable(std::string_view s);

std::string hex_encode(std::string_view bytes);
inline std::string hex_encode(const unsigned char* data, std::size_t size) {
  return hex_encode(std::string_view(reinterpret_cast<const char*>(data), size));
}
// The same, appended to `out` (sized beforehand by the caller when the bytes are a secret's).
void append_hex(std::string& out, std::string_view bytes);
// The bytes of even-length hex text (either case); nullopt otherwise, with nothing of the
// partly decoded bytes left behind.
std::optional<std::string> hex_decode(std::string_view text);

// The byte that the escape "%XX" at `at` of `text` encodes, or -1 when there is none there.
int escaped_byte(std::string_view text, std::size_t at);
// %XX decoding (no '+' to space: a token's '+' is literal, and SigV4 clients send a space as
// %20); a '%' not followed by two hex digits is kept as it is.
std::string percent_decode(std::string_view text);
// The same, appended to `out` (which, sized beforehand, is not reallocated: the decoded bytes
// may be a secret's).
void append_percent_decoded(std::string& out, std::string_view text);
// Encodes everything but RFC 3986 unreserved characters (and '/' with keep_slash), upper-case hex.
std::string percent_encode(std::string_view text, bool keep_slash = false);
// Percent-encoding as a client may write it: every byte as %XX (RFC 3986 §2.1), or all but the
// unreserved characters (§2.3), in upper- or lower-case hex (§2.1 makes them equivalent). The
// output is allocated once: it may hold a secret, and no reallocation leaves a copy behind.
std::string percent_escape(std::string_view text, bool keep_unreserved, bool lower_hex);

// The two base64 alphabets of RFC 4648: §4 ('+', '/') and §5, URL- and filename-safe ('-', '_').
enum class base64_alphabet { standard, url };
// The characters that any base64 text carrying `value` must contain when the value starts
// `offset` bytes (0, 1 or 2) past a 3-byte group boundary of the encoded data: those whose 6
// bits all come from the value's bytes. The characters around them also depend on the bytes
// before and after the value (and padding only follows the last group), so this is the longest
// substring that is the same in every such encoding, whatever surrounds the value. Empty when
// the value decides no whole character.
std::string base64_fragment(std::string_view value, std::size_t offset, base64_alphabet alphabet);

// base64 (RFC 4648 §4, with padding) for Basic credentials; the URL alphabet without padding is
// what JWS (RFC 7515 §2) and tokens in a URL's userinfo use. decode returns nullopt on bad input.
std::string base64_encode(std::string_view data,
                          base64_alphabet alphabet = base64_alphabet::standard, bool pad = true);
std::optional<std::string> base64_decode(std::string_view text);

// The decoded value of parameter `name` in "a=1&b=2" (a query without its '?', or a form body);
// "" when absent or without a value.
std::string form_value(std::string_view params, std::string_view name);

}  // namespace broker::base
