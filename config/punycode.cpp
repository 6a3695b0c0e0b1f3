#include "config/punycode.hpp"

#include <cstdint>
#include <limits>

namespace broker::config {
namespace {

// RFC 3492 §5 parameter values for punycode.
constexpr std::uint32_t base = 36;
constexpr std::uint32_t t_min = 1;
constexpr std::uint32_t t_max = 26;
constexpr std::uint32_t skew = 38;
constexpr std::uint32_t damp = 700;
constexpr std::uint32_t initial_bias = 72;
constexpr std::uint32_t initial_n = 0x80;

char encode_digit(std::uint32_t d) {
  return static_cast<char>(d < 26 ? 'a' + d : '0' + (d - 26));  // §5: a..z = 0..25, 0..9 = 26..35
}

// §6.1
std::uint32_t adapt(std::uint32_t delta, std::uint32_t num_points, bool first_time) {
  delta = first_time ? delta / damp : delta / 2;
  delta += delta / num_points;
  std::uint32_t k = 0;
  while (delta > ((base - t_min) * t_max) / 2) {
    delta /= base - t_min;
    k += base;
  }
  return k + (base - t_min + 1) * delta / (delta + skew);
}

}  // namespace

// §6.3, with the overflow checks the RFC asks for (32-bit arithmetic).
std::optional<std::string> punycode_encode(std::u32string_view input) {
  constexpr std::uint32_t max_int = std::numeric_limits<std::uint32_t>::max();
  std::string output;
  for (char32_t c : input)
    if (c < 0x80) output += static_cast<char>(c);
  const auto basic = static_cast<std::uint32_t>(output.size());
  std::uint32_t handled = basic;
  if (basic > 0) output += '-';

  std::uint32_t n = initial_n;
  std::uint32_t delta = 0;
  std::uint32_t bias = initial_bias;
  const auto length = static_cast<std::uint32_t>(input.size());
  while (handled < length) {
    std::uint32_t m = max_int;
    for (char32_t c : input)
      if (c >= n && c < m) m = c;
    if (m - n > (max_int - delta) / (handled + 1)) return std::nullopt;
    delta += (m - n) * (handled + 1);
    n = m;
    for (char32_t c : input) {
      if (c < n && ++delta == 0) return std::nullopt;
      if (c != n) continue;
      std::uint32_t q = delta;
      for (std::uint32_t k = base;; k += base) {
        std::uint32_t t = k <= bias ? t_min : (k >= bias + t_max ? t_max : k - bias);
        if (q < t) break;
        output += encode_digit(t + (q - t) % (base - t));
        q = (q - t) / (base - t);
      }
      output += encode_digit(q);
      bias = adapt(delta, handled + 1, handled == basic);
      delta = 0;
      ++handled;
    }
    ++delta;
    ++n;
  }
  return output;
}

}  // namespace broker::config
