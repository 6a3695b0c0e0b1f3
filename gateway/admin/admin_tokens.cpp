#include "gateway/admin/admin_tokens.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "base/text.hpp"
#include "brokers/families.hpp"
#include "gateway/redis/redis_store.hpp"
#include "gateway/session_record.hpp"
#include "http/message.hpp"

namespace broker::gateway {
namespace {

constexpr const char* tokens_key = "broker:admin-tokens";

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '@' || c == '-';
  });
}

std::string new_token_id() {
  unsigned char bytes[4];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  return "a-" + base::hex_encode(bytes, sizeof bytes);
}

admin_token_info info_from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  return {j.at("id").get<std::string>(), j.at("name").get<std::string>(),
          j.at("created_ms").get<std::int64_t>()};
}

// The tokens `id_or_name` names among `all` (hash → info): the one with that id, else every
// one of that operator.
std::vector<std::string> named(const std::map<std::string, admin_token_info>& all,
                               const std::string& id_or_name) {
  std::vector<std::string> out;
  for (const auto& [hash, info] : all)
    if (info.id == id_or_name) return {hash};
  for (const auto& [hash, info] : all)
    if (info.name == id_or_name) out.push_back(hash);
  return out;
}

std::map<std::string, admin_token_info> read_all(redis_store& redis) {
  const auto all = redis.blocking({redis_command("HGETALL", tokens_key)}).at(0).checked();
  std::map<std::string, admin_token_info> out;
  for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2)
    out.emplace(all.elements[i].text, info_from_json(all.elements[i + 1].text));
  return out;
}

}  // namespace

nlohmann::ordered_json to_json(const admin_token_info& t) {
  return {{"id", t.id}, {"name", t.name}, {"created_ms", t.created_ms}};
}

std::optional<base::secret> parse_bearer(std::string_view value) {
  const auto auth = brokers::parse_auth_value(value);
  if (!auth || !http::iequals(auth->scheme, "bearer")) return std::nullopt;
  return base::secret(std::string(auth->token));
}

admin_tokens::admin_tokens(std::shared_ptr<redis_store> redis) : redis_(std::move(redis)) {}

admin_tokens::created admin_tokens::create(const std::string& name) {
  if (!valid_name(name))
    throw std::invalid_argument("admin-token name " + base::printable(name) +
                                ": use 1-64 letters, digits, '.', '_', '@' or '-'");
  created out;
  out.info.id = new_token_id();
  out.info.name = name;
  out.info.created_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  const auto random = new_proxy_token();
  std::string text;
  text.reserve(4 + random.size());
  text.append("bka_").append(random.expose());
  out.token = base::secret(std::move(text));
  const auto hash = token_sha256(out.token);
  if (redis_) {
    redis_->blocking({redis_command("HSET", tokens_key, hash, to_json(out.info).dump())})
        .at(0)
        .checked();
    std::lock_guard lock(mutex_);
    read_at_ = {};  // known here at once
  } else {
    std::lock_guard lock(mutex_);
    by_hash_[hash] = out.info;
  }
  return out;
}

std::vector<admin_token_info> admin_tokens::list() {
  std::vector<admin_token_info> out;
  if (redis_) {
    const auto values = redis_->blocking({redis_command("HVALS", tokens_key)}).at(0).checked();
    for (const auto& v : values.elements) out.push_back(info_from_json(v.text));
  } else {
    std::lock_guard lock(mutex_);
    for (const auto& [hash, info] : by_hash_) out.push_back(info);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.created_ms < b.created_ms; });
  return out;
}

std::vector<admin_token_info> admin_tokens::revoke(const std::string& id_or_name) {
  std::vector<admin_token_info> gone;
  if (redis_) {
    const auto all = read_all(*redis_);
    std::vector<std::string> hdel{"HDEL", tokens_key};
    for (const auto& hash : named(all, id_or_name)) {
      hdel.push_back(hash);
      gone.push_back(all.at(hash));
    }
    if (!gone.empty()) redis_->blocking({std::move(hdel)}).at(0).checked();
    std::lock_guard lock(mutex_);
    read_at_ = {};  // refused here at once
  } else {
    std::lock_guard lock(mutex_);
    for (const auto& hash : named(by_hash_, id_or_name)) {
      gone.push_back(by_hash_.at(hash));
      by_hash_.erase(hash);
    }
  }
  return gone;
}

void admin_tokens::refresh() {
  const auto now = std::chrono::steady_clock::now();
  if (read_at_ != std::chrono::steady_clock::time_point{} && now - read_at_ < refresh_every) {
    if (!read_ok_) throw std::runtime_error("Redis could not be reached to read the admin tokens");
    return;
  }
  read_at_ = now;
  read_ok_ = false;
  if (!redis_->reachable())
    throw std::runtime_error("Redis is unreachable (the revocation poll fails)");
  by_hash_ = read_all(*redis_);
  read_ok_ = true;
}

std::optional<admin_token_info> admin_tokens::holder(const base::secret& token) {
  // Looked up by its SHA-256: the time a lookup takes says nothing about a token's bytes.
  const auto hash = token_sha256(token);
  std::lock_guard lock(mutex_);
  if (redis_) refresh();
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

bool admin_tokens::valid(const std::string& id) {
  std::lock_guard lock(mutex_);
  if (redis_) refresh();
  return std::any_of(by_hash_.begin(), by_hash_.end(),
                     [&](const auto& entry) { return entry.second.id == id; });
}

}  // namespace broker::gateway
