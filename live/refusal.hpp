// A refusal the broker makes, and its wire form (docs/cli.md): status, X-Broker-Error, JSON body.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "brokers/request_decision.hpp"
#include "http/message.hpp"

namespace broker::live {

struct refusal {
  std::string code;  // "policy_denied", "bad_request", ...
  int status = 403;
  std::string message;  // a human sentence; never contains a secret
  std::string rule;     // the deciding policy rule, "" when none
  // budget_exhausted: which budget, its limit and what was used (rendered into the body), and
  // for a rate, when to come back (Retry-After, seconds).
  std::string budget{};
  std::string limit{};
  std::string used{};
  long retry_after_s = 0;

  static refusal policy_denied(std::string rule, std::string_view host);
  // A held request a person denied, or whose ask timed out (docs/policy.md); `rule` refused it.
  static refusal approval_denied(std::string rule, std::string_view host, bool timed_out);
  static refusal private_address(std::string_view host, std::string_view address,
                                 std::string_view address_class);
  static refusal bad_request(std::string message);
  static refusal header_too_large();
  static refusal host_mismatch(std::string message);
  static refusal dns_failed(std::string_view host, std::string_view reason);
  static refusal upstream_unreachable(std::string_view host, std::string_view reason);
  // The upstream answered outside what the broker relays safely: a malformed response, a coded
  // one while it scrubs, too many interim responses, an upgrade that was not asked for (502).
  static refusal upstream_protocol_error(std::string_view host, std::string_view reason);
  static refusal upstream_timeout(std::string_view host);
  static refusal upstream_tls_failed(std::string_view host, std::string_view reason);
  // `where` says where it was found ("header authorization", "query", "body"); never the value.
  static refusal credential_not_bound(std::string_view credential, std::string_view host,
                                      std::string_view where, bool plaintext);
  // A dummy sent to a host its credential is bound to, from a connection its "programs" do not
  // admit (docs/policy.md): credential_not_bound, naming the binding and every process holding
  // the connection (or that none was known).
  static refusal credential_program(std::string_view credential, std::string_view host,
                                    std::string_view where,
                                    const std::vector<std::string>& programs,
                                    const config::client_identity* client);
  static refusal real_secret_blocked(std::string_view credential, std::string_view where);
  // A credential bound to the host that may not be used for this request (a signing scope outside
  // the credential's regions or services): credential_not_bound, saying why.
  static refusal credential_scope(std::string_view credential, std::string_view why);
  // A bound dummy outside its credential's "scope" (docs/policy.md): 403
  // credential_out_of_scope, the rule naming the scope key ("credentials.github.scope.repos").
  static refusal credential_out_of_scope(std::string_view credential, std::string_view key,
                                         std::string_view why);
  // A minted credential that could not be minted or renewed (docs/policy.md): 502
  // credential_unavailable, with the provider's status in the message; never a fall-back to the
  // long-lived credential.
  static refusal credential_unavailable(std::string_view credential, std::string_view why);
  // A call the credential's family never signs for the session (STS actions that hand out new
  // real credentials): policy_denied, the rule naming the credential.
  static refusal credential_action(std::string_view credential, std::string_view why);
  // A request signed with a session dummy that does not verify (403 signature_invalid);
  // `message` is the family's sentence.
  static refusal signature_invalid(std::string message);
  // An MCP call refused by an "mcp" rule (docs/policy.md): the HTTP form, for a body that held
  // no request to answer as JSON-RPC (a request's refusal is a JSON-RPC error).
  static refusal mcp_tool_denied(std::string rule, std::string why);
  // The answer to what the credential brokers decided (docs/policy.md-6), for a refused decision.
  static refusal of(const brokers::request_decision& d, std::string_view host, bool plaintext);
  static refusal budget_exhausted(std::string budget, std::string limit, std::string used,
                                  long retry_after_s);
  static refusal audit_unavailable();
  // A team gateway's client without a valid session credential (docs/gateway.md): missing, wrong,
  // expired or revoked, `why` says which. Rendered with Proxy-Authenticate.
  static refusal proxy_auth_required(std::string why);
  // A team gateway whose shared state (Redis) cannot be reached, for a session that fails closed.
  static refusal state_unavailable(std::string why);
  static refusal overloaded();
  // A request body over a limit: 413 (for a coded body, what it decodes to;
  // docs/security-model.md).
  static refusal body_too_large(std::string message);
  // A request body under a Content-Encoding the broker cannot search through: 415.
  static refusal unsupported_encoding(std::string message);
  // A request whose body must be read whole (`why`, from its credential plan) while the
  // process already holds as many such bytes as it may (limits::max_held_body_bytes): 503.
  static refusal bodies_held_exhausted(std::string_view why);
};

std::string_view reason_phrase(int status);

// The complete HTTP/1.1 response. `keep_alive` false adds "Connection: close".
std::string render_refusal(const refusal& r, std::string_view host, std::string_view session,
                           bool keep_alive);
// The same response in parts, for a side that frames it itself (an HTTP/2 stream): the JSON
// body, and the head that goes with a body of `body_size` bytes (no Connection field).
std::string refusal_body(const refusal& r, std::string_view host, std::string_view session);
http::message_head refusal_head(const refusal& r, std::size_t body_size);
// A refusal of a gRPC call, as gRPC clients show it: a trailers-only response (HTTP 200, no
// body) whose grpc-status is the code nearest to the refusal's HTTP status (403 →
// PERMISSION_DENIED, 429 → RESOURCE_EXHAUSTED, 502 → UNAVAILABLE...) and whose grpc-message is
// `body`, the JSON of docs/cli.md; X-Broker-Error as on any refusal.
http::message_head grpc_refusal_head(const refusal& r, std::string_view body);

}  // namespace broker::live
