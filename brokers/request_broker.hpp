// The one interface the request path knows (docs/architecture.md, docs/policy.md): a credential,
// whatever its family, and its part in every stage of a request. credential_set keeps one list of
// them and asks each in turn; the proxy sees only the set's request_plan. One family per file:
// value_broker.hpp (github, bearer, header and basic: one static value swapped where the family
// carries it; a file each), aws_broker.cpp (aws-sigv4: verify and re-sign), token_broker.cpp
// (gcp, azure: access tokens that rotate; a gcp child's token requests answered locally).
//
// The stages of one request:
//  - head: swap_header() and swap_query() put the real value where the family carries the
//    dummy. They are asked only where the credential is usable (a bound host, and TLS unless
//    the destination is loopback or the credential allows plaintext), and only once no real
//    value and no out-of-place dummy was found in the head (credential_set::apply);
//  - claim(): a family that needs more than a swap takes the request on as a request_step,
//    which then has the body (read whole first, or rewritten as it streams), may answer the
//    request itself, and has the response (what its head and body are rewritten with).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/request_decision.hpp"
#include "brokers/scope.hpp"
#include "brokers/scrub_index.hpp"
#include "config/policy.hpp"
#include "http/message.hpp"

namespace broker::brokers {

// A variable the child sees in place of a real value, and the credential it stands for.
struct dummy_variable {
  std::string name, value, credential;
};
// A file the child sees (docs/agents.md): a gcp key file its `variable` names, or a dummy copy of a
// login file shown at `target` (then `variable` is empty). The content holds dummies only.
struct dummy_file {
  std::string variable, file_name, content, credential;
  std::string target;  // absolute: the login file's path, where the child finds the copy
};

// A credential minted for the session (docs/policy.md, "Minted credentials"), as `broker status`
// shows it: never its value.
struct minted_info {
  std::string credential;
  std::string what;  // "GitHub App installation token"
  std::chrono::system_clock::time_point expires;
};

// The values of a credential fixed for the session.
struct credential_values {
  // Each real value → what a response shows in its place (its dummy). Refused in any request.
  std::vector<scrub_pattern> reals;
  // What the child holds: refused wherever the credential is not usable.
  std::vector<std::string_view> dummies;
};

// The most a family reads whole: an AWS payload whose hash the signature covers (SDK uploads
// stream instead, with UNSIGNED-PAYLOAD or aws-chunked), and a token request (a few hundred
// bytes in practice).
inline constexpr std::size_t max_signed_body = 32 * 1024 * 1024;
inline constexpr std::size_t max_token_request = 64 * 1024;
// A GraphQL request judged for a credential scoped to "graphql": "read".
inline constexpr std::size_t max_graphql_request = 1024 * 1024;

// A request body a step must read whole before the request can go on, at most `limit` bytes.
struct whole_body_need {
  std::size_t limit = 0;
  std::string_view why;  // why it is read whole, and how a client avoids it; for refusals
  // The step reads what the body says (a token request's form), rather than only its bytes as
  // sent (a payload's hash): it cannot be under a Content-Encoding (docs/security-model.md).
  bool reads_content = false;
};

// An answer the broker gives itself instead of the upstream (a gcp child's token request).
struct local_answer {
  std::string credential;
  std::string json;
};

// One request a family took on (request_broker::claim), through the stages after its head. It
// lives as long as the exchange: a body_rewriter it made may point into it.
class request_step {
 public:
  virtual ~request_step() = default;

  // The request carries this credential's real value once complete() passes (the head is
  // wiped after use).
  virtual bool holds_real() const = 0;
  // Set when the body must be read whole before complete().
  virtual std::optional<whole_body_need> whole_body() const { return std::nullopt; }

  // The body stage, with the whole body when whole_body() asked for it (else empty): checks and
  // rewrites the head (and that body, same length) in place, or prepares an answer(). A refusal
  // rewrites nothing.
  virtual request_decision complete(std::string_view method, std::string& target,
                                    std::vector<http::header_field>& headers,
                                    std::string& body) = 0;
  // After complete(): the broker's own answer, when it gives one.
  virtual std::optional<local_answer> answer() const { return std::nullopt; }
  // After complete(): what rewrites the body as it streams up, or null.
  virtual std::unique_ptr<body_rewriter> request_body_rewriter() { return nullptr; }

