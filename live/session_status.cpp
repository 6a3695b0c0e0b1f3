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
  // Credentials minted for the session: which, and until when (never a value).
  auto minted = nlohmann::ordered_json::array();
  for (const auto& m : ctx.credentials().minted()) {
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(m.expires.time_since_epoch()).count();
    minted.push_back({{"credential", m.credential}, {"what", m.what}, {"expires", seconds}});
  }
  j["minted"] = std::move(minted);
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
