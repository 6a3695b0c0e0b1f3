#include "gateway/redis/admit_script.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "session/budget_text.hpp"

namespace broker::gateway {

// ARGV:
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

namespace {

std::string limit_arg(const std::optional<std::uint64_t>& v) {
  return v ? std::to_string(*v) : "-1";
}

std::string usd_arg(double usd) {
  char text[64];
  std::snprintf(text, sizeof text, "%.10f", usd);
  return text;
}

}  // namespace

std::vector<std::string> admit_args(const admit_call& call, const session::budget_limits& l) {
  const auto& b = call.batch;
  std::vector<std::string> args;
  args.push_back(b ? call.source : "");
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
  args.push_back(std::to_string(call.asking));
  args.push_back(std::to_string(call.lease));
  return args;
}

std::optional<admit_answer> read_admit_answer(const redis_reply& reply) {
  const auto& e = reply.elements;
  if (reply.type != redis_reply::kind::array || e.size() < 7 ||
      e[0].type != redis_reply::kind::integer || e[1].type != redis_reply::kind::integer)
    return std::nullopt;
  const auto count = [&](std::size_t i) -> std::uint64_t {
    return std::strtoull(e[i].text.c_str(), nullptr, 10);
  };
  admit_answer a;
  a.admitted = static_cast<std::size_t>(std::max(0LL, e[0].integer));
  a.leased = static_cast<std::uint64_t>(std::max(0LL, e[1].integer));
  a.totals.requests = count(2);
  a.totals.bytes_out = count(3);
  a.totals.bytes_in = count(4);
  a.totals.llm_tokens = count(5);
  a.totals.cost_usd = std::strtod(e[6].text.c_str(), nullptr);
  for (std::size_t i = 7; i < e.size(); ++i) a.why.push_back(e[i].text);
  return a;
}

live::refusal spent_everywhere(const std::string& name, double used,
                               const session::budget_limits& l) {
  std::string limit;
  std::string used_text = std::to_string(static_cast<std::uint64_t>(used));
  if (name == "requests" && l.requests) limit = std::to_string(*l.requests);
  if (name == "llm_tokens" && l.llm_tokens) limit = std::to_string(*l.llm_tokens);
  if (name == "bytes_out" && l.bytes_out) limit = session::format_size(*l.bytes_out);
  if (name == "bytes_in" && l.bytes_in) limit = session::format_size(*l.bytes_in);
  if (name == "bytes_out" || name == "bytes_in")
    used_text = session::format_size(static_cast<std::uint64_t>(used));
  if (name == "cost_usd") {
    if (l.cost_usd) limit = session::format_usd(*l.cost_usd);
    used_text = session::format_usd(used);
  }
  return live::refusal::budget_exhausted(name, limit, used_text + " on all replicas", 0);
}

live::refusal admit_refusal(const std::vector<std::string>& why, const session::budget_limits& l,
                            const std::string& session_id) {
  const std::string what = why.empty() ? "" : why[0];
  if (what == "revoked")
    return live::refusal::proxy_auth_required("the session " + session_id + " was revoked");
  if (what == "unknown")
    return live::refusal::proxy_auth_required("the session " + session_id +
                                              " is no longer in the shared state");
  if (what == "rate" && why.size() == 2 && l.request_rate) {
    const long ms = std::atol(why[1].c_str());
    return live::refusal::budget_exhausted("rate", session::format_rate(*l.request_rate),
                                           "over the rate", std::max(1L, (ms + 999) / 1000));
  }
  if (what == "spent" && why.size() == 3)
    return spent_everywhere(why[1], std::strtod(why[2].c_str(), nullptr), l);
  return live::refusal::state_unavailable(
      "the shared state answered what the broker does not "
      "understand");
}

}  // namespace broker::gateway
