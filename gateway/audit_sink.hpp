// `serve --audit-sink KIND[:WHERE]` (repeatable): every audit record of every session on this
// replica also goes somewhere a pipeline reads it: a Redis Stream (audit_stream.hpp) or a syslog
// server (syslog_sink.hpp). The files stay the record of truth. A sink ships from its own thread,
// batched, so a slow or absent receiver never stalls a request; while it is away, lines wait in
// memory (up to a bound; beyond it the oldest are dropped and counted) and go out when it
// returns. Delivery is at least once: a consumer keys records by session and seq.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

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

  virtual std::uint64_t shipped() const = 0;
  virtual std::uint64_t dropped() const = 0;
};

}  // namespace broker::gateway
