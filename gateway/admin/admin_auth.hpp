// Who may use the admin listener's API and console (docs/gateway.md), checked in one place for
// both: an operator's admin token as "Authorization: Bearer TOKEN" (scripts), or a console login's
// cookie (admin_logins.hpp; browsers). A request with neither, or with one that is not valid, is
// refused 401 (WWW-Authenticate: Bearer) and recorded in the gateway's log as an `admin` record
// (at most 20 a second; the rest are counted into the next one's "suppressed").
//
// A state-changing request carried by the cookie must also prove it comes from the console's own
// page (CSRF, OWASP's "custom request header" and "Origin" checks): an X-CSRF-Token equal to the
// login's, and, when the browser says where the request comes from, Origin equal to this
// listener's own (http:// or https:// and its Host) and Sec-Fetch-Site not cross-site. Otherwise it
// is refused 403 csrf_rejected, recorded the same way. A bearer token is never sent by a browser on
// its own, so it needs neither.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gateway/admin/admin_listener.hpp"
#include "gateway/admin/admin_logins.hpp"
#include "gateway/admin/admin_tokens.hpp"

namespace broker::session {
class audit_log;
}

namespace broker::gateway {

class admin_gate {
 public:
  admin_gate(std::shared_ptr<admin_tokens> tokens, std::shared_ptr<admin_logins> logins,
             session::audit_log& gateway_log);
  ~admin_gate();

  struct admission {
    std::optional<admin_token_info> holder;  // set when admitted
    std::optional<admin_login> login;        // ... through a console login's cookie
    admin_response refused;                  // when not: the answer (JSON, recorded)
  };
  // `changes_state`: the request does something (POST), so a cookie needs the CSRF proof.
  admission admit(const admin_request& request, bool changes_state);

  // Records a refusal decided elsewhere (a failed console sign-in).
  void record_refusal(const admin_request& request, int status, const std::string& reason);

  admin_tokens& tokens() { return *tokens_; }
  admin_logins& logins() { return *logins_; }

 private:
  class records;
  std::shared_ptr<admin_tokens> tokens_;
  std::shared_ptr<admin_logins> logins_;
  std::unique_ptr<records> records_;
};

// Whether a request's Origin, when it has one, is this listener's own: http:// or https://
// and its Host.
bool origin_is_own(const admin_request& request);

// A JSON answer, and the refusal {"error": CODE, "message": sentence} every admin route uses.
admin_response json_answer(int status, const nlohmann::ordered_json& body);
admin_response admin_refusal(int status, const std::string& code, const std::string& message);

}  // namespace broker::gateway
