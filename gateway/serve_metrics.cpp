#include "gateway/serve_metrics.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include "certs/tls_contexts.hpp"

namespace broker::gateway {

void attach_serve_metrics(metrics& m, live::live_session& ctx, certs::tls_contexts& tls) {
  m.add_gauge("broker_open_connections", "Client connections open now",
              [&ctx] { return static_cast<double>(ctx.counters().active_connections.load()); });
  m.add_gauge("broker_leaf_cache_entries", "Leaf certificates held for intercepted hosts",
              [&tls] { return static_cast<double>(tls.leaves().size()); });
  m.add_collector([&tls](exposition& out) {
    out.family("broker_leaf_mints_total", "Leaf certificates minted (leaf cache misses)",
               exposition::kind::counter);
    out.sample("broker_leaf_mints_total", {}, static_cast<std::uint64_t>(tls.leaves().minted()));
  });
}

void attach_redis_metrics(metrics& m, std::shared_ptr<redis_stats> requests,
                          std::shared_ptr<redis_stats> background) {
  m.add_collector([requests, background](exposition& out) {
    const auto s = requests->read();
    const auto b = background->read();
    using kind = exposition::kind;
    const char* names[] = {"broker_redis_commands_total", "broker_redis_round_trips_total",
                           "broker_redis_errors_total", "broker_redis_connects_total"};
    const char* help[] = {"Commands sent to Redis", "Round trips to Redis (writes of commands)",
                          "Redis commands that failed (unreachable, or an error reply)",
                          "Connections made to Redis"};
    const std::uint64_t on_requests[] = {s.commands, s.round_trips, s.errors, s.connects};
    const std::uint64_t on_background[] = {b.commands, b.round_trips, b.errors, b.connects};
    for (std::size_t i = 0; i < 4; ++i) {
      out.family(names[i], help[i], kind::counter);
      out.sample(names[i], {{"path", "request"}}, on_requests[i]);
      out.sample(names[i], {{"path", "background"}}, on_background[i]);
    }
    out.family("broker_redis_round_trip_seconds", "Redis round-trip latency", kind::histogram);
    // The stats' last bucket is +Inf: the bounds say so too.
    std::array<double, redis_stats::bucket_count> bounds{};
    std::copy(redis_stats::latency_bounds.begin(), redis_stats::latency_bounds.end(),
              bounds.begin());
    bounds.back() = std::numeric_limits<double>::infinity();
    out.histogram("broker_redis_round_trip_seconds", {}, bounds, s.latency_buckets,
                  s.latency_sum_seconds, s.latency_count);
  });
}

}  // namespace broker::gateway
