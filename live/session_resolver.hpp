// A team gateway's sessions, as the proxy sees them (docs/gateway.md): which session a client's
// request belongs to, from its Proxy-Authorization. The gateway (gateway/) implements it; a
// context that has one is the gateway's own, and every client connection is bound to the
// session its credential names before anything else happens.
#pragma once

#include <memory>
#include <optional>

#include "base/asio.hpp"
#include "http/message.hpp"
#include "live/refusal.hpp"

namespace broker::live {

class live_session;

struct resolution {
  std::shared_ptr<live_session> session;  // set when the credential names a live session
  std::optional<refusal> refused;         // otherwise: 407 proxy_auth_required, 503 ...
};

class session_resolver {
 public:
  virtual ~session_resolver() = default;
  // The session of a request head (a CONNECT or an absolute-form request) from its
  // Proxy-Authorization. Never throws for what the client sent.
  virtual asio::awaitable<resolution> resolve(const http::message_head& head) = 0;
};

}  // namespace broker::live
