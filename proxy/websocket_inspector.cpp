#include "proxy/websocket_inspector.hpp"

#include <nlohmann/json.hpp>

#include "base/secret.hpp"

namespace broker::proxy {

namespace ws = http::websocket;

namespace {

std::shared_ptr<const brokers::scrub_index> index_of(
    const std::vector<brokers::scrub_pattern>& patterns) {
  if (patterns.empty()) return nullptr;
  return std::make_shared<const brokers::scrub_index>(patterns);
}

bool is_data(ws::opcode op) {
  return op == ws::opcode::text || op == ws::opcode::binary;
}

// The broker is the upstream's client now: its connection goes away with the client's.
constexpr std::uint16_t close_going_away = 1001;
// The broker could not record what happened (the audit log failed): RFC 6455 §7.4.1's "an
// unexpected condition".
constexpr std::uint16_t close_internal_error = 1011;
// The broker holds as many message bytes as it may; RFC 6455 §11.7's registry: try again later.
constexpr std::uint16_t close_try_again_later = 1013;

std::string protocol_error_code(std::uint16_t close_code) {
  return close_code == ws::close_too_big ? "websocket_message_too_big" : "websocket_protocol_error";
}

}  // namespace

websocket_inspector::websocket_inspector(websocket_checks checks, websocket_hooks hooks)
    : checks_(std::move(checks)),
      hooks_(std::move(hooks)),
      client_(true, ws::limits{checks_.max_message}),
      server_(false, ws::limits{checks_.max_message}),
      outbound_index_(checks_.outbound ? index_of(checks_.outbound->patterns()) : nullptr),
      inbound_index_(index_of(checks_.inbound)) {
  if (checks_.llm != session::llm_api::none) meter_.emplace(checks_.llm);
}

websocket_inspector::~websocket_inspector() = default;

void websocket_inspector::from_client(std::string_view bytes, std::string& to_upstream) {
  if (ending_) return;
  client_.feed(bytes);
  while (auto m = client_.next()) {
    client_message(*m, to_upstream);
    base::wipe(m->payload);  // it may have carried a real value, refused or not
    if (ending_) return;
  }
  if (client_.failed()) end_for_protocol(client_);
}

void websocket_inspector::from_server(std::string_view bytes, std::string& to_client) {
  if (ending_) return;
  server_.feed(bytes);
  while (auto m = server_.next()) {
    server_message(*m, to_client);
    if (ending_) return;
  }
  if (server_.failed()) end_for_protocol(server_);
}

void websocket_inspector::client_message(ws::message& m, std::string& to_upstream) {
  // Control frames are checked too: a ping's or a close's payload can carry 123 bytes out.
  std::string credential;
  if (auto refused = outbound_refusal(m.payload, credential)) {
    end_for(std::move(*refused), std::move(credential));
    return;
  }
  // Binary messages too: what the API might read as a request is admitted as one.
  if (meter_ && is_data(m.type) && session::is_llm_request_message(checks_.llm, m.payload)) {
    if (auto refused = hooks_.admit_llm_request ? hooks_.admit_llm_request() : std::nullopt) {
      // The client reads why before the close, as it would read a 429's body.
      end_for(*refused, {}, ws::encode_frame(ws::opcode::text, websocket_error_event(*refused)));
      return;
    }
    meter_->set_request_bytes(m.payload.size());
  }
  to_upstream += ws::encode_frame(m.type, m.payload, hooks_.mask_key());
  if (is_data(m.type)) ++messages_out_;
  if (m.type == ws::opcode::close) client_closed_ = true;
}

void websocket_inspector::server_message(ws::message& m, std::string& to_client) {
  if (inbound_index_) brokers::scrub_value(m.payload, *inbound_index_);
  if (is_data(m.type)) {
    ++messages_in_;
    // Metered as the client sees it: a real value replaced by its dummy changes no count.
    if (meter_ && m.type == ws::opcode::text) {
      if (auto usage = meter_->feed(m.payload); usage && hooks_.llm_usage) {
        if (!hooks_.llm_usage(*usage)) {
          ending_.emplace();
          ending_->error = "audit_unavailable";
          const auto close = ws::close_payload(close_internal_error, "audit_unavailable");
          ending_->to_client = ws::encode_frame(ws::opcode::close, close);
          ending_->to_upstream = ws::encode_frame(ws::opcode::close, close, hooks_.mask_key());
          return;
        }
      }
    }
  }
  to_client += ws::encode_frame(m.type, m.payload);
  if (m.type == ws::opcode::close) server_closed_ = true;
}

std::optional<live::refusal> websocket_inspector::outbound_refusal(std::string_view payload,
                                                                   std::string& credential) {
  if (!outbound_index_ || payload.empty()) return std::nullopt;
  cursor_.reset(*outbound_index_);
  const auto match = outbound_index_->find(payload, 0, cursor_);
  if (!match) return std::nullopt;
  auto decision = checks_.outbound->decision(match->pattern);
  if (!decision.refused()) return std::nullopt;
  // The scan's findings say "body"; here the body is a message.
  if (decision.where.starts_with("body")) decision.where.replace(0, 4, "a WebSocket message");
  credential = decision.credential;
  return live::refusal::of(decision, checks_.host, checks_.plaintext);
}

void websocket_inspector::end_overloaded() {
  if (ending_) return;
  ending_.emplace();
  ending_->error = "overloaded";
  const auto close = ws::close_payload(close_try_again_later, "overloaded");
  ending_->to_client = ws::encode_frame(ws::opcode::close, close);
  ending_->to_upstream = ws::encode_frame(ws::opcode::close, close, hooks_.mask_key());
}

void websocket_inspector::end_for_protocol(const ws::reader& r) {
  ending_.emplace();
  ending_->error = protocol_error_code(r.code());
  // Both sides are told the same: the code and the reader's reason (no payload bytes in it).
  const auto close = ws::close_payload(r.code(), r.error());
  ending_->to_client = ws::encode_frame(ws::opcode::close, close);
  ending_->to_upstream = ws::encode_frame(ws::opcode::close, close, hooks_.mask_key());
}

void websocket_inspector::end_for(live::refusal r, std::string credential,
                                  std::string client_first) {
  ending_.emplace();
  ending_->error = r.code;
  ending_->to_client = std::move(client_first);
  ending_->to_client +=
      ws::encode_frame(ws::opcode::close, ws::close_payload(ws::close_policy_violation, r.code));
  ending_->to_upstream = ws::encode_frame(
      ws::opcode::close, ws::close_payload(close_going_away, ""), hooks_.mask_key());
  ending_->refused = std::move(r);
  ending_->credential = std::move(credential);
}

std::string websocket_error_event(const live::refusal& r) {
  nlohmann::ordered_json error = {{"type", r.code}, {"code", r.code}, {"message", r.message}};
  if (!r.budget.empty()) {
    error["budget"] = r.budget;
    error["limit"] = r.limit;
    error["used"] = r.used;
  }
  const nlohmann::ordered_json event = {{"type", "error"}, {"error", std::move(error)}};
  return event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace broker::proxy
