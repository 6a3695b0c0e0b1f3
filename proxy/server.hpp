// The listener and its threads: accepts client connections, serves each as a coroutine on one of
// the per-thread io_contexts, drains on SIGINT/SIGTERM and reloads on SIGHUP.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "live/live_session.hpp"

namespace broker::proxy {

class server {
 public:
  // Binds HOST:PORT (port 0 = any free port). Throws std::runtime_error naming the address.
  server(std::shared_ptr<live::live_session> ctx, const std::string& host, std::uint16_t port,
         unsigned threads);
  // On a listening IPv4 socket made elsewhere (wrap: inside the child's network namespace); the
  // server owns it. Signals are left to the caller: stop() ends the server.
  server(std::shared_ptr<live::live_session> ctx, int listener_fd, unsigned threads);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // wrap with transparent capture (docs/architecture.md): connections accepted on `listener_fd` (a
  // dual-stack IPv6 listener) are served as captured ones, and DNS is answered on `dns_udp_fd`
  // and `dns_tcp_fd`; all made inside the child's namespace, owned by the server from here. The
  // context's synthetic_names() must be set. Call before run().
  void add_capture(int listener_fd, int dns_udp_fd, int dns_tcp_fd);

  std::string host() const;
  std::uint16_t port() const;  // the bound port

  // Serves until SIGINT or SIGTERM, then stops accepting, lets open connections finish (up to
  // timeouts.drain) and returns. SIGHUP calls `on_reload` (on a server thread).
  void run(std::function<void()> on_reload);
  // Thread-safe: stops accepting, lets open connections finish for up to `drain`, cuts the rest,
  // then run() returns.
  void stop(std::chrono::steady_clock::duration drain);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace broker::proxy
