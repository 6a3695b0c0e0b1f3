// The gateway's admin JSON API on its admin listener (docs/policy.md, docs/gateway.md), for
// operators and the console, behind an admin credential (admin_tokens.hpp):
//   GET  /api/sessions           the gateway's sessions, as `broker session list --json`
//   POST /api/sessions/ID/revoke the session's clients are refused from their next request on
//   GET  /api/asks               the requests held, oldest first: with replicas, every
//                                replica's (ask_relay.hpp), each naming its "replica"
//   POST /api/asks/ID/approve    body (optional) {"scope": "once" | "session", "path": "/prefix"}
//   POST /api/asks/ID/deny
// Every /api route needs "Authorization: Bearer TOKEN" or a console login (admin_auth.hpp: 401
// and a record in the gateway's log without one; a POST by cookie needs the CSRF proof too).
// Answers are JSON; a refusal
// is {"error": CODE, "message": sentence}. A decision's record, in the session's log, names the
// operator: "admin-token NAME (ID) from PEER". /metrics and /healthz stay open.
//
// The control socket's lines "admin-token-create NAME", "admin-token-list" and
// "admin-token-revoke ID|NAME" (`broker admin-token`) manage the tokens.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace broker::session {
class audit_log;
}

namespace broker::gateway {

class admin_gate;
class admin_listener;
class admin_tokens;
class gateway;

// Routes /api/* on `listener`, each behind `gate` (admin_auth.hpp). The gate writes to the
// gateway's own log: the listener must stop before that log ends.
void add_admin_api(admin_listener& listener, std::shared_ptr<gateway> team,
                   std::shared_ptr<admin_gate> gate);

// A control-socket line about admin tokens: its answer ({"error": sentence} when refused);
// nullopt for any other line. A create answer holds the token: it goes only to the socket's
// owner. `who` names the client for the record.
std::optional<nlohmann::ordered_json> answer_admin_token_command(admin_tokens& tokens,
                                                                 const std::string& line,
                                                                 const std::string& who,
                                                                 session::audit_log& gateway_log);

}  // namespace broker::gateway
