// A team gateway (docs/gateway.md): one `broker serve` holding many sessions. Each session has its
// own proxy credential, dummies, policy layers on the team's, budgets and audit log; a client's
// requests are bound to their session by Proxy-Authorization (resolve()). Sessions are made,
// listed, shown and revoked through the control socket's `session ...` lines (command()), and
// kept in a session_store: this process's memory, or Redis shared with other replicas. A
// session whose layers ask (docs/policy.md) holds what they refuse while an operator decides,
// through the admin API (admin_api.hpp) or `broker pending|approve|deny` on this host: the gateway
// is the ask_decider of the sessions served here.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gateway/admin/ask_relay.hpp"
#include "gateway/audit_sink.hpp"
#include "gateway/audit_stream.hpp"
#include "gateway/redis/shared_budget.hpp"
#include "gateway/session_store.hpp"
#include "live/ask_desk.hpp"
#include "live/live_session.hpp"
#include "live/session_resolver.hpp"

namespace broker::gateway {

struct gateway_setup {
  // The gateway's own options; options.session_id names its own log, which holds what comes
  // before a session is known (407s).
  live::session_options options;
  std::shared_ptr<const config::policy_set> team_policy;
  std::shared_ptr<const brokers::credential_set> credentials;  // the team's, loaded once
  std::shared_ptr<certs::tls_contexts> tls;
  // Opens a session's audit log on this replica (it fails closed when it cannot be written).
  std::function<std::unique_ptr<session::audit_log>(const std::string& session_id)> open_audit;
  std::string proxy_authority;  // "host:port" the clients dial (a front such as haproxy's)
  std::string listen;           // this replica's own listener URL, for records
  std::string trust_bundle;     // the file of system roots + the gateway CA, for env files
  // Replicas: the shared store (null: sessions live in this process) and this replica's name.
  std::shared_ptr<redis_store> redis;
  std::string replica;
  // --audit-sink: where every session's records also go (audit_sink.hpp); may be empty.
  std::vector<std::shared_ptr<audit_sink>> audit_sinks;
  // Told of every session's records (metrics); may be empty.
  live::record_observer observer;
  // A session revoked here or elsewhere: its series go (metrics); may be empty.
  std::function<void(const std::string& session_id)> on_revoked;
};

class gateway final : public live::session_resolver, public live::ask_decider {
 public:
  // Keeps its sessions in setup.redis when set, else in this process.
  explicit gateway(gateway_setup setup);
  ~gateway() override;
  gateway(const gateway&) = delete;
  gateway& operator=(const gateway&) = delete;

  asio::awaitable<live::resolution> resolve(const http::message_head& head) override;

  // The control socket's lines: "session-create JSON", "session-list", "session-show ID",
  // "session-revoke ID"; nullopt for any other line. Answers carry {"error": sentence} when
  // refused. A create answer holds the proxy credential: it goes only to the socket's owner.
  std::optional<nlohmann::ordered_json> command(const std::string& line);

  // {"policies": [{"source", "text"}], "ttl_s": N (0: none), "user", "labels": {k: v}} →
  // {"session": public view, "proxy_url": "http://ID:TOKEN@host:port", "env": [[NAME, VALUE]],
  // "files": [{"name", "variable", "content"}]}. Throws std::invalid_argument for a bad
  // request (a policy error names its source, line and key), std::runtime_error when the
  // store cannot be reached.
  nlohmann::ordered_json create(const nlohmann::json& request);
  nlohmann::ordered_json list();
  nlohmann::ordered_json show(const std::string& id);
  nlohmann::ordered_json revoke(const std::string& id);
  // For the console: the registry's sessions (oldest first; throws std::runtime_error when the
  // store cannot be reached), and the budgets a session has under the team's policy as it is now.
  std::vector<session_record> records();
  config::budget_spec budgets_of(const session_record& r) const;

  // The requests held by the sessions served on this replica (each session's own desk), and a
  // decision about one of them (its id names its session). An approval's scope is once or
  // session: a gateway has no approved.json.
  nlohmann::ordered_json pending() const override;
  nlohmann::ordered_json decide(const std::string& id, const live::ask_answer& answer) override;

  // With replicas (ask_relay.hpp): every replica's held requests, each naming its "replica"
  // (without, this one's), and a decision about one of them, held here or on another replica.
  void relay_asks(std::shared_ptr<ask_relay> relay);
  nlohmann::ordered_json pending_everywhere() const;
  nlohmann::ordered_json decide_anywhere(const std::string& id, const live::ask_answer& answer);

  // SIGHUP: the team's layers change under every session (credentials cannot).
  void replace_team_policy(std::shared_ptr<const config::policy_set> team);
  // A session revoked through the shared store (by another replica): its clients are refused
  // from the next request on.
  void revoked_elsewhere(const std::string& id);
  // At shutdown: what each session spent here goes to the shared state, and each session this
  // replica served gets its session_end record.
  void end_sessions();

  std::size_t sessions_served() const;
  std::uint64_t requests() const;
  std::uint64_t denied() const;

 private:
  // A session this replica serves.
  struct served {
    session_record record;
    std::shared_ptr<live::live_session> ctx;
    std::shared_ptr<shared_budget> shared;  // set when replicas share its budgets
  };
  // The session's context on this replica, made on its first request here (under mutex_).
  std::shared_ptr<live::live_session> open_session(const session_record& r);
  std::shared_ptr<const config::policy_set> policy_of(const session_record& r,
                                                      const config::policy_set& team) const;
  std::shared_ptr<const brokers::credential_set> credentials_of(const session_record& r) const;

  gateway_setup setup_;
  std::shared_ptr<session_store> store_;
  mutable std::mutex mutex_;
  std::map<std::string, served> live_;
  std::shared_ptr<ask_relay> relay_;  // set once, before serving
};

}  // namespace broker::gateway
