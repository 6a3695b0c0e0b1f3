#include "gateway/shared_budget.hpp"

#include <spdlog/spdlog.h>

#include <openssl/rand.h>

#include <cmath>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "session/audit_log.hpp"
#include "session/budget_text.hpp"
#include "session/log.hpp"

namespace broker::gateway {
namespace {

// KEYS: the session's hash, its usage hash. ARGV:
//   1-7   the batch: its source (this replica process; "" for no batch) and number, its bytes
//         out, bytes in, LLM tokens, cost, and the leased requests it gives back;
//   8-12  the limits (-1 for none) of requests, bytes out, bytes in, LLM tokens, cost;
//   13-14 the rate per second and burst (0 for none);
//   15-16 how many requests ask to go now, and how many more to lease.
// A source's batches are numbered in the order they are made and one is sent only once the
// one before was answered, so "apply when its number is past the last applied" applies each
// exactly once, however often it is resent, with one field per source in the usage hash.
// Answers {K, L, REQUESTS, BYTES_OUT, BYTES_IN, LLM_TOKENS, COST} when K requests go and L
// more are leased (both counted here, their rate tokens taken), with the totals after; past
// them, when fewer than asked go, why: "revoked", "unknown", "spent" NAME USED, or "rate"
// MS_UNTIL_A_TOKEN. A lease is granted only when nothing refused, at most 1/16 of the
// requests and rate tokens left (so that leases other replicas hold never starve this one),
// and none while a byte, token or cost budget has less than 1/16 left (near its end every
// request is checked against the totals of the moment).
const redis_script admit_script(R"lua(
local usage = KEYS[2]
local returned = 0
if ARGV[1] ~= '' then
  local applied = 'applied:' .. ARGV[1]
  if tonumber(ARGV[2]) > (tonumber(redis.call('HGET', usage, applied)) or 0) then
    redis.call('HSET', usage, applied, ARGV[2])
    if ARGV[3] ~= '0' then redis.call('HINCRBY', usage, 'bytes_out', ARGV[3]) end
    if ARGV[4] ~= '0' then redis.call('HINCRBY', usage, 'bytes_in', ARGV[4]) end
    if ARGV[5] ~= '0' then redis.call('HINCRBY', usage, 'llm_tokens', ARGV[5]) end
    if tonumber(ARGV[6]) > 0 then redis.call('HINCRBYFLOAT', usage, 'cost_usd', ARGV[6]) end
    returned = tonumber(ARGV[7])
    if returned > 0 then
      local requests = tonumber(redis.call('HGET', usage, 'requests')) or 0
      redis.call('HSET', usage, 'requests', math.max(0, requests - returned))
    end
  end
end
local rate = tonumber(ARGV[13])
local tokens, now
if rate > 0 then
  local burst = tonumber(ARGV[14])
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local bucket = redis.call('HMGET', usage, 'rate_tokens', 'rate_ms')
  tokens = tonumber(bucket[1]) or burst
  local last = tonumber(bucket[2]) or now
  tokens = math.min(burst, tokens + (now - last) * rate / 1000 + returned)
end
local function answer(k, lease, why)
  if rate > 0 then redis.call('HSET', usage, 'rate_tokens', tostring(tokens), 'rate_ms', now) end
  if k + lease > 0 then redis.call('HINCRBY', usage, 'requests', k + lease) end
  local used = redis.call('HMGET', usage, 'requests', 'bytes_out', 'bytes_in', 'llm_tokens', 'cost_usd')
  local out = {k, lease}
  for i = 1, 5 do out[i + 2] = used[i] or '0' end
  if why then for _, w in ipairs(why) do out[#out + 1] = w end end
  return out
end
local n = tonumber(ARGV[15])
local want = tonumber(ARGV[16])
if n == 0 and want == 0 then return answer(0, 0) end
local revoked = redis.call('HGET', KEYS[1], 'revoked')
if not revoked then return answer(0, 0, {'unknown'}) end
if revoked == '1' then return answer(0, 0, {'revoked'}) end
local used = redis.call('HMGET', usage, 'requests', 'bytes_out', 'bytes_in', 'llm_tokens', 'cost_usd')
local names = {'requests', 'bytes_out', 'bytes_in', 'llm_tokens', 'cost_usd'}
for i = 2, 5 do
  local limit = tonumber(ARGV[7 + i])
  if limit >= 0 and (tonumber(used[i]) or 0) >= limit then
    return answer(0, 0, {'spent', names[i], tostring(used[i] or '0')})
  end
end
local k = n
local why = nil
local left = nil
local limit = tonumber(ARGV[8])
if limit >= 0 then
  left = limit - (tonumber(used[1]) or 0)
  if left <= 0 then return answer(0, 0, {'spent', 'requests', tostring(used[1] or '0')}) end
  if left < k then
    k = left
    why = {'spent', 'requests', tostring(limit)}
  end
  left = left - k
end
if rate > 0 then
  local whole = math.floor(tokens)
  if whole < k then
    k = whole
    why = {'rate', tostring(math.ceil((1 - (tokens - whole)) * 1000 / rate))}
  end
  tokens = tokens - k
end
local lease = 0
if not why then
  lease = want
  if left then lease = math.min(lease, math.floor(left / 16)) end
  for i = 2, 5 do
    local limit = tonumber(ARGV[7 + i])
    if limit >= 0 and (tonumber(used[i]) or 0) * 16 >= limit * 15 then lease = 0 end
  end
  if rate > 0 then
    lease = math.min(lease, math.floor(math.floor(tokens) / 16))
    tokens = tokens - lease
  end
end
return answer(k, lease, why)
)lua");

std::string limit_arg(const std::optional<std::uint64_t>& v) {
  return v ? std::to_string(*v) : "-1";
}

// One call of the admit script: nullopt when Redis could not be reached.
asio::awaitable<std::optional<redis_reply>> run_script(redis_client& client,
                                                       std::vector<std::string> keys,
                                                       std::vector<std::string> args) {
  try {
    co_return co_await client.eval(admit_script, std::move(keys), std::move(args));
  } catch (const std::exception&) {
    co_return std::nullopt;
  }
}

std::string usd_arg(double usd) {
  char text[64];
  std::snprintf(text, sizeof text, "%.10f", usd);
  return text;
}

}  // namespace

// This replica process among every writer of a session's usage: its name and a random part (a
// restarted replica numbers its batches from 1 again).
std::string make_source(const std::string& replica) {
  unsigned char bytes[6];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  return replica + ":" + session::lower_hex(bytes, sizeof bytes);
}

bool shares_budgets(const session::budget_limits& l) {
  return l.requests || l.bytes_out || l.bytes_in || l.llm_tokens || l.cost_usd || l.request_rate;
}

shared_budget::shared_budget(std::shared_ptr<redis_store> store, std::string session_id,
                             std::string replica, std::shared_ptr<session::session_budget> local)
    : store_(std::move(store)),
      session_id_(std::move(session_id)),
      replica_(std::move(replica)),
      local_(std::move(local)),
      allow_without_state_(local_->limits().allow_without_state.value_or(false)),
      source_(make_source(replica_)),
      keys_{redis_store::session_key(session_id_), redis_store::usage_key(session_id_)} {}

std::uint64_t shared_budget::leased() const {
  std::lock_guard lock(mutex_);
  return leased_;
}

std::optional<shared_budget::batch> shared_budget::pending(bool give_back) {
  std::lock_guard lock(mutex_);
  if (pending_) return pending_;
  const auto now = local_->used();
  batch b{batches_ + 1, {}, 0};
  b.delta.bytes_out = now.bytes_out - shared_.bytes_out;
  b.delta.bytes_in = now.bytes_in - shared_.bytes_in;
  b.delta.llm_tokens = now.llm_tokens - shared_.llm_tokens;
  b.delta.cost_usd = now.cost_usd - shared_.cost_usd;
  if (give_back || clock::now() - heard_at_ >= fresh_for) std::swap(b.returned, leased_);
  if (!b.delta.bytes_out && !b.delta.bytes_in && !b.delta.llm_tokens && b.delta.cost_usd <= 0 &&
      !b.returned)
    return std::nullopt;
  shared_ = now;
  ++batches_;
  pending_ = b;
  return pending_;
}

std::vector<std::string> shared_budget::script_args(const std::optional<batch>& b, ask a) const {
  const auto& l = local_->limits();
  std::vector<std::string> args;
  args.push_back(b ? source_ : "");
  args.push_back(std::to_string(b ? b->number : 0));
  args.push_back(std::to_string(b ? b->delta.bytes_out : 0));
  args.push_back(std::to_string(b ? b->delta.bytes_in : 0));
  args.push_back(std::to_string(b ? b->delta.llm_tokens : 0));
  args.push_back(usd_arg(b ? b->delta.cost_usd : 0));
  args.push_back(std::to_string(b ? b->returned : 0));
  args.push_back(limit_arg(l.requests));
  args.push_back(limit_arg(l.bytes_out));
  args.push_back(limit_arg(l.bytes_in));
  args.push_back(limit_arg(l.llm_tokens));
  args.push_back(l.cost_usd ? usd_arg(*l.cost_usd) : "-1");
  args.push_back(l.request_rate ? usd_arg(l.request_rate->per_second) : "0");
  args.push_back(l.request_rate ? usd_arg(l.request_rate->burst) : "0");
  args.push_back(std::to_string(a.asking));
  std::uint64_t want = 0;  // tops the lease up
  if (a.lease_more) {
    std::lock_guard lock(mutex_);
    want = lease - std::min(lease, leased_);
  }
  args.push_back(std::to_string(want));
  return args;
}

shared_budget::outcome shared_budget::settle(const std::optional<redis_reply>& reply,
                                             const std::optional<batch>& b, ask a) {
  outcome out;
  if (!reply) {
    if (allow_without_state_)
      out.admitted = a.asking;
    else
      out.rest = proxy::refusal::state_unavailable(
          "the gateway's shared state (Redis) cannot be reached, and the session's budgets "
          "cannot be checked without it");
    return out;
  }
  const auto& e = reply->elements;
  if (reply->type != redis_reply::kind::array || e.size() < 7 ||
      e[0].type != redis_reply::kind::integer || e[1].type != redis_reply::kind::integer) {
    out.rest = proxy::refusal::state_unavailable("the shared state refused the budget check");
    return out;
  }
  out.admitted = static_cast<std::size_t>(std::max(0LL, e[0].integer));
  if (out.admitted < a.asking) out.rest = refused({e.begin() + 7, e.end()});
  const auto count = [&](std::size_t i) -> std::uint64_t {
    return std::strtoull(e[i].text.c_str(), nullptr, 10);
  };
  std::lock_guard lock(mutex_);
  if (b && pending_ && pending_->number == b->number) {
    acked_.bytes_out += b->delta.bytes_out;
    acked_.bytes_in += b->delta.bytes_in;
    acked_.llm_tokens += b->delta.llm_tokens;
    acked_.cost_usd += b->delta.cost_usd;
    pending_.reset();
  }
  // Usage only grows: an answer computed before one already taken in says less, not news.
  heard_.requests = count(2);
  heard_.bytes_out = std::max(heard_.bytes_out, count(3));
  heard_.bytes_in = std::max(heard_.bytes_in, count(4));
  heard_.llm_tokens = std::max(heard_.llm_tokens, count(5));
  heard_.cost_usd = std::max(heard_.cost_usd, std::strtod(e[6].text.c_str(), nullptr));
  heard_at_ = clock::now();
  leased_ += static_cast<std::uint64_t>(std::max(0LL, e[1].integer));
  if (out.rest && out.rest->code == "proxy_auth_required") gone_ = out.rest;
  return out;
}

// A budget the shared totals have spent: the 429 budget_exhausted body.
proxy::refusal shared_budget::spent(const std::string& name, const std::string& used) const {
  const auto& l = local_->limits();
  std::string limit, used_text = used;
  if (name == "requests" && l.requests) limit = std::to_string(*l.requests);
  if (name == "llm_tokens" && l.llm_tokens) limit = std::to_string(*l.llm_tokens);
  if (name == "bytes_out" && l.bytes_out) limit = session::format_size(*l.bytes_out);
  if (name == "bytes_in" && l.bytes_in) limit = session::format_size(*l.bytes_in);
  if (name == "bytes_out" || name == "bytes_in")
    used_text = session::format_size(std::strtoull(used.c_str(), nullptr, 10));
  if (name == "cost_usd" && l.cost_usd) {
    limit = session::format_usd(*l.cost_usd);
    used_text = session::format_usd(std::strtod(used.c_str(), nullptr));
  }
  return proxy::refusal::budget_exhausted(name, limit, used_text + " on all replicas", 0);
}

// Why the script let fewer requests go than asked: its answer's elements after the totals.
proxy::refusal shared_budget::refused(const std::vector<redis_reply>& why) const {
  const std::string what = why.empty() ? "" : why[0].text;
  if (what == "revoked")
    return proxy::refusal::proxy_auth_required("the session " + session_id_ + " was revoked");
  if (what == "unknown")
    return proxy::refusal::proxy_auth_required("the session " + session_id_ +
                                               " is no longer in the shared state");
  const auto& l = local_->limits();
  if (what == "rate" && why.size() == 2 && l.request_rate) {
    const long ms = std::atol(why[1].text.c_str());
    return proxy::refusal::budget_exhausted("rate", session::format_rate(*l.request_rate),
                                            "over the rate", std::max(1L, (ms + 999) / 1000));
  }
  if (what == "spent" && why.size() == 3) return spent(why[1].text, why[2].text);
  return proxy::refusal::state_unavailable(
      "the shared state answered what the broker does not "
      "understand");
}

std::optional<proxy::refusal> shared_budget::over_heard_locked() const {
  const auto& l = local_->limits();
  const auto here = local_->used();
  const auto total = [&](std::uint64_t heard, std::uint64_t used, std::uint64_t acked) {
    return heard + (used - acked);
  };
  const auto bytes_out = total(heard_.bytes_out, here.bytes_out, acked_.bytes_out);
  if (l.bytes_out && bytes_out >= *l.bytes_out)
    return spent("bytes_out", std::to_string(bytes_out));
  const auto bytes_in = total(heard_.bytes_in, here.bytes_in, acked_.bytes_in);
  if (l.bytes_in && bytes_in >= *l.bytes_in) return spent("bytes_in", std::to_string(bytes_in));
  const auto tokens = total(heard_.llm_tokens, here.llm_tokens, acked_.llm_tokens);
  if (l.llm_tokens && tokens >= *l.llm_tokens) return spent("llm_tokens", std::to_string(tokens));
  const double cost = heard_.cost_usd + (here.cost_usd - acked_.cost_usd);
  if (l.cost_usd && cost >= *l.cost_usd) return spent("cost_usd", usd_arg(cost));
  return std::nullopt;
}

shared_budget::lane& shared_budget::lane_here(const asio::any_io_executor& executor) {
  const void* key = &asio::query(executor, asio::execution::context);
  std::lock_guard lock(mutex_);
  return lanes_[key];
}

asio::awaitable<std::optional<proxy::refusal>> shared_budget::admit(const std::string& host) {
  (void)host;  // per-host budgets are this replica's (session_budget)
  const auto executor = co_await asio::this_coro::executor;
  bool from_lease = false, refill_now = false;
  std::optional<proxy::refusal> refusal;
  {
    std::lock_guard lock(mutex_);
    const auto now = clock::now();
    if (gone_) {
      refusal = gone_;
    } else if (leased_ > 0 && store_->reachable() && now - heard_at_ < fresh_for) {
      refusal = over_heard_locked();
      if (!refusal) {
        from_lease = true;
        --leased_;
        if (!refilling_ && (leased_ <= lease / 2 || now - heard_at_ >= refresh_after))
          refilling_ = refill_now = true;
      }
    }
  }
  if (refill_now) refill();
  if (refusal || from_lease) co_return refusal;
  // Otherwise every request of this session waiting on this thread asks in the same script
  // call: one round trip and one wake-up for all of them, each still counted before it goes.
  auto me = std::make_shared<waiter>(executor);
  lane& here = lane_here(executor);
  here.waiting.push_back(me);
  if (!here.busy) {
    here.busy = true;
    asio::co_spawn(executor, pump(here, shared_from_this()), asio::detached);
  }
  if (!me->done) co_await me->wake.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!me->done) co_return proxy::refusal::state_unavailable("the budget check was cut short");
  co_return std::move(me->result);
}

asio::awaitable<void> shared_budget::pump(lane& here, std::shared_ptr<shared_budget> self) {
  (void)self;  // keeps this alive while requests wait
  const auto executor = co_await asio::this_coro::executor;
  while (!here.waiting.empty()) {
    std::vector<std::shared_ptr<waiter>> group;
    group.swap(here.waiting);
    const auto b = pending(false);
    const ask a{group.size(), true};
    const auto reply = co_await run_script(store_->client_here(executor), keys_, script_args(b, a));
    auto out = settle(reply, b, a);
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (i >= out.admitted) group[i]->result = out.rest;
      group[i]->done = true;
      group[i]->wake.cancel();
    }
  }
  here.busy = false;
  watch_lease();
}

