#include "gateway/redis/redis_store.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <set>

#include "session/log.hpp"

namespace broker::gateway {
namespace {

// Revoking is one atomic step: the flag every admission reads, the set and the counter that
// replicas poll. 0 when there is no such session.
const char* const revoke_lua = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'revoked', '1')
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('INCR', KEYS[3])
return 1
)lua";

std::optional<session_record> record_of(const redis_reply& reply) {
  // HMGET record revoked
  if (reply.type != redis_reply::kind::array || reply.elements.size() != 2 ||
      reply.elements[0].is_nil())
    return std::nullopt;
  auto r = record_from_json(nlohmann::json::parse(reply.elements[0].text));
  r.revoked = reply.elements[1].text == "1";
  return r;
}

std::vector<std::string> hmget_record(const std::string& id) {
  return redis_command("HMGET", redis_store::session_key(id), "record", "revoked");
}

}  // namespace

struct redis_store::background {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::unique_ptr<redis_client> client;
  std::thread thread;
};

redis_store::redis_store(redis_endpoint endpoint, std::shared_ptr<redis_stats> stats,
                         std::shared_ptr<redis_stats> background_stats,
                         std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)),
      stats_(std::move(stats)),
      timeout_(timeout),
      background_(std::make_unique<background>()) {
  background_->client = std::make_unique<redis_client>(background_->io.get_executor(), endpoint_,
                                                       std::move(background_stats), timeout_);
  background_->thread = std::thread([this] { background_->io.run(); });
}

redis_store::~redis_store() {
  close();
}

void redis_store::close() {
  if (background_->thread.joinable()) {
    asio::post(background_->io, [this] {
      background_->client->close();
      background_->work.reset();
      background_->io.stop();
    });
    background_->thread.join();
  }
  std::lock_guard lock(clients_mutex_);
  for (auto& [ctx, client] : clients_) client->close();
  clients_.clear();
}

std::vector<redis_reply> redis_store::blocking(std::vector<std::vector<std::string>> commands) {
  return redis_run(endpoint_, std::move(commands), timeout_);
}

void redis_store::put(const session_record& r) {
  auto replies = blocking({redis_command("HSET", session_key(r.id), "record", to_json(r).dump(),
                                         "revoked", r.revoked ? "1" : "0"),
                           redis_command("SADD", "broker:sessions", r.id)});
  for (const auto& reply : replies) reply.checked();
}

std::vector<session_record> redis_store::all() {
  const auto ids = blocking({redis_command("SMEMBERS", "broker:sessions")}).at(0).checked();
  std::vector<std::vector<std::string>> reads;
  for (const auto& id : ids.elements) reads.push_back(hmget_record(id.text));
  std::vector<session_record> out;
  if (reads.empty()) return out;
  for (const auto& reply : blocking(std::move(reads)))
    if (auto r = record_of(reply.checked())) out.push_back(std::move(*r));
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.created_ms < b.created_ms; });
  return out;
}

std::optional<session_record> redis_store::get(const std::string& id) {
  return record_of(blocking({hmget_record(id)}).at(0).checked());
}

bool redis_store::revoke(const std::string& id) {
  const auto reply = blocking({redis_command("EVAL", revoke_lua, "3", session_key(id),
                                             "broker:revoked", "broker:revocations", id)})
                         .at(0)
                         .checked();
  return reply.integer == 1;
}

redis_client& redis_store::client_here(const asio::any_io_executor& executor) {
  const void* key = &asio::query(executor, asio::execution::context);
  std::lock_guard lock(clients_mutex_);
  auto& client = clients_[key];
  if (!client) client = std::make_unique<redis_client>(executor, endpoint_, stats_, timeout_);
  return *client;
}

asio::awaitable<std::optional<session_record>> redis_store::fetch(std::string id) {
  auto& client = client_here(co_await asio::this_coro::executor);
  const auto reply = co_await client.command(hmget_record(id));
  co_return record_of(reply.checked());
}

void redis_store::run(std::function<asio::awaitable<void>(redis_client&)> job) {
  asio::co_spawn(
      background_->io,
      [this, job = std::move(job)]() -> asio::awaitable<void> {
        try {
          co_await job(*background_->client);
        } catch (const std::exception& e) {
          session::log(spdlog::level::debug, session::log_tag("redis"), "background job: {}",
                       e.what());
        }
      },
      asio::detached);
}

void redis_store::watch_revocations(std::function<void(const std::string&)> on_revoked) {
  asio::co_spawn(
      background_->io,
      [this, on_revoked = std::move(on_revoked)]() -> asio::awaitable<void> {
        asio::steady_timer timer(background_->io);
        std::string seen_counter;
        std::set<std::string> seen;
        bool was_down = false;
        for (;;) {
          timer.expires_after(revocation_poll);
          co_await timer.async_wait(asio::use_awaitable);
          try {
            const auto counter = co_await background_->client->command("GET", "broker:revocations");
            reachable_.store(true, std::memory_order_relaxed);
            if (was_down) {
              session::log(spdlog::level::info, session::log_tag("redis"), "{} reachable again",
                           endpoint_.display());
              was_down = false;
            }
            if (counter.text == seen_counter) continue;
            const auto members =
                (co_await background_->client->command("SMEMBERS", "broker:revoked")).checked();
            for (const auto& id : members.elements)
              if (seen.insert(id.text).second) on_revoked(id.text);
            seen_counter = counter.text;
          } catch (const std::exception& e) {
            reachable_.store(false, std::memory_order_relaxed);
            if (!was_down)
              session::log(spdlog::level::err, session::log_tag("redis"),
                           "{} unreachable: {}; budgeted sessions are refused until it returns",
                           endpoint_.display(), e.what());
            was_down = true;
          }
        }
      },
      asio::detached);
}

}  // namespace broker::gateway
