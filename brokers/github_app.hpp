// "type": "github-app" (docs/policy.md, "Minted credentials"): the long-lived credential is a
// GitHub App's private key, and it never goes upstream for session traffic. Each session gets
// an installation token minted from it at first use (a JWT signed RS256 with the key, then
// POST /app/installations/{id}/access_tokens with the credential's repositories and
// permissions), renewed before its hour ends, and revoked (DELETE /installation/token) when the
// session ends, or, after a kill, when the next session with the same App starts
// (minted_records.hpp). The child holds a dummy of the `ghs_` shape, swapped where GitHub
// carries tokens (Bearer, token, either half of Basic).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "base/secret.hpp"
#include "brokers/provider_transport.hpp"
#include "brokers/request_broker.hpp"
#include "config/policy.hpp"

namespace broker::brokers {

// One App installation's calls to GitHub. Safe from several threads.
class github_app_client {
 public:
  github_app_client(config::github_app_spec app, base::secret private_key,
                    provider_transport transport);

  // The App's JWT as GitHub asks for it: RS256, "iss" the App, issued 60 s in the past (clock
  // drift), expiring 9 minutes later. It authenticates as the App: wiped once sent.
  std::string app_jwt(std::chrono::system_clock::time_point now) const;

  struct minted {
    base::secret token;
    std::chrono::system_clock::time_point expires;
  };
  // POST {api_url}/app/installations/{id}/access_tokens with "repositories" and "permissions"
  // when the credential names them. Throws mint_error with GitHub's status and message.
  minted mint() const;
  // DELETE {api_url}/installation/token with the token: true when GitHub no longer honours it
  // (204; 401: expired or revoked already).
  bool revoke(const base::secret& token) const;

  // "github-app API_URL APP_ID/INSTALLATION_ID": what its records are filed under.
  std::string issuer() const;
  const base::secret& private_key() const { return private_key_; }

 private:
  config::github_app_spec app_;
  base::secret private_key_;
  provider_transport transport_;
};

// The broker for a github-app credential, or null with `why` set when its private key has no
// value. Revokes, first, what a dead session of the same App left in `records` (an empty path:
// none kept). Throws source_error for a key that cannot sign.
std::unique_ptr<request_broker> make_github_app_broker(const config::credential_spec& spec,
                                                       request_broker::layer_bindings others,
                                                       provider_transport transport,
                                                       std::filesystem::path records,
                                                       std::string& why);

}  // namespace broker::brokers
