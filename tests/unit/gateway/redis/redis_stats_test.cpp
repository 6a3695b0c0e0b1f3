#include "gateway/redis/redis_stats.hpp"

#include <catch2/catch.hpp>

using broker::gateway::redis_stats;
using namespace std::chrono_literals;

TEST_CASE("redis stats: counters, and a cumulative latency histogram", "[redis]") {
  redis_stats stats;
  stats.wrote(3);
  stats.wrote(1);
  stats.failed(2);
  stats.error_reply();
  stats.connected();
  stats.answered(200us);  // <= 0.0005
  stats.answered(1ms);    // <= 0.001 (a bound is inclusive)
  stats.answered(30ms);   // <= 0.05
  stats.answered(2s);     // +Inf

  const auto s = stats.read();
  CHECK(s.commands == 4);
  CHECK(s.round_trips == 2);
  CHECK(s.errors == 3);
  CHECK(s.connects == 1);
  CHECK(s.latency_count == 4);
  CHECK(s.latency_sum_seconds == Approx(2.0312));
  const std::array<std::uint64_t, redis_stats::bucket_count> expected = {1, 2, 2, 2, 2, 2,
                                                                         3, 3, 3, 3, 3, 4};
  CHECK(s.latency_buckets == expected);
}
