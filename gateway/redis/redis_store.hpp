// The session store replicas share (docs/gateway.md): records, revocations and budget usage in
// Redis.
//
// Keys: broker:session:ID (hash: record = the record's JSON, revoked = 0|1), broker:sessions (set
// of ids), broker:revoked (set) with broker:revocations (a counter every revoke bumps, which each
// replica polls), broker:usage:ID (hash: what the session spent on every replica).
//
// Three ways in: the admin side (the control socket's thread, and the admin listener's for
// admin tokens, at most once a second) makes one blocking round trip per call; the proxy side uses
// the calling worker thread's own pipelined client (client_here()); and the store's own thread
// polls revocations and sends work posted to it (run()).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/redis/redis_client.hpp"
#include "gateway/session_store.hpp"

namespace broker::gateway {

class redis_store final : public session_store {
 public:
  // How often each replica looks for revocations: a revoke reaches every replica well within 1 s.
  static constexpr std::chrono::milliseconds revocation_poll{200};

  // `stats` counts the proxy side's round trips (one per budgeted request), `background` the
  // store's own (revocation polls, usage and audit shipping), so each can be read apart.
  redis_store(redis_endpoint endpoint, std::shared_ptr<redis_stats> stats,
              std::shared_ptr<redis_stats> background, std::chrono::milliseconds timeout);
  ~redis_store() override;

  void put(const session_record& r) override;
  std::vector<session_record> all() override;
  std::optional<session_record> get(const std::string& id) override;
  bool revoke(const std::string& id) override;
  asio::awaitable<std::optional<session_record>> fetch(std::string id) override;

  // `on_revoked(id)` for every session revoked anywhere (once each,
  // from that thread), within revocation_poll of the revoke. Call once.
  void watch_revocations(std::function<void(const std::string&)> on_revoked);
  // Runs `job` on the store's thread with its client (fire and forget; errors are the job's).
  void run(std::function<asio::awaitable<void>(redis_client&)> job);
  // The calling worker thread's client (made on first use; the worker's executor).
  redis_client& client_here(const asio::any_io_executor& executor);
  // A blocking round trip, for the admin side and for shutdown.
  std::vector<redis_reply> blocking(std::vector<std::vector<std::string>> commands);
  // Ends the store's thread and closes every client (before the workers' io_contexts go).
  void close();

  // False from a failed revocation poll until one succeeds: leases (shared_budget) stop.
  bool reachable() const { return reachable_.load(std::memory_order_relaxed); }
  const redis_endpoint& endpoint() const { return endpoint_; }
  const std::shared_ptr<redis_stats>& stats() const { return stats_; }

  static std::string session_key(const std::string& id) { return "broker:session:" + id; }
  static std::string usage_key(const std::string& id) { return "broker:usage:" + id; }

 private:
  struct background;
  redis_endpoint endpoint_;
  std::shared_ptr<redis_stats> stats_;
  std::chrono::milliseconds timeout_;
  std::mutex clients_mutex_;
  std::map<const void*, std::unique_ptr<redis_client>> clients_;  // per worker io_context
  std::unique_ptr<background> background_;
  std::atomic<bool> reachable_{true};
};

}  // namespace broker::gateway
