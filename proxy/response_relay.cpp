// The response's half of an exchange (response_relay.hpp).
#include "proxy/response_relay.hpp"

#include <spdlog/spdlog.h>

#include "brokers/scrub_index.hpp"
#include "brokers/scrubber.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/limits.hpp"
#include "proxy/relay_errors.hpp"
#include "proxy/websocket_relay.hpp"
#include "session/llm_usage.hpp"

namespace broker::proxy {

response_relay::response_relay(http_exchange& ex) : ex_(ex), s_(ex.state()) {}

asio::awaitable<next_step> response_relay::run(const std::string& method, bool client_keep_alive) {
  const auto response = co_await read_final_head(method);
  if (!response.head) co_return next_step::close;
  const http::message_head& head = *response.head;
  if (head.status == 101) co_return co_await websocket_relay(ex_).run(head);
  if (auto refused = coded_body_refusal(head)) co_return co_await ex_.refuse(*refused, false);
  // A body delimited by the upstream's close is delimited the same way for the client.
  const bool until_close = head.has_body && !head.chunked && !head.content_length;
  const bool keep_client = client_keep_alive && !until_close && s_.io.client.keep_alive();
  const auto next = keep_client ? next_step::keep_alive : next_step::close;
  if (const std::size_t limit = s_.plan ? s_.plan->response_whole_body(head.status) : 0;
      limit > 0 && !response.complete) {
    co_return co_await relay_rewritten_body(*response.head, limit, keep_client) ? next
                                                                                : next_step::close;
  }
  s_.response_started = true;
  s_.entry.status = head.status;

  if (response.complete) {
    s_.upstream_reusable = true;
    // Nothing of the response has gone out: the client is told why it gets none.
    if (!ex_.finish(head.status, true))
      co_return co_await ex_.refuse(live::refusal::audit_unavailable(), false);
    co_await s_.io.client.send_head(head, keep_client, true);
  } else {
    co_await s_.io.client.send_head(head, keep_client, false);
    auto meter = usage_meter(head);
    co_await relay_body(head, meter ? &*meter : nullptr);
  }
  co_return next;
}

asio::awaitable<upstream_side::response_head> response_relay::read_final_head(
    const std::string& method) {
  using failure = upstream_side::response_head::failure;
  auto& up = *s_.upstream;
  int interim = 0;
  for (;;) {
    auto response = co_await up.read_head(method);
    if (response.failed == failure::malformed) {
      co_await ex_.refuse(live::refusal::upstream_protocol_error(
                              s_.entry.host, "malformed response: " + response.detail),
                          false);
      co_return upstream_side::response_head{};
    }
    if (response.failed == failure::closed) {
      co_await ex_.refuse(
          live::refusal::upstream_unreachable(s_.entry.host, "connection closed before a response"),
          false);
      co_return upstream_side::response_head{};
    }
    if (!response.head) co_return response;  // the request body failed first
    auto& head = *response.head;
    scrub_head(head);
    if (head.status >= 200) co_return response;
    // Each interim response re-arms the deadline; a bound keeps an upstream from holding the
    // exchange open forever with them.
    if (++interim > limits::max_interim_responses) {
      co_await ex_.refuse(
          live::refusal::upstream_protocol_error(s_.entry.host, "too many interim responses"),
          false);
      co_return upstream_side::response_head{};
    }
    if (head.status == 101) co_return response;  // nothing HTTP follows it
    co_await s_.io.client.send_interim(head);
  }
}

asio::awaitable<bool> response_relay::relay_rewritten_body(http::message_head& head,
                                                           std::size_t limit, bool keep_client) {
  auto& up = *s_.upstream;
  std::string body;  // holds new real values until rewritten
  const base::wipe_on_exit wipe_body([&body] { base::wipe(body); });
  for (;;) {
    const auto piece = co_await up.read_body(true);
    body.append(piece.data);
    if (body.size() > limit) throw upstream_error("token response larger than the broker reads");
    if (piece.last) break;
  }
  s_.plan->rewrite_response(head.status, body);
  // Real values the rewrite did not know of are still scrubbed.
  std::string scrubbed;
  if (!s_.scrub_patterns.empty()) {
    brokers::stream_scrubber scrub(s_.scrub_patterns);
    scrub.feed(body, scrubbed);
    scrub.finish(scrubbed);
    base::wipe(body);
    body.swap(scrubbed);
  }
  std::erase_if(head.headers, [](const http::header_field& h) {
    return http::iequals(h.name, "content-length") || http::iequals(h.name, "transfer-encoding");
  });
  head.headers.push_back({"Content-Length", std::to_string(body.size())});
  head.chunked = false;
  head.content_length = body.size();
  s_.response_started = true;
  s_.upstream_reusable = true;
  if (!ex_.finish(head.status, true)) {
    co_await ex_.refuse(live::refusal::audit_unavailable(), false);
    co_return false;
  }
  co_await s_.io.client.send_head(head, keep_client, false);
  co_await s_.io.client.send_body(body, true);
  co_return true;
}

std::optional<live::refusal> response_relay::coded_body_refusal(
    const http::message_head& head) const {
  if (!head.has_body || s_.scrub_patterns.empty()) return std::nullopt;
  const std::string coding = http::coded_body(head);
  if (coding.empty()) return std::nullopt;
  // It was asked for identity; a coded body could carry a real value past the scrubber.
  return live::refusal::upstream_protocol_error(
      s_.entry.host, "compressed or coded response (" + coding +
                         ") to a request that asked for identity; the broker scrubs "
                         "real values from responses and cannot read through a coding");
}

std::optional<session::llm_usage_meter> response_relay::usage_meter(
    const http::message_head& head) const {
  std::optional<session::llm_usage_meter> meter;
  if (s_.llm == session::llm_api::none || head.status < 200 || head.status >= 300) return meter;
  const std::string* type = head.find("content-type");
  meter.emplace(s_.llm, type ? std::string_view(*type) : std::string_view());
  meter->set_request_bytes(s_.entry.bytes_out);
  return meter;
}

// A response body on its way down: what it passes through, and the buffers it reuses from one
// piece to the next.
struct response_relay::body_relay {
  const http::message_head& head;
  session::llm_usage_meter* meter;                // null when the body is not metered
  std::optional<brokers::stream_scrubber> scrub;  // empty when there is nothing to scrub
  bool as_framed;  // the upstream's bytes go to the client as they came, framing and all
  std::string released;
};

asio::awaitable<void> response_relay::relay_body(const http::message_head& head,
                                                 session::llm_usage_meter* meter) {
  auto& up = *s_.upstream;
  body_relay body{head, meter, std::nullopt, false, {}};
  if (!s_.scrub_patterns.empty()) body.scrub.emplace(s_.scrub_patterns);
  body.as_framed = !body.scrub && s_.io.client.carries_wire() && up.carries_wire();
  const bool decode = body.scrub || body.meter || !body.as_framed;
  for (;;) {
    // The head goes out with the first body bytes when they are already here (one write, one
    // TLS record, one wake-up of the client); with nothing to go with, alone rather than wait.
    if (!up.has_buffered()) co_await s_.io.client.flush();
    const auto piece = co_await up.read_body(decode);
    co_await relay_piece(body, piece);
    if (piece.last) {
      // Only a body read whole to its framed end leaves the connection fit for another request.
      s_.upstream_reusable = !piece.at_close;
      co_return;
    }
  }
}

asio::awaitable<void> response_relay::relay_piece(body_relay& b,
                                                  const upstream_side::body_piece& piece) {
  if (b.meter) {
    b.meter->feed(piece.data);
    if (piece.last) account_llm_usage(*b.meter);
  }
  // The record is written before the response completes (docs/audit-log.md).
  if (piece.last && !ex_.finish(b.head.status, true)) throw audit_failed();
  if (b.as_framed && !piece.at_close) {
    co_await s_.io.client.send_wire(piece.wire);
    co_return;
  }
  const bool trailers = piece.trailers != nullptr;
  if (!b.scrub) {
    co_await s_.io.client.send_body(piece.data, piece.last && !trailers);
  } else {
    b.released.clear();
    b.scrub->feed(piece.data, b.released);
    if (piece.last) b.scrub->finish(b.released);
    co_await s_.io.client.send_body(b.released, piece.last && !trailers);
  }
  if (trailers) {
    auto fields = *piece.trailers;
    scrub_fields(fields);
    co_await s_.io.client.send_trailers(fields);
  }
}

void response_relay::account_llm_usage(session::llm_usage_meter& meter) {
  const auto usage = meter.finish();
  s_.entry.llm_tokens = usage.total();
  s_.entry.llm_estimated = usage.estimated;
  if (auto* budget = s_.io.ctx.budget())
    s_.entry.llm_cost_usd =
        budget->add_llm_usage(s_.entry.host, usage.model, usage.input_tokens, usage.output_tokens);
}

void response_relay::scrub_head(http::message_head& head) const {
  if (s_.scrub_patterns.empty()) return;
  // One index for the whole head: the values are short, searched pattern by pattern (direct).
  const brokers::scrub_index index(s_.scrub_patterns, brokers::scrub_index::search::direct);
  brokers::scrub_value(head.reason, index);
  scrub_fields(head.headers, index);
}

void response_relay::scrub_fields(std::vector<http::header_field>& fields) const {
  if (s_.scrub_patterns.empty()) return;
  scrub_fields(fields,
               brokers::scrub_index(s_.scrub_patterns, brokers::scrub_index::search::direct));
}

void response_relay::scrub_fields(std::vector<http::header_field>& fields,
                                  const brokers::scrub_index& index) {
  for (auto& h : fields) {
    brokers::scrub_value(h.name, index);
    brokers::scrub_value(h.value, index);
  }
}

}  // namespace broker::proxy
