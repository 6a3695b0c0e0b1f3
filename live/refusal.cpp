#include "live/refusal.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace broker::live {

refusal refusal::policy_denied(std::string rule, std::string_view host) {
  std::string message = rule == "default_deny"
                            ? "no allow rule of the session policy matches " + std::string(host)
                            : "the session policy denies " + std::string(host) + " (" + rule + ")";
  return {"policy_denied", 403, std::move(message), std::move(rule)};
}

refusal refusal::approval_denied(std::string rule, std::string_view host, bool timed_out) {
  std::string message =
      timed_out ? "the request to " + std::string(host) +
                      " waited for a person's approval and timed out (no allow rule of the "
                      "session policy matches it)"
                : "a person denied the request to " + std::string(host) +
                      " (no allow rule of the session policy matches it)";
  return {"approval_denied", 403, std::move(message), std::move(rule)};
}

refusal refusal::private_address(std::string_view host, std::string_view address,
                                 std::string_view address_class) {
  return {"private_address_blocked",
          403,
          std::string(host) + " resolves to " + std::string(address) + " (" +
              std::string(address_class) + "), which only a cidr allow rule can open",
          {}};
}

refusal refusal::bad_request(std::string message) {
  return {"bad_request", 400, std::move(message), {}};
}

refusal refusal::header_too_large() {
  return {"header_too_large", 431, "the request head exceeds 64 KiB or 100 header fields", {}};
}

refusal refusal::host_mismatch(std::string message) {
  return {"host_mismatch", 421, std::move(message), {}};
}

refusal refusal::dns_failed(std::string_view host, std::string_view reason) {
  return {
      "dns_failed", 502, "could not resolve " + std::string(host) + ": " + std::string(reason), {}};
}

refusal refusal::upstream_unreachable(std::string_view host, std::string_view reason) {
  return {"upstream_unreachable",
          502,
          "could not reach " + std::string(host) + ": " + std::string(reason),
          {}};
}

refusal refusal::upstream_protocol_error(std::string_view host, std::string_view reason) {
  return {"upstream_protocol_error",
          502,
          std::string(host) + " answered outside what the broker can relay: " + std::string(reason),
          {}};
}

refusal refusal::upstream_timeout(std::string_view host) {
  return {"upstream_timeout", 504, std::string(host) + " did not answer in time", {}};
}

refusal refusal::upstream_tls_failed(std::string_view host, std::string_view reason) {
  return {"upstream_tls_failed",
          502,
          "TLS with " + std::string(host) + " failed: " + std::string(reason),
          {}};
}

refusal refusal::credential_not_bound(std::string_view credential, std::string_view host,
                                      std::string_view where, bool plaintext) {
  std::string message = "the request carries the session's dummy for credential \"" +
                        std::string(credential) + "\" (" + std::string(where) + "), ";
  message += plaintext ? "which is not sent over plain http:// to " + std::string(host)
                       : "which is not bound to " + std::string(host) +
                             "; the request was blocked and recorded";
  return {"credential_not_bound", 403, std::move(message), {}};
}

refusal refusal::credential_program(std::string_view credential, std::string_view host,
                                    std::string_view where,
                                    const std::vector<std::string>& programs,
                                    const config::client_identity* client) {
  std::string names;
  for (const auto& p : programs) names += (names.empty() ? "" : ", ") + p;
  std::string from;
  if (client)
    for (const auto& h : client->holders)
      from +=
          (from.empty() ? "" : " and ") + (h.exe.empty() ? "pid " + std::to_string(h.pid) : h.exe);
  if (from.empty())
    from = "a process broker could not identify";
  else if (client->holders.size() > 1)
    from = "a connection held by " + from;
  if (client && !client->complete) from += " (and maybe processes broker could not search)";
  std::string message = "the request carries the session's dummy for credential \"" +
                        std::string(credential) + "\" (" + std::string(where) +
                        "), which is bound to " + std::string(host) + " for the programs " + names +
                        " only (each process holding the connection must run the very file at " +
                        "a listed path, one the session cannot change); this request came from " +
                        from + "; the request was blocked and recorded";
  return {"credential_not_bound", 403, std::move(message), {}};
}

