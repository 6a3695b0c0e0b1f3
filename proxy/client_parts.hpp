// What one client connection is made of: its stream and buffer, its deadline, the session it
// serves and who holds it. The router (client_connection) owns them; the HTTP/1.1 loop
// (h1_request_loop) works on them while it serves requests.
#pragma once

#include <cstdint>
#include <memory>

#include "base/deadline.hpp"
#include "config/program_identity.hpp"
#include "live/live_session.hpp"
#include "live/timeouts.hpp"
#include "proxy/read_buffer.hpp"
#include "proxy/stream.hpp"
#include "proxy/upstream_pool.hpp"
#include "session/log.hpp"

namespace broker::proxy {

struct client_parts {
  // `pool` belongs to the thread whose io_context owns `socket`.
  client_parts(tcp::socket socket, std::shared_ptr<live::live_session> context,
               upstream_pool& upstreams, bool accepted_captured)
      : client(std::move(socket)),
        ctx(context),
        listener_ctx(std::move(context)),
        id(ctx->counters().next_connection_id()),
        pool(upstreams),
        tag(ctx->session_id(), id),
        deadline(client.get_executor()),
        captured(accepted_captured) {}

  const live::timeouts& timeouts() const { return ctx->options().timeouts; }

  stream client;
  // The session served: the listener's, except on a gateway, where it is the one the request's
  // proxy credential names (h1_request_loop binds it).
  std::shared_ptr<live::live_session> ctx;
  const std::shared_ptr<live::live_session> listener_ctx;
  const std::uint64_t id;
  upstream_pool& pool;
  session::log_tag tag;
  read_buffer in;
  live::connection_deadline deadline;
  bool draining = false;   // ends after the current exchange
  bool cut_short = false;  // ended at once: the exchange under way is audited as cut short
  // Accepted on the transparent-capture listener: the address the client dialed is the target.
  const bool captured;
  // The processes holding the client's socket (wrap); null when unknown.
  std::shared_ptr<const config::client_identity> holders;
};

}  // namespace broker::proxy
