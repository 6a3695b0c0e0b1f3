// What the brokers decide for a request, as a value naming the credential and why (docs/policy.md),
// and where the request is going as they decide it. The proxy turns a refusal into its
// answer in one place (refusal::of); it never needs to know which family decided.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "config/program_identity.hpp"

namespace broker::brokers {

enum class request_action {
  pass,                     // forward (possibly with swapped credentials)
  credential_not_bound,     // a dummy was sent to a host its credential is not bound to
  real_secret_blocked,      // a real value was found in the request
  signature_invalid,        // signed with a session dummy, but the signature does not verify
  scope_not_allowed,        // a bound credential outside its allowlists (AWS regions, services)
  action_denied,            // a call the credential never makes for the session (STS vending)
  credential_out_of_scope,  // a bound dummy outside the credential's "scope" (brokers/scope.hpp)
  credential_unavailable,   // a minted credential could not be minted or renewed (502)
};

struct request_decision {
  request_action action = request_action::pass;
  std::string credential;  // the credential found (refusals) or the first one swapped (pass)
  // Where it was found ("header authorization", "query", "body", ...) or, for the last three
  // actions, the family's sentence saying why; never a value.
  std::string where;
  int swapped = 0;          // how many dummies became real
  std::string scope_key{};  // credential_out_of_scope: the scope key that refused ("repos"...)

  bool refused() const { return action != request_action::pass; }
};

// Where a request is going, as the broker decides which credentials it may carry.
struct request_context {
  std::string_view host;   // normalized host name or IP literal text
  bool plaintext = false;  // http:// (no TLS to the upstream)
  bool loopback = false;   // the destination is a loopback address
  // The processes holding the connection it came on (wrap's attribution); null when unknown. A
  // credential with "programs" is usable only when every one runs a listed program
  // (docs/policy.md).
  const config::client_identity* client = nullptr;
  // The request's method, for credentials' scopes (credential_set::plan sets it); "" where only
  // a body is judged.
  std::string_view method{};
  // An MCP request that is one tools/call (mcp/request_judge.hpp): the tool's name, for
  // credentials with "mcp_tools"; nullopt for every other request.
  std::optional<std::string_view> mcp_tool{};
};

// Thrown by a body_rewriter for body bytes that must not go on; none of them was released.
class body_refused_error : public std::runtime_error {
 public:
  explicit body_refused_error(request_decision d)
      : std::runtime_error("request body refused"), decision_(std::move(d)) {}
  const request_decision& decision() const { return decision_; }

 private:
  request_decision decision_;
};

// A request body rewritten as it streams (aws-chunked bodies re-signed chunk by chunk): fed the
// decoded body in pieces, it appends what may go upstream. Throws body_refused_error.
class body_rewriter {
 public:
  virtual ~body_rewriter() = default;
  virtual void feed(std::string_view in, std::string& out) = 0;
  // At the end of the body; throws body_refused_error when it ended early.
  virtual void finish() = 0;
};

}  // namespace broker::brokers
