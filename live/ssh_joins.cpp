#include "live/ssh_joins.hpp"

#include "base/digest.hpp"

namespace broker::live {

void ssh_joins::opened(std::string_view signature, std::string host, std::uint16_t port) {
  const auto digest = base::sha256_hex(signature);
  std::lock_guard lock(mutex_);
  if (open_.size() >= max_open) return;
  open_[digest] = joined{std::move(host), port, {}, {}};
}

std::optional<ssh_joins::joined> ssh_joins::closed(std::string_view signature) {
  const auto digest = base::sha256_hex(signature);
  std::lock_guard lock(mutex_);
  auto it = open_.find(digest);
  if (it == open_.end()) return std::nullopt;
  auto out = std::move(it->second);
  open_.erase(it);
  return out;
}

std::optional<ssh_joins::joined> ssh_joins::find(std::string_view signature) const {
  const auto digest = base::sha256_hex(signature);
  std::lock_guard lock(mutex_);
  auto it = open_.find(digest);
  if (it == open_.end()) return std::nullopt;
  return it->second;
}

void ssh_joins::signed_with(std::string_view signature, std::string key, std::string user) {
  const auto digest = base::sha256_hex(signature);
  std::lock_guard lock(mutex_);
  auto it = open_.find(digest);
  if (it == open_.end()) return;
  it->second.key = std::move(key);
  it->second.user = std::move(user);
}

}  // namespace broker::live
