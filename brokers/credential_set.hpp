// A session's brokered credentials: each policy credential whose source has a value, with its
// real secret, its per-session dummy and its family's broker. It decides what happens to every
// intercepted or plain request (DESIGN §5): real values anywhere are refused, dummies of
// credentials not bound to the host are refused (a canary), and bound dummies become real.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "brokers/aws_signing.hpp"
#include "brokers/credential_broker.hpp"
#include "brokers/request_decision.hpp"
#include "brokers/request_plan.hpp"
#include "brokers/scrubber.hpp"
#include "brokers/secret.hpp"
#include "brokers/token_credential.hpp"
#include "config/policy.hpp"
#include "http/message.hpp"

namespace broker::brokers {

// Which value of its credential an entry holds: most families have one; an aws-sigv4
// credential is brokered as two or three entries of the same name.
enum class credential_part { value, aws_key_id, aws_secret, aws_token };

struct credential {
  config::credential_spec spec;  // for an aws-sigv4 part, env names just that part's variable
  credential_part part = credential_part::value;
  secret real;
  std::string dummy;                          // same length as real
  std::unique_ptr<credential_broker> broker;  // made by credential_set; callers leave it empty
  // The bindings of the same name in the other layers that define it (load() fills this): a
  // host is bound only if spec.hosts and each of these lists match it. Usually empty.
  std::vector<std::vector<config::host_pattern>> other_layer_hosts;
};

class value_catalog;

// What a request body to one destination must not carry, fixed when it was made
// (credential_set::request_body_scan): patterns for a stream_scrubber and, per pattern, the
// decision its match means. It owns what the patterns view, so a scrubber built on patterns()
// is valid as long as this object; a token rotating while the body streams changes nothing here.
class body_scan {
 public:
  body_scan() = default;

  // Each pattern's replacement is the pattern itself: a match refuses the body, nothing is
  // rewritten.
  const std::vector<scrub_pattern>& patterns() const { return patterns_; }
  // What a match of patterns()[index] means: the refusal, its credential, and where = "body"
  // (", base64-encoded" or ", percent-encoded" when the value was). pass for an index that is
  // no pattern's.
  request_decision decision(std::size_t index) const;

 private:
  friend class credential_set;
  std::vector<std::shared_ptr<const value_catalog>> catalogs_;
  std::vector<scrub_pattern> patterns_;
  // Per pattern: the catalog and the needle it is.
  std::vector<std::pair<const value_catalog*, std::uint32_t>> needles_;
};

class credential_set {
 public:
  credential_set();
  // Makes each credential's broker. Credentials are kept at stable addresses (the brokers and the
  // scrub patterns point into them).
  using aws_rotation_list =
      std::vector<std::pair<std::string, std::unique_ptr<rotating<aws_real_credentials>>>>;
  explicit credential_set(std::vector<credential> credentials,
                          std::vector<std::unique_ptr<token_credential>> tokens = {},
                          aws_rotation_list aws_rotations = {});
  ~credential_set();
  credential_set(credential_set&&) noexcept;
  credential_set& operator=(credential_set&&) noexcept;

  // Loads every credential of every layer (a name in several layers must have the same type;
  // the later layer's binding narrows: its hosts must also match). Credentials whose source has
  // no value are skipped and reported in `skipped` as "NAME: reason" (never a value). Throws
  // source_error for a source that fails, std::invalid_argument for conflicting layers. `transport`
  // is how the broker itself reaches a token endpoint (gcp key files).
  static credential_set load(const std::vector<config::policy>& layers,
                             std::vector<std::string>* skipped = nullptr,
                             const token_transport& transport = {});

  // Is `host` one of this credential's bound hosts?
  static bool bound(const credential& c, std::string_view host);
  static bool bound(const config::credential_spec& spec,
                    const std::vector<std::vector<config::host_pattern>>& other_layer_hosts,
                    std::string_view host);

  // Checks one request head and, when it passes, swaps bound dummies for real values in place
  // (target's query for opted-in parameters, headers by family). Real values are looked for in
  // the target and every header; dummies of credentials not bound to the host (or bound, but the
  // request is plaintext to a non-loopback host without allow_plaintext) likewise. Each is found
  // as sent, base64-encoded (either alphabet, any alignment, inside a longer blob or a Basic
  // credential), percent-encoded (the target; a header name or value holding a '%'), and split
  // across fields repeated under one name (see credential_set_request_text.hpp). The refusal's
  // `where` says where and how ("header x-a, split across repeated header fields"), never the
  // value. On a refusal nothing is modified.
  request_decision apply(const request_context& where, std::string& target,
                         std::vector<http::header_field>& headers) const;

