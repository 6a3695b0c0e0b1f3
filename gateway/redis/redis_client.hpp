// The gateway's Redis client: one connection, driven by coroutines on one executor (one
// io_context thread; the gateway makes one client per worker thread; not thread-safe).
//
// Pipelined: commands issued while a round trip is under way are queued and go out together in
// the next single write; replies are matched in order. Under concurrency a request costs at most
// one round trip, however many requests a worker serves at once.
//
// Faults: when the connection breaks, the server sends bytes that are not RESP, or a round trip
// takes longer than the timeout (a stopped Redis), every outstanding command fails with
// redis_unavailable and the connection is dropped. The next command connects again, but at most
// one connect attempt is made per reconnect_backoff: a command inside it fails at once, so a dead
// Redis costs no connect storm. An error reply is an answer, not a fault (redis_reply::checked()).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gateway/redis/redis_endpoint.hpp"
#include "gateway/redis/redis_reply.hpp"
#include "gateway/redis/redis_stats.hpp"

namespace broker::gateway {

namespace asio = boost::asio;

// A command and its arguments as redis_client takes them: redis_command("SET", key, value).
// Inside a coroutine, GCC 12 cannot build a braced list of strings (`{"GET", key}` fails with
// "array used as initializer"), so coroutines spell commands with this.
template <class... Args>
requires(sizeof...(Args) > 0 && (std::constructible_from<std::string, Args> &&
                                 ...)) std::vector<std::string> redis_command(Args&&... args) {
  std::vector<std::string> out;
  out.reserve(sizeof...(Args));
  (out.emplace_back(std::forward<Args>(args)), ...);
  return out;
}

// A Lua script for eval(): its text and the SHA-1 (hex) that EVALSHA names it by.
struct redis_script {
  explicit redis_script(std::string lua) : text(std::move(lua)) {}
  std::string text;
  // Hashed on first use: a script made at start-up (admit_script) is in every broker process,
  // most of which never talk to Redis (`broker wrap` would pay OpenSSL's SHA-1 fetch).
  const std::string& sha1() const;

 private:
  mutable std::once_flag hashed_;
  mutable std::string sha1_;
};

class redis_client {
 public:
  // The least time between two connect attempts.
  static constexpr std::chrono::milliseconds reconnect_backoff{250};
  // Commands waiting for the next write; past it a command fails as unavailable at once.
  static constexpr std::size_t max_queued_commands = 16384;
  // Bytes of replies buffered before they are complete; past it the connection is dropped.
  static constexpr std::size_t max_reply_bytes = 16 * 1024 * 1024;

  // What the backoff measures time with (a test passes a clock it moves itself).
  using clock_fn = std::function<std::chrono::steady_clock::time_point()>;

  // Connects lazily, on the first command. `timeout` bounds connecting (with AUTH and SELECT)
  // and each round trip.
  redis_client(asio::any_io_executor executor, redis_endpoint endpoint,
               std::shared_ptr<redis_stats> stats, std::chrono::milliseconds timeout,
               clock_fn now = std::chrono::steady_clock::now);
  // Closes (see close()).
  ~redis_client();
  redis_client(const redis_client&) = delete;
  redis_client& operator=(const redis_client&) = delete;

  // One command and its arguments (binary-safe): the reply, which may be an error reply.
  // Throws redis_unavailable; a cancelled caller's reply is read and dropped.
  asio::awaitable<redis_reply> command(std::vector<std::string> args);
  // The same, spelled as arguments: command("GET", key).
  template <class... Args>
  requires(sizeof...(Args) > 0 && (std::constructible_from<std::string, Args> &&
                                   ...)) asio::awaitable<redis_reply> command(Args&&... args) {
    return command(redis_command(std::forward<Args>(args)...));
  }

  // Several commands in one write (one round trip): their replies, in order.
  asio::awaitable<std::vector<redis_reply>> pipeline(
      std::vector<std::vector<std::string>> commands);

  // EVALSHA, and EVAL once when the server does not know the script (NOSCRIPT: it restarted,
  // or its script cache was flushed).
  asio::awaitable<redis_reply> eval(const redis_script& script, std::vector<std::string> keys,
                                    std::vector<std::string> args);

  bool connected() const;
  // For shutdown: outstanding commands fail as unavailable, the connection is closed, and so
  // is every later command.
  void close();

  const redis_endpoint& endpoint() const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

// A one-shot for CLI commands: connects, sends `commands` in one write, and returns their replies
// (error replies among them), on its own io_context on the calling thread. Throws
// redis_unavailable with the endpoint (without its password) and what went wrong.
std::vector<redis_reply> redis_run(const redis_endpoint& endpoint,
                                   std::vector<std::vector<std::string>> commands,
                                   std::chrono::milliseconds timeout);

}  // namespace broker::gateway
