#include "gateway/admin/ask_relay.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <boost/asio/steady_timer.hpp>

#include "base/text.hpp"
#include "gateway/redis/redis_store.hpp"
#include "session/log.hpp"

namespace broker::gateway {
namespace {

constexpr const char* replicas_key = "broker:ask-replicas";

std::string listed_key(const std::string& replica) {
  return "broker:asks:" + replica;
}
std::string decisions_key(const std::string& replica) {
  return "broker:ask-decisions:" + replica;
}

nlohmann::ordered_json to_json(const live::ask_answer& a) {
  return {{"approve", a.approve},
          {"scope", live::scope_name(a.scope)},
          {"path", a.path_prefix},
          {"who", a.who}};
}

live::ask_answer answer_from_json(const nlohmann::json& j) {
  live::ask_answer a;
  a.approve = j.value("approve", false);
  a.scope = live::scope_named(j.value("scope", std::string("session")))
                .value_or(live::approval_scope::session);
  a.path_prefix = j.value("path", std::string());
  a.who = j.value("who", std::string());
  return a;
}

std::string reply_key() {
  unsigned char bytes[12];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  return "broker:ask-answer:" + base::hex_encode(bytes, sizeof bytes);
}

}  // namespace

ask_relay::ask_relay(std::shared_ptr<redis_store> store, std::string replica, local_pending pending,
                     local_decide decide)
    : store_(std::move(store)),
      replica_(std::move(replica)),
      pending_(std::move(pending)),
      decide_(std::move(decide)) {}

redis_store& ask_relay::store() {
  auto store = store_.lock();
  if (!store) throw std::runtime_error("the gateway's shared state is closing");
  return *store;  // the gateway holds it as long as it answers
}

void ask_relay::stop() {
  std::lock_guard lock(calls_);
  stopped_ = true;
}

std::optional<std::string> ask_relay::publication() {
  std::lock_guard lock(calls_);
  if (stopped_) return std::nullopt;
  return pending_().dump();
}

std::vector<std::pair<std::string, std::string>> ask_relay::decided(
    const std::vector<std::string>& sent) {
  std::vector<std::pair<std::string, std::string>> answers;  // reply key, answer
  std::lock_guard lock(calls_);
  for (const auto& text : sent) {
    const auto request = nlohmann::json::parse(text, nullptr, false);
    if (!request.is_object() || !request.contains("id") || !request["id"].is_string() ||
        !request.contains("reply") || !request["reply"].is_string())
      continue;
    nlohmann::ordered_json result;
    try {
      if (stopped_) throw std::invalid_argument("no request: the gateway is stopping");
      result = decide_(request["id"].get<std::string>(),
                       answer_from_json(request.value("answer", nlohmann::json::object())));
    } catch (const std::exception& e) {
      result = {{"error", "refused"}, {"message", e.what()}};
    }
    answers.emplace_back(request["reply"].get<std::string>(), result.dump());
  }
  return answers;
}

void ask_relay::start() {
  auto store = store_.lock();
  if (!store) return;
  store->run([weak = weak_from_this(), listed = listed_key(replica_), replica = replica_,
              inbox = decisions_key(replica_)](redis_client& client) -> asio::awaitable<void> {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    const auto ms = std::to_string(listed_for.count());
    const auto keep = std::to_string(forward_wait.count() * 2);
    for (;;) {
      timer.expires_after(publish_every);
      co_await timer.async_wait(asio::use_awaitable);
      auto self = weak.lock();
      if (!self) co_return;
      try {
        const auto asks = self->publication();
        if (!asks) co_return;
        co_await client.command("SET", listed, *asks, "PX", ms);
        co_await client.command("SADD", replicas_key, replica);
        // Decisions other replicas sent for the asks held here.
        std::vector<std::string> sent;
        for (;;) {
          const auto got = (co_await client.command("LPOP", inbox)).checked();
          if (got.is_nil()) break;
          sent.push_back(got.text);
        }
        for (const auto& [reply, answer] : self->decided(sent)) {
          co_await client.command("RPUSH", reply, answer);
          co_await client.command("PEXPIRE", reply, keep);
        }
      } catch (const std::exception& e) {
        session::log(spdlog::level::debug, session::log_tag("asks"), "relay: {}", e.what());
      }
    }
  });
}

nlohmann::ordered_json ask_relay::everywhere(nlohmann::ordered_json local) {
  auto out = nlohmann::ordered_json::array();
  for (auto& ask : local) {
    ask["replica"] = replica_;
    out.push_back(std::move(ask));
  }
  const auto replicas = store().blocking({redis_command("SMEMBERS", replicas_key)}).at(0).checked();
  std::vector<std::string> mget{"MGET"};
  std::vector<std::string> names;
  for (const auto& r : replicas.elements)
    if (r.text != replica_) {
      names.push_back(r.text);
      mget.push_back(listed_key(r.text));
    }
  if (!names.empty()) {
    const auto lists = store().blocking({mget}).at(0).checked();
    for (std::size_t i = 0; i < lists.elements.size() && i < names.size(); ++i) {
      if (lists.elements[i].is_nil()) continue;  // that replica stopped publishing
      auto asks = nlohmann::ordered_json::parse(lists.elements[i].text, nullptr, false);
      if (!asks.is_array()) continue;
      for (auto& ask : asks) {
        ask["replica"] = names[i];
        out.push_back(std::move(ask));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.value("waiting_s", 0L) > b.value("waiting_s", 0L);
  });
  return out;
}

nlohmann::ordered_json ask_relay::forward(const std::string& id, const live::ask_answer& answer) {
  std::string holder;
  for (const auto& ask : everywhere(nlohmann::ordered_json::array()))
    if (ask.value("id", "") == id) holder = ask.value("replica", "");
  if (holder.empty())
    throw std::invalid_argument("no request " + id +
                                " is held by any replica (decided already, timed out, or never "
                                "asked)");
  const auto reply = reply_key();
  const nlohmann::ordered_json request{{"id", id}, {"answer", to_json(answer)}, {"reply", reply}};
  store().blocking(
      {redis_command("RPUSH", decisions_key(holder), request.dump()),
       redis_command("PEXPIRE", decisions_key(holder), std::to_string(forward_wait.count() * 2))});
  // The holder takes its list each time it publishes: poll for its answer meanwhile.
  const auto deadline = std::chrono::steady_clock::now() + forward_wait;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto got = store().blocking({redis_command("LPOP", reply)}).at(0).checked();
    if (!got.is_nil()) {
      auto result = nlohmann::ordered_json::parse(got.text, nullptr, false);
      if (result.is_object() && result.contains("error"))
        throw std::invalid_argument(result.value("message", std::string("refused")));
      if (result.is_object()) result["replica"] = holder;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Taken back if the holder has not taken it yet, so that it never applies after this answer.
  const auto taken_back =
      store()
          .blocking({redis_command("LREM", decisions_key(holder), "1", request.dump())})
          .at(0)
          .checked();
  const auto waited = std::to_string(forward_wait.count() / 1000) + " s";
  if (taken_back.integer > 0)
    throw std::runtime_error("replica " + holder + " holds " + id +
                             " but did not take the decision within " + waited +
                             "; nothing was decided");
  throw std::runtime_error("replica " + holder + " took the decision about " + id +
                           " but did not answer within " + waited + "; it may have applied");
}

}  // namespace broker::gateway
