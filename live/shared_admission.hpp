// Admission that other processes share (docs/gateway.md): a team gateway's replicas spend one
// session's budgets together, so after the session's own checks pass, each request asks the
// shared state (gateway/redis/shared_budget.hpp) whether it may go. Contexts without one skip it.
#pragma once

#include <optional>
#include <string>

#include "base/asio.hpp"
#include "live/refusal.hpp"
#include "session/audit_record.hpp"

namespace broker::live {

class shared_admission {
 public:
  virtual ~shared_admission() = default;
  // One more request to `host`: nullopt when it may go (it is then counted everywhere), else
  // the refusal (429 budget_exhausted, 503 state_unavailable). Never throws.
  virtual asio::awaitable<std::optional<refusal>> admit(const std::string& host) = 0;
  // An exchange's record was written: what it spent (bytes, LLM tokens) is to be shared.
  virtual void recorded(const session::audit_entry& entry) = 0;
};

}  // namespace broker::live
