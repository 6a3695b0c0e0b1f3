// `serve --audit-sink redis` (audit_sink.hpp): every audit record, of every session on this
// replica, also goes to a Redis Stream (default key broker:audit) that a pipeline reads (XREAD, or
// XREADGROUP with acknowledgements) — entries {session, replica, record: the JSONL line}, in each
// session's seq order. Why a stream: the replicas already share Redis; an entry is stored (and with
// appendonly, durable) before it is acknowledged, consumers resume from their last id, and
// several consumer groups can read one stream, none of which syslog gives.
//
// The files stay the record of truth: lines are shipped from the store's thread, batched (one
// pipelined round trip per batch), so a slow or absent Redis never stalls a request. While
// Redis is away, lines wait in memory (up to max_pending; beyond that the oldest are dropped
// and counted) and go out when it returns.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "gateway/audit_sink.hpp"
#include "gateway/redis/redis_store.hpp"

namespace broker::gateway {

class audit_stream final : public audit_sink, public std::enable_shared_from_this<audit_stream> {
 public:
  static constexpr std::size_t max_pending = 100'000;
  static constexpr std::size_t batch_size = 256;
  static constexpr std::size_t stream_max_length = 10'000'000;  // XADD MAXLEN ~

  audit_stream(std::shared_ptr<redis_store> store, std::string key, std::string replica);

  void ship(std::string_view session, std::string_view line) override;
  // Waits for the store's thread to ship what is queued, so that nothing is sent twice.
  void settle(std::chrono::milliseconds limit) override;
  // One blocking round trip. A record whose batch was cut off by the store's close may go out
  // twice.
  void flush() override;

 private:
  struct entry {
    std::string session;
    std::string line;
  };
  asio::awaitable<void> drain(redis_client& client);
  std::vector<std::string> xadd(const entry& e) const;

  std::shared_ptr<redis_store> store_;
  const std::string key_;
  const std::string replica_;
  mutable std::mutex mutex_;
  std::deque<entry> pending_;
  bool draining_ = false;
};

}  // namespace broker::gateway
