// Idle upstream connections kept for reuse, per worker thread (a socket belongs to its thread's
// io_context, so the pool needs no lock). A client that opens a new connection per request
// (CONNECT + TLS each time) still reaches the upstream over a warm connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/asio.hpp"
#include "proxy/upstream_connection.hpp"

namespace broker::proxy {

class h2_upstream;

class upstream_pool {
 public:
  // Bounds: idle connections kept per key and in all, and how long one may sit idle (servers
  // close idle keep-alive connections after 5-60 s; reusing one at that moment races the close).
  // Per key as many as in all: 200 clients of one API on two workers keep ~100 upstream
  // connections busy per worker, and a smaller per-key bound closed one in six as it came back
  // (a new TCP and TLS handshake for the next request). An idle one costs ~25 KiB.
  static constexpr std::size_t max_idle_per_key = 256;
  static constexpr std::size_t max_idle = 256;
  static constexpr std::chrono::seconds max_idle_time{30};

  // A still-open idle connection for `key`, most recently used first; null when none.
  std::unique_ptr<upstream_connection> take(const std::string& key);
  // Keeps a connection whose last response ended cleanly (no unread bytes); drops it otherwise
  // or when the bounds are reached.
  void give_back(std::unique_ptr<upstream_connection> c);

  // Closes the idle connections past max_idle_time or closed by their server (run now and then:
  // take() only looks at the key it is asked for, and a burst's connections would otherwise be
  // held, ~25 KiB each, until the next request to their host).
  // Returns how many went.
  std::size_t evict_stale(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  std::size_t idle() const { return total_; }

  // HTTP/2 connections are shared, not taken: one that can start another stream for `key`, or
  // null. Kept until closed, or idle past max_idle_time (evict_stale()).
  std::shared_ptr<h2_upstream> h2_for(const std::string& key);
  void keep_h2(std::shared_ptr<h2_upstream> c);
  std::size_t h2_connections() const;

  // Whether a dial for `key` that may bring an HTTP/2 connection is under way, and the wait for
  // it to end (so that a burst of streams shares one connection rather than dialing one each).
  bool dialing(const std::string& key) const { return dialing_.count(key) > 0; }
  asio::awaitable<void> wait_for_dial(const std::string& key);
  // A dial under way while it lives: its end (however the dial ends) wakes the waiters.
  class dial_ticket {
   public:
    dial_ticket(upstream_pool& pool, std::string key);
    ~dial_ticket();
    dial_ticket(const dial_ticket&) = delete;
    dial_ticket& operator=(const dial_ticket&) = delete;

   private:
    upstream_pool& pool_;
    std::string key_;
  };

 private:
  std::unordered_map<std::string, std::vector<std::shared_ptr<h2_upstream>>> h2_;
  std::unordered_map<std::string, std::shared_ptr<asio::steady_timer>> dialing_;
  std::unordered_map<std::string, std::vector<std::unique_ptr<upstream_connection>>> idle_;
  std::size_t total_ = 0;
};

// True while the peer has neither closed nor sent anything (a kept-alive connection that is
// safe to send the next request on): nothing on the socket, and nothing that TLS read ahead.
bool still_open(stream& s);

}  // namespace broker::proxy
