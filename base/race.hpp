// `race(a, b)`: run two coroutines; the first to finish - normally or by an exception - cancels
// the other. Asio's `||` waits for the first *success*, so a coroutine that throws would leave
// the race running until the other finishes; a connection must not hang on that.
#pragma once

#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>

#include <array>
#include <chrono>
#include <exception>
#include <type_traits>

#include "base/asio.hpp"

namespace broker::base {

// Returns 0 when `a` finished first, 1 when `b` did; rethrows the winner's exception.
inline asio::awaitable<std::size_t> race(asio::awaitable<void> a, asio::awaitable<void> b) {
  auto ex = co_await asio::this_coro::executor;
  auto [order, ex0, ex1] = co_await asio::experimental::make_parallel_group(
                               asio::co_spawn(ex, std::move(a), asio::deferred),
                               asio::co_spawn(ex, std::move(b), asio::deferred))
                               .async_wait(asio::experimental::wait_for_one(), asio::deferred);
  const std::size_t winner = order[0];
  if (winner == 0 && ex0) std::rethrow_exception(ex0);
  if (winner == 1 && ex1) std::rethrow_exception(ex1);
  co_return winner;
}

// `beside(side, main)`: runs `side` while `main` runs, for work that may end before the main work
// does without ending it (a request body going up while its response comes down). `main`'s end,
// normal or by an exception, cancels `side` if it still runs; an exception from `side` cancels
// `main`; `side` ending normally lets `main` go on alone, its frames freed. Rethrows `side`'s
// exception when it failed before `main` ended, else `main`'s; returns `main`'s result.
template <typename T>
asio::awaitable<T> beside(asio::awaitable<void> side, asio::awaitable<T> main) {
  // The group's condition tells the two apart by their completions: `side`'s is (exception),
  // `main`'s (exception, T).
  static_assert(!std::is_void_v<T>, "main's result tells its completion from side's");
  struct condition {
    asio::cancellation_type_t operator()(const std::exception_ptr& failed) const {
      return failed ? asio::cancellation_type::terminal : asio::cancellation_type::none;
    }
    asio::cancellation_type_t operator()(const std::exception_ptr&, const T&) const {
      return asio::cancellation_type::terminal;
    }
  };
  auto ex = co_await asio::this_coro::executor;
  auto [order, side_failure, main_failure, result] =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(ex, std::move(side), asio::deferred),
          asio::co_spawn(ex, std::move(main), asio::deferred))
          .async_wait(condition{}, asio::deferred);
  if (order[0] == 0 && side_failure) std::rethrow_exception(side_failure);
  if (main_failure) std::rethrow_exception(main_failure);
  co_return std::move(result);
}

// Waits until cancelled: a side of a race that is done but must not end it yet.
inline asio::awaitable<void> hold_until_cancelled() {
  asio::steady_timer forever(co_await asio::this_coro::executor,
                             std::chrono::steady_clock::time_point::max());
  co_await forever.async_wait(use_tuple);
}

}  // namespace broker::base
