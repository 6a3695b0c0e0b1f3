// What every connection of one proxy session shares: options, the live policy, the audit log and
// counters. Thread-safe; connections hold it by shared_ptr.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "brokers/credential_set.hpp"
#include "config/policy_set.hpp"
#include "live/connect_to.hpp"
#include "live/session_clients.hpp"
#include "live/session_counters.hpp"
#include "live/session_ending.hpp"
#include "live/ssh_joins.hpp"
#include "live/timeouts.hpp"
#include "session/audit_log.hpp"
#include "session/audit_record.hpp"
#include "session/budget.hpp"

namespace broker::certs {
class tls_contexts;
}  // namespace broker::certs
namespace broker::mcp {
class pin_store;
class call_approvals;
}  // namespace broker::mcp

namespace broker::live {

class session_resolver;
class ask_desk;
struct ask_options;
class shared_admission;

struct session_options {
  std::string session_id;
  std::vector<connect_to_rule> connect_to;
  std::vector<std::filesystem::path> upstream_cas;  // extra roots for verifying upstream TLS
  live::timeouts timeouts;
};

using session::audit_entry;

// Told of every exchange record written (metrics).
using record_observer = std::function<void(const std::string& session, const audit_entry&)>;

// What a context carries beyond its session's core (options, policy, audit log, credentials,
// TLS): what wrap, a gateway and transparent capture attach, each given at construction. An
// empty member: the session has none.
struct session_attachments {
  // The session's budgets (the tightest of every layer's).
  std::shared_ptr<session::session_budget> budget;
  record_observer observer;
  // A gateway session: its budgets shared with the other replicas, and its expiry.
  std::shared_ptr<shared_admission> shared;
  std::optional<std::chrono::system_clock::time_point> expires;
  // wrap: where the session's clients live.
  session_clients clients;
  // The session asks a person about what its asking layers refuse (docs/policy.md): how.
  std::shared_ptr<const ask_options> asks;
  // wrap --learn: what asking layers refuse goes through, recorded as learned (docs/policy.md).
  bool learn = false;
};

class live_session {
 public:
  live_session(session_options options, std::shared_ptr<const config::policy_set> policy,
               std::unique_ptr<session::audit_log> audit,
               std::shared_ptr<const brokers::credential_set> credentials,
               std::shared_ptr<certs::tls_contexts> tls, session_attachments attached = {});
  ~live_session();

  const session_options& options() const { return options_; }
  const std::string& session_id() const { return options_.session_id; }

  std::shared_ptr<const config::policy_set> policy() const { return policy_.load(); }
  void replace_policy(std::shared_ptr<const config::policy_set> policy) { policy_.store(policy); }

  // The session's brokered credentials; fixed for the session (a reload changes rules, not keys).
  const brokers::credential_set& credentials() const { return *credentials_; }
  certs::tls_contexts& tls() { return *tls_; }
  // The session's budgets; null when no layer sets any.
  session::session_budget* budget() const { return attached_.budget.get(); }
  // How the session ends before its command does: asked from inside, revoked, expired.
  session_ending& ending() { return ending_; }
  const session_ending& ending() const { return ending_; }

  // A gateway session's budgets shared with the other replicas; null when not shared.
  shared_admission* shared() const { return attached_.shared.get(); }

  // A team gateway's own context (docs/gateway.md): it resolves every client connection to the
  // session its proxy credential names; null for any other context. Set once, before the first
  // connection: the gateway is made after the listener it names is bound.
  void set_resolver(std::shared_ptr<session_resolver> r) { resolver_ = std::move(r); }
  session_resolver* resolver() const { return resolver_.get(); }

  // `text` with every real secret value replaced by its dummy: for anything the broker writes
  // that carries client-chosen text (hosts, paths, log lines).
  std::string scrub(std::string_view text) const;

  // False while the audit log cannot be written: the session then refuses every new request
  // (fail closed) until it can again (session::audit_log::available()).
  bool audit_ok() { return audit_->available(); }
  // Charges the budget with the bytes of `entry` it has not been charged with yet.
  void charge(audit_entry& entry);
  // Writes the exchange's record (and counts it); false when it could not be written. `staged`:
  // chained now, written with the next flush_records() (the caller flushes before the response
  // completes).
  bool record(const audit_entry& entry, bool staged = false);
  // Writes the staged records; false when they could not be written.
  bool flush_records() { return audit_->flush(); }
  session::audit_log& audit_log() { return *audit_; }

  // Where requests wait for a person's approval; null when the session does not ask.
  ask_desk* asks() const { return asks_.get(); }
  // wrap --learn (session_attachments::learn).
  bool learns() const { return attached_.learn; }

  // wrap: where the session's clients live (session_attachments).
  const session_clients& clients() const { return attached_.clients; }
  // Writes a `dns` record (a name the policy refused); not counted as a request.
  bool record_dns(const audit_entry& entry);

  // Each MCP server's tools as the session first listed them (docs/policy.md, "MCP servers").
  mcp::pin_store& mcp_pins() { return *mcp_pins_; }
  // The MCP calls a person approved for the session (ask_desk).
  mcp::call_approvals& mcp_approvals() { return *mcp_approvals_; }

  // wrap: SSH connections joined to the keys the session's agent signed with (ssh_joins.hpp).
  ssh_joins& ssh() { return ssh_; }

  // Its connections and exchanges, counted.
  session_counters& counters() { return counters_; }
  const session_counters& counters() const { return counters_; }

 private:
  session_options options_;
  std::atomic<std::shared_ptr<const config::policy_set>> policy_;
  std::unique_ptr<session::audit_log> audit_;
  std::shared_ptr<const brokers::credential_set> credentials_;
  std::shared_ptr<certs::tls_contexts> tls_;
  const session_attachments attached_;
  std::shared_ptr<session_resolver> resolver_;
  session_ending ending_;
  session_counters counters_;
  ssh_joins ssh_;
  std::unique_ptr<ask_desk> asks_;
  std::unique_ptr<mcp::pin_store> mcp_pins_;
  std::unique_ptr<mcp::call_approvals> mcp_approvals_;
};

}  // namespace broker::live
