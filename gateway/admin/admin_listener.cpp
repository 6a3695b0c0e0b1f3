#include "gateway/admin/admin_listener.hpp"

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>

#include "base/asio.hpp"
#include "base/deadline.hpp"
#include "base/listener.hpp"
#include "base/race.hpp"
#include "http/parser.hpp"
#include "session/log.hpp"

namespace broker::gateway {

namespace {

constexpr std::string_view exposition_type = "text/plain; version=0.0.4; charset=utf-8";

std::string_view reason_of(int status) {
  static constexpr std::pair<int, std::string_view> reasons[] = {
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {303, "See Other"},
      {204, "No Content"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {409, "Conflict"},
      {413, "Content Too Large"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {503, "Service Unavailable"},
  };
  for (const auto& [code, reason] : reasons)
    if (code == status) return reason;
  return "";  // the reason phrase is optional (RFC 9112 §4)
}

admin_response plain(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body), {}};
}

// The response on the wire. `with_body` is false for HEAD: the same fields, no body.
std::string serialize(const admin_response& r, bool keep_alive, bool with_body,
                      std::string_view allow) {
  std::string wire = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
                                 r.status, reason_of(r.status), r.content_type, r.body.size());
  if (!allow.empty()) wire += fmt::format("Allow: {}\r\n", allow);
  for (const auto& [name, value] : r.fields) wire += fmt::format("{}: {}\r\n", name, value);
  if (!keep_alive) wire += "Connection: close\r\n";
  wire += "\r\n";
  if (with_body) wire += r.body;
  return wire;
}

// One request read off a connection, or why there is none.
struct read_result {
  std::optional<admin_request> request;
  std::optional<admin_response> refusal;  // answered, then the connection closes
  bool keep_alive = false;
};

}  // namespace

struct admin_listener::impl {
  impl(std::shared_ptr<broker::gateway::metrics> m, admin_limits l)
      : metrics(std::move(m)), limits(l) {}

  asio::io_context io{1};  // first: destroyed last, after every socket and coroutine frame
  tcp::acceptor acceptor{io};
  std::uint16_t bound_port = 0;
  std::shared_ptr<broker::gateway::metrics> metrics;
  const admin_limits limits;
  std::size_t open = 0;  // connections; touched on the listener's thread only
  std::uint64_t next_id = 0;

  struct handler_entry {
    admin_handler handler;
    bool slow = false;
  };
  std::mutex routes_mutex;
  std::map<std::string, std::map<std::string, handler_entry>, std::less<>> routes;  // path, method
  asio::thread_pool worker{1};  // the slow routes' handlers

