// redis_client: callers queue their commands; one driver coroutine at a time (re)connects,
// writes everything queued in one write, reads the replies in order and wakes each caller as its
// own replies are in. While a round trip is under way, new commands wait in the queue for the
// next write. The state lives in a shared block that the driver holds, so a client destroyed
// mid-round-trip leaves nothing dangling.
#include "gateway/redis_client.hpp"

#include <sys/socket.h>

#include <openssl/evp.h>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <array>
#include <cerrno>
#include <deque>
#include <functional>
#include <optional>
#include <stdexcept>

#include "gateway/redis_protocol.hpp"
#include "proxy/asio.hpp"
#include "proxy/race.hpp"

namespace broker::gateway {

using proxy::use_tuple;
using clock = std::chrono::steady_clock;
using stream_socket = asio::generic::stream_protocol::socket;

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

asio::awaitable<void> sleep_for(clock::duration d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(use_tuple);
}

// False once the server has closed the connection or sent bytes nobody asked for: an idle
// connection that a restarted Redis closed is noticed before a command is written to it.
bool still_open(stream_socket& socket) {
  char byte;
  const auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// Built outside the coroutines: GCC 12 cannot keep an initializer list in a coroutine frame.
std::vector<std::string> select_command(unsigned db) {
  return {"SELECT", std::to_string(db)};
}

std::vector<std::string> evalsha_command(const redis_script& script, std::vector<std::string>& keys,
                                         std::vector<std::string>& args) {
  std::vector<std::string> call = {"EVALSHA", script.sha1, std::to_string(keys.size())};
  call.insert(call.end(), std::make_move_iterator(keys.begin()),
              std::make_move_iterator(keys.end()));
  call.insert(call.end(), std::make_move_iterator(args.begin()),
              std::make_move_iterator(args.end()));
  return call;
}

std::string in_ms(clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

struct redis_client::state {
  using deliver_fn = std::function<void(redis_reply&&)>;

  state(asio::any_io_executor ex, redis_endpoint ep, std::shared_ptr<redis_stats> st,
        std::chrono::milliseconds t)
      : executor(std::move(ex)),
        endpoint(std::move(ep)),
        name(endpoint.display()),
        stats(std::move(st)),
        timeout(t),
        socket(executor) {}

  asio::any_io_executor executor;
  redis_endpoint endpoint;
  std::string name;  // the endpoint without its password, for messages
  std::shared_ptr<redis_stats> stats;
  clock::duration timeout;

  stream_socket socket;                  // open while connected
  std::unique_ptr<reply_reader> reader;  // a new one per connection
  std::array<char, 16 * 1024> buffer{};

  std::deque<pending_ptr> queue;  // waiting for the next write
  std::size_t queued_commands = 0;
  bool driving = false;  // a driver coroutine is running
  bool closed = false;
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

  void drop_connection() {
    boost::system::error_code ignored;
    socket.close(ignored);
  }

  void close() {
    closed = true;
    fail_queue("the client was closed");
    drop_connection();
  }

  clock::duration backoff_left() const {
    if (!last_attempt) return clock::duration::zero();
    return std::max(clock::duration::zero(), *last_attempt + reconnect_backoff - clock::now());
  }

  // Queues `p` and starts the driver if none runs; throws when `p` cannot be sent now.
  void enqueue(std::shared_ptr<state> self, pending_ptr p) {
    auto refuse = [&](const std::string& what) {
      stats->failed(p->commands);
      throw redis_unavailable(message(what));
    };
    if (closed) refuse("the client was closed");
    if (!driving && !socket.is_open()) {
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
        if (!s.socket.is_open() || !still_open(s.socket)) {
          if (s.socket.is_open()) s.last_failure = "the server closed the idle connection";
          s.drop_connection();
          if (const auto left = s.backoff_left(); left > clock::duration::zero()) {
            s.fail_queue("not connected (" + s.last_failure + "); the next attempt in " +
                         in_ms(left));
            break;
          }
          if (auto why = co_await s.connect(); !why.empty()) {
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
    const deliver_fn deliver = [&](redis_reply&& reply) {
      pending& p = *batch[current];
      if (reply.is_error()) stats->error_reply();
      p.replies.push_back(std::move(reply));
      if (p.replies.size() < p.commands) return;
      p.done = true;
      p.wake.cancel();
      ++current;
    };
    const std::string failure = co_await exchange(out, commands, deliver);
    if (!failure.empty()) {
      drop_connection();
      last_failure = failure;
      for (auto& p : batch) finish(*p, failure);
      fail_queue(failure);
    } else if (reader->buffered() != 0) {
      // Bytes nobody asked for: later replies could no longer be matched to their commands.
      drop_connection();
      last_failure = "the server sent more replies than commands";
    }
  }

  // One round trip within the timeout, counted in the stats. Returns why it failed, or "".
  asio::awaitable<std::string> exchange(const std::vector<asio::const_buffer>& out,
                                        std::size_t commands, const deliver_fn& deliver) {
    std::string failure;
    const auto started = clock::now();
    stats->wrote(commands);
    const std::size_t winner =
        co_await proxy::race(transfer(out, commands, deliver, failure), sleep_for(timeout));
    if (winner == 1) co_return "no answer within " + in_ms(timeout);
    if (failure.empty()) stats->answered(clock::now() - started);
    co_return failure;
  }

  // Writes `out` and reads `commands` replies into `deliver`; sets `failure` when it cannot.
  asio::awaitable<void> transfer(const std::vector<asio::const_buffer>& out, std::size_t commands,
                                 const deliver_fn& deliver, std::string& failure) {
    auto lost = [&](const boost::system::error_code& ec, const char* doing) {
      if (closed) return std::string("the client was closed");
      if (ec == asio::error::eof) return std::string("the server closed the connection");
      return std::string("connection lost while ") + doing + ": " + ec.message();
    };
    if (auto [ec, n] = co_await asio::async_write(socket, out, use_tuple); ec) {
      failure = lost(ec, "sending");
      co_return;
    }
    std::size_t answered = 0;
    for (;;) {
      while (answered < commands) {
        auto reply = reader->next();
        if (!reply) break;
        ++answered;
        deliver(std::move(*reply));
      }
      if (reader->failed()) {
        failure = "the server's answer is not RESP (" + reader->error() + ")";
        co_return;
      }
      if (answered == commands) co_return;
      auto [ec, n] = co_await socket.async_read_some(asio::buffer(buffer), use_tuple);
      if (ec) {
        failure = lost(ec, "reading");
        co_return;
      }
      reader->feed(buffer.data(), n);
      // Complete replies were taken above, so what is buffered is mostly one reply arriving.
      if (reader->buffered() > max_reply_bytes) {
        failure = "a reply larger than " + std::to_string(max_reply_bytes) + " bytes";
        co_return;
      }
    }
  }

  // Opens the connection, logs in and selects the db, within the timeout. Returns why it
  // failed, or "".
  asio::awaitable<std::string> connect() {
    last_attempt = clock::now();
    reader = std::make_unique<reply_reader>();
    std::string failure;
    const std::size_t winner = co_await proxy::race(open(failure), sleep_for(timeout));
    if (winner == 1) co_return "no answer within " + in_ms(timeout) + " while connecting";
    if (failure.empty()) stats->connected();
    co_return failure;
  }

  asio::awaitable<void> open(std::string& failure) {
    if (endpoint.kind == redis_endpoint::transport::unix_socket) {
      asio::local::stream_protocol::endpoint path;
      try {
        path = asio::local::stream_protocol::endpoint(endpoint.path);
      } catch (const boost::system::system_error& e) {
        failure = "the socket path " + endpoint.path + ": " + e.code().message();
        co_return;
      }
      if (auto [ec] = co_await socket.async_connect(path, use_tuple); ec) {
        failure = "cannot connect: " + ec.message();
        co_return;
      }
    } else {
      asio::ip::tcp::resolver resolver(executor);
      auto [rec, results] =
          co_await resolver.async_resolve(endpoint.host, std::to_string(endpoint.port), use_tuple);
      if (rec) {
        failure = "cannot resolve " + endpoint.host + ": " + rec.message();
        co_return;
      }
      boost::system::error_code last = asio::error::host_not_found;
      for (const auto& entry : results) {
        drop_connection();
        auto [ec] = co_await socket.async_connect(
            asio::generic::stream_protocol::endpoint(entry.endpoint()), use_tuple);
        last = ec;
        if (!ec) break;
      }
      if (last) {
        failure = "cannot connect: " + last.message();
        co_return;
      }
      boost::system::error_code ignored;
      socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    }
    co_await log_in(failure);
  }

  // AUTH and SELECT, in one write, when the endpoint asks for them.
  asio::awaitable<void> log_in(std::string& failure) {
    std::vector<std::string> names;  // what each reply answers, for the message
    std::string bytes;
    brokers::wipe_on_exit wipe_bytes([&] { brokers::wipe(bytes); });
    if (endpoint.password) {
      std::vector<std::string> auth;
      auth.emplace_back("AUTH");
      if (!endpoint.user.empty()) auth.push_back(endpoint.user);
      auth.emplace_back(endpoint.password->expose());
      brokers::wipe_on_exit wipe_auth([&] { brokers::wipe(auth.back()); });
      append_command(bytes, auth);
      names.emplace_back("AUTH");
    }
    if (endpoint.db != 0) {
      names.push_back("SELECT " + std::to_string(endpoint.db));
      append_command(bytes, select_command(endpoint.db));
    }
    if (names.empty()) co_return;
    std::vector<redis_reply> replies;
    const auto started = clock::now();
    stats->wrote(names.size());
    const std::vector<asio::const_buffer> out(1, asio::buffer(bytes));
    co_await transfer(
        out, names.size(), [&](redis_reply&& r) { replies.push_back(std::move(r)); }, failure);
    if (!failure.empty()) co_return;
    stats->answered(clock::now() - started);
    for (std::size_t i = 0; i < replies.size(); ++i) {
      if (replies[i].is_error()) {
        failure = names[i] + " failed: " + replies[i].text;
        co_return;
      }
    }
  }
};

redis_script::redis_script(std::string lua) : text(std::move(lua)) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha1(), nullptr) != 1)
    throw std::runtime_error("EVP_Digest(sha1) failed");
  static constexpr char hex[] = "0123456789abcdef";
  for (unsigned int i = 0; i < length; ++i) {
    sha1 += hex[digest[i] >> 4];
    sha1 += hex[digest[i] & 15];
  }
}

redis_client::redis_client(asio::any_io_executor executor, redis_endpoint endpoint,
                           std::shared_ptr<redis_stats> stats, std::chrono::milliseconds timeout)
    : state_(std::make_shared<state>(std::move(executor), std::move(endpoint), std::move(stats),
                                     timeout)) {
  if (!state_->stats) throw std::invalid_argument("redis_client: no stats");
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
  return state_->socket.is_open();
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
