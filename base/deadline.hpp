// A connection's watchdog: one timer per connection, re-armed by storing a new expiry (cheap on
// the hot path). start() runs a callback when the expiry passes, which cancels whatever the
// connection (or an HTTP/2 stream) is waiting for through its cancellation slot; `watch()`
// returns then instead, for a short step raced with it. `Waiting` names what the connection
// waits for (an enum of the room that uses it), for it to say when time ran out.
#pragma once

#include <chrono>
#include <cstdint>

#include "base/asio.hpp"

namespace broker::base {

enum class waiting_unnamed { something };

template <class Waiting = waiting_unnamed>
class deadline {
 public:
  using clock = std::chrono::steady_clock;

  explicit deadline(const asio::any_io_executor& ex) : timer_(ex) {}

  void arm(clock::duration d, Waiting what = Waiting{}) {
    const auto next = clock::now() + d;
    waiting_ = what;
    // The watch loop sleeps until the old expiry; only an earlier one needs to wake it.
    const bool earlier = next < expiry_;
    expiry_ = next;
    if (earlier) timer_.cancel();
  }
  Waiting waiting() const { return waiting_; }

  // The same watch as a callback, for work that is cancelled rather than raced (a race is two
  // spawned coroutines and a parallel group for the work's life): `expired()` runs once, when
  // the expiry passes, unless stop() (or another start()) comes first. `keep` (a shared_ptr to
  // whatever holds this deadline) lives until the wait is over.
  template <class Keep, class Expired>
  void start(Keep keep, Expired expired) {
    wait_for(++generation_, std::move(keep), std::move(expired));
  }
  // start() for work spawned with `signal`'s slot bound: the expiry sets `expired` and emits a
  // terminal cancellation, which ends the work wherever it waits. Both outlive the wait or a
  // stop() before they go.
  template <class Keep>
  void cancel_on_expiry(Keep keep, asio::cancellation_signal& signal, bool& expired) {
    start(std::move(keep), [&signal, &expired] {
      expired = true;
      signal.emit(asio::cancellation_type::terminal);
    });
  }
  void stop() {
    ++generation_;
    timer_.cancel();
  }

  asio::awaitable<void> watch() {
    for (;;) {
      timer_.expires_at(expiry_);
      auto [ec] = co_await timer_.async_wait(use_tuple);
      if (clock::now() >= expiry_) co_return;
      if (ec && ec != asio::error::operation_aborted) co_return;
      // Cancelled by an earlier arm(), or spurious: re-check the current expiry.
      if (ec == asio::error::operation_aborted) {
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) co_return;
      }
    }
  }

 private:
  template <class Keep, class Expired>
  void wait_for(std::uint64_t generation, Keep keep, Expired expired) {
    timer_.expires_at(expiry_);
    timer_.async_wait([this, generation, keep = std::move(keep),
                       expired = std::move(expired)](const error_code& ec) mutable {
      if (generation != generation_) return;  // stopped (`keep` holds this deadline's owner)
      if (clock::now() >= expiry_ || (ec && ec != asio::error::operation_aborted)) {
        ++generation_;
        expired();
        return;
      }
      // Cancelled by an earlier arm(), or woken at an expiry since moved later: wait again.
      wait_for(generation, std::move(keep), std::move(expired));
    });
  }

  asio::steady_timer timer_;
  clock::time_point expiry_ = clock::time_point::max();
  Waiting waiting_{};
  std::uint64_t generation_ = 0;  // of the start() whose wait counts
};

}  // namespace broker::base