// The jobs on the store's thread hold this only between round trips, never across one, so a
// job still waiting when the store closes keeps nothing alive.
asio::awaitable<bool> shared_budget::sync(std::weak_ptr<shared_budget> weak,
                                          std::vector<std::string> keys, redis_client& client,
                                          ask a, bool give_back) {
  std::optional<batch> b;
  std::vector<std::string> args;
  if (auto self = weak.lock()) {
    b = self->pending(give_back);
    args = self->script_args(b, a);
  } else {
    co_return false;
  }
  const auto reply = co_await run_script(client, std::move(keys), std::move(args));
  auto self = weak.lock();
  if (!self) co_return false;
  self->settle(reply, b, a);
  co_return reply.has_value();
}

void shared_budget::refill() {
  store_->run(
      [weak = weak_from_this(), keys = keys_](redis_client& client) -> asio::awaitable<void> {
        co_await sync(weak, keys, client, ask{0, true}, false);
        if (auto self = weak.lock()) {
          {
            std::lock_guard lock(self->mutex_);
            self->refilling_ = false;
          }
          self->watch_lease();
        }
      });
}

void shared_budget::watch_lease() {
  {
    std::lock_guard lock(mutex_);
    if (watching_ || leased_ == 0) return;
    watching_ = true;
  }
  store_->run(
      [weak = weak_from_this(), keys = keys_](redis_client& client) -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor);
        for (;;) {
          if (auto self = weak.lock()) {
            std::lock_guard lock(self->mutex_);
            if (self->leased_ == 0) {
              self->watching_ = false;
              co_return;
            }
            timer.expires_at(self->heard_at_ + fresh_for);
          } else {
            co_return;
          }
          if (timer.expiry() <= clock::now()) {
            // Stale: the lease goes back (and what was spent here goes with it).
            if (co_await sync(weak, keys, client, ask{}, true)) continue;
            timer.expires_after(redis_client::reconnect_backoff);
          }
          co_await timer.async_wait(asio::use_awaitable);
        }
      });
}

