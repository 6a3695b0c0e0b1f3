#include "gateway/redis/shared_budget.hpp"

#include <spdlog/spdlog.h>

#include <openssl/rand.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/text.hpp"
#include "session/audit_log.hpp"
#include "session/log.hpp"

namespace broker::gateway {
namespace {

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

// This replica process among every writer of a session's usage: its name and a random part (a
// restarted replica numbers its batches from 1 again).
std::string make_source(const std::string& replica) {
  unsigned char bytes[6];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  return replica + ":" + base::hex_encode(bytes, sizeof bytes);
}

}  // namespace

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

std::optional<usage_batch> shared_budget::pending(bool give_back) {
  std::lock_guard lock(mutex_);
  if (pending_) return pending_;
  const auto now = local_->used();
  usage_batch b{batches_ + 1, {}, 0};
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

std::vector<std::string> shared_budget::script_args(const std::optional<usage_batch>& b,
                                                    ask a) const {
  admit_call call{source_, b, a.asking, 0};
  if (a.lease_more) {  // top the lease up
    std::lock_guard lock(mutex_);
    call.lease = lease - std::min(lease, leased_);
  }
  return admit_args(call, local_->limits());
}

shared_budget::outcome shared_budget::settle(const std::optional<redis_reply>& reply,
                                             const std::optional<usage_batch>& b, ask a) {
  outcome out;
  if (!reply) {
    if (allow_without_state_)
      out.admitted = a.asking;
    else
      out.rest = live::refusal::state_unavailable(
          "the gateway's shared state (Redis) cannot be reached, and the session's budgets "
          "cannot be checked without it");
    return out;
  }
  const auto answer = read_admit_answer(*reply);
  if (!answer) {
    out.rest = live::refusal::state_unavailable("the shared state refused the budget check");
    return out;
  }
  out.admitted = std::min(answer->admitted, a.asking);
  if (out.admitted < a.asking) out.rest = admit_refusal(answer->why, local_->limits(), session_id_);
  std::lock_guard lock(mutex_);
  if (b && pending_ && pending_->number == b->number) {
    acked_.bytes_out += b->delta.bytes_out;
    acked_.bytes_in += b->delta.bytes_in;
    acked_.llm_tokens += b->delta.llm_tokens;
    acked_.cost_usd += b->delta.cost_usd;
    pending_.reset();
  }
  // Usage only grows: an answer computed before one already taken in says less, not news.
  const auto& t = answer->totals;
  heard_.bytes_out = std::max(heard_.bytes_out, t.bytes_out);
  heard_.bytes_in = std::max(heard_.bytes_in, t.bytes_in);
  heard_.llm_tokens = std::max(heard_.llm_tokens, t.llm_tokens);
  heard_.cost_usd = std::max(heard_.cost_usd, t.cost_usd);
  heard_at_ = clock::now();
  leased_ += answer->leased;
  if (out.rest && out.rest->code == "proxy_auth_required") gone_ = out.rest;
  return out;
}

std::optional<live::refusal> shared_budget::over_heard_locked() const {
  const auto& l = local_->limits();
  const auto here = local_->used();
  const auto total = [&](std::uint64_t heard, std::uint64_t used, std::uint64_t acked) {
    return heard + (used - acked);
  };
  const auto bytes_out = total(heard_.bytes_out, here.bytes_out, acked_.bytes_out);
  if (l.bytes_out && bytes_out >= *l.bytes_out) return spent_everywhere("bytes_out", bytes_out, l);
  const auto bytes_in = total(heard_.bytes_in, here.bytes_in, acked_.bytes_in);
  if (l.bytes_in && bytes_in >= *l.bytes_in) return spent_everywhere("bytes_in", bytes_in, l);
  const auto tokens = total(heard_.llm_tokens, here.llm_tokens, acked_.llm_tokens);
  if (l.llm_tokens && tokens >= *l.llm_tokens) return spent_everywhere("llm_tokens", tokens, l);
  const double cost = heard_.cost_usd + (here.cost_usd - acked_.cost_usd);
  if (l.cost_usd && cost >= *l.cost_usd) return spent_everywhere("cost_usd", cost, l);
  return std::nullopt;
}

shared_budget::lane& shared_budget::lane_here(const asio::any_io_executor& executor) {
  const void* key = &asio::query(executor, asio::execution::context);
  std::lock_guard lock(mutex_);
  return lanes_[key];
}

asio::awaitable<std::optional<live::refusal>> shared_budget::admit(const std::string& host) {
  (void)host;  // per-host budgets are this replica's (session_budget)
  const auto executor = co_await asio::this_coro::executor;
  bool from_lease = false, refill_now = false;
  std::optional<live::refusal> refusal;
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
  if (!me->done) co_return live::refusal::state_unavailable("the budget check was cut short");
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
  std::optional<usage_batch> b;
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

bool shared_budget::flush() {
  // Twice at most: a batch still unanswered goes first, then the rest with the lease.
  for (int round = 0; round < 2; ++round) {
    const auto b = pending(true);
    if (!b) return true;
    std::vector<std::string> command = {"EVAL", admit_script.text, "2", keys_[0], keys_[1]};
    for (auto& a : script_args(b, ask{})) command.push_back(std::move(a));
    try {
      store_->blocking({std::move(command)}).at(0).checked();
    } catch (const std::exception& e) {
      session::log(spdlog::level::err, session::log_tag(session_id_),
                   "usage not shared with the other replicas at shutdown: {}", e.what());
      return false;
    }
    std::lock_guard lock(mutex_);
    if (pending_ && pending_->number == b->number) pending_.reset();
  }
  return true;
}

}  // namespace broker::gateway
