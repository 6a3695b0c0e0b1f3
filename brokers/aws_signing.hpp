// The aws-sigv4 family's request step (docs/policy.md): a request signed with a session's dummy AWS
// credentials is checked with the dummy secret (it came from this session and was not altered on
// the way) and signed again with the real credentials, in the header form or the presigned-query
// form, with the session token swapped and aws-chunked bodies re-signed chunk by chunk.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/secret.hpp"
#include "brokers/aws_credentials.hpp"
#include "brokers/rotating.hpp"
#include "brokers/sigv4.hpp"
#include "http/message.hpp"

namespace broker::brokers {

// One issue of temporary AWS credentials (a credential_process with an Expiration), fetched
// again before they expire. What a response echoing them shows is each session's to say (its
// broker's dummy_masks).
struct aws_real_credentials {
  base::secret key_id, secret_key, token;
  std::chrono::system_clock::time_point expires;
};

struct aws_values {
  std::string_view key_id, secret_key, token;  // token empty when there is none
};

// A session's AWS identity: the dummies of one aws-sigv4 credential (token empty when the real
// credentials have no session token) and where its real values are. The views and pointers
// point into the credential's broker.
struct aws_identity {
  std::string_view name;  // the credential's name
  std::string_view dummy_key_id, dummy_secret, dummy_token;
  const aws_credentials* fixed;             // the real credentials, unless they rotate
  const std::vector<std::string>* regions;  // allowlists; empty = any
  const std::vector<std::string>* services;
  // Temporary credentials are replaced as they expire; null = `fixed` for good.
  const rotating<aws_real_credentials>* rotation = nullptr;

  // The real credentials to sign with now, for as long as the signing takes.
  aws_values real() const {
    if (!rotation)
      return {fixed->access_key_id.expose(), fixed->secret_access_key.expose(),
              fixed->session_token.expose()};
    const aws_real_credentials& c = rotation->current();
    return {c.key_id.expose(), c.secret_key.expose(), c.token.expose()};
  }
};

// One request signed with an identity's dummy key id. Made by find_aws_request(); lives as long
// as the exchange (its chunk re-signer points into it).
class aws_signed_request {
 public:
  aws_signed_request(const aws_identity& id, bool presigned, sigv4::credential_scope scope);
  ~aws_signed_request();

  std::string_view credential() const { return id_.name; }
  const aws_identity& identity() const { return id_; }
  const sigv4::credential_scope& scope() const { return scope_; }
  // The signed payload hash is computed from, or checked against, the body: the request must be
  // read whole before resign().
  bool needs_body() const { return needs_body_; }

  // Why this session may not make this call even with a good signature, or "": an STS action
  // that hands out new real credentials (GetSessionToken, AssumeRole...), which the child would
  // then hold. `body` is the whole body when needs_body() (STS bodies always are read).
  std::string action_refusal(std::string_view target, std::string_view body) const;

  // Checks the signature with the dummy secret and signs the request again with the real
  // credentials, in place. `body` is the whole body when needs_body(), else ignored. Throws
  // sigv4::sigv4_error (nothing modified) when the request does not verify.
  void resign(std::string_view method, std::string& target,
              std::vector<http::header_field>& headers, std::string_view body);

  // After resign(), for an aws-chunked body signed chunk by chunk: its re-signer; else null.
  std::unique_ptr<sigv4::chunk_resigner> body_resigner() const;

 private:
  friend std::unique_ptr<aws_signed_request> find_aws_request(
      const std::vector<const aws_identity*>&, std::string_view,
      const std::vector<http::header_field>&, bool);
  // The payload hash the signature covers: `stated` by the client (x-amz-content-sha256, or
  // UNSIGNED-PAYLOAD for S3 presigned URLs), else the body's, else the empty body's.
  void take_payload_hash(std::optional<std::string> stated, bool has_body);
  // resign()'s steps. The request as the client signed it, checked with the dummy secret: the
  // names of the headers it signed.
  std::vector<std::string> check_as_sent(std::string_view method, const std::string& target,
                                         const std::vector<http::header_field>& headers);
  // Signed again with the real values: in the query string (a presigned URL), or in its
  // Authorization header (the session token added to the signed headers when it must go along).
  void sign_query(std::string_view method, std::string& target,
                  const std::vector<http::header_field>& headers,
                  const std::vector<std::string>& signed_headers, const aws_values& real);
  void sign_headers(std::string_view method, const std::string& target,
                    std::vector<http::header_field>& headers,
                    std::vector<std::string> signed_headers, const aws_values& real);

  const aws_identity& id_;
  bool presigned_;
  sigv4::credential_scope scope_;
  bool needs_body_ = false;
  std::string payload_hash_;  // as signed: a hex digest, UNSIGNED-PAYLOAD, STREAMING-...
  bool hash_from_body_ = false;
  std::unique_ptr<sigv4::signing_key> dummy_key_, real_key_;
  std::string amz_date_, dummy_signature_, real_signature_;
};

// The request's SigV4 signature, when it names one of `ids`' dummy key ids (Authorization
// header first, then X-Amz-Credential in the query); null when it names none. Throws
// sigv4::sigv4_error when it names one but is malformed. `has_body`: the request carries a body.
std::unique_ptr<aws_signed_request> find_aws_request(const std::vector<const aws_identity*>& ids,
                                                     std::string_view target,
                                                     const std::vector<http::header_field>& headers,
                                                     bool has_body);

// May `id` sign for this scope (its regions and services allowlists)? The reason when not.
std::string aws_scope_refusal(const aws_identity& id, const sigv4::credential_scope& scope);

}  // namespace broker::brokers
