// `race(a, b)`: run two coroutines; the first to finish - normally or by an exception - cancels
// the other. Asio's `||` waits for the first *success*, so a coroutine that throws would leave
// the race running until the other finishes; a connection must not hang on that.
#pragma once

#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>

#include <chrono>
#include <exception>

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

// Waits until cancelled: a side of a race that is done but must not end it yet.
inline asio::awaitable<void> hold_until_cancelled() {
  asio::steady_timer forever(co_await asio::this_coro::executor,
                             std::chrono::steady_clock::time_point::max());
  co_await forever.async_wait(use_tuple);
}

}  // namespace broker::base
