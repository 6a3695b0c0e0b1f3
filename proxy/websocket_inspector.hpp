// What the broker does to each message of an upgraded (WebSocket) connection
// (docs/security-model.md), apart from the sockets (websocket_relay.cpp moves the bytes): both
// directions are read as frames (http/websocket.hpp) and written again message by message. A client
// message, text or binary, whole after its fragments are joined, and every control frame the client
// sends, is searched for what an HTTP request body to the same destination must not carry (real
// values, dummies of credentials not bound there, in their encoded forms); a hit ends the
// connection with 1008 before any byte of that message leaves. Server messages have real values
// replaced by their dummies (same length). On an LLM API WebSocket each request message is admitted
// by the budget and each response's usage is metered. Frame boundaries may change (a message goes
// as one frame); messages, their order and their opcodes do not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/credential_set.hpp"
#include "http/websocket.hpp"
#include "live/refusal.hpp"
#include "proxy/limits.hpp"
#include "session/llm_usage.hpp"

namespace broker::proxy {

// What the connection is checked for, fixed when it is upgraded.
struct websocket_checks {
  // What a client message must not carry (credential_set::request_body_scan for the
  // destination); null when the session has no credentials. Outlives the inspector.
  const brokers::body_scan* outbound = nullptr;
  std::string host;  // the destination, for the refusal's message
  bool plaintext = false;
  // Real value → dummy, for the server's messages (views that outlive the inspector).
  std::vector<brokers::scrub_pattern> inbound;
  session::llm_api llm = session::llm_api::none;
  std::size_t max_message = limits::max_websocket_message;
};

// What the inspector asks of the connection around it.
struct websocket_hooks {
  // A fresh, unpredictable masking key for each frame sent upstream (RFC 6455 §5.3).
  std::function<std::uint32_t()> mask_key;
  // A client message asks the LLM API for a response: the refusal when the budget says no.
  std::function<std::optional<live::refusal>()> admit_llm_request;
  // A response ended with this usage: metered and recorded by the caller; false when its
  // record could not be written (the connection then ends).
  std::function<bool(const session::llm_usage&)> llm_usage;
};

// How the inspector ended the connection, and what each side is told.
struct websocket_ending {
  std::string to_client;    // frames for the client: an error event where one is due, a close
  std::string to_upstream;  // a close frame, masked
  std::string error;        // the audit record's error code
  // A refusal of the client's traffic (a value that must not leave, a spent budget), recorded
  // as its HTTP counterpart is; unset for a protocol error.
  std::optional<live::refusal> refused;
  std::string credential;  // the credential a refused value belongs to
};

class websocket_inspector {
 public:
  websocket_inspector(websocket_checks checks, websocket_hooks hooks);
  ~websocket_inspector();
  websocket_inspector(const websocket_inspector&) = delete;
  websocket_inspector& operator=(const websocket_inspector&) = delete;

  // Bytes read from the client (split anywhere): the messages completed by them that pass,
  // appended to `to_upstream` as masked frames. Once ending() is set, nothing more passes.
  void from_client(std::string_view bytes, std::string& to_upstream);
  // Bytes read from the upstream: the messages completed by them, scrubbed, appended to
  // `to_client` as unmasked frames.
  void from_server(std::string_view bytes, std::string& to_client);

  // Ends the connection from outside (1013, try again later): the process holds as many
  // message bytes as it may (limits::max_held_body_bytes).
  void end_overloaded();
  const std::optional<websocket_ending>& ending() const { return ending_; }
  // Both sides have sent their close frame (RFC 6455 §7.1.2): nothing more may follow.
  bool closed() const { return client_closed_ && server_closed_; }
  // Data messages passed on each way (control frames not counted).
  std::uint64_t messages_out() const { return messages_out_; }
  std::uint64_t messages_in() const { return messages_in_; }
  // Bytes read and not yet part of a whole message, each way.
  std::size_t pending_from_client() const { return client_.pending(); }
  std::size_t pending_from_server() const { return server_.pending(); }

 private:
  void client_message(http::websocket::message& m, std::string& to_upstream);
  void server_message(http::websocket::message& m, std::string& to_client);
  // The client's message carries a value that must not leave: the refusal, if so.
  std::optional<live::refusal> outbound_refusal(std::string_view payload, std::string& credential);
  void end_for_protocol(const http::websocket::reader& r);
  void end_for(live::refusal r, std::string credential, std::string client_first = {});

  websocket_checks checks_;
  websocket_hooks hooks_;
  http::websocket::reader client_, server_;
  std::shared_ptr<const brokers::scrub_index> outbound_index_, inbound_index_;
  brokers::scrub_index::cursor cursor_;
  std::optional<session::llm_message_meter> meter_;
  std::optional<websocket_ending> ending_;
  bool client_closed_ = false;
  bool server_closed_ = false;
  std::uint64_t messages_out_ = 0;
  std::uint64_t messages_in_ = 0;
};

// The Responses API's error event for a refused request message, in docs/cli.md's words:
// {"type":"error","error":{"type":CODE,"code":CODE,"message":...}} (and the budget's name, limit
// and use for budget_exhausted).
std::string websocket_error_event(const live::refusal& r);

}  // namespace broker::proxy
