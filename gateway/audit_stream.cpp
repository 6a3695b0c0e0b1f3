#include "gateway/audit_stream.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "session/log.hpp"

#include <thread>

namespace broker::gateway {

audit_stream::audit_stream(std::shared_ptr<redis_store> store, std::string key, std::string replica)
    : store_(std::move(store)), key_(std::move(key)), replica_(std::move(replica)) {}

std::vector<std::string> audit_stream::xadd(const entry& e) const {
  return redis_command("XADD", key_, "MAXLEN", "~", std::to_string(stream_max_length), "*",
                       "session", e.session, "replica", replica_, "record", e.line);
}

void audit_stream::ship(std::string_view session, std::string_view line) {
  bool start = false;
  {
    std::lock_guard lock(mutex_);
    if (pending_.size() >= max_pending) {
      pending_.pop_front();
      ++dropped_;
    }
    pending_.push_back({std::string(session), std::string(line)});
    start = !draining_;
    draining_ = true;
  }
  if (start) store_->run([self = shared_from_this()](redis_client& c) { return self->drain(c); });
}

asio::awaitable<void> audit_stream::drain(redis_client& client) {
  bool failing = false;
  asio::steady_timer wait(co_await asio::this_coro::executor);
  for (;;) {
    std::vector<std::vector<std::string>> batch;
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < pending_.size() && i < batch_size; ++i)
        batch.push_back(xadd(pending_[i]));
      if (batch.empty()) {
        draining_ = false;
        co_return;
      }
    }
    std::string failure;
    try {
      const auto replies = co_await client.pipeline(std::move(batch));
      std::lock_guard lock(mutex_);
      const auto n = std::min(replies.size(), pending_.size());
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
      shipped_ += n;
      failing = false;
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (failure.empty()) continue;
    if (!failing)
      session::log(spdlog::level::warn, session::log_tag("audit-sink"), "records wait for {}: {}",
                   store_->endpoint().display(), failure);
    failing = true;
    wait.expires_after(std::chrono::milliseconds(500));
    co_await wait.async_wait(asio::use_awaitable);
  }
}

void audit_stream::settle(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    {
      std::lock_guard lock(mutex_);
      if (!draining_) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void audit_stream::flush() {
  std::vector<std::vector<std::string>> all;
  {
    std::lock_guard lock(mutex_);
    for (const auto& e : pending_) all.push_back(xadd(e));
  }
  if (all.empty()) return;
  try {
    const auto n = store_->blocking(std::move(all)).size();
    std::lock_guard lock(mutex_);
    const auto done = std::min(n, pending_.size());
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
    shipped_ += done;
  } catch (const std::exception& e) {
    session::log(spdlog::level::err, session::log_tag("audit-sink"),
                 "{} record(s) not shipped at shutdown (they are in the files): {}",
                 pending_.size(), e.what());
  }
}

}  // namespace broker::gateway
