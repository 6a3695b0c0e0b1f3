#include "config/units.hpp"

#include <array>
#include <limits>
#include <string>

#include "base/text.hpp"

namespace broker::config {
namespace {

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Reads a run of decimal digits into `value`; false on an empty run or overflow.
bool read_digits(std::string_view text, std::size_t& i, std::uint64_t& value, std::size_t& count) {
  value = 0;
  count = 0;
  while (i < text.size() && is_digit(text[i])) {
    auto d = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (u64_max - d) / 10) return false;
    value = value * 10 + d;
    ++i;
    ++count;
  }
  return count > 0;
}

struct duration_unit {
  std::string_view name;
  std::int64_t ms;
};
// Largest first: a duration's components must appear in this order, each at most once.
constexpr std::array<duration_unit, 5> duration_units{
    {{"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", 1'000}, {"ms", 1}}};

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::size_t i = 0, count = 0;
  std::uint64_t whole = 0;
  if (!read_digits(text, i, whole, count)) return std::nullopt;
  std::uint64_t frac = 0, frac_scale = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    // Six fractional digits keep frac * multiplier inside 64 bits (10^6 * 2^40 < 2^64).
    if (!read_digits(text, i, frac, count) || count > 6) return std::nullopt;
    for (std::size_t k = 0; k < count; ++k) frac_scale *= 10;
  }
  if (i < text.size() && text[i] == ' ') {
    ++i;
    if (i == text.size()) return std::nullopt;  // a space must be followed by a unit
  }
  std::string unit = base::lower(text.substr(i));
  std::uint64_t multiplier;
  if (unit.empty() || unit == "b")
    multiplier = 1;
  else if (unit == "kb")
    multiplier = 1'000ULL;
  else if (unit == "mb")
    multiplier = 1'000'000ULL;
  else if (unit == "gb")
    multiplier = 1'000'000'000ULL;
  else if (unit == "tb")
    multiplier = 1'000'000'000'000ULL;
  else if (unit == "kib")
    multiplier = 1ULL << 10;
  else if (unit == "mib")
    multiplier = 1ULL << 20;
  else if (unit == "gib")
    multiplier = 1ULL << 30;
  else if (unit == "tib")
    multiplier = 1ULL << 40;
  else
    return std::nullopt;

  if (whole > u64_max / multiplier) return std::nullopt;
  std::uint64_t result = whole * multiplier;
  std::uint64_t extra = frac * multiplier / frac_scale;  // fractions of a byte round down
  if (result > u64_max - extra) return std::nullopt;
  return result + extra;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  constexpr std::int64_t max_ms = std::numeric_limits<std::int64_t>::max();
  std::size_t i = 0, count = 0;
  std::uint64_t value = 0;
  if (!read_digits(text, i, value, count)) return std::nullopt;
  if (i == text.size()) {  // a bare number is seconds
    if (value > static_cast<std::uint64_t>(max_ms / 1000)) return std::nullopt;
    return std::chrono::milliseconds(static_cast<std::int64_t>(value) * 1000);
  }
  std::string rest = base::lower(text);
  std::int64_t total = 0;
  std::size_t next_unit = 0;  // index into duration_units: components must descend
  i = 0;
  while (i < rest.size()) {
    if (!read_digits(rest, i, value, count)) return std::nullopt;
    std::size_t end = i;
    while (end < rest.size() && !is_digit(rest[end])) ++end;
    std::string_view name = std::string_view(rest).substr(i, end - i);
    std::size_t u = next_unit;
    while (u < duration_units.size() && duration_units[u].name != name) ++u;
    if (u == duration_units.size()) return std::nullopt;
    std::int64_t ms = duration_units[u].ms;
    if (value > static_cast<std::uint64_t>(max_ms / ms)) return std::nullopt;
    std::int64_t part = static_cast<std::int64_t>(value) * ms;
    if (total > max_ms - part) return std::nullopt;
    total += part;
    next_unit = u + 1;
    i = end;
  }
  return std::chrono::milliseconds(total);
}

std::string format_duration(std::chrono::milliseconds duration) {
  std::int64_t left = duration.count();
  if (left == 0) return "0s";
  std::string out;
  if (left < 0) {
    out = "-";
    left = -left;
  }
  for (const auto& unit : duration_units) {
    std::int64_t n = left / unit.ms;
    if (n == 0) continue;
    out += std::to_string(n);
    out += unit.name;
    left -= n * unit.ms;
  }
  return out;
}

std::optional<rate> parse_rate(std::string_view text) {
  std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::size_t i = 0, count = 0;
  std::uint64_t events = 0;
  std::string_view numerator = text.substr(0, slash);
  // Whole events only: the numerator is also the bucket size, and a bucket smaller than one
  // request would never admit anything.
  if (!read_digits(numerator, i, events, count) || i != numerator.size() || events == 0)
    return std::nullopt;
  std::string_view per = text.substr(slash + 1);
  // The period needs a unit ("/s", "/10s"): "5/10" reads too much like a fraction.
  if (per.empty() || is_digit(per.back())) return std::nullopt;
  auto period =
      is_digit(per.front()) ? parse_duration(per) : parse_duration("1" + std::string(per));
  if (!period || period->count() <= 0) return std::nullopt;
  rate r;
  r.burst = static_cast<double>(events);
  r.per_second = static_cast<double>(events) * 1000.0 / static_cast<double>(period->count());
  return r;
}

}  // namespace broker::config
