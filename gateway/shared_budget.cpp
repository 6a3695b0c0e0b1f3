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

// KEYS: the session's hash, its usage hash. ARGV: the batch's source (this replica process; ""
// for no batch) and number, its bytes out, bytes in, LLM tokens and cost; then the limits (-1
// for none) of requests, bytes out, bytes in, LLM tokens, cost; the rate per second and burst
// (0 for none); how many requests ask to go (0: only apply the batch). A source's batches are
// numbered in the order they are made and one is sent only once the one before was answered,
// so "apply when its number is past the last applied" applies each exactly once, however
// often it is resent, with one field per source in the usage hash. Answers {K} when K
// requests go (all asked), else {K, WHY...} for the rest: "revoked", "unknown", "spent" NAME
// USED, or "rate" MS_UNTIL_A_TOKEN. The K are counted (and their rate tokens taken) here.
const redis_script admit_script(R"lua(
local revoked = redis.call('HGET', KEYS[1], 'revoked')
if ARGV[1] ~= '' then
  local applied = 'applied:' .. ARGV[1]
  if tonumber(ARGV[2]) > (tonumber(redis.call('HGET', KEYS[2], applied)) or 0) then
    redis.call('HSET', KEYS[2], applied, ARGV[2])
    if ARGV[3] ~= '0' then redis.call('HINCRBY', KEYS[2], 'bytes_out', ARGV[3]) end
    if ARGV[4] ~= '0' then redis.call('HINCRBY', KEYS[2], 'bytes_in', ARGV[4]) end
    if ARGV[5] ~= '0' then redis.call('HINCRBY', KEYS[2], 'llm_tokens', ARGV[5]) end
    if tonumber(ARGV[6]) > 0 then redis.call('HINCRBYFLOAT', KEYS[2], 'cost_usd', ARGV[6]) end
  end
end
local n = tonumber(ARGV[14])
if n == 0 then return {0} end
if not revoked then return {0, 'unknown'} end
if revoked == '1' then return {0, 'revoked'} end
local used = redis.call('HMGET', KEYS[2], 'requests', 'bytes_out', 'bytes_in', 'llm_tokens', 'cost_usd')
local names = {'requests', 'bytes_out', 'bytes_in', 'llm_tokens', 'cost_usd'}
for i = 2, 5 do
  local limit = tonumber(ARGV[6 + i])
  if limit >= 0 and (tonumber(used[i]) or 0) >= limit then
    return {0, 'spent', names[i], tostring(used[i] or '0')}
  end
end
local k = n
local why = nil
local limit = tonumber(ARGV[7])
if limit >= 0 then
  local left = limit - (tonumber(used[1]) or 0)
  if left <= 0 then return {0, 'spent', 'requests', tostring(used[1] or '0')} end
  if left < k then
    k = left
    why = {'spent', 'requests', tostring(limit)}
  end
end
local rate = tonumber(ARGV[12])
if rate > 0 then
  local burst = tonumber(ARGV[13])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local bucket = redis.call('HMGET', KEYS[2], 'rate_tokens', 'rate_ms')
  local tokens = tonumber(bucket[1]) or burst
  local last = tonumber(bucket[2]) or now
  tokens = math.min(burst, tokens + (now - last) * rate / 1000)
  local whole = math.floor(tokens)
  if whole < k then
    k = whole
    why = {'rate', tostring(math.ceil((1 - (tokens - whole)) * 1000 / rate))}
  end
  redis.call('HSET', KEYS[2], 'rate_tokens', tostring(tokens - k), 'rate_ms', now)
end
if k > 0 then redis.call('HINCRBY', KEYS[2], 'requests', k) end
if why then return {k, unpack(why)} end
return {k}
)lua");

