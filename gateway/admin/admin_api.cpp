#include "gateway/admin/admin_api.hpp"

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/text.hpp"

#include "gateway/admin/admin_auth.hpp"
#include "gateway/admin/admin_listener.hpp"
#include "gateway/admin/admin_tokens.hpp"
#include "gateway/gateway.hpp"
#include "session/audit_log.hpp"
#include "session/audit_record.hpp"
#include "session/log.hpp"

namespace broker::gateway {
namespace {

constexpr std::string_view asks_prefix = "/api/asks/";
constexpr std::string_view sessions_prefix = "/api/sessions/";

// The body of an approve: {"scope": "once" | "session", "path": "/prefix"}, both optional.
live::ask_answer approval_of(const std::string& body) {
  live::ask_answer answer;
  answer.approve = true;
  if (body.empty()) return answer;
  const auto j = nlohmann::json::parse(body);
  if (!j.is_object()) throw std::invalid_argument("the body is not a JSON object");
  const auto scope = live::scope_named(j.value("scope", std::string("session")));
  if (!scope || *scope == live::approval_scope::always)
    throw std::invalid_argument(
        "\"scope\": expected \"once\" or \"session\" (a gateway keeps no "
        "approved.json: add a rule to the team policy for always)");
  answer.scope = *scope;
  answer.path_prefix = j.value("path", std::string());
  return answer;
}

// POST /api/asks/ID/approve|deny.
admin_response decide(const admin_request& request, const admin_token_info& holder, gateway& team) {
  const std::string rest = request.path.substr(asks_prefix.size());
  const auto slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  const std::string verb = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (id.empty() || (verb != "approve" && verb != "deny"))
    return admin_refusal(404, "not_found",
                         "expected POST /api/asks/ID/approve or /api/asks/ID/deny");
  live::ask_answer answer;
  try {
    if (verb == "approve") answer = approval_of(request.body);
  } catch (const std::exception& e) {
    return admin_refusal(400, "bad_request", e.what());
  }
  answer.who = "admin-token " + holder.name + " (" + holder.id + ") from " + request.peer;
  try {
    return json_answer(200, team.decide_anywhere(id, answer));
  } catch (const std::invalid_argument& e) {
    const std::string why = e.what();
    return admin_refusal(why.starts_with("no request") ? 404 : 400,
                         why.starts_with("no request") ? "not_found" : "bad_request", why);
  } catch (const std::runtime_error& e) {
    return admin_refusal(503, "state_unavailable", e.what());
  }
}

// POST /api/sessions/ID/revoke.
admin_response revoke(const admin_request& request, const admin_token_info& holder, gateway& team) {
  const std::string rest = request.path.substr(sessions_prefix.size());
  const auto slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  if (id.empty() || slash == std::string::npos || rest.substr(slash + 1) != "revoke")
    return admin_refusal(404, "not_found", "expected POST /api/sessions/ID/revoke");
  try {
    auto answer = team.revoke(id);
    session::log(spdlog::level::info, session::log_tag("admin"),
                 "session {} revoked by {} ({}) from {}", id, holder.name, holder.id, request.peer);
    return json_answer(200, answer);
  } catch (const std::invalid_argument& e) {
    return admin_refusal(404, "not_found", e.what());
  } catch (const std::runtime_error& e) {
    return admin_refusal(503, "state_unavailable", e.what());
  }
}

}  // namespace

void add_admin_api(admin_listener& listener, std::shared_ptr<gateway> team,
                   std::shared_ptr<admin_gate> gate) {
  const auto guarded = [gate](bool changes_state, auto answer) {
    return [gate, changes_state, answer](const admin_request& request) {
      auto admitted = gate->admit(request, changes_state);
      if (!admitted.holder) return admitted.refused;
      return answer(request, *admitted.holder);
    };
  };
  listener.route("GET", "/api/sessions",
                 guarded(false, [team](const admin_request&, const admin_token_info&) {
                   return json_answer(200, team->list());
                 }));
  listener.route(
      "POST", std::string(sessions_prefix) + "*",
      guarded(true, [team](const admin_request& request, const admin_token_info& holder) {
        return revoke(request, holder, *team);
      }));
  // With replicas these read Redis, and a decision may wait on the replica holding the ask.
  constexpr bool slow = true;
  listener.route("GET", "/api/asks",
                 guarded(false,
                         [team](const admin_request&, const admin_token_info&) {
                           try {
                             return json_answer(200, {{"asks", team->pending_everywhere()}});
                           } catch (const std::runtime_error& e) {
                             return admin_refusal(503, "state_unavailable", e.what());
                           }
                         }),
                 slow);
  listener.route("POST", std::string(asks_prefix) + "*",
                 guarded(true,
                         [team](const admin_request& request, const admin_token_info& holder) {
                           return decide(request, holder, *team);
                         }),
                 slow);
}

std::optional<nlohmann::ordered_json> answer_admin_token_command(admin_tokens& tokens,
                                                                 const std::string& line,
                                                                 const std::string& who,
                                                                 session::audit_log& gateway_log) {
  const auto space = line.find(' ');
  const std::string verb = line.substr(0, space);
  const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
  if (!verb.starts_with("admin-token-")) return std::nullopt;
  try {
    if (verb == "admin-token-list") {
      auto out = nlohmann::ordered_json::array();
      for (const auto& t : tokens.list()) out.push_back(to_json(t));
      return nlohmann::ordered_json{{"tokens", out}};
    }
    session::admin_action record;
    record.who = who;
    if (verb == "admin-token-create") {
      auto made = tokens.create(rest);
      record.decision = "token_create";
      record.token_id = made.info.id;
      record.token_name = made.info.name;
      gateway_log.write(session::admin_record(record));
      auto out = to_json(made.info);
      out["token"] = std::string(made.token.expose());
      return out;
    }
    if (verb == "admin-token-revoke") {
      const auto gone = tokens.revoke(rest);
      if (gone.empty()) return nlohmann::ordered_json{{"error", "no admin token " + rest}};
      auto out = nlohmann::ordered_json::array();
      for (const auto& t : gone) {
        record.decision = "token_revoke";
        record.token_id = t.id;
        record.token_name = t.name;
        gateway_log.write(session::admin_record(record));
        out.push_back(to_json(t));
      }
      return nlohmann::ordered_json{{"ok", true}, {"revoked", out}};
    }
    return nlohmann::ordered_json{{"error", "unknown admin-token command " + verb}};
  } catch (const std::exception& e) {
    return nlohmann::ordered_json{{"error", e.what()}};
  }
}

}  // namespace broker::gateway
