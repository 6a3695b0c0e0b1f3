// The aws-sigv4 family (docs/policy.md): the child holds a dummy key id, secret and session token;
// a request signed with them is verified with the dummy secret and signed again with the real
// credentials (aws_signing.hpp), which may be temporary ones fetched again before they expire.
#pragma once

#include <memory>
#include <string>

#include "brokers/aws_credentials.hpp"
#include "brokers/aws_signing.hpp"
#include "brokers/provider_transport.hpp"
#include "brokers/request_broker.hpp"

namespace broker::brokers {

class stable_dummies;

class aws_broker final : public request_broker {
 public:
  struct init {
    config::credential_spec spec;  // env: the key id's, secret's and token's variables
    aws_credentials real;          // session_token empty when there is none
    std::string dummy_key_id, dummy_secret, dummy_token;  // each its real value's length
    layer_bindings other_layers;
    // Temporary credentials are fetched again before they expire; null = `real` for good.
    std::shared_ptr<const rotating<aws_real_credentials>> rotation;
    // "assume_role": requests are signed only with `rotation`'s credentials, never `real`; when
    // the first AssumeRole failed (rotation null), `unavailable` says why and every request is
    // refused 502.
    bool minted = false;
    std::string unavailable;
  };
  // Throws std::invalid_argument for an empty key id or secret, or (unless they rotate) a dummy
  // of another length.
  explicit aws_broker(init values);
  ~aws_broker() override;

  // Fixed credentials: dummies shaped like the real values, derived from the seed under the
  // fields "key id", "secret" and "session token". Temporary ones, which each replica fetches
  // for itself (other values, other lengths), are shaped like AWS's own instead, so that
  // replicas still agree.
  std::unique_ptr<request_broker> for_session(const dummy_seed& seed) const override;
  credential_values values() const override;
  void rotated_values(std::chrono::system_clock::time_point now,
                      std::vector<scrub_pattern>& out) const override;
  void dummy_variables(std::vector<dummy_variable>& out) const override;
  void displaced_variables(std::vector<std::string>& out) const override;
  std::string_view mints() const override;
  std::optional<std::chrono::system_clock::time_point> minted_until() const override;
  std::unique_ptr<request_step> claim(const request_context& where, std::string_view method,
                                      std::string_view target,
                                      const std::vector<http::header_field>& headers, bool has_body,
                                      request_decision& refused) const override;

 private:
  struct session_dummies {
    std::string key_id, secret, token;
  };
  aws_broker(const aws_broker& base, session_dummies dummies);
  void check_and_identify();

  // Shared with the other sessions' brokers of this credential.
  std::shared_ptr<const aws_credentials> real_;
  std::shared_ptr<const rotating<aws_real_credentials>> rotation_;
  bool minted_ = false;
  std::string unavailable_;
  std::string dummy_key_id_, dummy_secret_, dummy_token_;
  // What responses show for the real values, from this broker's dummies (the token's from the
  // secret's when there is no token dummy: temporary credentials may bring a token later).
  dummy_masks key_id_masks_, secret_masks_, token_masks_;
  aws_identity identity_;  // views into the members above
};

// The broker for an aws-sigv4 credential loaded from its source: dummies made here, and the
// credentials fetched again before they expire when the source says they do. With
// "assume_role", temporary credentials from STS through `transport` (aws_assume_role.hpp), and
// dummies shaped like them. nullptr when a value is too short to broker (shorter than
// `min_size` bytes).
std::unique_ptr<aws_broker> make_aws_broker(const config::credential_spec& spec,
                                            aws_credentials real,
                                            request_broker::layer_bindings other_layers,
                                            std::size_t min_size,
                                            const stable_dummies* stable = nullptr,
                                            const provider_transport& transport = {});

}  // namespace broker::brokers
