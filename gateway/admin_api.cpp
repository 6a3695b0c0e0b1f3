#include "gateway/admin_api.hpp"

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/text.hpp"

#include "gateway/admin_listener.hpp"
#include "gateway/admin_tokens.hpp"
#include "gateway/gateway.hpp"
#include "session/audit_log.hpp"
#include "session/audit_record.hpp"
#include "session/log.hpp"

namespace broker::gateway {
namespace {

constexpr const char* json_type = "application/json";
constexpr std::string_view asks_prefix = "/api/asks/";

admin_response json_answer(int status, const nlohmann::ordered_json& body) {
  return {status, json_type, body.dump() + "\n", {}};
}

admin_response refusal(int status, const std::string& code, const std::string& message) {
  return json_answer(status, {{"error", code}, {"message", message}});
}

// The gateway's log takes at most `per_second` refused admin requests a second; those over it
// are counted into the next record written ("suppressed"), so that a flood of guesses cannot
// flood the log.
class refusal_records {
 public:
  explicit refusal_records(session::audit_log& log) : log_(log) {}

  void write(nlohmann::ordered_json record) {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_ >= std::chrono::seconds(1)) {
      window_ = now;
      written_ = 0;
    }
    if (written_ >= per_second) {
      ++suppressed_;
      return;
    }
    ++written_;
    if (suppressed_ > 0) record["suppressed"] = std::exchange(suppressed_, 0);
    log_.write(record);
  }

  static constexpr int per_second = 20;

 private:
  session::audit_log& log_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point window_{};
  int written_ = 0;
  std::uint64_t suppressed_ = 0;
};

// Who holds the request's admin token, or the 401 (recorded) that answers it.
struct admission {
  std::optional<admin_token_info> holder;
  admin_response refused;
};

admission admit(const admin_request& request, admin_tokens& tokens, refusal_records& records) {
  admission out;
  std::string reason;
  const std::string* value = request.head.find("authorization");
  if (!value) {
    reason = "no Authorization field";
  } else if (auto token = parse_bearer(*value); !token) {
    reason = "Authorization is not a Bearer token";
  } else {
    try {
      out.holder = tokens.holder(*token);
    } catch (const std::exception& e) {
      session::log(spdlog::level::err, session::log_tag("admin"),
                   "{} {} from {}: cannot check the admin token: {}", request.method,
                   base::printable(request.path.substr(0, 256)), request.peer, e.what());
      out.refused = refusal(503, "state_unavailable",
                            "the gateway's shared state (Redis) cannot be reached to check the "
                            "admin token");
      return out;
    }
    if (out.holder) return out;
    reason = "unknown or revoked admin token";
  }
  session::admin_action record;
  record.decision = "deny";
  record.status = 401;
  record.method = request.method;
  record.path = request.path.substr(0, 256);
  record.peer = request.peer;
  record.reason = reason;
  records.write(session::admin_record(record));
  out.refused = refusal(401, "admin_auth_required",
                        reason +
                            ": send Authorization: Bearer TOKEN with a token from `broker "
                            "admin-token create`");
  out.refused.fields.emplace_back("WWW-Authenticate", "Bearer realm=\"broker admin\"");
  return out;
}

// The body of an approve: {"scope": "once" | "session", "path": "/prefix"}, both optional.
proxy::ask_answer approval_of(const std::string& body) {
  proxy::ask_answer answer;
  answer.approve = true;
  if (body.empty()) return answer;
  const auto j = nlohmann::json::parse(body);
  if (!j.is_object()) throw std::invalid_argument("the body is not a JSON object");
  const auto scope = j.value("scope", std::string("session"));
  if (scope == "once")
    answer.scope = proxy::approval_scope::once;
  else if (scope == "session")
    answer.scope = proxy::approval_scope::session;
  else
    throw std::invalid_argument(
        "\"scope\": expected \"once\" or \"session\" (a gateway keeps no "
        "approved.json: add a rule to the team policy for always)");
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
    return refusal(404, "not_found", "expected POST /api/asks/ID/approve or /api/asks/ID/deny");
  proxy::ask_answer answer;
  try {
    if (verb == "approve") answer = approval_of(request.body);
  } catch (const std::exception& e) {
    return refusal(400, "bad_request", e.what());
  }
  answer.who = "admin-token " + holder.name + " (" + holder.id + ") from " + request.peer;
  try {
    return json_answer(200, team.decide(id, answer));
  } catch (const std::invalid_argument& e) {
    const std::string why = e.what();
    return refusal(why.starts_with("no request") ? 404 : 400,
                   why.starts_with("no request") ? "not_found" : "bad_request", why);
  }
}

}  // namespace

void add_admin_api(admin_listener& listener, std::shared_ptr<gateway> team,
                   std::shared_ptr<admin_tokens> tokens, session::audit_log& gateway_log) {
  const auto guarded = [tokens,
                        records = std::make_shared<refusal_records>(gateway_log)](auto answer) {
    return [tokens, records, answer](const admin_request& request) {
      auto admitted = admit(request, *tokens, *records);
      if (!admitted.holder) return admitted.refused;
      return answer(request, *admitted.holder);
    };
  };
  listener.route("GET", "/api/sessions",
                 guarded([team](const admin_request&, const admin_token_info&) {
                   return json_answer(200, team->list());
                 }));
  listener.route("GET", "/api/asks", guarded([team](const admin_request&, const admin_token_info&) {
                   return json_answer(200, {{"asks", team->pending()}});
                 }));
  listener.route("POST", std::string(asks_prefix) + "*",
                 guarded([team](const admin_request& request, const admin_token_info& holder) {
                   return decide(request, holder, *team);
                 }));
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
