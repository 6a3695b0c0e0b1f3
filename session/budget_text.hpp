// How budget limits and usage read in a 429 budget_exhausted body and in `broker status`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "config/units.hpp"

namespace broker::session {

// Bytes below 1000 exactly ("512 B"); larger sizes in the unit that states them exactly with at
// most two decimals, decimal first ("100 MB", "1 KiB", "1.5 GB"), else decimal truncated to two
// decimals ("123.45 MB"): a used amount never reads as more than it is.
std::string format_size(std::uint64_t bytes);

// "$25.00"; amounts that are not whole cents keep up to four decimals, truncated ("$0.0015").
std::string format_usd(double usd);

// The inverse of config::parse_rate: "20/s", "100/m", "5/10s"; a bucket merged from several
// layers reads as its count per period ("20/12s").
std::string format_rate(const config::rate& r);

}  // namespace broker::session
