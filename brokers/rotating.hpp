// Real values that expire and are fetched again while a session runs (access tokens, temporary
// AWS credentials): every value issued, newest current, and a thread that fetches the next one
// ahead of each expiry. Values are never dropped before the session ends, so views into them
// (scrub patterns, a request being re-signed) stay valid.
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace broker::brokers {

// When to fetch the next value: 5 minutes before expiry, but not before half the value's life
// has passed (a 4-minute token is refreshed after 2).
inline std::chrono::system_clock::time_point refresh_time(
    std::chrono::system_clock::time_point issued, std::chrono::system_clock::time_point expires) {
  using namespace std::chrono_literals;
  const auto halfway = issued + (expires - issued) / 2;
  return std::max(halfway,
                  expires - std::chrono::duration_cast<std::chrono::system_clock::duration>(5min));
}

// What a response echoing a rotated real value shows instead: the dummy, repeated or cut to the
// value's length (scrubbing keeps lengths, so framing stays valid).
inline std::string same_length_mask(std::string_view dummy, std::size_t size) {
  std::string mask;
  mask.reserve(size);
  while (mask.size() < size && !dummy.empty()) mask.append(dummy.substr(0, size - mask.size()));
  return mask;
}

// same_length_mask for one dummy at every length asked for, kept: what a broker's responses show
// for the rotated values it scrubs (a value rotated by a source shared among sessions is masked
// with each session's own dummy). The views stay valid as long as this object; thread-safe.
class dummy_masks {
 public:
  explicit dummy_masks(std::string dummy) : dummy_(std::move(dummy)) {}
  dummy_masks(const dummy_masks&) = delete;
  dummy_masks& operator=(const dummy_masks&) = delete;

  // The dummy, repeated or cut to `size` bytes (a prefix of the dummy repeated: one string at
  // least as long serves every shorter size).
  std::string_view of(std::size_t size) const {
    std::lock_guard lock(mutex_);
    if (repeats_.empty() || repeats_.back().size() < size)
      repeats_.push_back(same_length_mask(
          dummy_, std::max(size, repeats_.empty() ? 0 : 2 * repeats_.back().size())));
    return std::string_view(repeats_.back()).substr(0, size);
  }

 private:
  std::string dummy_;
  mutable std::mutex mutex_;
  mutable std::deque<std::string> repeats_;  // each longer than the one before; never shrinks
};

// `Value` has a member `expires` (std::chrono::system_clock::time_point).
template <class Value>
class rotating {
 public:
  using clock = std::chrono::system_clock;
  using fetcher = std::function<Value()>;  // throws on failure; messages carry no value

  // `what` names the values in log lines ("credential gcp: its access token").
  rotating(std::string what, Value first, clock::time_point issued, fetcher fetch)
      : what_(std::move(what)), fetch_(std::move(fetch)) {
    add(std::move(first), issued);
    thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
  }
  ~rotating() {
    thread_.request_stop();
    wake_.notify_all();
  }
  rotating(const rotating&) = delete;
  rotating& operator=(const rotating&) = delete;

  const Value& current() const { return *current_.load(); }
  // Every value that has not expired, newest first (the current one always).
  std::vector<const Value*> live(clock::time_point now) const {
    std::vector<const Value*> out;
    std::lock_guard lock(mutex_);
    for (auto it = issued_.rbegin(); it != issued_.rend(); ++it)
      if (it == issued_.rbegin() || it->expires > now) out.push_back(&*it);
    return out;
  }

 private:
  static constexpr auto retry_after_failure = std::chrono::seconds(30);

  void add(Value v, clock::time_point issued) {
    std::lock_guard lock(mutex_);
    next_ = refresh_time(issued, v.expires);
    current_.store(&issued_.emplace_back(std::move(v)));
  }

  void loop(std::stop_token stop) {
    while (!stop.stop_requested()) {
      {
        std::unique_lock lock(mutex_);
        const auto when = next_;
        wake_.wait_until(lock, stop, when, [] { return false; });
        if (stop.stop_requested()) return;
      }
      const auto issued = clock::now();
      try {
        add(fetch_(), issued);
      } catch (const std::exception& e) {
        // The current value stays in use meanwhile.
        spdlog::warn("{}: fetching a new one failed ({}); retrying in {} s", what_, e.what(),
                     retry_after_failure.count());
        std::lock_guard lock(mutex_);
        next_ = clock::now() + retry_after_failure;
      }
    }
  }

  std::string what_;
  fetcher fetch_;
  mutable std::mutex mutex_;
  std::deque<Value> issued_;  // never shrinks
  std::atomic<const Value*> current_{nullptr};
  clock::time_point next_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: started once everything above exists, stopped first
};

}  // namespace broker::brokers
