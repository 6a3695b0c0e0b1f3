// What a serving broker shows on /metrics beside the per-session counts (metrics.hpp): gauges
// and counters read at each scrape from the listener's context, the leaf cache and the Redis
// clients' stats.
#pragma once

#include <memory>

#include "gateway/metrics.hpp"
#include "gateway/redis/redis_stats.hpp"
#include "live/live_session.hpp"

namespace broker::gateway {

// Open connections, leaf cache entries and mints. `ctx` and `tls` must outlive `m`'s scrapes.
void attach_serve_metrics(metrics& m, live::live_session& ctx, certs::tls_contexts& tls);

// Redis as the requests see it (path="request": admissions, session lookups) and as the
// replica's own thread does (path="background": revocation polls, shared usage, audit records).
void attach_redis_metrics(metrics& m, std::shared_ptr<redis_stats> requests,
                          std::shared_ptr<redis_stats> background);

}  // namespace broker::gateway
