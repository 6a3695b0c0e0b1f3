#include "gateway/admin/admin_logins.hpp"

#include <stdexcept>

#include "gateway/redis/redis_store.hpp"
#include "gateway/session_record.hpp"

namespace broker::gateway {
namespace {

std::string login_key(const std::string& hash) {
  return "broker:console-login:" + hash;
}

nlohmann::ordered_json to_json(const admin_login& l) {
  return {{"token_id", l.holder.id}, {"name", l.holder.name}, {"csrf", l.csrf}};
}

std::optional<admin_login> login_from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("token_id") || !j["token_id"].is_string() ||
      !j.contains("name") || !j["name"].is_string() || !j.contains("csrf") ||
      !j["csrf"].is_string())
    return std::nullopt;
  admin_login out;
  out.holder.id = j["token_id"].get<std::string>();
  out.holder.name = j["name"].get<std::string>();
  out.csrf = j["csrf"].get<std::string>();
  return out;
}

}  // namespace

admin_logins::admin_logins(std::shared_ptr<redis_store> redis, std::shared_ptr<admin_tokens> tokens)
    : redis_(std::move(redis)), tokens_(std::move(tokens)) {
  if (!tokens_) throw std::invalid_argument("admin logins: no admin tokens");
}

base::secret admin_logins::open(const admin_token_info& holder) {
  const auto random = new_proxy_token();
  std::string text;
  text.reserve(4 + random.size());
  text.append("bkl_").append(random.expose());
  base::secret cookie(std::move(text));
  admin_login login;
  login.holder = holder;
  login.csrf = std::string(new_proxy_token().expose());
  const auto hash = token_sha256(cookie);
  const auto now = std::chrono::steady_clock::now();
  if (redis_) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(lifetime).count();
    redis_
        ->blocking({redis_command("SET", login_key(hash), to_json(login).dump(), "PX",
                                  std::to_string(ms))})
        .at(0)
        .checked();
  }
  std::lock_guard lock(mutex_);
  // Without Redis this is the login itself; with it, the cache's first second.
  by_hash_[hash] = {login, redis_ ? now + cache_for : now + lifetime};
  return cookie;
}

std::optional<admin_login> admin_logins::find(const base::secret& cookie) {
  const auto hash = token_sha256(cookie);
  const auto now = std::chrono::steady_clock::now();
  std::optional<admin_login> found;
  {
    std::lock_guard lock(mutex_);
    // Expired entries go as they are met, so the map holds live logins (and a second's cache).
    std::erase_if(by_hash_, [&](const auto& e) { return e.second.until <= now; });
    if (const auto it = by_hash_.find(hash); it != by_hash_.end()) found = it->second.login;
  }
  if (!found && redis_) {
    const auto reply = redis_->blocking({redis_command("GET", login_key(hash))}).at(0).checked();
    if (!reply.is_nil()) found = login_from_json(reply.text);
    if (found) {
      std::lock_guard lock(mutex_);
      by_hash_[hash] = {*found, now + cache_for};
    }
  }
  // A login lives only as long as the admin token it was made with.
  if (found && !tokens_->valid(found->holder.id)) return std::nullopt;
  return found;
}

void admin_logins::close(const base::secret& cookie) {
  const auto hash = token_sha256(cookie);
  {
    std::lock_guard lock(mutex_);
    by_hash_.erase(hash);
  }
  if (redis_) redis_->blocking({redis_command("DEL", login_key(hash))}).at(0).checked();
}

std::optional<base::secret> cookie_value(std::string_view field, std::string_view name) {
  // cookie-string = cookie-pair *( ";" SP cookie-pair ); tolerate missing spaces.
  while (!field.empty()) {
    const auto semicolon = field.find(';');
    auto pair = field.substr(0, semicolon);
    field = semicolon == std::string_view::npos ? std::string_view() : field.substr(semicolon + 1);
    while (!pair.empty() && (pair.front() == ' ' || pair.front() == '\t')) pair.remove_prefix(1);
    const auto equals = pair.find('=');
    if (equals == std::string_view::npos || pair.substr(0, equals) != name) continue;
    auto value = pair.substr(equals + 1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    if (value.empty()) return std::nullopt;
    return base::secret(std::string(value));
  }
  return std::nullopt;
}

}  // namespace broker::gateway
