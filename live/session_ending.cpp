#include "live/session_ending.hpp"

namespace broker::live {

void session_ending::ask(const session_end& why) {
  std::lock_guard lock(mutex_);
  if (!asked_) asked_ = why;
}

std::optional<session_end> session_ending::asked() const {
  std::lock_guard lock(mutex_);
  return asked_;
}

std::optional<std::string> session_ending::why(std::chrono::system_clock::time_point now) const {
  if (revoked_.load()) return "the session " + session_id_ + " was revoked";
  if (expires_ && now >= *expires_) return "the session " + session_id_ + " has expired";
  return std::nullopt;
}

}  // namespace broker::live
