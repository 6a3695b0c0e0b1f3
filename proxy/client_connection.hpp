// One client connection's router (nghttpx's ClientHandler): its HTTP/1.1 requests are served by
// an h1_request_loop until a CONNECT comes, which is refused, tunnelled or intercepted (TLS
// toward the client with a leaf for the host, then each request inside served as the loop or an
// h2_connection serves it). A captured connection (a wrap child that dialed directly,
// docs/architecture.md) is served as if it had sent a CONNECT to the address it dialed.
#pragma once

#include <memory>
#include <optional>

#include "base/asio.hpp"
#include "live/live_session.hpp"
#include "live/refusal.hpp"
#include "proxy/client_parts.hpp"
#include "proxy/h1_request_loop.hpp"
#include "proxy/h2_connection.hpp"
#include "proxy/interception.hpp"
#include "proxy/upstream_pool.hpp"
#include "session/log.hpp"

namespace broker::proxy {

class client_connection : public std::enable_shared_from_this<client_connection> {
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
  asio::any_io_executor executor() { return c_.client.get_executor(); }
  // Bound to the spawn of run(): the deadline cancels the connection's work through it.
  asio::cancellation_slot cancel_slot() { return cancel_.slot(); }
  const session::log_tag& tag() const { return c_.tag; }

 private:
  // Finds the processes holding this connection (wrap sessions), for the audit records and
  // "programs".
  void attribute();
  asio::awaitable<void> serve();
  // The deadline passed while the connection waited for `what`: the exchange under way is
  // recorded (and answered 504 when its upstream was silent before any of the response).
  asio::awaitable<void> expire(live::waiting_for what);
  asio::awaitable<void> handle_connect(const http::message_head& head);
  // The target of a CONNECT (or of a captured connection): refused, tunnelled or intercepted.
  asio::awaitable<void> open_target(http_exchange& ex, const config::destination& dest);
  // A refused CONNECT to a host the other layers tunnel that a person may approve (docs/policy.md):
  // learned (wrap --learn), or held while the session asks. Sets `verdict` allowed (a tunnel)
  // when it goes; returns the refusal when it does not (approval_denied).
  asio::awaitable<std::optional<live::refusal>> settle_askable_tunnel(
      session::audit_entry& entry, const config::destination& dest, config::verdict& verdict);
  // An allowed tunnel: the session's admission, then the upstream dialed and the bytes relayed.
  // `ssh_rule`: an ssh rule's (docs/policy.md, "SSH"), whose record names the keys.
  asio::awaitable<void> open_tunnel(http_exchange& ex, const config::destination& dest,
                                    const config::policy_set& policy, bool ssh_rule);
  // A captured connection: its target is the address it dialed (the name a synthetic address
  // was given to, or a literal IP); no CONNECT line to read and no 200 to send.
  asio::awaitable<void> handle_captured();
  // The CONNECT answered (unless captured) and the bytes relayed both ways until either side
  // ends, a byte budget closing it when spent; then the tunnel's record. An ssh tunnel's record
  // has the server's host key and the key the session's agent signed with (ssh/tunnel_join.hpp).
  asio::awaitable<void> relay_to(http_exchange& ex, tcp::socket& upstream, bool ssh_rule);
  // Charges a tunnel's bytes to the budget as they move; returns when a byte budget is spent.
  asio::awaitable<void> watch_tunnel_budget(session::audit_entry& entry);
  // Answers a CONNECT with 200 and sets up what is inside it (TLS or plain HTTP); false when the
  // connection cannot go on (the client left, its TLS handshake failed).
  // `http2`: the client may choose h2 (ALPN); a rule's "http2": false keeps it on HTTP/1.1.
  asio::awaitable<bool> start_interception(const config::destination& dest,
                                           std::optional<live::refusal> refused, bool http2 = true);
  // An intercepted connection whose client chose HTTP/2: served to its end by an h2_connection.
  asio::awaitable<void> serve_h2();

  client_parts c_;
  // The deadline's expiry emits it (a terminal cancellation of what run() awaits), as an HTTP/2
  // stream's does: a race of serve() with the deadline's watch would keep two more coroutines
  // for the connection's life.
  asio::cancellation_signal cancel_;
  h1_request_loop h1_{c_};
  std::optional<interception> intercept_;
  h2_connection* h2_ = nullptr;          // while serve_h2() runs
  std::optional<tcp::endpoint> dialed_;  // captured: the address and port the client dialed
};

}  // namespace broker::proxy
