// The console's logins (docs/gateway.md): an operator signs in once with an admin token and gets a
// login, a random cookie value ("bkl_" and 43 base64url characters) that the browser sends back
// (HttpOnly, SameSite=Strict), so the token itself never sits in a browser's cookie jar. Each
// login has its own CSRF token, which the console's script sends with every state-changing
// request (X-CSRF-Token): a page of another origin can make the browser send the cookie, never
// that header.
//
// Like the admin tokens, only a login's SHA-256 is kept: in this process, or with replicas in
// Redis (key broker:console-login:SHA256, value {"token_id", "name", "csrf"}, expiring with the
// login), so a login made on one replica opens the console on every replica. A login lasts
// `lifetime`, ends at once at sign-out here (within `cache_for` on other replicas), and with
// its admin token: a revoked token's logins stop working within a second.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/secret.hpp"
#include "gateway/admin/admin_tokens.hpp"

namespace broker::gateway {

class redis_store;

struct admin_login {
  admin_token_info holder;  // the admin token it was made with (its id and operator's name)
  std::string csrf;         // 43 base64url characters
};

class admin_logins {
 public:
  static constexpr std::chrono::hours lifetime{12};
  // A login looked up in Redis is trusted this long before it is read again.
  static constexpr std::chrono::milliseconds cache_for{1000};
  static constexpr std::string_view cookie_name = "broker_console";

  admin_logins(std::shared_ptr<redis_store> redis, std::shared_ptr<admin_tokens> tokens);

  // A new login for the holder of a valid admin token: the cookie's value. Throws
  // std::runtime_error when Redis cannot be reached.
  base::secret open(const admin_token_info& holder);
  // The login of a cookie value: nullopt for one never made, expired, signed out, or whose
  // admin token was revoked. Throws std::runtime_error when Redis cannot be reached.
  std::optional<admin_login> find(const base::secret& cookie);
  void close(const base::secret& cookie);

 private:
  struct entry {
    admin_login login;
    std::chrono::steady_clock::time_point until;  // expiry here; with Redis, the cache's
  };
  std::shared_ptr<redis_store> redis_;
  std::shared_ptr<admin_tokens> tokens_;
  std::mutex mutex_;
  std::map<std::string, entry> by_hash_;  // the logins (without Redis) or the cache (with it)
};

// The value of the cookie `name` in a Cookie field ("a=1; broker_console=..."; RFC 6265 §5.4).
std::optional<base::secret> cookie_value(std::string_view field, std::string_view name);

}  // namespace broker::gateway
