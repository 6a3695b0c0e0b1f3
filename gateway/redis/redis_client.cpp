// redis_client: callers queue their commands; one driver coroutine at a time (re)connects,
// writes everything queued in one write, reads the replies in order and wakes each caller as its
// own replies are in. While a round trip is under way, new commands wait in the queue for the
// next write. The state lives in a shared block that the driver holds, so a client destroyed
// mid-round-trip leaves nothing dangling. Connecting and the round trip itself are
// redis_connection's.
#include "gateway/redis/redis_client.hpp"

#include <openssl/evp.h>
#include <boost/asio/io_context.hpp>

#include <array>
#include <deque>
#include <optional>
#include <stdexcept>

#include "base/asio.hpp"
#include "base/text.hpp"
#include "gateway/redis/redis_connection.hpp"
#include "gateway/redis/redis_protocol.hpp"

namespace broker::gateway {

using clock = std::chrono::steady_clock;

namespace {

// One caller's commands: written together, answered in order.
struct pending {
  explicit pending(const asio::any_io_executor& ex) : wake(ex, clock::time_point::max()) {}
  std::string bytes;  // the commands in RESP
  std::size_t commands = 0;
  std::vector<redis_reply> replies;
  asio::steady_timer wake;  // cancelled once done
  bool done = false;
  std::string failure;     // when not empty: why the commands failed (redis_unavailable)
  bool abandoned = false;  // the caller was cancelled: not written, or its replies dropped
};
using pending_ptr = std::shared_ptr<pending>;

std::vector<std::string> evalsha_command(const redis_script& script, std::vector<std::string>& keys,
                                         std::vector<std::string>& args) {
  std::vector<std::string> call = {"EVALSHA", script.sha1(), std::to_string(keys.size())};
  call.insert(call.end(), std::make_move_iterator(keys.begin()),
              std::make_move_iterator(keys.end()));
  call.insert(call.end(), std::make_move_iterator(args.begin()),
              std::make_move_iterator(args.end()));
  return call;
}

}  // namespace

struct redis_client::state {
  state(asio::any_io_executor ex, redis_endpoint ep, std::shared_ptr<redis_stats> st,
        std::chrono::milliseconds timeout, clock_fn clock_now)
      : executor(std::move(ex)),
        endpoint(std::move(ep)),
        name(endpoint.display()),
        stats(std::move(st)),
        connection(executor, endpoint, stats, timeout),
        now(std::move(clock_now)) {}

  asio::any_io_executor executor;
  redis_endpoint endpoint;
  std::string name;  // the endpoint without its password, for messages
  std::shared_ptr<redis_stats> stats;
  redis_connection connection;

  std::deque<pending_ptr> queue;  // waiting for the next write
  std::size_t queued_commands = 0;
  bool driving = false;  // a driver coroutine is running
  bool closed = false;
  clock_fn now;
  std::optional<clock::time_point> last_attempt;  // the last connect attempt began
  std::string last_failure;                       // why the connection last failed

  std::string message(const std::string& what) const { return "redis " + name + ": " + what; }

  void finish(pending& p, const std::string& what) {
    if (p.done) return;
    stats->failed(p.commands);
    p.failure = message(what);
    p.done = true;
    p.wake.cancel();
  }

  void fail_queue(const std::string& what) {
    while (!queue.empty()) {
      finish(*queue.front(), what);
      queue.pop_front();
    }
    queued_commands = 0;
  }

  void drop_connection() { connection.drop(); }

  void close() {
    closed = true;
    connection.closing();
    fail_queue("the client was closed");
    drop_connection();
  }

  clock::duration backoff_left() const {
    if (!last_attempt) return clock::duration::zero();
    return std::max(clock::duration::zero(), *last_attempt + reconnect_backoff - now());
  }

  // Queues `p` and starts the driver if none runs; throws when `p` cannot be sent now.
  void enqueue(std::shared_ptr<state> self, pending_ptr p) {
    auto refuse = [&](const std::string& what) {
      stats->failed(p->commands);
      throw redis_unavailable(message(what));
    };
    if (closed) refuse("the client was closed");
    if (!driving && !connection.is_open()) {
      if (const auto left = backoff_left(); left > clock::duration::zero())
        refuse("not connected (" + last_failure + "); the next attempt in " + in_ms(left));
    }
    if (queued_commands + p->commands > max_queued_commands)
      refuse("more than " + std::to_string(max_queued_commands) + " commands waiting");
    queued_commands += p->commands;
    queue.push_back(std::move(p));
    if (!driving) {
      driving = true;
      asio::co_spawn(executor, drive(std::move(self)), asio::detached);
    }
  }

  // The caller's side: queue the commands, wait for the driver to answer or fail them.
  static asio::awaitable<std::vector<redis_reply>> submit(
      std::shared_ptr<state> s, std::vector<std::vector<std::string>> commands) {
    auto p = std::make_shared<pending>(s->executor);
    for (const auto& c : commands) append_command(p->bytes, c);
    p->commands = commands.size();
    s->enqueue(s, p);
    if (!p->done) co_await p->wake.async_wait(use_tuple);
    if (!p->done) {
      // The caller was cancelled: its commands are not written, or their replies are dropped.
      p->abandoned = true;
      throw boost::system::system_error(asio::error::operation_aborted);
    }
    if (!p->failure.empty()) throw redis_unavailable(p->failure);
    co_return std::move(p->replies);
  }