  // The response stage: what the response's head and body are rewritten with, besides the
  // set's real values (what the step wrote into the request, back to the client's form).
  virtual void response_patterns(std::vector<scrub_pattern>& out) const { (void)out; }
  // A response whose body the step rewrites whole (a token response carrying new real values):
  // the most it reads for `status`, or 0 when it reads none.
  virtual std::size_t response_whole_body(int status) const {
    (void)status;
    return 0;
  }
  // Rewrites that body, which may change length: new real values become dummies before the
  // client sees them.
  virtual void rewrite_response(int status, std::string& body) {
    (void)status;
    (void)body;
  }
};

class dummy_seed;

class request_broker {
 public:
  // The same name in the other policy layers that define it: each of these narrows. A host is
  // bound only if spec.hosts and each of `hosts` match it; a request is in scope only if
  // spec.scope and each of `scopes` let it through.
  struct layer_bindings {
    std::vector<std::vector<config::host_pattern>> hosts;
    std::vector<config::credential_scope> scopes;
  };

  request_broker(config::credential_spec spec, layer_bindings other_layers);
  virtual ~request_broker();
  request_broker(const request_broker&) = delete;
  request_broker& operator=(const request_broker&) = delete;

  // The same credential for another session of a team gateway (docs/gateway.md): the same real
  // values, shared and never read again from their source (a rotating family's refreshes are
  // shared too), the same binding and behaviour, and dummies derived from `seed`, this
  // credential's name and which of its values each one stands for. Equal seeds give equal
  // dummies in every process that loaded equal real values. Safe while this broker serves
  // requests on other threads. Throws std::logic_error for a family that serves one session
  // only (login files: a refresh rewrites one user's file).
  virtual std::unique_ptr<request_broker> for_session(const dummy_seed& seed) const = 0;

  // Before it serves: one more layer's binding of the same name (a gateway session's), whose
  // hosts and scope narrow this one's.
  void narrow(const config::credential_spec& layer);

  const config::credential_spec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  // Is `host` one of the credential's bound hosts?
  bool bound(std::string_view host) const;
  // May its real value go to this destination? Bound host, a program its "programs" name (when
  // it names any), and TLS unless the destination is loopback or the credential allows
  // plaintext (docs/architecture.md).
  bool usable(const request_context& where) const;
  // Is a request with this method and target (as sent) inside the credential's scope, in every
  // layer? Judged only for a usable credential; a scope that needs the body says so
  // (scope_verdict::graphql_body), and the set's plan then reads it (brokers/scope.hpp).
  scope_verdict judge_scope(std::string_view host, std::string_view method,
                            std::string_view target) const;
  bool scoped() const { return spec_.scope || !other_layers_.scopes.empty(); }
  // A credential with "mcp_tools": whether `where` is one call of a tool it names; every other
  // request is outside it (scope_verdict key "mcp_tools"). Inside for a credential without.
  scope_verdict judge_mcp_tool(const request_context& where) const;

  // ---- What the child holds, and what must never leave ----

  // The views stay valid as long as this broker.
  virtual credential_values values() const = 0;
  // Real values issued since the session started that have not expired as of `now` (access
  // tokens, temporary AWS credentials), each with what a response shows in its place.
  virtual void rotated_values(std::chrono::system_clock::time_point now,
                              std::vector<scrub_pattern>& out) const;
  // Dummies issued since the session started (a refreshed login's tokens): refused wherever
  // the credential is not usable, like values().dummies. Views stay valid as long as this broker.
  virtual void rotated_dummies(std::vector<std::string_view>& out) const;
  // Whether rotated_values or rotated_dummies can ever yield anything (a set without such a
  // broker never looks for them).
  virtual bool rotates() const { return false; }
  virtual void dummy_variables(std::vector<dummy_variable>& out) const = 0;
  virtual void dummy_files(std::vector<dummy_file>& out) const;
  // Variables that would point the family's clients away from their dummies (an AWS profile).
  virtual void displaced_variables(std::vector<std::string>& out) const;
  // What it mints for the session ("GitHub App installation token"), or empty: a minting
  // family says so from the start, before it has minted anything.
  virtual std::string_view mints() const { return {}; }
  // Until when what it minted and holds now is good, once it has minted.
  virtual std::optional<std::chrono::system_clock::time_point> minted_until() const {
    return std::nullopt;
  }

  // ---- The request head ----

  // Rewrites one header value in place where this family carries the credential (`name` as
  // received, compared case-insensitively). Returns how many dummies became real.
  virtual int swap_header(std::string_view name, std::string& value) const;
  // Rewrites the values of the query parameters the credential opted into (spec.query) whose
  // whole value is the dummy. Returns the count.
  virtual int swap_query(std::string& target) const;

  // A request this family must follow past its head (asked of every broker after the swaps,
  // whether usable at the destination or not; the family decides): its step, or null. A refusal
  // sets `refused` and returns null.
  virtual std::unique_ptr<request_step> claim(const request_context& where, std::string_view method,
                                              std::string_view target,
                                              const std::vector<http::header_field>& headers,
                                              bool has_body, request_decision& refused) const;

 protected:
  const layer_bindings& other_layers() const { return other_layers_; }

 private:
  config::credential_spec spec_;
  layer_bindings other_layers_;
};

}  // namespace broker::brokers
