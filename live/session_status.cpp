#include "live/session_status.hpp"

#include <chrono>

#include "live/live_session.hpp"

namespace broker::live {

nlohmann::ordered_json session_status(const live_session& ctx, const std::string& mode, int pid) {
  nlohmann::ordered_json j;
  j["session"] = ctx.session_id();
  j["mode"] = mode;
  j["pid"] = pid;
  j["requests"] = ctx.counters().requests();
  j["denied"] = ctx.counters().denied();
  j["would_deny"] = ctx.counters().would_deny();
  if (auto* budget = ctx.budget()) j["budgets"] = budget->report(std::chrono::steady_clock::now());
  return j;
}

session::session_end session_end_of(const live_session& ctx, std::optional<int> exit) {
  session::session_end end;
  end.requests = ctx.counters().requests();
  end.denied = ctx.counters().denied();
  end.would_deny = ctx.counters().would_deny();
  if (auto* budget = ctx.budget())
    end.usage = budget->report(std::chrono::steady_clock::now())["usage"];
  end.exit = exit;
  return end;
}

}  // namespace broker::live
