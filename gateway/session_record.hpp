// One team-gateway session as the registry holds it (docs/gateway.md): who it is for, until when,
// the policy layers it adds to the team's, the seed its dummies are derived from, and the
// SHA-256 of its proxy token (the token itself is only ever in the client's env file). Every
// replica builds the same session from the same record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/secret.hpp"

namespace broker::gateway {

struct session_layer {
  std::string source;  // the file it came from, for errors and records
  std::string text;    // its JSON, parsed by each replica
};

struct session_record {
  std::string id;
  std::string token_sha256;     // lower-case hex
  std::int64_t created_ms = 0;  // Unix time
  std::int64_t expires_ms = 0;  // 0: never
  std::string user;
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<session_layer> policies;
  std::string dummy_seed;  // lower-case hex of 32 random bytes
  bool revoked = false;
};

nlohmann::ordered_json to_json(const session_record& r);
// Throws std::invalid_argument naming the field that is missing or of the wrong type.
session_record record_from_json(const nlohmann::json& j);

// What `session list/show` print: the record without the token hash and seed.
nlohmann::ordered_json public_view(const session_record& r, std::int64_t now_ms);

// A fresh session's id ("g-" and 12 hex digits), proxy token (43 base64url characters) and
// dummy seed; from the CSPRNG.
std::string new_gateway_session_id();
base::secret new_proxy_token();
std::string new_dummy_seed();
std::string token_sha256(const base::secret& token);

// The credential in a Proxy-Authorization value: "Basic base64(id:token)" (RFC 7617; the
// scheme case-insensitive). nullopt for anything else.
struct proxy_credential {
  std::string id;
  base::secret token;
};
std::optional<proxy_credential> parse_proxy_authorization(std::string_view value);

// Whether `token` is the record's, compared in constant time.
bool token_matches(const session_record& r, const base::secret& token);

}  // namespace broker::gateway