  std::thread thread;

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // EMFILE and friends: back off briefly instead of spinning.
        asio::steady_timer pause(io, std::chrono::milliseconds(50));
        co_await pause.async_wait(use_tuple);
        continue;
      }
      if (open >= limits.max_connections) {
        const auto text = serialize(plain(503, "too many connections\n"), false, true, "");
        error_code ignored;
        socket.non_blocking(true, ignored);
        socket.write_some(asio::buffer(text), ignored);
        continue;
      }
      ++open;
      const std::uint64_t id = ++next_id;
      asio::co_spawn(io, serve(std::move(socket)), [this, id](std::exception_ptr failure) {
        --open;
        if (!failure) return;
        try {
          std::rethrow_exception(failure);
        } catch (const std::exception& e) {
          session::log(spdlog::level::debug, session::log_tag("admin", id), "connection: {}",
                       e.what());
        } catch (...) {
        }
      });
    }
  }

  // A connection: its requests in turn, raced with its watchdog.
  asio::awaitable<void> serve(tcp::socket socket) {
    base::deadline<> watchdog(socket.get_executor());
    error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    std::string peer;
    if (!ec)
      peer = (remote.address().is_v6() ? "[" + remote.address().to_string() + "]"
                                       : remote.address().to_string()) +
             ":" + std::to_string(remote.port());
    co_await base::race(requests(socket, watchdog, peer), watchdog.watch());
  }

  asio::awaitable<void> requests(tcp::socket& socket, base::deadline<>& watchdog,
                                 const std::string& peer) {
    std::string buffered;  // read, not yet parsed: the start of a pipelined next request
    for (;;) {
      watchdog.arm(limits.request_timeout);
      auto got = co_await read_request(socket, buffered);
      std::string wire;
      if (got.refusal) {
        wire = serialize(*got.refusal, false, true, "");
      } else if (got.request) {
        got.request->peer = peer;
        std::string allow;
        const auto response = co_await answer(*got.request, allow);
        wire = serialize(response, got.keep_alive, got.request->method != "HEAD", allow);
      } else {
        co_return;  // closed (or failed) between or during requests: nothing to answer
      }
      watchdog.arm(limits.request_timeout);
      auto [ec, n] = co_await asio::async_write(socket, asio::buffer(wire), use_tuple);
      if (ec) co_return;
      if (got.refusal) co_await linger(socket);
      if (got.refusal || !got.keep_alive) co_return;
    }
  }

  // After a refusal: the write side is shut, and what the client still sends is read and
  // dropped until it closes (or the watchdog ends it). Closing with unread bytes would reset
  // the connection, and the client could lose the answer before reading it.
  static asio::awaitable<void> linger(tcp::socket& socket) {
    error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 4096> sink;
    while (!ec)
      std::tie(ec, std::ignore) = co_await socket.async_read_some(asio::buffer(sink), use_tuple);
  }

  // Reads one request whole. The parser is new for each request; bytes past the end
  // of this one stay in `buffered` for the next.
  asio::awaitable<read_result> read_request(tcp::socket& socket, std::string& buffered) {
    http::parser parser(http::parser::kind::request);
    admin_request request;
    std::size_t head_bytes = 0;
    bool continue_sent = false;
    std::array<char, 4096> chunk;
    read_result out;
    for (;;) {
      if (buffered.empty()) {
        auto [ec, n] = co_await socket.async_read_some(asio::buffer(chunk), use_tuple);
        if (ec) co_return out;
        buffered.append(chunk.data(), n);
      }
      const bool head_was_done = parser.head_done();
      const auto r = parser.feed(buffered, head_was_done ? &request.body : nullptr);
      if (r.status == http::parse_status::error) {
        const bool too_large = parser.error() == http::parse_error::header_too_large;
        out.refusal =
            too_large ? plain(431, "request header too large\n") : plain(400, "bad request\n");
        co_return out;
      }
      buffered.erase(0, r.consumed);
      if (!head_was_done) {
        head_bytes += r.consumed;
        if (head_bytes > limits.max_head_bytes) {
          out.refusal = plain(431, "request header too large\n");
          co_return out;
        }
        if (!parser.head_done()) continue;
        const auto& head = parser.head();
        if (head.content_length.value_or(0) > limits.max_body_bytes) {
          out.refusal = plain(413, "request body too large\n");
          co_return out;
        }
        // curl waits a second for this before it sends a body of more than 1 KiB.
        if (!parser.message_done() && head.has_token("expect", "100-continue") && !continue_sent) {
          continue_sent = true;
          constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
          auto [ec, n] = co_await asio::async_write(socket, asio::buffer(go_on), use_tuple);
          if (ec) co_return out;
        }
      } else if (request.body.size() > limits.max_body_bytes) {
        out.refusal = plain(413, "request body too large\n");
        co_return out;
      }
      if (parser.message_done()) break;
    }
    request.head = std::move(parser.head());
    request.method = request.head.method;
    const auto& target = request.head.target;
    const auto question = target.find('?');
    request.path = target.substr(0, question);
    if (question != std::string::npos) request.query = target.substr(question + 1);
    out.keep_alive = parser.keep_alive();
    out.request = std::move(request);
    co_return out;
  }

  // The route of `path`: its own, else the longest "PREFIX/*" route above it; null when none.
  const std::map<std::string, handler_entry>* route_of(const std::string& path) const {
    if (const auto it = routes.find(path); it != routes.end()) return &it->second;
    for (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0;
         slash = path.rfind('/', slash - 1)) {
      const auto it = routes.find(path.substr(0, slash + 1) + "*");
      if (it != routes.end()) return &it->second;
    }
    return nullptr;
  }

  static admin_response call(const admin_handler& handler, const admin_request& request) {
    try {
      return handler(request);
    } catch (const std::exception& e) {
      session::log(spdlog::level::warn, session::log_tag("admin"), "{} {}: {}", request.method,
                   request.path, e.what());
      return plain(500, "internal error\n");
    }
  }

  // call() as a coroutine of its own, for another executor; its arguments are copies (a lambda
  // coroutine's captures are not safe in GCC 12).
  static asio::awaitable<admin_response> call_there(admin_handler handler, admin_request request) {
    co_return call(handler, request);
  }

  // The route's answer; 404 for an unknown path, 405 (and the methods in `allow`) for a known
  // path asked with another method.
  asio::awaitable<admin_response> answer(const admin_request& request, std::string& allow) {
    handler_entry entry;
    {
      std::lock_guard lock(routes_mutex);
      const auto* path = route_of(request.path);
      if (!path) co_return plain(404, "not found\n");
      const auto& methods = *path;
      auto it = methods.find(request.method);
      if (it == methods.end() && request.method == "HEAD") it = methods.find("GET");
      if (it == methods.end()) {
        for (const auto& [method, h] : methods) {
          if (!allow.empty()) allow += ", ";
          allow += method;
          if (method == "GET" && !methods.contains("HEAD")) allow += ", HEAD";
        }
        co_return plain(405, "method not allowed\n");
      }
      entry = it->second;
    }
    if (!entry.slow) co_return call(entry.handler, request);
    // On the worker; this coroutine resumes on the listener's thread with the answer. The
    // connection's watchdog still bounds the wait.
    co_return co_await asio::co_spawn(worker, call_there(std::move(entry.handler), request),
                                      asio::use_awaitable);
  }
};

