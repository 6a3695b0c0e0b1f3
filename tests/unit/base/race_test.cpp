#include "base/race.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

namespace asio = boost::asio;
using broker::base::beside;
using broker::base::race;
using namespace std::chrono_literals;

namespace {

asio::awaitable<void> sleep(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// Sets `ended` when its frame goes, however the coroutine ends.
struct on_end {
  bool& ended;
  ~on_end() { ended = true; }
};

asio::awaitable<void> side(std::chrono::milliseconds d, bool& ended, bool fail = false) {
  on_end mark{ended};
  co_await sleep(d);
  if (fail) throw std::runtime_error("side failed");
}

asio::awaitable<int> main_work(std::chrono::milliseconds d, bool side_ended_before,
                               const bool& side_ended, bool& cancelled, bool fail = false) {
  try {
    co_await sleep(d);
  } catch (const boost::system::system_error&) {
    cancelled = true;
    throw;
  }
  if (fail) throw std::logic_error("main failed");
  // The side's frame is gone before the main work ends, when the side was done first.
  co_return side_ended_before&& side_ended ? 2 : 1;
}

template <typename T>
std::optional<T> run(asio::io_context& io, asio::awaitable<T> work, std::string& failure) {
  std::optional<T> result;
  asio::co_spawn(io, std::move(work), [&](std::exception_ptr e, T value) {
    if (!e) {
      result = value;
      return;
    }
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      failure = x.what();
    }
  });
  io.run_for(5s);
  return result;
}

}  // namespace

TEST_CASE("beside: a side that ends first lets the main work go on, its frame freed", "[race]") {
  asio::io_context io;
  bool side_ended = false, cancelled = false;
  std::string failure;
  const auto result = run(
      io, beside(side(10ms, side_ended), main_work(60ms, true, side_ended, cancelled)), failure);
  CHECK(failure.empty());
  CHECK(result == 2);
  CHECK_FALSE(cancelled);
}

TEST_CASE("beside: the main work's end cancels a side still running", "[race]") {
  asio::io_context io;
  bool side_ended = false, cancelled = false;
  std::string failure;
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = run(
      io, beside(side(10s, side_ended), main_work(10ms, false, side_ended, cancelled)), failure);
  CHECK(failure.empty());
  CHECK(result == 1);
  CHECK(side_ended);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

TEST_CASE("beside: a side's failure cancels the main work and is what the caller sees", "[race]") {
  asio::io_context io;
  bool side_ended = false, cancelled = false;
  std::string failure;
  const auto result =
      run(io, beside(side(10ms, side_ended, true), main_work(10s, false, side_ended, cancelled)),
          failure);
  CHECK_FALSE(result);
  CHECK(failure == "side failed");
  CHECK(cancelled);
}

TEST_CASE("beside: the main work's failure cancels the side and is rethrown", "[race]") {
  asio::io_context io;
  bool side_ended = false, cancelled = false;
  std::string failure;
  const auto result =
      run(io, beside(side(10s, side_ended), main_work(10ms, false, side_ended, cancelled, true)),
          failure);
  CHECK_FALSE(result);
  CHECK(failure == "main failed");
  CHECK(side_ended);
}

TEST_CASE("beside: a side that ended well leaves the main work's failure to be rethrown",
          "[race]") {
  asio::io_context io;
  bool side_ended = false, cancelled = false;
  std::string failure;
  const auto result =
      run(io, beside(side(10ms, side_ended), main_work(60ms, true, side_ended, cancelled, true)),
          failure);
  CHECK_FALSE(result);
  CHECK(failure == "main failed");
  CHECK(side_ended);
  CHECK_FALSE(cancelled);
}

TEST_CASE("race: the first to end, by an exception too, cancels the other", "[race]") {
  asio::io_context io;
  bool slow_ended = false, fast_ended = false;
  std::string failure;
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = run(io, race(side(10s, slow_ended), side(10ms, fast_ended, true)), failure);
  CHECK_FALSE(result);
  CHECK(failure == "side failed");
  CHECK(slow_ended);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}
