// One gateway session's budgets, spent together by every replica through Redis (docs/gateway.md).
//
// Redis holds the session's shared usage. A Lua script (one round trip) applies what this
// replica spent since it last said (bytes, LLM tokens, cost: a numbered batch, applied once
// however often it is resent), checks every session budget against the sum of all replicas,
// counts the requests it lets go (taking their rate tokens), and answers the shared totals.
//
// Leases keep Redis off most requests' path. Far from the session's limits the script also
// grants this replica a lease: up to `lease` more requests, counted and their rate tokens taken
// at once, which the replica then admits without asking, checking the byte, token and cost
// budgets against the totals it last heard plus what it spent since. A lease is topped up off
// the request path before it runs out, is used only while this replica heard from Redis within
// `fresh_for`, and goes back (uncounted) once it is stale. A grant is at most 1/16 of the
// requests or rate tokens left, and there is none while a byte, token or cost budget has less
// than 1/16 left: near a limit every request asks (those of the session waiting on one worker
// thread share one call). So a request or rate budget is never overspent, and a byte, token or
// cost budget only by the requests in flight, or admitted far from its end on totals at most
// `fresh_for` old. What a replica spends is shared with its next call: at once for an LLM
// response's usage, within `refresh_after` for bytes when a budget counts them.
//
// When Redis cannot be reached (the revocation poll says so, or no answer within `fresh_for`)
// requests ask, and are refused 503 state_unavailable, or admitted and counted here only when
// the policy says budgets.on_state_unavailable "allow". The session's local budget
// (session_budget) keeps counting everything this replica serves, and is where the per-host
// budgets and the duration are checked.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "gateway/redis/admit_script.hpp"
#include "gateway/redis/redis_store.hpp"
#include "live/shared_admission.hpp"
#include "session/budget.hpp"

namespace broker::gateway {

// Whether the limits set anything the replicas must share.
bool shares_budgets(const session::budget_limits& limits);

class shared_budget final : public live::shared_admission,
                            public std::enable_shared_from_this<shared_budget> {
 public:
  using clock = std::chrono::steady_clock;
  // The most requests one answer grants ahead; a grant is at most 1/16 of what is left.
  static constexpr std::uint64_t lease = 64;
  // A lease is used only this long after the last answer; then it goes back, and requests ask.
  static constexpr std::chrono::milliseconds fresh_for{250};
  // A lease this old (or half used) is refilled, off the request path.
  static constexpr std::chrono::milliseconds refresh_after{100};

  shared_budget(std::shared_ptr<redis_store> store, std::string session_id, std::string replica,
                std::shared_ptr<session::session_budget> local);

  asio::awaitable<std::optional<live::refusal>> admit(const std::string& host) override;
  void recorded(const session::audit_entry& entry) override;
  // At shutdown: what this replica spent and has not shared yet, and its unused lease (one
  // blocking round trip). False when Redis could not be reached (it was logged).
  bool flush();

  // Requests this replica may still admit without asking (for tests and metrics).
  std::uint64_t leased() const;

 private:
  // What one script call asks: how many requests want to go now, and whether to top the
  // lease up (to `lease`).
  struct ask {
    std::size_t asking = 0;
    bool lease_more = false;
  };
  struct outcome {
    std::size_t admitted = 0;
    std::optional<live::refusal> rest;  // for the asking requests past `admitted`
  };

  // The batch still to be acknowledged, or a new one of what was spent since the last (with
  // the lease when it is stale, or when `give_back`).
  std::optional<usage_batch> pending(bool give_back);
  std::vector<std::string> script_args(const std::optional<usage_batch>& b, ask a) const;
  // Takes an answer in: the totals heard, the batch acknowledged, the lease granted.
  outcome settle(const std::optional<redis_reply>& reply, const std::optional<usage_batch>& b,
                 ask a);
  // A byte, token or cost budget spent by the totals heard plus what was spent here since.
  std::optional<live::refusal> over_heard_locked() const;
  // Off the request path, on the store's thread: one script call (false when Redis did not
  // answer), a refill of the lease, and the return of one that went stale.
  static asio::awaitable<bool> sync(std::weak_ptr<shared_budget> weak,
                                    std::vector<std::string> keys, redis_client& client, ask a,
                                    bool give_back);
  void refill();
  void watch_lease();

  // Requests of this session waiting on one worker thread, and whether a script call is out
  // for them (touched only on that thread).
  struct waiter {
    explicit waiter(const asio::any_io_executor& e)
        : wake(e, asio::steady_timer::time_point::max()) {}
    asio::steady_timer wake;  // cancelled when the answer is in
    bool done = false;
    std::optional<live::refusal> result;
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
  const std::string source_;             // replica and process, naming this writer's batches
  const std::vector<std::string> keys_;  // the script's: the session's hash, its usage hash
  mutable std::mutex mutex_;
  session::session_budget::usage shared_;  // local usage covered by batches made
  session::session_budget::usage acked_;   // ... and by batches Redis acknowledged
  session::session_budget::usage heard_;   // the shared totals Redis last answered (requests aside)
  std::optional<usage_batch> pending_;
  std::uint64_t batches_ = 0;
  std::uint64_t leased_ = 0;      // granted requests not yet admitted
  clock::time_point heard_at_{};  // the last answer
  bool refilling_ = false;
  bool watching_ = false;
  bool sharing_ = false;               // bytes spent here are to be shared within refresh_after
  std::optional<live::refusal> gone_;  // revoked, or no longer in the shared state
  std::map<const void*, lane> lanes_;  // per worker io_context; under mutex_ to find
};

}  // namespace broker::gateway