admin_listener::admin_listener(std::string host, std::uint16_t port, std::shared_ptr<metrics> m,
                               admin_limits limits)
    : impl_(std::make_unique<impl>(std::move(m), limits)) {
  if (!impl_->metrics) throw std::invalid_argument("admin listener: no metrics");
  const std::string address_text =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("admin listener " + address_text + ": not an IP address");
  auto& acceptor = impl_->acceptor;
  ec = base::listen_on(acceptor, tcp::endpoint(address, port));
  if (ec)
    throw std::runtime_error("admin listener: cannot listen on " + address_text + ": " +
                             ec.message());
  impl_->bound_port = acceptor.local_endpoint().port();

  route("GET", "/metrics", [metrics = impl_->metrics](const admin_request&) {
    return admin_response{200, std::string(exposition_type), metrics->render(), {}};
  });
  route("GET", "/healthz", [](const admin_request&) { return plain(200, "ok"); });

  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([io = &impl_->io] { io->run(); });
}

admin_listener::~admin_listener() {
  // Stopping the io_context ends the accept loop and every connection where they wait; their
  // frames (and sockets) go with the io_context, after the thread has returned.
  impl_->io.stop();
  impl_->thread.join();
  impl_->worker.join();  // a slow handler under way finishes first
}

std::uint16_t admin_listener::port() const {
  return impl_->bound_port;
}

void admin_listener::route(std::string method, std::string path, admin_handler handler, bool slow) {
  std::lock_guard lock(impl_->routes_mutex);
  impl_->routes[std::move(path)][std::move(method)] = {std::move(handler), slow};
}

}  // namespace broker::gateway
