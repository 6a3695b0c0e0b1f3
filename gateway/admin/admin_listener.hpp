// The gateway's admin listener (docs/gateway.md): a small HTTP/1.1 server on its own thread and
// io_context, so that it keeps answering while the proxy's threads are busy. It serves
//   GET /metrics  the metrics' exposition (text/plain; version=0.0.4; charset=utf-8)
//   GET /healthz  "ok"
// and whatever routes the broker adds (a route ending in "/*" answers every path under it). Unknown
// paths get 404, a known path asked with another method 405 (with Allow), an unparseable request
// 400 and the connection closed; every answer has a short body and a Content-Length. Connections
// are kept alive; each request must arrive whole within the request timeout (a client that sends
// nothing, or half a head, is dropped), and heads and bodies are bounded (431, 413). No route is
// reachable without the listener's address: bind it to loopback or an admin network, it has no
// authentication of its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gateway/metrics.hpp"
#include "http/message.hpp"

namespace broker::gateway {

struct admin_request {
  std::string method;
  std::string path;   // the target up to '?'
  std::string query;  // after '?', without it
  http::message_head head;
  std::string body;  // decoded (chunking removed), at most admin_limits::max_body_bytes
  std::string peer;  // the client's address, "IP:PORT", for records
};

struct admin_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>>
      fields;  // more header fields, e.g. WWW-Authenticate
};

// Answers one request; runs on the listener's thread, so it must be quick and must not wait on
// the proxy's threads. An exception becomes a 500 (its message is not sent).
using admin_handler = std::function<admin_response(const admin_request&)>;

struct admin_limits {
  // From the moment a connection opens, or its previous response was written, until the next
  // request has arrived whole; and again for writing the response out.
  std::chrono::milliseconds request_timeout{5000};
  // An admin request is a line and a few fields; 8 KiB is plenty for any scraper.
  std::size_t max_head_bytes = 8 * 1024;
  std::size_t max_body_bytes = 64 * 1024;
  // Connections open at once; further ones get 503 and are closed.
  std::size_t max_connections = 64;
};

class admin_listener {
 public:
  // Binds HOST:PORT (port 0 = any free port) and starts serving on its own thread. Throws
  // std::runtime_error naming the address when it cannot.
  admin_listener(std::string host, std::uint16_t port, std::shared_ptr<metrics> m,
                 admin_limits limits = {});
  // Stops accepting, cuts open connections and joins the thread.
  ~admin_listener();
  admin_listener(const admin_listener&) = delete;
  admin_listener& operator=(const admin_listener&) = delete;

  std::uint16_t port() const;  // the bound port

  // Adds (or replaces) the handler for METHOD PATH; a GET route answers HEAD too, without the
  // body. A PATH ending in "/*" answers every path under it that no other route names (the
  // longest such prefix wins); the handler reads the rest from request.path. Thread-safe; takes
  // effect for the next request. E.g.
  //   route("GET", "/sessions", [&](const admin_request&) { return admin_response{...}; });
  // `slow`: the handler may take long (it reads files): it runs on the listener's worker
  // thread, one such request at a time, while the listener's own thread goes on answering the
  // rest (/metrics, /healthz, the quick routes).
  void route(std::string method, std::string path, admin_handler handler, bool slow = false);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace broker::gateway
