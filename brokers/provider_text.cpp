// Providers' messages and timestamps (provider_text.hpp).
#include "brokers/provider_text.hpp"

#include <cstdio>
#include <ctime>

namespace broker::brokers {

std::string printable_excerpt(std::string_view text) {
  constexpr std::size_t limit = 300;
  std::string out;
  for (char c : text.substr(0, limit)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > limit) out += "...";
  return out;
}

std::optional<std::chrono::system_clock::time_point> parse_utc_time(std::string_view text) {
  const std::string s(text);
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19)
    return std::nullopt;
  std::string_view rest = text.substr(19);
  if (rest.starts_with('.')) {
    std::size_t digits = 1;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits == 1) return std::nullopt;
    rest.remove_prefix(digits);
  }
  if (rest != "Z") return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::time_t t = ::timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t);
}

}  // namespace broker::brokers