  // The plan for one request (request_plan.hpp): apply()'s checks and swaps on the head, then
  // the family steps that need more (an AWS signature to verify and re-sign, a gcp token request
  // to answer). Modifies `target` and `headers` only when the request passes.
  request_plan plan(const request_context& where, std::string_view method, std::string& target,
                    std::vector<http::header_field>& headers, bool has_body) const;

  // The AWS SigV4 step, after apply() passed: the request signed with one of this session's
  // dummy AWS key ids (to be verified and re-signed; see aws_signing.hpp), or null when it carries
  // none. A malformed signature naming a dummy, or a scope outside the credential's regions or
  // services, sets `refused` (signature_invalid, credential_not_bound) and returns null.
  std::unique_ptr<aws_signed_request> find_aws_request(
      const request_context& where, std::string_view target,
      const std::vector<http::header_field>& headers, bool has_body,
      request_decision& refused) const;

  // What a request body to `where` must not contain, as of now: every real value (rotated ones
  // too) and the dummies that apply() would refuse for this destination, each as sent,
  // base64-encoded (fragments at every alignment, both alphabets) and percent-encoded (every
  // byte, or all but unreserved ones; either hex case). Keep it as long as the scrubber built
  // on its patterns.
  body_scan request_body_scan(const request_context& where) const;

  // Real value → dummy, for responses (headers via scrub_value, bodies via stream_scrubber);
  // access tokens as they are now. The views stay valid as long as this set.
  std::vector<scrub_pattern> response_patterns() const;

  // A gcp child's token request (POST to Google's token endpoint with the refresh token of its
  // session key file): the JSON answer carrying the dummy access token. nullopt for any other
  // request. `form` is the request's body.
  struct token_answer {
    std::string credential;
    std::string json;
  };
  std::optional<token_answer> gcp_token_answer(std::string_view host, std::string_view method,
                                               std::string_view form) const;
  // Could this request be one gcp_token_answer() answers (it needs the body to tell)?
  bool may_be_gcp_token_request(std::string_view host, std::string_view method) const;

  // The variables the child sees: each credential's env names → its dummy (a variable named by
  // two credentials goes to the first).
  struct dummy_variable {
    std::string name, value, credential;
  };
  std::vector<dummy_variable> dummy_variables() const;
  std::vector<std::pair<std::string, std::string>> dummy_environment() const;
  // Files the child's variables name (gcp key files): variable, file name, content.
  struct dummy_file {
    std::string variable, file_name, content, credential;
  };
  std::vector<dummy_file> dummy_files() const;

  // Variables that would point a brokered family's clients away from their dummies, so the
  // child must not see them: an AWS profile (AWS_PROFILE names a section of the masked
  // ~/.aws files, and an SDK that cannot find it fails instead of using the dummies).
  std::vector<std::string> displaced_variables() const;

  // The credentials' names, each once.
  std::vector<std::string> names() const;

  std::size_t size() const { return credentials_.size(); }
  const credential& operator[](std::size_t i) const { return *credentials_[i]; }
  bool empty() const { return credentials_.empty() && tokens_.empty(); }

 private:
  std::vector<std::unique_ptr<credential>> credentials_;
  std::vector<scrub_pattern> response_patterns_;

  // Every real value and every dummy of credentials_ and tokens_ in their encoded forms, made
  // once: reals first, then dummies, each in the set's order (a finding of an earlier one is
  // reported first). A value's owner is its credential's index, tokens_ counted after
  // credentials_.
  void catalog_values();
  bool usable_owner(std::size_t owner, const request_context& where) const;
  std::shared_ptr<const value_catalog> catalog_;
  // The same for rotated_values(), remade when they change (under the cache's mutex).
  struct rotated_cache;
  std::unique_ptr<rotated_cache> rotated_;
  std::shared_ptr<const value_catalog> rotated_catalog() const;

  // The real values issued since the session started that have not expired (access tokens,
  // temporary AWS credentials), with their credential's name: refused in requests like any real
  // value.
  std::vector<std::pair<std::string_view, std::string_view>> rotated_values(
      std::chrono::system_clock::time_point now) const;

  std::vector<aws_identity> aws_;
  std::vector<std::unique_ptr<token_credential>> tokens_;
  aws_rotation_list aws_rotations_;
};

}  // namespace broker::brokers
