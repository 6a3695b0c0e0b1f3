// A session's brokered credentials: one request_broker per policy credential whose source has a
// value (request_broker.hpp). It decides what happens to every intercepted or plain request
// (docs/policy.md): real values anywhere are refused, dummies of credentials not bound to the host
// are refused (a canary), bound dummies become real, and the families that need more follow the
// request as its plan's steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "brokers/request_broker.hpp"
#include "brokers/request_decision.hpp"
#include "brokers/request_plan.hpp"
#include "brokers/scrubber.hpp"
#include "brokers/token_broker.hpp"
#include "config/policy.hpp"
#include "http/message.hpp"

namespace broker::brokers {

class value_catalog;
class stable_dummies;

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
  // The brokers, in the order their findings are reported. They are kept at stable addresses
  // (the scrub patterns and catalogs point into them).
  explicit credential_set(std::vector<std::unique_ptr<request_broker>> brokers);
  ~credential_set();
  credential_set(credential_set&&) noexcept;
  credential_set& operator=(credential_set&&) noexcept;

  // Loads every credential of every layer (a name in several layers must have the same type;
  // the later layer's binding narrows: its hosts must also match). Credentials whose source has
  // no value are skipped and reported in `skipped` as "NAME: reason" (never a value). Throws
  // source_error for a source that fails, std::invalid_argument for conflicting layers. `transport`
  // is how the broker itself reaches a token endpoint (gcp key files). Login files (docs/agents.md)
  // are loaded only with `login_files` (a wrap child in netns mode, which sees their dummy
  // copies instead of them); otherwise they are skipped. With `stable` (wrap), every value that
  // does not rotate gets the dummy `stable` derives from it, the same in every session of the
  // user (a key, a key file's member that no refresh renews, static AWS keys); OAuth and cloud
  // tokens, and temporary AWS credentials, get random dummies as without it.
  static credential_set load(const std::vector<config::policy>& layers,
                             std::vector<std::string>* skipped = nullptr,
                             const provider_transport& transport = {}, bool login_files = false,
                             std::shared_ptr<const stable_dummies> stable = nullptr);

  // One session's set on a team gateway (docs/gateway.md) that loaded this one: the same real
  // values (shared, not read again: an env: source was wiped when this set loaded it), bindings and
  // behaviour, one refresher per rotating credential for all sessions, and every dummy derived
  // from `seed` (the session's random bytes, at least dummy_seed::min_size; the registry keeps
  // them), the credential's name and which of its values it stands for. The same seed gives
  // byte-identical dummies in every replica that loaded equal real values; this set's own
  // dummies are not the session's. Safe while this set serves requests on other threads. Throws
  // std::invalid_argument for a short seed, std::logic_error for a login-file credential.
  // `narrowing`: the session's own layers, whose credentials of the same names narrow the team's
  // hosts and scopes (request_broker::narrow); a name the set does not hold is ignored.
  credential_set for_session(std::string_view seed,
                             const std::vector<config::policy>& narrowing = {}) const;

  // Checks one request head and, when it passes, swaps bound dummies for real values in place
  // (target's query for opted-in parameters, headers by family), noting each rewritten value
  // in `swaps` when given. Real values are looked for in the target and every header; dummies
  // of credentials not usable at the destination likewise (request_broker::usable), and of those
  // usable whose scope refuses the request (where.method and `target`). Each is
  // found as sent, base64-encoded (either alphabet, any alignment, inside a longer blob or a
  // Basic credential), percent-encoded (the target; a header name or value holding a '%'), and
  // split across fields repeated under one name (see credential_set_request_text.hpp). The
  // refusal's `where` says where and how ("header x-a, split across repeated header fields"),
  // never the value. On a refusal nothing is modified.
  request_decision apply(const request_context& where, std::string& target,
                         std::vector<http::header_field>& headers,
                         swapped_values* swaps = nullptr) const;