std::string limit_arg(const std::optional<std::uint64_t>& v) {
  return v ? std::to_string(*v) : "-1";
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
      source_(make_source(replica_)) {}

std::optional<shared_budget::batch> shared_budget::pending() {
  std::lock_guard lock(mutex_);
  if (pending_) return pending_;
  const auto now = local_->used();
  session::session_budget::usage delta;
  delta.bytes_out = now.bytes_out - shared_.bytes_out;
  delta.bytes_in = now.bytes_in - shared_.bytes_in;
  delta.llm_tokens = now.llm_tokens - shared_.llm_tokens;
  delta.cost_usd = now.cost_usd - shared_.cost_usd;
  if (!delta.bytes_out && !delta.bytes_in && !delta.llm_tokens && delta.cost_usd <= 0)
    return std::nullopt;
  shared_ = now;
  pending_ = batch{++batches_, delta};
  return pending_;
}

void shared_budget::acknowledge(std::uint64_t number) {
  std::lock_guard lock(mutex_);
  if (pending_ && pending_->number == number) pending_.reset();
}

std::vector<std::string> shared_budget::script_args(const std::optional<batch>& b,
                                                    std::size_t asking) const {
  const auto& l = local_->limits();
  std::vector<std::string> args;
  args.push_back(b ? source_ : "");
  args.push_back(std::to_string(b ? b->number : 0));
  args.push_back(std::to_string(b ? b->delta.bytes_out : 0));
  args.push_back(std::to_string(b ? b->delta.bytes_in : 0));
  args.push_back(std::to_string(b ? b->delta.llm_tokens : 0));
  args.push_back(usd_arg(b ? b->delta.cost_usd : 0));
  args.push_back(limit_arg(l.requests));
  args.push_back(limit_arg(l.bytes_out));
  args.push_back(limit_arg(l.bytes_in));
  args.push_back(limit_arg(l.llm_tokens));
  args.push_back(l.cost_usd ? usd_arg(*l.cost_usd) : "-1");
  args.push_back(l.request_rate ? usd_arg(l.request_rate->per_second) : "0");
  args.push_back(l.request_rate ? usd_arg(l.request_rate->burst) : "0");
  args.push_back(std::to_string(asking));
  return args;
}

// Why the script let fewer requests go than asked: its answer's elements after the count.
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
  if (what == "spent" && why.size() == 3) {
    const std::string& name = why[1].text;
    const std::string& used = why[2].text;
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
  return proxy::refusal::state_unavailable("the shared state answered what the broker does not "
                                           "understand");
}

shared_budget::lane& shared_budget::lane_here(const asio::any_io_executor& executor) {
  const void* key = &asio::query(executor, asio::execution::context);
  std::lock_guard lock(mutex_);
  return lanes_[key];
}

asio::awaitable<std::optional<proxy::refusal>> shared_budget::admit(const std::string& host) {
  (void)host;  // per-host budgets are this replica's (session_budget)
  const auto executor = co_await asio::this_coro::executor;
  // Every request of this session waiting on this thread asks in the same script call: one
  // round trip and one wake-up for all of them, each still counted before it goes.
  auto me = std::make_shared<waiter>(executor);
  lane& here = lane_here(executor);
  here.waiting.push_back(me);
  if (!here.busy) {
    here.busy = true;
    asio::co_spawn(executor, pump(here, shared_from_this()), asio::detached);
  }
  if (!me->done) co_await me->wake.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!me->done)
    co_return proxy::refusal::state_unavailable("the budget check was cut short");
  co_return std::move(me->result);
}

asio::awaitable<void> shared_budget::pump(lane& here, std::shared_ptr<shared_budget> self) {
  (void)self;  // keeps this alive while requests wait
  const auto executor = co_await asio::this_coro::executor;
  while (!here.waiting.empty()) {
    std::vector<std::shared_ptr<waiter>> group;
    group.swap(here.waiting);
    const auto b = pending();
    std::optional<redis_reply> reply;
    try {
      auto& client = store_->client_here(executor);
      reply = co_await client.eval(admit_script,
                                   redis_command(redis_store::session_key(session_id_),
                                                 redis_store::usage_key(session_id_)),
                                   script_args(b, group.size()));
      if (b) acknowledge(b->number);
    } catch (const std::exception&) {
      reply.reset();
    }
    std::size_t admitted = 0;
    std::optional<proxy::refusal> rest;
    if (!reply) {
      if (allow_without_state_)
        admitted = group.size();
      else
        rest = proxy::refusal::state_unavailable(
            "the gateway's shared state (Redis) cannot be reached, and the session's budgets "
            "cannot be checked without it");
    } else if (reply->type != redis_reply::kind::array || reply->elements.empty() ||
               reply->elements[0].type != redis_reply::kind::integer) {
      rest = proxy::refusal::state_unavailable("the shared state refused the budget check");
    } else {
      admitted = static_cast<std::size_t>(std::max(0LL, reply->elements[0].integer));
      if (admitted < group.size())
        rest = refused({reply->elements.begin() + 1, reply->elements.end()});
    }
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (i >= admitted) group[i]->result = rest;
      group[i]->done = true;
      group[i]->wake.cancel();
    }
  }
  here.busy = false;
}

void shared_budget::recorded(const session::audit_entry& entry) {
  if (!entry.llm_tokens) return;  // bytes go with the next admission
  auto self = shared_from_this();
  store_->run([self](redis_client& client) -> asio::awaitable<void> {
    const auto b = self->pending();
    if (!b) co_return;
    const auto reply = co_await client.eval(
        admit_script,
        redis_command(redis_store::session_key(self->session_id_),
                      redis_store::usage_key(self->session_id_)),
        self->script_args(b, 0));
    if (!reply.is_error()) self->acknowledge(b->number);
  });
}

void shared_budget::flush() {
  const auto b = pending();
  if (!b) return;
  std::vector<std::string> command = {"EVAL", admit_script.text, "2",
                                      redis_store::session_key(session_id_),
                                      redis_store::usage_key(session_id_)};
  for (auto& a : script_args(b, 0)) command.push_back(std::move(a));
  try {
    store_->blocking({std::move(command)}).at(0).checked();
    acknowledge(b->number);
  } catch (const std::exception& e) {
    session::log(spdlog::level::err, session::log_tag(session_id_),
                 "usage not shared with the other replicas at shutdown: {}", e.what());
  }
}

}  // namespace broker::gateway
