// Counters that stop at their maximum instead of wrapping (byte, request and token totals).
#pragma once

#include <cstdint>
#include <limits>

namespace broker::base {

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return b > std::numeric_limits<std::uint64_t>::max() - a
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

}  // namespace broker::base
