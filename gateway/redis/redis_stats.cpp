#include "gateway/redis/redis_stats.hpp"

#include <algorithm>

namespace broker::gateway {

namespace {
constexpr auto relaxed = std::memory_order_relaxed;
}

void redis_stats::wrote(std::size_t commands) {
  commands_.fetch_add(commands, relaxed);
  round_trips_.fetch_add(1, relaxed);
}

void redis_stats::answered(std::chrono::steady_clock::duration latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  const auto bound = std::lower_bound(latency_bounds.begin(), latency_bounds.end(), seconds);
  buckets_[static_cast<std::size_t>(bound - latency_bounds.begin())].fetch_add(1, relaxed);
  latency_sum_ns_.fetch_add(
      static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(latency).count()),
      relaxed);
}

void redis_stats::failed(std::size_t commands) {
  errors_.fetch_add(commands, relaxed);
}

void redis_stats::error_reply() {
  errors_.fetch_add(1, relaxed);
}

void redis_stats::connected() {
  connects_.fetch_add(1, relaxed);
}

redis_stats::snapshot redis_stats::read() const {
  snapshot out;
  out.commands = commands_.load(relaxed);
  out.round_trips = round_trips_.load(relaxed);
  out.errors = errors_.load(relaxed);
  out.connects = connects_.load(relaxed);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    running += buckets_[i].load(relaxed);
    out.latency_buckets[i] = running;
  }
  out.latency_count = running;
  out.latency_sum_seconds = static_cast<double>(latency_sum_ns_.load(relaxed)) / 1e9;
  return out;
}

}  // namespace broker::gateway