void shared_budget::recorded(const session::audit_entry& entry) {
  // An LLM response's usage goes at once; bytes within refresh_after, when a budget counts them.
  const bool now = entry.llm_tokens.has_value();
  if (!now) {
    const auto& l = local_->limits();
    if (!l.bytes_out && !l.bytes_in) return;
    std::lock_guard lock(mutex_);
    if (sharing_) return;
    sharing_ = true;
  }
  store_->run(
      [weak = weak_from_this(), keys = keys_, now](redis_client& client) -> asio::awaitable<void> {
        if (!now) {
          asio::steady_timer timer(co_await asio::this_coro::executor, refresh_after);
          co_await timer.async_wait(asio::use_awaitable);
          if (auto self = weak.lock()) {
            std::lock_guard lock(self->mutex_);
            self->sharing_ = false;
          }
        }
        co_await sync(weak, keys, client, ask{}, false);
      });
}

void shared_budget::flush() {
  // Twice at most: a batch still unanswered goes first, then the rest with the lease.
  for (int round = 0; round < 2; ++round) {
    const auto b = pending(true);
    if (!b) return;
    std::vector<std::string> command = {"EVAL", admit_script.text, "2", keys_[0], keys_[1]};
    for (auto& a : script_args(b, ask{})) command.push_back(std::move(a));
    try {
      store_->blocking({std::move(command)}).at(0).checked();
    } catch (const std::exception& e) {
      session::log(spdlog::level::err, session::log_tag(session_id_),
                   "usage not shared with the other replicas at shutdown: {}", e.what());
      return;
    }
    std::lock_guard lock(mutex_);
    if (pending_ && pending_->number == b->number) pending_.reset();
  }
}

}  // namespace broker::gateway
