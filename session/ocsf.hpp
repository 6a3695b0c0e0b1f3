// Audit records as OCSF events (docs/gateway.md): `broker log --format ocsf` feeds a SIEM that
// speaks the Open Cybersecurity Schema Framework. Each record becomes one HTTP Activity event
// (class 4002, OCSF 1.8.0): a request, refusal or tunnel with its method as the activity, its URL,
// status, bytes and time, the policy's verdict as action and disposition (a refusal's code in
// status_code), and the session, its user and the client process as the actor. A record the
// class cannot express (session_start, session_end, approval, policy_reload, admin, kept_out,
// ssh_agent) is still one event: activity Other, named after the record, with the whole record in
// `unmapped`.
// tests/integration/ocsf/ holds the field list every event is checked against, and its source.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace broker::session {

class ocsf_mapper {
 public:
  // The event for one record. Records are given in log order: a gateway session's user is
  // named in its session_start, and its later records' actor carries it.
  nlohmann::ordered_json map(const nlohmann::json& record);

 private:
  std::map<std::string, std::string> users_;  // session id -> user, from session_start
};

}  // namespace broker::session
