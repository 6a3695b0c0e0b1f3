// What a running session counts: its connections as they come and go, its exchanges as their
// records are written (what `broker status`, the metrics and the session's last record show).
// Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "session/audit_record.hpp"

namespace broker::live {

class session_counters {
 public:
  std::uint64_t next_connection_id() { return ++connection_ids_; }
  // One more exchange recorded (or refused for want of a log).
  void count(const session::audit_entry& entry) {
    ++requests_;
    if (!entry.allowed) ++denied_;
    if (entry.allowed && !entry.would_deny.empty()) ++would_deny_;
    if (entry.allowed && entry.learned) ++learned_;
  }

  std::uint64_t requests() const { return requests_.load(); }
  std::uint64_t denied() const { return denied_.load(); }
  // Allowed, and an audit-only layer would have refused (docs/policy.md).
  std::uint64_t would_deny() const { return would_deny_.load(); }
  // Let through by wrap --learn.
  std::uint64_t learned() const { return learned_.load(); }

  std::atomic<std::size_t> active_connections{0};

 private:
  std::atomic<std::uint64_t> connection_ids_{0};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> denied_{0};
  std::atomic<std::uint64_t> would_deny_{0};
  std::atomic<std::uint64_t> learned_{0};
};

}  // namespace broker::live
