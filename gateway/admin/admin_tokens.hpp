// The gateway's admin credentials (docs/gateway.md): one token per operator, `broker admin-token
// create|list|revoke`. A token ("bka_" and 43 base64url characters) is shown once, to the
// control socket's owner who made it; the gateway keeps only its SHA-256, with the operator's
// name, in this process's memory or, with replicas, in Redis (hash broker:admin-tokens: field =
// the SHA-256, value = {"id", "name", "created_ms"}), so every replica knows every token. A
// replica reads that hash at most once a second (so a flood of guesses costs Redis one round
// trip a second, and a token revoked elsewhere stops working here within a second), and not at
// all while Redis is known to be away: the check then fails closed at once. The proxy's session
// tokens never open the admin API, and an admin token never opens the proxy.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/secret.hpp"

namespace broker::gateway {

class redis_store;

struct admin_token_info {
  std::string id;  // "a-" and 8 hex digits
  std::string name;
  std::int64_t created_ms = 0;
};

nlohmann::ordered_json to_json(const admin_token_info& t);

// The token in an Authorization value: "Bearer TOKEN" (RFC 6750; the scheme case-insensitive).
std::optional<base::secret> parse_bearer(std::string_view value);

class admin_tokens {
 public:
  // Tokens live in `redis` when set (shared by replicas), else in this process.
  explicit admin_tokens(std::shared_ptr<redis_store> redis);

  // A new token for the operator `name` (1-64 letters, digits, '.', '_', '@' or '-'): who holds
  // it, and the token itself. Throws std::invalid_argument for a bad name, std::runtime_error
  // when Redis cannot be reached.
  struct created {
    admin_token_info info;
    base::secret token;
  };
  created create(const std::string& name);
  std::vector<admin_token_info> list();
  // Revokes the token with this id or, when no token has it, every token of the operator with
  // this name: what went.
  std::vector<admin_token_info> revoke(const std::string& id_or_name);
  // Whose token this is; nullopt for a token that was never made or was revoked. Throws
  // std::runtime_error when Redis cannot be reached (or could not be within the last second).
  std::optional<admin_token_info> holder(const base::secret& token);
  // Whether the token with this id is still valid (a login made with it lives as long). The same
  // reads and errors as holder().
  bool valid(const std::string& id);

  static constexpr std::chrono::milliseconds refresh_every{1000};

 private:
  // With Redis: reads the hash again when the copy is older than refresh_every (under mutex_).
  void refresh();

  std::shared_ptr<redis_store> redis_;
  std::mutex mutex_;
  // Every token by its SHA-256: the store itself without Redis, else Redis's as last read.
  std::map<std::string, admin_token_info> by_hash_;
  std::chrono::steady_clock::time_point read_at_{};  // the last read (or attempt)
  bool read_ok_ = false;
};

}  // namespace broker::gateway
