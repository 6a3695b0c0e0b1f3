#include "proxy/upstream_pool.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <iterator>

#include "proxy/h2_upstream.hpp"
#include "proxy/limits.hpp"

namespace broker::proxy {

upstream_connection::upstream_connection(stream s, std::string k, bool lb)
    : io(std::move(s)), key(std::move(k)), loopback(lb) {}

bool still_open(stream& s) {
  if (s.is_tls() && SSL_has_pending(s.native_tls()) == 1) return false;
  char byte;
  const auto n = ::recv(s.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

namespace {

// Safe to send the next request on: not idle past the limit, and not closed by its server.
bool reusable(upstream_connection& c, std::chrono::steady_clock::time_point now) {
  return now - c.idle_since < upstream_pool::max_idle_time && still_open(c.io);
}

}  // namespace

std::unique_ptr<upstream_connection> upstream_pool::take(const std::string& key) {
  auto it = idle_.find(key);
  if (it == idle_.end()) return nullptr;
  auto& list = it->second;
  const auto now = std::chrono::steady_clock::now();
  while (!list.empty()) {
    auto c = std::move(list.back());
    list.pop_back();
    --total_;
    if (reusable(*c, now)) return c;
  }
  return nullptr;
}

std::size_t upstream_pool::evict_stale(std::chrono::steady_clock::time_point now) {
  for (auto it = h2_.begin(); it != h2_.end();) {
    std::erase_if(it->second, [&](const std::shared_ptr<h2_upstream>& c) {
      if (!c->closed() && !(c->idle() && now - c->idle_since() >= max_idle_time)) return false;
      c->close();
      return true;
    });
    it = it->second.empty() ? h2_.erase(it) : std::next(it);
  }
  const std::size_t before_all = total_;
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& list = it->second;
    const auto before = list.size();
    std::erase_if(
        list, [&](const std::unique_ptr<upstream_connection>& c) { return !reusable(*c, now); });
    total_ -= before - list.size();
    it = list.empty() ? idle_.erase(it) : std::next(it);
  }
  return before_all - total_;
}

void upstream_pool::give_back(std::unique_ptr<upstream_connection> c) {
  if (!c || !c->in.empty()) return;
  auto& list = idle_[c->key];
  if (list.size() >= max_idle_per_key) {
    // The oldest goes: the newest is the likeliest to still be open.
    list.erase(list.begin());
    --total_;
  }
  if (total_ >= max_idle) return;
  c->in.release();  // an idle connection holds no buffer block
  c->idle_since = std::chrono::steady_clock::now();
  list.push_back(std::move(c));
  ++total_;
}

std::shared_ptr<h2_upstream> upstream_pool::h2_for(const std::string& key) {
  const auto it = h2_.find(key);
  if (it == h2_.end()) return nullptr;
  std::erase_if(it->second, [](const std::shared_ptr<h2_upstream>& c) { return c->closed(); });
  for (const auto& c : it->second)
    if (c->can_start()) return c;
  return nullptr;
}

void upstream_pool::keep_h2(std::shared_ptr<h2_upstream> c) {
  h2_[c->key()].push_back(std::move(c));
}

std::size_t upstream_pool::h2_connections() const {
  std::size_t n = 0;
  for (const auto& [key, list] : h2_) n += list.size();
  return n;
}

upstream_pool::dial_ticket::dial_ticket(upstream_pool& pool, std::string key)
    : pool_(pool), key_(std::move(key)) {
  pool_.dialing_.try_emplace(key_, nullptr);
}

upstream_pool::dial_ticket::~dial_ticket() {
  const auto it = pool_.dialing_.find(key_);
  if (it == pool_.dialing_.end()) return;
  if (it->second) it->second->cancel();
  pool_.dialing_.erase(it);
}

asio::awaitable<void> upstream_pool::wait_for_dial(const std::string& key) {
  const auto it = dialing_.find(key);
  if (it == dialing_.end()) co_return;
  if (!it->second)
    it->second = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor,
                                                      std::chrono::steady_clock::time_point::max());
  const auto event = it->second;  // the ticket erases the entry; the wait keeps the timer
  co_await event->async_wait(use_tuple);
}

}  // namespace broker::proxy
