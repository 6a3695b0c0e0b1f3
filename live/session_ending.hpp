// How a running session ends before its command does: from inside (a budget whose on_exhaust
// kills, `broker kill`), which wrap polls, and for a gateway session's clients, once it is
// revoked or past its expiry. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "session/budget.hpp"

namespace broker::live {

// Why a running session is ended from inside: a budget whose on_exhaust kills, or `broker kill`.
struct session_end {
  enum class cause { budget, kill };
  cause why = cause::kill;
  session::exhausted spent;  // the budget, when `why` is budget
};

class session_ending {
 public:
  session_ending(std::string session_id,
                 std::optional<std::chrono::system_clock::time_point> expires)
      : session_id_(std::move(session_id)), expires_(expires) {}

  // A refused request whose budget says "kill", or `broker kill`, asks for the session's end;
  // wrap polls asked(). The first reason stays.
  void ask(const session_end& why);
  std::optional<session_end> asked() const;

  // A gateway session ends for its clients when revoked or past its expiry: every request on
  // it, even on a connection bound before, is then refused 407 (why() says which).
  void revoke() { revoked_ = true; }
  std::optional<std::string> why(std::chrono::system_clock::time_point now) const;

 private:
  const std::string session_id_;
  const std::optional<std::chrono::system_clock::time_point> expires_;
  std::atomic<bool> revoked_{false};
  mutable std::mutex mutex_;
  std::optional<session_end> asked_;
};

}  // namespace broker::live
