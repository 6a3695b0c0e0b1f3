// One gateway session's budgets, spent together by every replica through Redis (DESIGN §12).
//
// Each request costs at most one round trip (requests of the session waiting on one worker
// thread share one): a Lua script that first adds what this replica spent
// since it last said (bytes, LLM tokens, cost: a numbered batch, applied once however often
// it is resent), then checks every session budget against the sum of all replicas and, when
// none is spent, counts the request and takes a rate token. So a budget is spent once across
// replicas, overspent only by requests already in flight. An LLM response's usage is sent at
// once, off the request's path, so that another replica's next request sees it.
//
// When Redis cannot be reached the request is refused 503 state_unavailable, or admitted and
// counted here only when the policy says budgets.on_state_unavailable "allow". The session's
// local budget (session_budget) keeps counting everything this replica serves, and is where
// the per-host budgets and the duration are checked.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include "gateway/redis_store.hpp"
#include "proxy/shared_admission.hpp"
#include "session/budget.hpp"

namespace broker::gateway {

// Whether the limits set anything the replicas must share.
bool shares_budgets(const session::budget_limits& limits);

class shared_budget final : public proxy::shared_admission,
                            public std::enable_shared_from_this<shared_budget> {
 public:
  shared_budget(std::shared_ptr<redis_store> store, std::string session_id, std::string replica,
                std::shared_ptr<session::session_budget> local);

  asio::awaitable<std::optional<proxy::refusal>> admit(const std::string& host) override;
  void recorded(const session::audit_entry& entry) override;
  // At shutdown: what this replica spent and has not shared yet (one blocking round trip).
  void flush();

 private:
  struct batch {
    std::uint64_t number;  // this source's count: each is applied once
    session::session_budget::usage delta;
  };
  // The batch still to be acknowledged, or a new one of what was spent since the last.
  std::optional<batch> pending();
  void acknowledge(std::uint64_t number);
  // The script's arguments: the batch to apply, the limits, and how many requests ask to go.
  std::vector<std::string> script_args(const std::optional<batch>& b, std::size_t asking) const;
  proxy::refusal refused(const std::vector<redis_reply>& why) const;

  // Requests of this session waiting on one worker thread, and whether a script call is out
  // for them (touched only on that thread).
  struct waiter {
    explicit waiter(const asio::any_io_executor& e) : wake(e, asio::steady_timer::time_point::max()) {}
    asio::steady_timer wake;  // cancelled when the answer is in
    bool done = false;
    std::optional<proxy::refusal> result;
  };
  struct lane {
    bool busy = false;
    std::vector<std::shared_ptr<waiter>> waiting;
  };
  lane& lane_here(const asio::any_io_executor& executor);
  // Asks for every waiting request in one call, until none waits.
  asio::awaitable<void> pump(lane& here, std::shared_ptr<shared_budget> self);

  std::shared_ptr<redis_store> store_;
  const std::string session_id_;
  const std::string replica_;
  std::shared_ptr<session::session_budget> local_;
  const bool allow_without_state_;
  const std::string source_;  // replica and process, naming this writer's batches
  std::mutex mutex_;
  session::session_budget::usage shared_;  // local usage covered by sent batches
  std::optional<batch> pending_;
  std::uint64_t batches_ = 0;
  std::map<const void*, lane> lanes_;  // per worker io_context; under mutex_ to find
};

}  // namespace broker::gateway
