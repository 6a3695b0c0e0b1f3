#include "gateway/admin/admin_auth.hpp"

#include <openssl/crypto.h>

#include <chrono>
#include <mutex>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/text.hpp"
#include "session/audit_log.hpp"
#include "session/audit_record.hpp"
#include "session/log.hpp"

namespace broker::gateway {

admin_response json_answer(int status, const nlohmann::ordered_json& body) {
  return {status, "application/json", body.dump() + "\n", {}};
}

admin_response admin_refusal(int status, const std::string& code, const std::string& message) {
  return json_answer(status, {{"error", code}, {"message", message}});
}

// The gateway's log takes at most `per_second` refused admin requests a second; those over it
// are counted into the next record written ("suppressed"), so that a flood of guesses cannot
// flood the log.
class admin_gate::records {
 public:
  explicit records(session::audit_log& log) : log_(log) {}

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

bool origin_is_own(const admin_request& request) {
  const auto* origin = request.head.find("origin");
  if (!origin) return true;
  const auto* host = request.head.find("host");
  // https too: the listener may sit behind a TLS-terminating proxy that keeps Host.
  return host && !host->empty() && (*origin == "http://" + *host || *origin == "https://" + *host);
}

namespace {

// Whether `a` equals `b`, in time that depends on their lengths only.
bool same_text(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// Why a cookie-borne state change is not the console's own, or "" when it is.
std::string csrf_problem(const admin_request& request, const admin_login& login) {
  if (const auto* site = request.head.find("sec-fetch-site"); site && *site == "cross-site")
    return "a cross-site request (Sec-Fetch-Site)";
  if (!origin_is_own(request))
    return "Origin " + base::printable(request.head.find("origin")->substr(0, 128)) +
           " is not this console's";
  const auto* token = request.head.find("x-csrf-token");
  if (!token) return "no X-CSRF-Token";
  if (!same_text(*token, login.csrf)) return "a wrong X-CSRF-Token";
  return "";
}

}  // namespace

admin_gate::admin_gate(std::shared_ptr<admin_tokens> tokens, std::shared_ptr<admin_logins> logins,
                       session::audit_log& gateway_log)
    : tokens_(std::move(tokens)),
      logins_(std::move(logins)),
      records_(std::make_unique<records>(gateway_log)) {}

admin_gate::~admin_gate() = default;

void admin_gate::record_refusal(const admin_request& request, int status,
                                const std::string& reason) {
  session::admin_action record;
  record.decision = "deny";
  record.status = status;
  record.method = request.method;
  record.path = request.path.substr(0, 256);
  record.peer = request.peer;
  record.reason = reason;
  records_->write(session::admin_record(record));
}

admin_gate::admission admin_gate::admit(const admin_request& request, bool changes_state) {
  admission out;
  std::string reason;
  const std::string* authorization = request.head.find("authorization");
  const std::string* cookies = request.head.find("cookie");
  auto cookie = cookies ? cookie_value(*cookies, admin_logins::cookie_name) : std::nullopt;
  try {
    if (authorization) {
      if (auto token = parse_bearer(*authorization); !token)
        reason = "Authorization is not a Bearer token";
      else if (!(out.holder = tokens_->holder(*token)))
        reason = "unknown or revoked admin token";
    } else if (cookie) {
      out.login = logins_->find(*cookie);
      if (!out.login)
        reason = "unknown, expired or signed-out console login";
      else
        out.holder = out.login->holder;
    } else {
      reason = "no Authorization field and no console login";
    }
  } catch (const std::exception& e) {
    session::log(spdlog::level::err, session::log_tag("admin"),
                 "{} {} from {}: cannot check the admin credential: {}", request.method,
                 base::printable(request.path.substr(0, 256)), request.peer, e.what());
    out.holder.reset();
    out.refused = admin_refusal(503, "state_unavailable",
                                "the gateway's shared state (Redis) cannot be reached to check "
                                "the admin credential");
    return out;
  }
  if (out.holder && out.login && changes_state) {
    if (auto problem = csrf_problem(request, *out.login); !problem.empty()) {
      record_refusal(request, 403, problem);
      out.holder.reset();
      out.refused = admin_refusal(403, "csrf_rejected",
                                  problem +
                                      ": a console action must come from the console's "
                                      "own page");
      return out;
    }
  }
  if (out.holder) return out;
  record_refusal(request, 401, reason);
  out.refused = admin_refusal(401, "admin_auth_required",
                              reason +
                                  ": send Authorization: Bearer TOKEN with a token from `broker "
                                  "admin-token create`, or sign in at /console/login");
  out.refused.fields.emplace_back("WWW-Authenticate", "Bearer realm=\"broker admin\"");
  return out;
}

}  // namespace broker::gateway
