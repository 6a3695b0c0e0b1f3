// Ask and approve (docs/policy.md): a request only asking layers refused is held here while a
// person decides, with `broker approve`/`broker deny` through the session's control socket (or a
// gateway's admin API). A held request costs a timer on its connection's thread and the record
// below, no thread of its own; its body stays unread in the socket and the connection's bounded
// read buffer. An approval for the session adds an allow rule to the asking layers
// (policy_set::with_approval) and releases every held request the new policy allows; `--always`
// also writes the rule to approved.json. Each ask and each decision is an audit record.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/asio.hpp"
#include "config/policy_set.hpp"
#include "mcp/messages.hpp"
#include "session/audit_record.hpp"

namespace broker::live {

class live_session;

// How a session asks: set on the context by wrap --ask, or when a layer asks.
struct ask_options {
  // --always writes here; empty (a gateway's sessions): --always is refused.
  std::filesystem::path approved_file;
  // Told of each ask as `broker pending --json` lists it (wrap: a stderr line, --ask-notify).
  std::function<void(const nlohmann::ordered_json& ask)> on_ask;
  // Held at once at most; beyond it a request is refused as if nobody were asked.
  std::size_t max_held = 4096;
};

enum class approval_scope { once, session, always };
// "once", "session" or "always"; and back, nullopt for any other word.
const char* scope_name(approval_scope s);
std::optional<approval_scope> scope_named(std::string_view name);

struct ask_answer {
  bool approve = false;
  approval_scope scope = approval_scope::session;
  std::string path_prefix;  // approve only this path and what is under it
  std::string who;          // for the record: the deciding person's uid and process
};

// An MCP call held for a person (docs/policy.md, "Asks about MCP calls"): what the ask shows, and
// what an approval for the session approves (this call's tool, prompt or resource on its server,
// mcp::call_approvals; a changed tool accepted as it now is, mcp::pin_store::accept).
struct mcp_ask {
  std::string server;  // "host:port"
  mcp::call_kind kind = mcp::call_kind::tool;
  std::string method;     // "tools/call"
  std::string target;     // the tool or prompt name, or the resource URI
  std::string arguments;  // pretty-printed, secrets redacted (mcp::shown_arguments); "" for none
  std::string why;        // the refusal, as a sentence
  std::vector<std::string> changed;  // a changed tool: which of its fields
  bool pin = false;                  // refused by its pin: an approval for the session accepts
  std::string shown;                 // ... the listing it was asked about (mcp::pin_store::accept)
};

struct ask_outcome {
  enum class kind { approved, denied, timed_out, full, cut_short };
  kind what = kind::timed_out;
  std::string rule;  // approved: the rule that let it go ("approved[0]", "approved:once")
};

// Where held requests are listed and decided: one session's desk, or a gateway's sessions'.
class ask_decider {
 public:
  virtual ~ask_decider() = default;
  // The held requests, oldest first: id, session, pid, exe, method, url, rule, waiting_s.
  virtual nlohmann::ordered_json pending() const = 0;
  // Decides the held request `id`; its answer for the deciding client. Throws
  // std::invalid_argument for an id that is not held (decided, timed out, never asked), a scope
  // the session cannot take (--always without approved.json) or a bad path prefix.
  virtual nlohmann::ordered_json decide(const std::string& id, const ask_answer& answer) = 0;
};

class ask_desk final : public ask_decider {
 public:
  ask_desk(live_session& ctx, ask_options options);
  ~ask_desk() override;

  // Holds the request `entry` names (refused by `entry.rule`) until a person decides, or the
  // session's ask timeout passes. `tunnel`: a CONNECT (or captured connection) the other layers
  // tunnel, held before anything of it is read; its approval is a tunnel rule. Writes the `ask`
  // record, and the `approval` record when it times out. Runs on the connection's executor.
  asio::awaitable<ask_outcome> hold(const session::audit_entry& entry,
                                    const config::destination& dest, bool tunnel = false);
  // Holds an MCP call its rules refused as a person may approve. An approval is for this call
  // (once) or for its tool on its server for the session; never always, nor by path.
  asio::awaitable<ask_outcome> hold_call(const session::audit_entry& entry,
                                         const config::destination& dest, mcp_ask call);

  nlohmann::ordered_json pending() const override;
  nlohmann::ordered_json decide(const std::string& id, const ask_answer& answer) override;

  // A reloaded policy for the session (SIGHUP): every rule approved for the session so far is
  // added to it again, so that a reload keeps what a person approved. Taken in turn with
  // decide(), so an approval made during a reload lands on one policy or the other, never lost.
  void replace_policy(std::shared_ptr<const config::policy_set> fresh);

 private:
  struct held_request;
  asio::awaitable<ask_outcome> wait(std::shared_ptr<held_request> h);
  // An approval of a held MCP call (decide(), under the lock): the held calls it releases.
  std::vector<std::shared_ptr<held_request>> approve_call(
      const std::shared_ptr<held_request>& asked, const ask_answer& answer,
      session::approval& record);
  // One held request as pending() lists it.
  nlohmann::ordered_json listed(const held_request& h,
                                std::chrono::steady_clock::time_point now) const;
  void release(std::shared_ptr<held_request> h, ask_outcome outcome);
  // An approval for the session or always (decide(), under the lock): the policy grows by a rule
  // for the asked request's host, and every held request it now allows is released (returned).
  std::vector<std::shared_ptr<held_request>> approve_and_grow(const held_request& asked,
                                                              const ask_answer& answer,
                                                              session::approval& record);

  live_session& ctx_;
  const ask_options options_;
  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::shared_ptr<held_request>> held_;  // by number: oldest first
  std::uint64_t next_id_ = 0;
  std::vector<config::rule> approved_;  // for the session (and always), in order
};

// A reloaded policy for the session: through its desk when it asks (keeping its approvals).
void reload_policy(live_session& ctx, std::shared_ptr<const config::policy_set> fresh);

// A control-socket line about asks ("pending", "approve ID once|session|always [PREFIX]",
// "deny ID"): its answer; nullopt for any other line. `who` names the client for the records.
std::optional<nlohmann::ordered_json> answer_ask_command(ask_decider* desk, const std::string& line,
                                                         const std::string& who);

}  // namespace broker::live
