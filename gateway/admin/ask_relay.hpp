// Asks across replicas (docs/policy.md, docs/gateway.md): a request is held on the replica its
// client reached, but an operator's console or script may talk to any replica. Through the
// replicas' Redis:
//   - each replica publishes the asks it holds, every `publish_every`, as one JSON array
//     (key broker:asks:REPLICA, expiring after `listed_for`, so a replica that stops stops
//     being listed), and names itself in the set broker:ask-replicas;
//   - a replica asked to decide an ask another one holds pushes the decision onto that
//     replica's list broker:ask-decisions:REPLICA, with a key to answer on, and waits up to
//     `forward_wait` for the answer; the holder takes its list each time it publishes,
//     decides as if asked itself, and pushes the answer back. A decision not taken in time is
//     taken back off the list, so it never applies after the sender was told it failed.
// So every replica lists every replica's asks (at most `publish_every` old), and a decision
// reaches the holder within `publish_every`.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "live/ask_desk.hpp"

namespace broker::gateway {

class redis_store;

class ask_relay : public std::enable_shared_from_this<ask_relay> {
 public:
  static constexpr std::chrono::milliseconds publish_every{250};
  static constexpr std::chrono::milliseconds listed_for{2000};
  // Within the admin listener's 5 s for an answer, with room for the take-back.
  static constexpr std::chrono::milliseconds forward_wait{3000};

  // What this replica holds, and how it decides one of its own (gateway::pending/decide).
  using local_pending = std::function<nlohmann::ordered_json()>;
  using local_decide =
      std::function<nlohmann::ordered_json(const std::string& id, const live::ask_answer&)>;

  ask_relay(std::shared_ptr<redis_store> store, std::string replica, local_pending pending,
            local_decide decide);

  // Starts publishing and taking decisions, on the store's thread.
  void start();
  // No call to `pending` or `decide` is under way once this returns, and none follows: the
  // gateway calls it before it ends.
  void stop();

  // Every replica's asks, this one's as `local` says, each with its "replica"; oldest first.
  // Throws std::runtime_error when Redis cannot be reached.
  nlohmann::ordered_json everywhere(nlohmann::ordered_json local);

  // Has the replica that lists `id` decide it; its answer. Throws std::invalid_argument when no
  // replica lists it, or the holder refused the decision (its message); std::runtime_error when
  // the holder did not answer within forward_wait or Redis cannot be reached.
  nlohmann::ordered_json forward(const std::string& id, const live::ask_answer& answer);

 private:
  // One publish and the decisions taken with it (on the store's thread), under calls_.
  std::optional<std::string> publication();
  std::vector<std::pair<std::string, std::string>> decided(const std::vector<std::string>& sent);
  redis_store& store();

  // Weak: the store's thread runs the relay's loop, and must never end the store itself.
  std::weak_ptr<redis_store> store_;
  const std::string replica_;
  local_pending pending_;
  local_decide decide_;
  std::mutex calls_;
  bool stopped_ = false;
};

}  // namespace broker::gateway