  // The plan for one request (request_plan.hpp): apply()'s checks and swaps on the head, then
  // the steps of the families that claim it (an AWS signature to verify and re-sign, a gcp
  // token request to answer). Modifies `target` and `headers` only when the request passes.
  request_plan plan(const request_context& where, std::string_view method, std::string& target,
                    std::vector<http::header_field>& headers, bool has_body) const;

  // What a request body to `where` must not contain, as of now: every real value (rotated ones
  // too) and the dummies that apply() would refuse for this destination, each as sent,
  // base64-encoded (fragments at every alignment, both alphabets) and percent-encoded (every
  // byte, or all but unreserved ones; either hex case). Keep it as long as the scrubber built
  // on its patterns.
  body_scan request_body_scan(const request_context& where) const;

  // Real value → dummy, for responses (headers via scrub_value, bodies via stream_scrubber);
  // rotated values as they are now. The views stay valid as long as this set.
  std::vector<scrub_pattern> response_patterns() const;

  // The variables the child sees: each credential's env names → its dummy (a variable named by
  // two credentials goes to the first, those with "mcp_tools" coming after all others).
  std::vector<dummy_variable> dummy_variables() const;
  std::vector<std::pair<std::string, std::string>> dummy_environment() const;
  // Files the child's variables name (gcp key files).
  std::vector<dummy_file> dummy_files() const;
  // Variables the child must not see: they would point a brokered family's clients away from
  // their dummies (request_broker::displaced_variables), each once.
  std::vector<std::string> displaced_variables() const;

  // The credentials minted for the session so far, each with its expiry.
  std::vector<minted_info> minted() const;
  // Until when the credential named `credential` holds what it minted, when it mints (cheap:
  // only minting brokers are looked at, for each request's record).
  std::optional<std::chrono::system_clock::time_point> minted_until(
      std::string_view credential) const;

  // The credentials' names.
  std::vector<std::string> names() const;

  std::size_t size() const { return brokers_.size(); }
  const request_broker& operator[](std::size_t i) const { return *brokers_[i]; }
  bool empty() const { return brokers_.empty(); }

 private:
  std::vector<std::unique_ptr<request_broker>> brokers_;
  std::vector<scrub_pattern> response_patterns_;  // the fixed real values
  std::vector<std::size_t> minting_;              // brokers_ that mint for the session
  // A credential with "mcp_tools" that shares a variable with one without (same family): on a
  // call of its tools, the dummy the child holds (base's) is swapped for its real value.
  struct stand_in {
    std::size_t base;  // brokers_ index of the credential whose dummy the child holds
    std::size_t tool;  // brokers_ index of the one with "mcp_tools"
    std::unique_ptr<request_broker> swapper;  // tool's real value for base's dummy
  };
  std::vector<stand_in> stand_ins_;
  void find_stand_ins();
  // The broker that swaps brokers_[i]'s dummy for this request: a stand-in's, when one applies.
  const request_broker& swapping(std::size_t i, const request_context& where,
                                 std::string_view target) const;

  // apply(), noting in `carried` (when given) the index of each usable broker whose dummy the
  // head carries (its family swaps it, or its request step will).
  request_decision check_and_swap(const request_context& where, std::string& target,
                                  std::vector<http::header_field>& headers, swapped_values* swaps,
                                  std::vector<std::size_t>* carried) const;

  // Every real value and every dummy of brokers_ in their encoded forms, made once: reals
  // first, then dummies, each in the set's order (a finding of an earlier one is reported
  // first). A value's owner is its broker's index.
  void catalog_values();
  std::shared_ptr<const value_catalog> catalog_;
  // The same for the rotated values, remade when they change (under the cache's mutex).
  struct rotated_cache;
  std::unique_ptr<rotated_cache> rotated_;
  std::shared_ptr<const value_catalog> rotated_catalog() const;
};

}  // namespace broker::brokers
