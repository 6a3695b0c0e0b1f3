// One client connection: reads request heads and routes each one: a CONNECT opens a tunnel or
// is intercepted (TLS toward the client with a leaf for the host, then each request inside is
// forwarded like a plain one: interception.cpp), an absolute-form http:// request is forwarded
// (http_forward.cpp). A captured connection (a wrap child that dialed directly, DESIGN §11) is
// served as if it had sent a CONNECT to the address it dialed (captured.cpp). Each request,
// tunnel or refusal is one http_exchange, which carries it from policy to its audit record.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/asio.hpp"
#include "base/deadline.hpp"
#include "http/parser.hpp"
#include "live/live_session.hpp"
#include "live/refusal.hpp"
#include "live/timeouts.hpp"
#include "proxy/h1_client_side.hpp"
#include "proxy/h2_connection.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/read_buffer.hpp"
#include "proxy/stream.hpp"
#include "proxy/upstream_pool.hpp"
#include "session/log.hpp"

namespace broker::proxy {

class client_connection {
 public:
  // `pool` belongs to the thread whose io_context owns `socket`. `captured`: accepted on the
  // transparent-capture listener, where the address the client dialed is the target.
  client_connection(tcp::socket socket, std::shared_ptr<live::live_session> ctx,
                    upstream_pool& pool, bool captured = false);

  // Serves the connection to its end. Never throws for client or upstream behaviour.
  asio::awaitable<void> run();
  // Ask the connection to end: at once if it waits for a request, after the current one if not;
  // with `now`, at once whatever it is doing (its exchange is audited as cut short). Must run on
  // the connection's executor.
  void drain(bool now);
  asio::any_io_executor executor() { return client_.get_executor(); }
  const session::log_tag& tag() const { return tag_; }

 private:
  // After an intercepted CONNECT: every request on this connection goes to `dest`.
  struct interception {
    config::destination dest;
    std::string scheme;                    // "https" after a TLS handshake, "http" for plain bytes
    std::optional<live::refusal> refused;  // decided at CONNECT time, answered to every request
    bool h2 = false;  // the client chose HTTP/2 (ALPN): h2_connection serves it
  };
  enum class head_result { ok, closed, refused };
  enum class binding { bound, refused_keep, refused_close };

  // Finds the processes holding this connection (wrap sessions), for the audit records and
  // "programs".
  void attribute();
  asio::awaitable<void> serve();
  asio::awaitable<head_result> read_request_head(http::parser& parser, bool first);
  asio::awaitable<void> handle_connect(const http::message_head& head);
  // A team gateway's connection (DESIGN §12): the session the request's proxy credential names
  // becomes this connection's context; a missing or wrong one is refused (407) in the gateway's
  // own log.
  asio::awaitable<binding> bind_session(const http::parser& request);
  // The target of a CONNECT (or of a captured connection): refused, tunnelled or intercepted.
  asio::awaitable<void> open_target(http_exchange& ex, const config::destination& dest);
  // A refused CONNECT to a host the other layers tunnel that a person may approve (DESIGN §13):
  // learned (wrap --learn), or held while the session asks. Sets `verdict` allowed (a tunnel)
  // when it goes; returns the refusal when it does not (approval_denied).
  asio::awaitable<std::optional<live::refusal>> settle_askable_tunnel(
      session::audit_entry& entry, const config::destination& dest, config::verdict& verdict);
  // A captured connection: its target is the address it dialed (the name a synthetic address
  // was given to, or a literal IP); no CONNECT line to read and no 200 to send.
  asio::awaitable<void> handle_captured();
  // The target of a captured connection; nullopt when it dialed a synthetic address that was
  // never handed out (`address` then holds it as text).
  std::optional<config::destination> captured_target(std::string& address) const;
  // The CONNECT answered (unless captured) and the bytes relayed both ways until either side
  // ends, a byte budget closing it when spent; then the tunnel's record.
  asio::awaitable<void> relay_to(http_exchange& ex, tcp::socket& upstream);
  // Charges a tunnel's bytes to the budget as they move; returns when a byte budget is spent.
  asio::awaitable<void> watch_tunnel_budget();
  // Answers a CONNECT with 200 and sets up what is inside it (TLS or plain HTTP); false when the
  // connection cannot go on (the client left, its TLS handshake failed).
  // `http2`: the client may choose h2 (ALPN); a rule's "http2": false keeps it on HTTP/1.1.
  asio::awaitable<bool> start_interception(const config::destination& dest,
                                           std::optional<live::refusal> refused, bool http2 = true);
  asio::awaitable<next_step> handle_intercepted(http::parser& request);
  // An intercepted connection whose client chose HTTP/2: served to its end by an h2_connection.
  asio::awaitable<void> serve_h2();
  asio::awaitable<next_step> handle_forward(http::parser& request);
  // The exchange for the request (or CONNECT) whose head was just read; the one before it ends.
  http_exchange& begin_exchange(std::string method);
  const live::timeouts& timeouts() const { return ctx_->options().timeouts; }

  stream client_;
  std::shared_ptr<live::live_session> ctx_;
  // The context the listener gave: ctx_ too, except on a gateway, where ctx_ is the session.
  const std::shared_ptr<live::live_session> listener_ctx_;
  const std::uint64_t connection_id_;
  upstream_pool& pool_;
  session::log_tag tag_;
  read_buffer in_;
  live::connection_deadline deadline_;
  bool draining_ = false;
  // What an exchange reads its request body from and answers through.
  h1_client_side h1_{client_, in_, deadline_, ctx_, draining_};
  std::optional<interception> intercept_;
  h2_connection* h2_ = nullptr;  // while serve_h2() runs
  // The exchange in flight, so a deadline that fires mid-exchange can still answer and audit it.
  std::optional<http_exchange> exchange_;
  bool cut_short_ = false;
  const bool captured_;
  std::optional<tcp::endpoint> dialed_;  // captured: the address and port the client dialed
  // The processes holding the client's socket (wrap); null when unknown.
  std::shared_ptr<const config::client_identity> holders_;
};

}  // namespace broker::proxy