  static asio::awaitable<void> drive(std::shared_ptr<state> self) {
    state& s = *self;
    std::vector<pending_ptr> batch;
    try {
      while (!s.closed && !s.queue.empty()) {
        if (!s.connection.is_open() || !s.connection.still_open()) {
          if (s.connection.is_open()) s.last_failure = "the server closed the idle connection";
          s.drop_connection();
          if (const auto left = s.backoff_left(); left > clock::duration::zero()) {
            s.fail_queue("not connected (" + s.last_failure + "); the next attempt in " +
                         in_ms(left));
            break;
          }
          s.last_attempt = s.now();
          if (auto why = co_await s.connection.connect(); !why.empty()) {
            s.drop_connection();
            s.last_failure = why;
            s.fail_queue(why);
            break;
          }
          continue;
        }
        co_await s.round_trip(batch);
        batch.clear();
      }
    } catch (const std::exception& e) {
      s.drop_connection();
      for (auto& p : batch) s.finish(*p, e.what());
      s.fail_queue(e.what());
    }
    if (s.closed) s.drop_connection();
    s.driving = false;
  }

  // Everything queued that a caller still waits for, in one write; each caller is woken as its
  // replies are in. On a fault, this batch and everything queued behind it fail.
  asio::awaitable<void> round_trip(std::vector<pending_ptr>& batch) {
    std::vector<asio::const_buffer> out;
    std::size_t commands = 0;
    while (!queue.empty()) {
      pending_ptr p = std::move(queue.front());
      queue.pop_front();
      queued_commands -= p->commands;
      if (p->abandoned) continue;
      out.push_back(asio::buffer(p->bytes));
      commands += p->commands;
      batch.push_back(std::move(p));
    }
    if (batch.empty()) co_return;
    std::size_t current = 0;
    const redis_connection::deliver_fn deliver = [&](redis_reply&& reply) {
      pending& p = *batch[current];
      if (reply.is_error()) stats->error_reply();
      p.replies.push_back(std::move(reply));
      if (p.replies.size() < p.commands) return;
      p.done = true;
      p.wake.cancel();
      ++current;
    };
    const std::string failure = co_await connection.exchange(out, commands, deliver);
    if (!failure.empty()) {
      drop_connection();
      last_failure = failure;
      for (auto& p : batch) finish(*p, failure);
      fail_queue(failure);
    } else if (connection.buffered() != 0) {
      // Bytes nobody asked for: later replies could no longer be matched to their commands.
      drop_connection();
      last_failure = "the server sent more replies than commands";
    }
  }
};

const std::string& redis_script::sha1() const {
  std::call_once(hashed_, [this] {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    if (EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha1(), nullptr) != 1)
      throw std::runtime_error("EVP_Digest(sha1) failed");
    sha1_ = base::hex_encode(digest.data(), length);
  });
  return sha1_;
}

redis_client::redis_client(asio::any_io_executor executor, redis_endpoint endpoint,
                           std::shared_ptr<redis_stats> stats, std::chrono::milliseconds timeout,
                           clock_fn now)
    : state_(std::make_shared<state>(std::move(executor), std::move(endpoint), std::move(stats),
                                     timeout, std::move(now))) {
  if (!state_->stats) throw std::invalid_argument("redis_client: no stats");
  if (!state_->now) throw std::invalid_argument("redis_client: no clock");
  if (timeout <= std::chrono::milliseconds::zero())
    throw std::invalid_argument("redis_client: the timeout must be positive");
}

redis_client::~redis_client() {
  state_->close();
}

asio::awaitable<redis_reply> redis_client::command(std::vector<std::string> args) {
  std::vector<std::vector<std::string>> one;
  one.push_back(std::move(args));
  auto replies = co_await state::submit(state_, std::move(one));
  co_return std::move(replies.front());
}

asio::awaitable<std::vector<redis_reply>> redis_client::pipeline(
    std::vector<std::vector<std::string>> commands) {
  if (commands.empty()) co_return std::vector<redis_reply>{};
  co_return co_await state::submit(state_, std::move(commands));
}

asio::awaitable<redis_reply> redis_client::eval(const redis_script& script,
                                                std::vector<std::string> keys,
                                                std::vector<std::string> args) {
  auto s = state_;  // the client may go while this waits; its state may not
  std::vector<std::string> call = evalsha_command(script, keys, args);
  std::vector<std::vector<std::string>> one(1, call);
  auto replies = co_await state::submit(s, std::move(one));
  if (!replies.front().is_error("NOSCRIPT")) co_return std::move(replies.front());
  call[0] = "EVAL";
  call[1] = script.text;
  one.clear();
  one.push_back(std::move(call));
  replies = co_await state::submit(s, std::move(one));
  co_return std::move(replies.front());
}

bool redis_client::connected() const {
  return state_->connection.is_open();
}

void redis_client::close() {
  state_->close();
}

const redis_endpoint& redis_client::endpoint() const {
  return state_->endpoint;
}

std::vector<redis_reply> redis_run(const redis_endpoint& endpoint,
                                   std::vector<std::vector<std::string>> commands,
                                   std::chrono::milliseconds timeout) {
  asio::io_context io;
  std::vector<redis_reply> replies;
  std::exception_ptr failure;
  {
    redis_client client(io.get_executor(), endpoint, std::make_shared<redis_stats>(), timeout);
    asio::co_spawn(io, client.pipeline(std::move(commands)),
                   [&](std::exception_ptr e, std::vector<redis_reply> r) {
                     failure = e;
                     replies = std::move(r);
                   });
    io.run();
  }
  if (failure) std::rethrow_exception(failure);
  return replies;
}

}  // namespace broker::gateway
