#include "session/budget_text.hpp"

#include <array>
#include <cmath>
#include <cstdio>

namespace broker::session {
namespace {

struct size_unit {
  const char* name;
  std::uint64_t bytes;
};

// "1.50" -> "1.5", "2.00" -> "2": whole hundredths, trailing zeros dropped.
std::string with_hundredths(std::uint64_t whole, std::uint64_t hundredths) {
  std::string out = std::to_string(whole);
  if (hundredths == 0) return out;
  out += '.';
  out += static_cast<char>('0' + hundredths / 10);
  if (hundredths % 10 != 0) out += static_cast<char>('0' + hundredths % 10);
  return out;
}

std::string in_unit(std::uint64_t bytes, const size_unit& unit) {
  // (bytes % unit) * 100 stays below 100 TiB, far inside 64 bits.
  return with_hundredths(bytes / unit.bytes, bytes % unit.bytes * 100 / unit.bytes) + " " +
         unit.name;
}

}  // namespace

std::string format_size(std::uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + " B";
  constexpr std::array<size_unit, 4> decimal{{{"TB", 1'000'000'000'000ULL},
                                              {"GB", 1'000'000'000ULL},
                                              {"MB", 1'000'000ULL},
                                              {"KB", 1'000}}};
  constexpr std::array<size_unit, 4> binary{
      {{"TiB", 1ULL << 40}, {"GiB", 1ULL << 30}, {"MiB", 1ULL << 20}, {"KiB", 1ULL << 10}}};
  auto exact = [bytes](const size_unit& unit) {
    return bytes >= unit.bytes && bytes % unit.bytes * 100 % unit.bytes == 0;
  };
  for (std::size_t i = 0; i < decimal.size(); ++i) {
    if (exact(decimal[i])) return in_unit(bytes, decimal[i]);
    if (exact(binary[i])) return in_unit(bytes, binary[i]);
  }
  for (const auto& unit : decimal)
    if (bytes >= unit.bytes) return in_unit(bytes, unit);
  return std::to_string(bytes) + " B";  // unreachable: bytes >= 1000
}

std::string format_usd(double usd) {
  if (!std::isfinite(usd)) return usd > 0 ? "$inf" : "$nan";
  std::array<char, 400> text{};  // DBL_MAX with "%.2f" is 312 characters
  if (std::fabs(usd) >= 1e12) {  // cents no longer exact in a double's 53 bits
    std::snprintf(text.data(), text.size(), "$%.0f", usd);
    return text.data();
  }
  double cents = std::round(usd * 100);
  if (std::fabs(usd * 100 - cents) < 1e-6) {
    std::snprintf(text.data(), text.size(), "$%.2f", cents / 100);
    return text.data();
  }
  // The small epsilon keeps 0.0015 (stored as 0.00149999...) from truncating to 0.0014.
  double truncated = std::floor(usd * 10'000 + 1e-6) / 10'000;
  std::snprintf(text.data(), text.size(), "$%.4f", truncated);
  std::string out = text.data();
  while (out.back() == '0' && out.size() - out.find('.') > 3) out.pop_back();
  return out;
}

std::string format_rate(const config::rate& r) {
  auto count = static_cast<long long>(std::llround(r.burst));
  auto period = std::chrono::milliseconds(std::llround(r.burst * 1000.0 / r.per_second));
  std::string per;
  if (period == std::chrono::seconds(1))
    per = "s";
  else if (period == std::chrono::minutes(1))
    per = "m";
  else if (period == std::chrono::hours(1))
    per = "h";
  else if (period == std::chrono::hours(24))
    per = "d";
  else
    per = config::format_duration(period);
  return std::to_string(count) + "/" + per;
}

}  // namespace broker::session
