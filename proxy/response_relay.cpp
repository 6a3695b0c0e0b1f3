// The response's half of an exchange (response_relay.hpp).
#include "proxy/response_relay.hpp"

#include <spdlog/spdlog.h>

#include "base/text.hpp"
#include "brokers/scrub_index.hpp"
#include "brokers/scrubber.hpp"
#include "mcp/answer_filter.hpp"
#include "proxy/held_bytes.hpp"
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
  // An MCP server's event stream is filtered as it passes (relay_body): its length changes.
  if (mcp_event_stream(*response.head)) reframe_as_chunked(*response.head);
  const http::message_head& head = *response.head;
  if (head.status == 101) co_return co_await websocket_relay(ex_).run(head);
  if (coded_body_refused(head)) co_return co_await refuse_coded_body(head);
  // A body delimited by the upstream's close is delimited the same way for the client.
  const bool until_close = head.has_body && !head.chunked && !head.content_length;
  const bool keep_client = client_keep_alive && !until_close && s_.io.client.keep_alive();
  const auto next = keep_client ? next_step::keep_alive : next_step::close;
  if (const std::size_t limit = whole_body_limit(head); limit > 0 && !response.complete) {
    co_return co_await relay_rewritten_body(*response.head, limit, keep_client) ? next
                                                                                : next_step::close;
  }
  s_.response_started = true;
  s_.entry.status = head.status;

  if (response.complete) {
    s_.upstream_reusable = true;
    // Nothing of the response has gone out: the client is told why it gets none.
    if (!ex_.finish(head.status, true)) co_return co_await refuse_unrecorded();
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

namespace {

bool is_success(const http::message_head& head) {
  return head.status >= 200 && head.status < 300 && head.has_body;
}

// The media type, without parameters, lower-case ("" when none).
std::string media_type(const http::message_head& head) {
  const std::string* type = head.find("content-type");
  if (!type) return {};
  std::string out = base::lower(type->substr(0, type->find(';')));
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  return out;
}

}  // namespace

bool response_relay::mcp_event_stream(const http::message_head& head) const {
  return !s_.mcp.empty() && is_success(head) && media_type(head) == "text/event-stream";
}

void response_relay::reframe_as_chunked(http::message_head& head) {
  std::erase_if(head.headers, [](const http::header_field& h) {
    return http::iequals(h.name, "content-length") || http::iequals(h.name, "transfer-encoding");
  });
  head.headers.push_back({"Transfer-Encoding", "chunked"});
  head.chunked = true;
  head.content_length.reset();
}

std::size_t response_relay::whole_body_limit(const http::message_head& head) const {
  std::size_t limit = s_.plan ? s_.plan->response_whole_body(head.status) : 0;
  // An MCP server's JSON answer is read whole: a tools/list result is filtered.
  if (!s_.mcp.empty() && is_success(head) && media_type(head) == "application/json")
    limit = std::max(limit, mcp::max_message_bytes);
  return limit;
}

asio::awaitable<bool> response_relay::relay_rewritten_body(http::message_head& head,
                                                           std::size_t limit, bool keep_client) {
  auto& up = *s_.upstream;
  std::string body;  // holds new real values until rewritten
  const base::wipe_on_exit wipe_body([&body] { base::wipe(body); });
  held_bytes hold;  // counted against the process's allowance as it grows
  for (;;) {
    const auto piece = co_await up.read_body(true);
    body.append(piece.data);
    if (body.size() > limit)
      throw upstream_error("a response the broker reads whole is larger than it reads");
    if (body.size() > hold.held() &&
        !hold.hold(std::min(limit, std::max(body.size(), 2 * hold.held()))))
      throw upstream_error("the broker holds too many bodies whole at once to read this one");
    if (piece.last) break;
  }
  if (s_.plan) s_.plan->rewrite_response(head.status, body);
  if (!s_.mcp.empty()) {
    std::optional<live::refusal> unreadable;
    try {
      filter_mcp_answer(body);
    } catch (const mcp::unreadable_answer& e) {
      unreadable = live::refusal::upstream_protocol_error(s_.entry.host, e.what());
    }
    if (unreadable) {
      co_await ex_.refuse(*unreadable, false);
      co_return false;
    }
  }
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

asio::awaitable<next_step> response_relay::refuse_coded_body(const http::message_head& head) {
  // It was asked for identity; a coded body could carry a real value past the scrubber.
  const auto refused = live::refusal::upstream_protocol_error(
      s_.entry.host, "compressed or coded response (" + http::coded_body(head) +
                         ") to a request that asked for identity; the broker scrubs "
                         "real values from responses and cannot read through a coding");
  co_return co_await ex_.refuse(refused, false);
}

asio::awaitable<next_step> response_relay::refuse_unrecorded() {
  co_return co_await ex_.refuse(live::refusal::audit_unavailable(), false);
}

bool response_relay::coded_body_refused(const http::message_head& head) const {
  return head.has_body && !s_.scrub_patterns.empty() && !http::coded_body(head).empty();
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

void response_relay::filter_mcp_answer(std::string& body) {
  if (s_.entry.mcp && !s_.mcp_call_id.empty())
    if (auto o = mcp::json_answer_outcome(body, s_.mcp_call_id)) note_outcome(*o);
  const mcp::server_pins pins{&s_.io.ctx.mcp_pins(), s_.mcp_server()};
  std::vector<std::string> changed;
  auto filtered = mcp::filter_json_answer(body, s_.mcp, &pins, &changed);
  if (!filtered) {
    note_tools_hidden(0, changed);  // changed ones kept listed, to be asked about at their calls
    return;
  }
  base::wipe(body);
  body = std::move(*filtered);
  note_tools_hidden(1, changed);  // how many is not told by the whole-body filter; at least one
}

void response_relay::note_outcome(const mcp::call_outcome& o) {
  s_.entry.mcp->outcome = o.outcome;
  s_.entry.mcp->error_code = o.code;
}

void response_relay::note_tools_hidden(std::size_t n, const std::vector<std::string>& changed) {
  if (n == 0 && changed.empty()) return;
  if (!s_.entry.mcp) s_.entry.mcp.emplace();
  s_.entry.mcp->tools_hidden += n;
  auto& all = s_.entry.mcp->tools_changed;
  all.insert(all.end(), changed.begin(), changed.end());
}

// A response body on its way down: what it passes through, and the buffers it reuses while its
// pieces keep coming.
struct response_relay::body_relay {
  const http::message_head& head;
  session::llm_usage_meter* meter;                // null when the body is not metered
  std::optional<brokers::stream_scrubber> scrub;  // empty when there is nothing to scrub
  std::unique_ptr<mcp::sse_filter> mcp;  // an MCP server's event stream (in the frame: 240 B)
  bool as_framed;  // the upstream's bytes go to the client as they came, framing and all
  std::string released;
  std::string filtered;
};

asio::awaitable<void> response_relay::relay_body(const http::message_head& head,
                                                 session::llm_usage_meter* meter) {
  auto& up = *s_.upstream;
  body_relay body{head, meter, std::nullopt, nullptr, false, {}, {}};
  if (!s_.scrub_patterns.empty()) body.scrub.emplace(s_.scrub_patterns);
  if (mcp_event_stream(head))
    body.mcp = std::make_unique<mcp::sse_filter>(
        s_.mcp, mcp::server_pins{&s_.io.ctx.mcp_pins(), s_.mcp_server()},
        s_.entry.mcp ? s_.mcp_call_id : std::string());
  body.as_framed = !body.scrub && !body.mcp && s_.io.client.carries_wire() && up.carries_wire();
  const bool decode = body.scrub || body.meter || body.mcp || !body.as_framed;
  for (;;) {
    // The head goes out with the first body bytes when they are already here (one write, one
    // TLS record, one wake-up of the client); with nothing to go with, alone rather than wait.
    if (!up.has_buffered()) {
      co_await s_.io.client.flush();
      // The next piece may be seconds away (a model's next event): no buffer held meanwhile.
      std::string().swap(body.released);
      std::string().swap(body.filtered);
    }
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
  std::string_view data = piece.data;
  if (b.mcp) {
    // Whole events only, each filtered (mcp/answer_filter.hpp).
    b.filtered.clear();
    const std::size_t hidden = b.mcp->removed();
    const std::size_t changed = b.mcp->changed().size();
    try {
      b.mcp->feed(piece.data, b.filtered);
      if (piece.last) b.mcp->finish(b.filtered);
    } catch (const mcp::unreadable_answer& e) {
      throw upstream_error(e.what());
    }
    if (b.mcp->outcome() && s_.entry.mcp && s_.entry.mcp->outcome.empty())
      note_outcome(*b.mcp->outcome());
    if (b.mcp->removed() > hidden || b.mcp->changed().size() > changed)
      note_tools_hidden(
          b.mcp->removed() - hidden,
          std::vector<std::string>(b.mcp->changed().begin() + changed, b.mcp->changed().end()));
    data = b.filtered;
  }
  // The record is written before the response completes (docs/audit-log.md).
  if (piece.last && !ex_.finish(b.head.status, true)) throw audit_failed();
  if (b.as_framed && !piece.at_close) {
    co_await s_.io.client.send_wire(piece.wire);
    co_return;
  }
  const bool trailers = piece.trailers != nullptr;
  if (!b.scrub) {
    co_await s_.io.client.send_body(data, piece.last && !trailers);
  } else {
    b.released.clear();
    b.scrub->feed(data, b.released);
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
