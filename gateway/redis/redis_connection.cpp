#include "gateway/redis/redis_connection.hpp"

#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <cerrno>

#include "base/asio.hpp"
#include "base/race.hpp"
#include "base/secret.hpp"
#include "gateway/redis/redis_client.hpp"

namespace broker::gateway {

namespace {

asio::awaitable<void> sleep_for(redis_connection::clock::duration d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(use_tuple);
}

// Built outside the coroutines: GCC 12 cannot keep an initializer list in a coroutine frame.
std::vector<std::string> select_command(unsigned db) {
  return {"SELECT", std::to_string(db)};
}

}  // namespace

std::string in_ms(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

redis_connection::redis_connection(asio::any_io_executor executor, const redis_endpoint& endpoint,
                                   std::shared_ptr<redis_stats> stats, clock::duration timeout)
    : executor_(std::move(executor)),
      endpoint_(endpoint),
      stats_(std::move(stats)),
      timeout_(timeout),
      socket_(executor_) {}

bool redis_connection::still_open() {
  char byte;
  const auto n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

std::size_t redis_connection::buffered() const {
  return reader_ ? reader_->buffered() : 0;
}

void redis_connection::drop() {
  boost::system::error_code ignored;
  socket_.close(ignored);
}

asio::awaitable<std::string> redis_connection::exchange(const std::vector<asio::const_buffer>& out,
                                                        std::size_t commands,
                                                        const deliver_fn& deliver) {
  std::string failure;
  const auto started = clock::now();
  stats_->wrote(commands);
  const std::size_t winner =
      co_await base::race(transfer(out, commands, deliver, failure), sleep_for(timeout_));
  if (winner == 1) co_return "no answer within " + in_ms(timeout_);
  if (failure.empty()) stats_->answered(clock::now() - started);
  co_return failure;
}

asio::awaitable<void> redis_connection::transfer(const std::vector<asio::const_buffer>& out,
                                                 std::size_t commands, const deliver_fn& deliver,
                                                 std::string& failure) {
  auto lost = [&](const boost::system::error_code& ec, const char* doing) {
    if (closing_) return std::string("the client was closed");
    if (ec == asio::error::eof) return std::string("the server closed the connection");
    return std::string("connection lost while ") + doing + ": " + ec.message();
  };
  if (auto [ec, n] = co_await asio::async_write(socket_, out, use_tuple); ec) {
    failure = lost(ec, "sending");
    co_return;
  }
  std::size_t answered = 0;
  for (;;) {
    while (answered < commands) {
      auto reply = reader_->next();
      if (!reply) break;
      ++answered;
      deliver(std::move(*reply));
    }
    if (reader_->failed()) {
      failure = "the server's answer is not RESP (" + reader_->error() + ")";
      co_return;
    }
    if (answered == commands) co_return;
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer_), use_tuple);
    if (ec) {
      failure = lost(ec, "reading");
      co_return;
    }
    reader_->feed(buffer_.data(), n);
    // Complete replies were taken above, so what is buffered is mostly one reply arriving.
    if (reader_->buffered() > redis_client::max_reply_bytes) {
      failure = "a reply larger than " + std::to_string(redis_client::max_reply_bytes) + " bytes";
      co_return;
    }
  }
}

asio::awaitable<std::string> redis_connection::connect() {
  reader_ = std::make_unique<reply_reader>();
  std::string failure;
  const std::size_t winner = co_await base::race(open(failure), sleep_for(timeout_));
  if (winner == 1) co_return "no answer within " + in_ms(timeout_) + " while connecting";
  if (failure.empty()) stats_->connected();
  co_return failure;
}

asio::awaitable<void> redis_connection::open(std::string& failure) {
  if (endpoint_.kind == redis_endpoint::transport::unix_socket) {
    asio::local::stream_protocol::endpoint path;
    try {
      path = asio::local::stream_protocol::endpoint(endpoint_.path);
    } catch (const boost::system::system_error& e) {
      failure = "the socket path " + endpoint_.path + ": " + e.code().message();
      co_return;
    }
    if (auto [ec] = co_await socket_.async_connect(path, use_tuple); ec) {
      failure = "cannot connect: " + ec.message();
      co_return;
    }
  } else {
    asio::ip::tcp::resolver resolver(executor_);
    auto [rec, results] =
        co_await resolver.async_resolve(endpoint_.host, std::to_string(endpoint_.port), use_tuple);
    if (rec) {
      failure = "cannot resolve " + endpoint_.host + ": " + rec.message();
      co_return;
    }
    boost::system::error_code last = asio::error::host_not_found;
    for (const auto& entry : results) {
      drop();
      auto [ec] = co_await socket_.async_connect(
          asio::generic::stream_protocol::endpoint(entry.endpoint()), use_tuple);
      last = ec;
      if (!ec) break;
    }
    if (last) {
      failure = "cannot connect: " + last.message();
      co_return;
    }
    boost::system::error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  co_await log_in(failure);
}

// AUTH and SELECT, in one write, when the endpoint asks for them.
asio::awaitable<void> redis_connection::log_in(std::string& failure) {
  std::vector<std::string> names;  // what each reply answers, for the message
  std::string bytes;
  base::wipe_on_exit wipe_bytes([&] { base::wipe(bytes); });
  if (endpoint_.password) {
    std::vector<std::string> auth;
    auth.emplace_back("AUTH");
    if (!endpoint_.user.empty()) auth.push_back(endpoint_.user);
    auth.emplace_back(endpoint_.password->expose());
    base::wipe_on_exit wipe_auth([&] { base::wipe(auth.back()); });
    append_command(bytes, auth);
    names.emplace_back("AUTH");
  }
  if (endpoint_.db != 0) {
    names.push_back("SELECT " + std::to_string(endpoint_.db));
    append_command(bytes, select_command(endpoint_.db));
  }
  if (names.empty()) co_return;
  std::vector<redis_reply> replies;
  const auto started = clock::now();
  stats_->wrote(names.size());
  const std::vector<asio::const_buffer> out(1, asio::buffer(bytes));
  co_await transfer(
      out, names.size(), [&](redis_reply&& r) { replies.push_back(std::move(r)); }, failure);
  if (!failure.empty()) co_return;
  stats_->answered(clock::now() - started);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].is_error()) {
      failure = names[i] + " failed: " + replies[i].text;
      co_return;
    }
  }
}

}  // namespace broker::gateway
