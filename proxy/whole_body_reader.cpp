#include "proxy/whole_body_reader.hpp"

#include <algorithm>

#include "brokers/scrubber.hpp"
#include "proxy/body_search.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/limits.hpp"
#include "proxy/relay_errors.hpp"

namespace broker::proxy {

whole_body_reader::whole_body_reader(http_exchange& ex) : s_(ex.state()) {}

// The body as it grows: what it may reach, what it holds of the allowance, and its search.
struct whole_body_reader::body_reading {
  std::size_t limit;
  std::string_view why;
  std::size_t reserved;
  body_search& search;
  const brokers::body_scan& checks;  // what a stop's pattern names
  const brokers::request_context& where;
};

asio::awaitable<std::optional<live::refusal>> whole_body_reader::read(
    http::message_head& head, const brokers::request_context& where,
    const brokers::whole_body_need& need) {
  const auto& credentials = s_.io.ctx.credentials();
  const brokers::body_scan checks = credentials.request_body_scan(where);
  brokers::stream_scrubber scan(checks.patterns());  // views into `checks`
  body_search search(scan, s_.body_codings);         // a coded body (an AWS payload) as it was sent
  body_reading reading{
      need.limit, need.why, head.content_length.value_or(limits::relay_buffer_bytes),
      search,     checks,   where};
  if (head.content_length > need.limit)
    co_return live::refusal::bad_request(whole_body_too_large(reading));
  // Every byte held is counted against the process-wide allowance before it is taken.
  held_bytes hold;
  if (!hold.hold(reading.reserved)) co_return live::refusal::bodies_held_exhausted(need.why);
  if (head.has_token("expect", "100-continue")) {
    // The client waits for a go-ahead before it sends the body; the upstream cannot give it
    // (nothing was sent there yet), so the broker does, and the upstream sees a plain request.
    http::message_head go_ahead;
    go_ahead.status = 100;
    go_ahead.reason = "Continue";
    co_await s_.io.client.send_interim(go_ahead);
    std::erase_if(head.headers,
                  [](const http::header_field& h) { return http::iequals(h.name, "expect"); });
  }
  s_.body.emplace(std::string(), std::move(hold)).bytes.reserve(reading.reserved);
  std::optional<live::refusal> refused;
  try {
    refused = co_await read_body_into(reading);
  } catch (const body_error& e) {  // the client's stream: malformed, or ended mid-body
    refused = live::refusal::bad_request(std::string("malformed request body: ") + e.what());
  }
  if (refused) s_.body.reset();
  co_return refused;
}

asio::awaitable<std::optional<live::refusal>> whole_body_reader::read_body_into(body_reading& r) {
  std::string& body = s_.body->bytes;
  for (;;) {
    const auto piece = co_await s_.io.client.read_body(true);
    // What the body holds once this piece is through the search (it holds back at most the
    // rest of what it was fed).
    const std::size_t total = body.size() + r.search.held() + piece.data.size();
    if (total > r.limit)
      co_return live::refusal::bad_request("malformed request body: " + whole_body_too_large(r));
    if (total > r.reserved) {
      r.reserved = std::min(r.limit, std::max(total, 2 * r.reserved));
      if (!s_.body->hold.hold(r.reserved)) co_return live::refusal::bodies_held_exhausted(r.why);
      body.reserve(r.reserved);
    }
    if (auto stop = r.search.feed(piece.data, piece.last, body)) co_return stopped(r, *stop);
    if (piece.last) co_return std::nullopt;
  }
}

live::refusal whole_body_reader::stopped(const body_reading& r, const search_stop& stop) {
  if (const auto* answer = std::get_if<live::refusal>(&stop)) return *answer;
  const auto decision = r.checks.decision(std::get<std::size_t>(stop));
  s_.entry.credential = decision.credential;
  return live::refusal::of(decision, s_.entry.host, r.where.plaintext);
}

std::string whole_body_reader::whole_body_too_large(const body_reading& r) {
  return "this request's body must be read whole (" + std::string(r.why) +
         "), and such bodies are limited to " + std::to_string(r.limit) + " bytes";
}

}  // namespace broker::proxy
