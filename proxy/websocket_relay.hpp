// An upgraded connection (docs/security-model.md): the 101 checked and passed on, then the
// WebSocket relayed message by message through a websocket_inspector, one pump per direction, until
// either side ends it, the idle deadline passes, or the inspector ends it (a value that must not
// leave, a spent budget, a protocol error), when each side is sent its close. What the client
// pipelined behind its upgrade request waited in its buffer until the 101 and is read as frames
// like the rest. One record per connection (messages and bytes each way), one more per metered LLM
// response.
#pragma once

#include "base/asio.hpp"
#include "proxy/client_side.hpp"

namespace broker::http {
struct message_head;
}

namespace broker::proxy {

class http_exchange;
struct exchange_state;

class websocket_relay {
 public:
  // The exchange's WebSocket half: its steps, and its state (http_exchange::state()).
  explicit websocket_relay(http_exchange& ex);

  // The WebSocket the request asked for, agreed to with `head` (a 101), relayed to its end: the
  // connection is handed over. Any other upgrade, or a 101 agreeing to an extension, is refused.
  asio::awaitable<next_step> run(const http::message_head& head);

 private:
  asio::awaitable<void> relay(client_side::raw_connection client);

  http_exchange& ex_;
  exchange_state& s_;
};

}  // namespace broker::proxy