refusal refusal::real_secret_blocked(std::string_view credential, std::string_view where) {
  return {"real_secret_blocked",
          403,
          "the request carries the real value of credential \"" + std::string(credential) + "\" (" +
              std::string(where) + "); this session's programs must only ever hold its dummy",
          {}};
}

refusal refusal::credential_scope(std::string_view credential, std::string_view why) {
  return {"credential_not_bound",
          403,
          "credential \"" + std::string(credential) + "\" may not sign this request: " +
              std::string(why) + "; the request was blocked and recorded",
          {}};
}

refusal refusal::credential_out_of_scope(std::string_view credential, std::string_view key,
                                         std::string_view why) {
  // "mcp_tools" is a key of the credential itself, beside its "scope".
  const std::string at = key == "mcp_tools" ? "mcp_tools" : "scope." + std::string(key);
  return {"credential_out_of_scope", 403,
          "the request is outside the scope of credential \"" + std::string(credential) + "\" (" +
              at + "): " + std::string(why) + "; the request was blocked and recorded",
          "credentials." + std::string(credential) + "." + at};
}

refusal refusal::credential_unavailable(std::string_view credential, std::string_view why) {
  return {"credential_unavailable", 502,
          "credential \"" + std::string(credential) + "\" is minted for the session and none " +
              "could be had: " + std::string(why) +
              "; the long-lived credential is never sent instead",
          "credentials." + std::string(credential)};
}

refusal refusal::mcp_tool_denied(std::string rule, std::string why) {
  return {"mcp_tool_denied", 403, std::move(why), std::move(rule)};
}

refusal refusal::credential_action(std::string_view credential, std::string_view why) {
  return {
      "policy_denied", 403,
      "credential \"" + std::string(credential) + "\" does not sign this call: " + std::string(why),
      "credentials." + std::string(credential)};
}

refusal refusal::signature_invalid(std::string message) {
  return {"signature_invalid", 403, std::move(message), {}};
}

refusal refusal::of(const brokers::request_decision& d, std::string_view host, bool plaintext) {
  using brokers::request_action;
  switch (d.action) {
    case request_action::real_secret_blocked:
      return real_secret_blocked(d.credential, d.where);
    case request_action::credential_not_bound:
      return credential_not_bound(d.credential, host, d.where, plaintext);
    case request_action::scope_not_allowed:
      return credential_scope(d.credential, d.where);
    case request_action::action_denied:
      return credential_action(d.credential, d.where);
    case request_action::credential_unavailable:
      return credential_unavailable(d.credential, d.where);
    case request_action::credential_out_of_scope:
      return credential_out_of_scope(d.credential, d.scope_key, d.where);
    case request_action::signature_invalid:
      return signature_invalid(d.where);
    case request_action::pass:
      break;
  }
  throw std::logic_error("refusal::of a decision that passes");
}

refusal refusal::budget_exhausted(std::string budget, std::string limit, std::string used,
                                  long retry_after_s) {
  refusal r{"budget_exhausted",
            429,
            "the session's " + budget + " budget is spent (limit " + limit + ", used " + used + ")",
            {}};
  r.budget = std::move(budget);
  r.limit = std::move(limit);
  r.used = std::move(used);
  r.retry_after_s = retry_after_s;
  return r;
}

refusal refusal::audit_unavailable() {
  return {"audit_unavailable",
          503,
          "the session's audit log cannot be written, so the broker refuses all traffic",
          {}};
}

refusal refusal::proxy_auth_required(std::string why) {
  return {"proxy_auth_required", 407, std::move(why), {}};
}

refusal refusal::state_unavailable(std::string why) {
  return {"state_unavailable", 503, std::move(why), {}};
}

