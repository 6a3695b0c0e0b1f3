// Credentials whose real value is a short-lived OAuth access token (the gcp and azure families,
// docs/policy.md): fetched when the session starts and again, by a background thread, before each
// one expires. The child holds one dummy access token for the whole session; on a bound host
// `Authorization: Bearer DUMMY` becomes the latest real token.
//
// For gcp the child's GOOGLE_APPLICATION_CREDENTIALS names a session file holding a dummy OAuth
// client (an "authorized_user" key); the token requests it causes are answered by the broker
// with the dummy access token (a request_step with a local answer), so nothing the child holds
// can be redeemed anywhere.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/secret.hpp"
#include "brokers/cloud_tokens.hpp"
#include "brokers/provider_transport.hpp"
#include "brokers/request_broker.hpp"
#include "brokers/rotating.hpp"
#include "config/policy.hpp"

namespace broker::brokers {

// One access token as fetched. What a response echoing it shows is each session's to say (its
// credential's dummy_masks).
struct issued_token {
  base::secret token;
  std::chrono::system_clock::time_point expires;
};

// The dummy OAuth client in a gcp child's key file.
struct gcp_dummy_client {
  std::string client_id;  // "<digits>-<random>.apps.googleusercontent.com"
  std::string client_secret;
  std::string refresh_token;
};

class token_broker final : public request_broker {
 public:
  using fetcher = std::function<access_token()>;  // throws source_error

  // Fetches the first token now (throws source_error) and starts the refresher. A credential
  // that mints (gcp with "access_boundary") whose first exchange fails (mint_error) is made
  // anyway, unavailable: every request carrying its dummy to a bound host is refused 502
  // credential_unavailable, as is every one once its last token expired unrenewed.
  token_broker(config::credential_spec spec, layer_bindings other_layers, fetcher fetch);
  ~token_broker() override = default;

  // Shares this credential's tokens and their refresher (N sessions, one refresh). The dummy
  // access token is shaped like the family's tokens, not like the first one fetched (each
  // replica fetches its own: another length, a JWT's other claims), so that replicas agree;
  // fields "access token", and for gcp "client id", "client secret", "refresh token".
  std::unique_ptr<request_broker> for_session(const dummy_seed& seed) const override;

  const std::string& dummy() const { return dummy_; }
  // What a response shows for a real token of `size` bytes: the dummy, cut or repeated.
  std::string_view mask(std::size_t size) const { return masks_->of(size); }
  const gcp_dummy_client& gcp_client() const { return gcp_client_; }

  // The latest token (stays valid as long as this credential); null when none could be had.
  const issued_token* current() const { return tokens_ ? &tokens_->current() : nullptr; }
  // Every token issued that has not expired yet, newest first (a request may still carry an
  // older one a response echoed).
  std::vector<const issued_token*> live(std::chrono::system_clock::time_point now) const {
    return tokens_ ? tokens_->live(now) : std::vector<const issued_token*>();
  }

  // The session file a gcp child's GOOGLE_APPLICATION_CREDENTIALS names.
  std::string gcp_key_file() const;
  // The token endpoint's answer to the child's refresh request: the dummy access token, good
  // for an hour (it stands for whichever real token is current, so it never runs out).
  std::string gcp_token_answer() const;

  // The child holds the dummy access token and, for gcp, the dummy OAuth client's secret and
  // refresh token; no real value is fixed (each access token is a rotated value).
  credential_values values() const override;
  void rotated_values(std::chrono::system_clock::time_point now,
                      std::vector<scrub_pattern>& out) const override;
  // gcp: CLOUDSDK_AUTH_ACCESS_TOKEN (gcloud takes a token from it) and the key file's variable
  // (dummy_files); azure: the credential's variables.
  void dummy_variables(std::vector<dummy_variable>& out) const override;
  void dummy_files(std::vector<dummy_file>& out) const override;
  bool rotates() const override { return true; }
  // gcp with "access_boundary": a downscoped token, and the current one's expiry.
  std::string_view mints() const override;
  std::optional<std::chrono::system_clock::time_point> minted_until() const override;
  // `Authorization: Bearer DUMMY` → the latest real token (for a minting credential, only one
  // that has not expired: otherwise the dummy stays, and claim refuses the request).
  int swap_header(std::string_view name, std::string& value) const override;
  // gcp: a POST to Google's token endpoint, which may redeem the session key file's refresh
  // token (the body tells): answered locally with the dummy access token. A minting credential
  // with no good token: its bound bearer dummy is refused 502 credential_unavailable.
  std::unique_ptr<request_step> claim(const request_context& where, std::string_view method,
                                      std::string_view target,
                                      const std::vector<http::header_field>& headers, bool has_body,
                                      request_decision& refused) const override;

 private:
  token_broker(const token_broker& base, std::string dummy, gcp_dummy_client client);

  // A minting credential's token that has not expired; null when there is none.
  const issued_token* minted_token(std::chrono::system_clock::time_point now) const;

  std::string dummy_;
  gcp_dummy_client gcp_client_;
  std::unique_ptr<const dummy_masks> masks_;  // of dummy_
  // Shared with the other sessions' credentials of it; the refresher stops with the last one.
  // Null when a minting credential's first exchange failed; unavailable_ then says why.
  std::shared_ptr<const rotating<issued_token>> tokens_;
  std::string unavailable_;
};

// The fetcher for a gcp or azure credential's source:
//  - azure, or gcp with "cmd:": the command's output (az account get-access-token JSON, a bare
//    token from gcloud auth print-access-token, or token-endpoint JSON), run again to refresh;
//  - gcp with "file:PATH": a Google key file (service_account: a JWT bearer grant the broker
//    signs; authorized_user: a refresh-token grant), POSTed as a form to its token_uri through
//    `transport` (an OAuth error is a JSON body too, whatever the status); "env:NAME": NAME holds
//    the key file's path (GOOGLE_APPLICATION_CREDENTIALS).
// nullopt when the source has no value (unset variable, missing file).
std::optional<token_broker::fetcher> make_token_fetcher(const config::credential_spec& spec,
                                                        const provider_transport& transport);

}  // namespace broker::brokers
