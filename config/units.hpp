// Human units for budgets: sizes ("100MB", "1.5GiB"), durations ("2h", "90s"), rates ("20/s").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace broker::config {

// "512", "100KB", "100MB", "1GB", "2TB" (powers of 1000) and "KiB".."TiB" (powers of 1024);
// case-insensitive unit, optional single space, fractional values allowed ("1.5GB").
std::optional<std::uint64_t> parse_size(std::string_view text);

// "90s", "30m", "2h", "1d", "1h30m", "500ms"; a bare number is seconds.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// The inverse, largest units first: 5400000ms -> "1h30m", 500ms -> "500ms", 0 -> "0s".
std::string format_duration(std::chrono::milliseconds duration);

struct rate {
  double per_second = 0;  // sustained rate
  double burst = 0;       // bucket size: the numerator ("20/s" -> 20)
};
// "20/s", "100/m", "1000/h", "5/10s".
std::optional<rate> parse_rate(std::string_view text);

}  // namespace broker::config
