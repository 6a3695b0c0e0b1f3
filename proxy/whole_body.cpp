// A request body read whole before anything of the request goes upstream, when its credential
// plan asks for it (request_plan::whole_body): searched like a streamed one, bounded by the
// plan's limit and by the process-wide allowance for bodies held (held_bytes).
#include <algorithm>

#include "brokers/scrubber.hpp"
#include "proxy/body_search.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/limits.hpp"
#include "proxy/relay_errors.hpp"

namespace broker::proxy {

asio::awaitable<std::optional<refusal>> http_exchange::read_whole_body(
    http::parser& request, const brokers::request_context& where,
    const brokers::whole_body_need& need) {
  const std::size_t limit = need.limit;
  const auto& credentials = io_.ctx.credentials();
  const brokers::body_scan checks = credentials.request_body_scan(where);
  brokers::stream_scrubber scan(checks.patterns());  // views into `checks`
  body_search search(scan, body_codings_);           // a coded body (an AWS payload) as it was sent
  auto& head = request.head();
  const std::string too_large = "this request's body must be read whole (" + std::string(need.why) +
                                "), and such bodies are limited to " + std::to_string(limit) +
                                " bytes";
  if (head.content_length > limit) co_return refusal::bad_request(too_large);
  // Every byte held is counted against the process-wide allowance before it is taken.
  std::size_t reserved = head.content_length.value_or(limits::relay_buffer_bytes);
  held_bytes hold;
  if (!hold.hold(reserved)) co_return refusal::bodies_held_exhausted(need.why);
  if (head.has_token("expect", "100-continue")) {
    // The client waits for a go-ahead before it sends the body; the upstream cannot give it
    // (nothing was sent there yet), so the broker does, and the upstream sees a plain request.
    co_await write_client("HTTP/1.1 100 Continue\r\n\r\n");
    std::erase_if(head.headers,
                  [](const http::header_field& h) { return http::iequals(h.name, "expect"); });
  }
  auto& whole = body_.emplace(std::string(), std::move(hold));
  std::string& body = whole.bytes;
  body.reserve(reserved);
  std::string decoded;
  bool exhausted = false;
  try {
    for (;;) {
      if (!io_.in.empty()) {
        decoded.clear();
        const auto r = request.feed(io_.in.view(), &decoded);
        if (r.status == http::parse_status::error) throw body_error(request.error_reason());
        io_.in.consume(r.consumed);
        // What the body holds once this piece is through the scan (it holds back at most
        // the rest of what it was fed).
        const std::size_t total = body.size() + search.held() + decoded.size();
        if (total > limit) throw body_error(too_large);
        if (total > reserved) {
          reserved = std::min(limit, std::max(total, 2 * reserved));
          if (!whole.hold.hold(reserved)) {
            exhausted = true;
            break;
          }
          body.reserve(reserved);
        }
        const bool last = r.status == http::parse_status::message_complete;
        search.feed(decoded, last, body);
        if (last) break;
      }
      io_.timer.arm(timeouts().body, waiting_for::request_body);
      auto [ec, n] = co_await io_.client.read_some(io_.in.space());
      if (ec) throw body_error("client closed the connection mid-body");
      io_.in.commit(n);
    }
  } catch (const value_in_body& e) {
    body_.reset();
    const auto decision = checks.decision(e.pattern);
    entry_.credential = decision.credential;
    co_return refusal::of(decision, entry_.host, where.plaintext);
  } catch (const body_error& e) {
    body_.reset();
    co_return refusal::bad_request(std::string("malformed request body: ") + e.what());
  } catch (const body_unreadable& e) {
    body_.reset();
    co_return e.answer;
  }
  if (exhausted) {
    body_.reset();
    co_return refusal::bodies_held_exhausted(need.why);
  }
  co_return std::nullopt;
}

}  // namespace broker::proxy
