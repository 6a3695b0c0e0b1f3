// Compact JWS (RFC 7515) signed RS256 (RFC 7518 §3.3), as the providers that mint credentials
// ask for them: Google's JWT bearer grant (cloud_tokens.hpp) and GitHub App JWTs
// (github_app.hpp).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace broker::brokers {

// A JWS part: base64url without padding (RFC 7515 §2).
std::string jws_part(std::string_view data);

// "header.claims.signature" with an unencrypted RSA private key in PEM. It authenticates as the
// key's owner: treat it as a secret (wipe it once sent). Throws source_error, naming `who` and
// never the key, when the key is no such key.
std::string rs256_jws(std::string_view private_key_pem, const nlohmann::ordered_json& header,
                      const nlohmann::ordered_json& claims, const std::string& who);

}  // namespace broker::brokers