refusal refusal::overloaded() {
  return {"overloaded", 503, "the broker is serving its maximum number of connections", {}};
}

refusal refusal::bodies_held_exhausted(std::string_view why) {
  return {"overloaded",
          503,
          "the broker holds as many request bodies whole as it may at once; retry later (this "
          "one is read whole because " +
              std::string(why) + ")",
          {}};
}

refusal refusal::body_too_large(std::string message) {
  return {"body_too_large", 413, std::move(message), {}};
}

refusal refusal::unsupported_encoding(std::string message) {
  return {"unsupported_encoding", 415, std::move(message), {}};
}

std::string_view reason_phrase(int status) {
  const auto text = http::status_text(status);
  return text.empty() ? "Error" : text;
}

std::string refusal_body(const refusal& r, std::string_view host, std::string_view session) {
  nlohmann::ordered_json body = {{"error", r.code},
                                 {"message", r.message},
                                 {"host", host},
                                 {"rule", r.rule},
                                 {"session", session}};
  if (!r.budget.empty()) {
    body["budget"] = r.budget;
    body["limit"] = r.limit;
    body["used"] = r.used;
  }
  std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.push_back('\n');
  return text;
}

http::message_head refusal_head(const refusal& r, std::size_t body_size) {
  http::message_head head;
  head.status = r.status;
  head.reason = reason_phrase(r.status);
  head.headers.push_back({"Content-Type", "application/json"});
  head.headers.push_back({"X-Broker-Error", r.code});
  if (r.status == 407) head.headers.push_back({"Proxy-Authenticate", "Basic realm=\"broker\""});
  if (r.retry_after_s > 0) head.headers.push_back({"Retry-After", std::to_string(r.retry_after_s)});
  head.headers.push_back({"Content-Length", std::to_string(body_size)});
  head.content_length = body_size;
  head.has_body = body_size > 0;
  return head;
}

http::message_head grpc_refusal_head(const refusal& r, std::string_view body) {
  // gRPC status codes (grpc/doc/statuscodes.md) for the HTTP statuses refusals use.
  int code = 13;  // INTERNAL
  switch (r.status) {
    case 400:
    case 413:
    case 415:
    case 431:
      code = 3;
      break;  // INVALID_ARGUMENT
    case 403:
    case 421:
      code = 7;
      break;  // PERMISSION_DENIED
    case 407:
      code = 16;
      break;  // UNAUTHENTICATED
    case 429:
      code = 8;
      break;  // RESOURCE_EXHAUSTED
    case 502:
    case 503:
      code = 14;
      break;  // UNAVAILABLE
    case 504:
      code = 4;
      break;  // DEADLINE_EXCEEDED
    default:
      break;
  }
  // grpc-message is percent-encoded (gRPC over HTTP/2: Status-Message).
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string message;
  for (unsigned char c : body) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      message += static_cast<char>(c);
    } else {
      message += '%';
      message += hex[c >> 4];
      message += hex[c & 15];
    }
  }
  http::message_head head;
  head.status = 200;
  head.reason = "OK";
  head.headers = {{"content-type", "application/grpc"},
                  {"grpc-status", std::to_string(code)},
                  {"grpc-message", std::move(message)},
                  {"x-broker-error", r.code}};
  return head;
}

std::string render_refusal(const refusal& r, std::string_view host, std::string_view session,
                           bool keep_alive) {
  const std::string text = refusal_body(r, host, session);
  const auto head = refusal_head(r, text.size());
  std::string out;
  out.reserve(256 + text.size());
  out.append("HTTP/1.1 ").append(std::to_string(r.status)).append(" ");
  out.append(head.reason).append("\r\n");
  for (const auto& f : head.headers) out.append(f.name).append(": ").append(f.value).append("\r\n");
  out.append(keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
  out.append("\r\n").append(text);
  return out;
}

}  // namespace broker::live
