// One connection of the gateway's Redis client (redis_client.hpp): connecting (TCP or a unix
// socket, then AUTH and SELECT when the endpoint asks), and round trips: a write of pipelined
// commands and the read of their replies, in order, within the timeout, counted in the stats.
// Every failure is a sentence for redis_unavailable; nothing here throws. Not thread-safe: one
// executor's coroutines drive it, one round trip at a time.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gateway/redis/redis_endpoint.hpp"
#include "gateway/redis/redis_protocol.hpp"
#include "gateway/redis/redis_reply.hpp"
#include "gateway/redis/redis_stats.hpp"

namespace broker::gateway {

namespace asio = boost::asio;

class redis_connection {
 public:
  using clock = std::chrono::steady_clock;
  // Takes each reply as it is read, in the order of the commands.
  using deliver_fn = std::function<void(redis_reply&&)>;

  redis_connection(asio::any_io_executor executor, const redis_endpoint& endpoint,
                   std::shared_ptr<redis_stats> stats, clock::duration timeout);

  // Opens the connection, logs in and selects the db, within the timeout: "" or why not.
  asio::awaitable<std::string> connect();
  // Writes `out` (`commands` commands) and reads their replies into `deliver`, within the
  // timeout: "" or why not. After a failure the connection is to be dropped.
  asio::awaitable<std::string> exchange(const std::vector<asio::const_buffer>& out,
                                        std::size_t commands, const deliver_fn& deliver);

  bool is_open() const { return socket_.is_open(); }
  // False once the server has closed the connection or sent bytes nobody asked for: an idle
  // connection that a restarted Redis closed is noticed before a command is written to it.
  bool still_open();
  // Reply bytes read past the last reply taken (after a round trip: bytes nobody asked for).
  std::size_t buffered() const;
  void drop();
  // From now on a lost connection is reported as closed by the client, not as a fault.
  void closing() { closing_ = true; }

 private:
  asio::awaitable<void> open(std::string& failure);
  asio::awaitable<void> log_in(std::string& failure);
  asio::awaitable<void> transfer(const std::vector<asio::const_buffer>& out, std::size_t commands,
                                 const deliver_fn& deliver, std::string& failure);

  asio::any_io_executor executor_;
  const redis_endpoint& endpoint_;  // the client's, which outlives this
  std::shared_ptr<redis_stats> stats_;
  clock::duration timeout_;
  asio::generic::stream_protocol::socket socket_;  // open while connected
  std::unique_ptr<reply_reader> reader_;           // a new one per connection
  std::array<char, 16 * 1024> buffer_{};
  bool closing_ = false;
};

// "250 ms": a duration in messages.
std::string in_ms(std::chrono::steady_clock::duration d);

}  // namespace broker::gateway
