// A session's brokered credentials: each policy credential whose source has a value, with its
// real secret, its per-session dummy and its family's broker. It decides what happens to every
// intercepted or plain request (DESIGN §5): real values anywhere are refused, dummies of
// credentials not bound to the host are refused (a canary), and bound dummies become real.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "brokers/credential_broker.hpp"
#include "brokers/scrubber.hpp"
#include "brokers/secret.hpp"
#include "config/policy.hpp"
#include "proxy/http_parser.hpp"

namespace broker::brokers {

struct credential {
  config::credential_spec spec;
  secret real;
  std::string dummy;                          // same length as real
  std::unique_ptr<credential_broker> broker;  // made by credential_set; callers leave it empty
  // The bindings of the same name in the other layers that define it (load() fills this): a
  // host is bound only if spec.hosts and each of these lists match it. Usually empty.
  std::vector<std::vector<config::host_pattern>> other_layer_hosts;
};

enum class request_action {
  pass,                  // forward (possibly with swapped credentials)
  credential_not_bound,  // a dummy was sent to a host its credential is not bound to
  real_secret_blocked,   // a real value was found in the request
};

struct request_decision {
  request_action action = request_action::pass;
  std::string credential;  // the credential found (refusals) or the first one swapped (pass)
  std::string where;       // "header authorization", "query", "body", ... (never the value)
  int swapped = 0;         // how many dummies became real
};

// Where a request is going, as the broker decides which credentials it may carry.
struct request_context {
  std::string_view host;   // normalized host name or IP literal text
  bool plaintext = false;  // http:// (no TLS to the upstream)
  bool loopback = false;   // the destination is a loopback address
};

class credential_set {
 public:
  credential_set() = default;
  // Makes each credential's broker. Credentials are kept at stable addresses (the brokers and the
  // scrub patterns point into them).
  explicit credential_set(std::vector<credential> credentials);
  credential_set(credential_set&&) noexcept = default;
  credential_set& operator=(credential_set&&) noexcept = default;

  // Loads every credential of every layer (a name in several layers must have the same type;
  // the later layer's binding narrows: its hosts must also match). Credentials whose source has
  // no value, and families not brokered yet (aws-sigv4, gcp, azure), are skipped and reported in
  // `skipped` as "NAME: reason" (never a value). Throws source_error for a source that fails,
  // std::invalid_argument for conflicting layers.
  static credential_set load(const std::vector<config::policy>& layers,
                             std::vector<std::string>* skipped = nullptr);

  // Is `host` one of this credential's bound hosts?
  static bool bound(const credential& c, std::string_view host);

  // Checks one request head and, when it passes, swaps bound dummies for real values in place
  // (target's query for opted-in parameters, headers by family). Real values are looked for in
  // the target and every header (also inside base64 Basic credentials); dummies of credentials
  // not bound to the host (or bound, but the request is plaintext to a non-loopback host without
  // allow_plaintext) likewise. On a refusal nothing is modified.
  request_decision apply(const request_context& where, std::string& target,
                         std::vector<proxy::header_field>& headers) const;

  // Patterns a request body to `where` must not contain: every real value, and the dummies that
  // apply() would refuse for this destination. Replacement = the pattern itself. Indexes map to
  // body_pattern_credential().
  std::vector<scrub_pattern> request_body_patterns(const request_context& where) const;
  // For a match index from a scrubber built on request_body_patterns: the decision to report.
  request_decision body_decision(const request_context& where, std::size_t pattern) const;

  // Real value → dummy, for responses (headers via scrub_value, bodies via stream_scrubber).
  const std::vector<scrub_pattern>& response_patterns() const { return response_patterns_; }

  // The variables the child sees: each credential's env names → its dummy. (aws-sigv4 comes with
  // issue 6 and is skipped here.)
  std::vector<std::pair<std::string, std::string>> dummy_environment() const;

  std::size_t size() const { return credentials_.size(); }
  const credential& operator[](std::size_t i) const { return *credentials_[i]; }
  bool empty() const { return credentials_.empty(); }

 private:
  std::vector<std::unique_ptr<credential>> credentials_;
  std::vector<scrub_pattern> response_patterns_;
};

}  // namespace broker::brokers
