// Runs one coroutine to its end on a test's io_context (the gateway's Redis tests).
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>
#include <chrono>
#include <exception>
#include <optional>

#include "base/asio.hpp"

namespace broker::test {

// Runs `work` on `io` until it is done (at most 20 s), then what became ready meanwhile (the
// client's bookkeeping after it woke its caller), and returns the result or rethrows. Work that
// is still waiting (a fake peer's accept) is left for the next run.
template <class T>
T run(boost::asio::io_context& io, boost::asio::awaitable<T> work) {
  std::optional<T> result;
  std::exception_ptr error;
  bool done = false;
  boost::asio::co_spawn(io, std::move(work), [&](std::exception_ptr e, T value) {
    done = true;
    error = e;
    if (!e) result = std::move(value);
  });
  io.restart();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done && io.run_one_until(deadline) > 0) {
  }
  REQUIRE(done);
  while (io.poll() > 0) {
  }
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

}  // namespace broker::test
