// `serve --audit-sink syslog[:HOST:PORT]` (audit_sink.hpp): every audit record also goes to a
// syslog server (rsyslog, syslog-ng, a SIEM's collector) as RFC 5424 over TCP with octet-counted
// framing (RFC 6587 §3.4.1), one message per record:
//   LEN <PRI>1 TS HOST broker REPLICA EVENT - {the record as written}
// PRI is facility local0 with severity info, or warning for a refusal; TS is the record's ts;
// PROCID is this replica's name, so that a record is keyed by (replica, session, seq).
//
// Lines go out from the sink's own thread in batches of up to 256 (one send each). Plain TCP
// syslog has no acknowledgement: a server that stops loses what it had not yet read from its
// socket. So the last 8 MiB sent are kept, and when the connection is found closed (before each
// batch, or a send failing) they are sent again, ahead of what waits, once it is back: at least
// once, some records twice. While the server is away lines wait (up to max_pending, then the
// oldest are dropped and counted) and the sink reconnects every half second. A connect waits
// at most 2 s and a send 5 s (a server that stopped reading), so shutdown never hangs on it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/audit_sink.hpp"

namespace broker::gateway {

class syslog_sink final : public audit_sink {
 public:
  static constexpr std::size_t max_pending = 100'000;
  static constexpr std::size_t batch_size = 256;
  static constexpr std::size_t replay_bytes = 8 << 20;
  static constexpr std::chrono::milliseconds connect_timeout{2000};
  static constexpr std::chrono::milliseconds send_timeout{5000};

  // "syslog" (127.0.0.1:514) or "syslog:HOST:PORT" ([v6]:PORT too). Throws
  // std::invalid_argument for anything else. Connects in the background.
  syslog_sink(const std::string& spec, std::string replica);
  ~syslog_sink() override;
  syslog_sink(const syslog_sink&) = delete;
  syslog_sink& operator=(const syslog_sink&) = delete;

  void ship(std::string_view session, std::string_view line) override;
  void settle(std::chrono::milliseconds limit) override;
  void flush() override;  // settles for a second and stops the thread

  const std::string& endpoint() const { return endpoint_; }

  // One record as a framed RFC 5424 message (what is sent; for tests).
  static std::string frame(std::string_view line, const std::string& host,
                           const std::string& replica);

 private:
  void run();
  void stop();  // the thread ends (after its send in progress, 5 s at most)
  bool connect_socket();
  bool connection_closed() const;
  void disconnect();  // closes the socket; the replay window goes back ahead of what waits

  std::string host_;
  std::uint16_t port_ = 0;
  std::string endpoint_;
  std::string replica_;
  std::string hostname_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::string> pending_;  // lines not yet sent
  std::deque<std::string> replay_;   // lines sent, the newest last, up to replay_bytes
  std::size_t replay_size_ = 0;
  std::size_t in_flight_ = 0;  // lines the thread took and is sending
  bool stopping_ = false;

  int fd_ = -1;  // the thread's alone
  std::thread thread_;
};

}  // namespace broker::gateway
