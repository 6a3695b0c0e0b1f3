// The admission script the replicas of a team gateway run in Redis (docs/gateway.md): its Lua, the
// arguments it takes, the answer it gives, and the refusal an answer stands for. When a replica
// asks, what it sends and what it does with the answer (leases, batches) is shared_budget's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gateway/redis/redis_client.hpp"
#include "live/refusal.hpp"
#include "session/budget.hpp"

namespace broker::gateway {

// KEYS: the session's hash, its usage hash (redis_store::session_key, usage_key).
extern const redis_script admit_script;

// What one replica process spent since it last said (requests aside: the script counts those),
// and the leased requests it gives back. Its number orders its writer's batches: each is
// applied once, however often it is resent.
struct usage_batch {
  std::uint64_t number = 0;
  session::session_budget::usage delta;
  std::uint64_t returned = 0;
};

struct admit_call {
  std::string source;  // the writer: this replica process ("r1:5f2a...")
  std::optional<usage_batch> batch;
  std::size_t asking = 0;   // requests that ask to go now
  std::uint64_t lease = 0;  // how many more to lease (the script may grant fewer)
};

std::vector<std::string> admit_args(const admit_call& call, const session::budget_limits& limits);

struct admit_answer {
  std::size_t admitted = 0;               // of the asking requests, counted
  std::uint64_t leased = 0;               // more requests granted ahead, counted
  session::session_budget::usage totals;  // the session on every replica, after this call
  std::vector<std::string> why;           // why fewer than asked went: empty when all did
};

// nullopt when the reply is not the script's answer (an error reply, or another shape).
std::optional<admit_answer> read_admit_answer(const redis_reply& reply);

// For the requests that did not go: 407 (the session was revoked, or is gone), 429 (a budget
// spent on all replicas, or over the rate), or 503 for a reason the broker does not know.
live::refusal admit_refusal(const std::vector<std::string>& why,
                            const session::budget_limits& limits, const std::string& session_id);

// 429 budget_exhausted: `name` ("requests", "bytes_out", "bytes_in", "llm_tokens", "cost_usd")
// spent on all replicas, `used` of it.
live::refusal spent_everywhere(const std::string& name, double used,
                               const session::budget_limits& limits);

}  // namespace broker::gateway
