// What every Redis client of a process did, for the admin listener's /metrics: one redis_stats
// is shared by all clients (one per worker thread), so its counters are atomics. The latency
// histogram is per round trip (from the write to the last reply it asked for), in seconds, with
// Prometheus's cumulative buckets.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace broker::gateway {

class redis_stats {
 public:
  // Upper bounds of the latency buckets in seconds; a last bucket (+Inf) follows them.
  static constexpr std::array<double, 11> latency_bounds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};
  static constexpr std::size_t bucket_count = latency_bounds.size() + 1;

  // A consistent-enough copy for rendering: each field is read once, relaxed.
  struct snapshot {
    std::uint64_t commands = 0;     // commands written to a server
    std::uint64_t round_trips = 0;  // socket writes that carried at least one command
    std::uint64_t errors = 0;       // commands failed as unavailable, plus error replies
    std::uint64_t connects = 0;     // connections established (logged in, db selected)
    // Cumulative: latency_buckets[i] counts round trips of at most latency_bounds[i] seconds;
    // the last is +Inf and equals latency_count.
    std::array<std::uint64_t, bucket_count> latency_buckets{};
    double latency_sum_seconds = 0;
    std::uint64_t latency_count = 0;  // round trips answered in full
  };

  // A write that carried `commands` commands.
  void wrote(std::size_t commands);
  // A round trip answered in full, `latency` after its write began.
  void answered(std::chrono::steady_clock::duration latency);
  void failed(std::size_t commands);
  void error_reply();
  void connected();

  snapshot read() const;

 private:
  std::atomic<std::uint64_t> commands_{0};
  std::atomic<std::uint64_t> round_trips_{0};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::uint64_t> connects_{0};
  std::array<std::atomic<std::uint64_t>, bucket_count> buckets_{};  // per bucket, not cumulative
  std::atomic<std::uint64_t> latency_sum_ns_{0};
};

}  // namespace broker::gateway
