// `serve --audit-sink KIND[:WHERE]` (repeatable): every audit record of every session on this
// replica also goes somewhere a pipeline reads it: a Redis Stream (audit_stream.hpp) or a syslog
// server (syslog_sink.hpp). The files stay the record of truth. A sink ships from its own thread,
// batched, so a slow or absent receiver never stalls a request; while it is away, lines wait in
// memory (up to a bound; beyond it the oldest are dropped and counted) and go out when it
// returns. Delivery is at least once: a consumer keys records by session and seq.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace broker::gateway {

class audit_sink {
 public:
  virtual ~audit_sink() = default;

  // From the audit log's sink (any thread, under that log's lock): queue one line.
  virtual void ship(std::string_view session, std::string_view line) = 0;
  // At shutdown, before the shared store closes: waits (up to `limit`) for what is queued to
  // go out.
  virtual void settle(std::chrono::milliseconds limit) = 0;
  // After the store closed: what is still queued, in one last blocking try.
  virtual void flush() = 0;

  std::uint64_t shipped() const { return shipped_; }
  std::uint64_t dropped() const { return dropped_; }  // while the queue was full

 protected:
  std::atomic<std::uint64_t> shipped_ = 0;
  std::atomic<std::uint64_t> dropped_ = 0;
};

// An audit log's sink (audit_log::set_sink) that gives each of `sinks` the session's lines.
inline std::function<void(std::string_view)> ship_to(std::vector<std::shared_ptr<audit_sink>> sinks,
                                                     std::string session) {
  return [sinks = std::move(sinks), session = std::move(session)](std::string_view line) {
    for (const auto& sink : sinks) sink->ship(session, line);
  };
}

}  // namespace broker::gateway
