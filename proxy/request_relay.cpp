#include "proxy/request_relay.hpp"

#include <spdlog/spdlog.h>

#include <array>

#include "base/race.hpp"
#include "base/secret.hpp"
#include "brokers/scrubber.hpp"
#include "proxy/body_search.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/limits.hpp"
#include "proxy/relay_errors.hpp"
#include "proxy/response_relay.hpp"
#include "session/llm_usage.hpp"

namespace broker::proxy {

request_relay::request_relay(http_exchange& ex) : ex_(ex), s_(ex.state()) {}

void request_relay::release_upstream() {
  // Only an upstream whose last response was relayed whole may carry another request.
  if (s_.upstream && s_.upstream_reusable && s_.upstream->reusable())
    s_.upstream->give_back(s_.io.pool);
  s_.upstream.reset();
}

asio::awaitable<next_step> request_relay::run(http::message_head& request,
                                              const std::string& target, const request_target& to,
                                              const brokers::request_context& where) {
  const bool client_keep_alive = s_.io.client.keep_alive();
  s_.upstream->bind(s_.io.timer, ex_.timeouts().upstream, s_.entry);
  s_.io.timer.arm(ex_.timeouts().upstream, live::waiting_for::upstream);
  if (auto ec = co_await s_.upstream->send_head(request, target, to.dest, to.scheme == "https",
                                                s_.websocket))
    co_return co_await refuse_unsent(ec);
  const bool sent_whole = s_.body.has_value();
  if (sent_whole && !co_await send_whole_body()) co_return next_step::close;
  if (request.has_body && !sent_whole) {
    // A body that is not all here, or is large, is pumped up while the response comes down.
    if (!s_.io.client.body_here(limits::inline_request_body_bytes))
      co_return co_await relay_while_pumping(where, client_keep_alive);
    // A small one that is all here (an API call's JSON) goes up first, in a frame gone before
    // the response: this one lives as long as the response, a streamed answer's for minutes.
    if (auto ended = co_await send_body_here(where)) co_return *ended;
  }
  // The request is wholly up: its fields (real values, once swapped) are wiped and let go of
  // rather than held for as long as the response streams.
  for (auto& f : request.headers) base::wipe(f.value);
  std::vector<http::header_field>().swap(request.headers);
  const auto next = co_await response_relay(ex_).run(s_.entry.method, client_keep_alive);
  release_upstream();
  co_return next;
}

asio::awaitable<next_step> request_relay::refuse_unsent(const error_code& ec) {
  s_.upstream.reset();
  co_return co_await ex_.refuse(live::refusal::upstream_unreachable(s_.entry.host, ec.message()),
                                false);
}

asio::awaitable<bool> request_relay::send_whole_body() {
  // Read whole before the head was signed; it goes up in the coding the client sent it in, and
  // is let go of, with its share of the held-bytes allowance, once sent.
  if (auto ec = co_await s_.upstream->send_body(s_.body->bytes, true)) {
    co_await refuse_unsent(ec);
    co_return false;
  }
  if (s_.plan->holds_real()) base::wipe(s_.body->bytes);  // a token request's real refresh token
  s_.body.reset();
  co_return true;
}

struct request_relay::body_scan_state {
  body_scan_state(brokers::body_scan c, const std::vector<http::content_coding>& codings)
      : checks(std::move(c)), scan(checks.patterns()), search(scan, codings) {}
  brokers::body_scan checks;  // the scrubber's patterns view into it: declared first, outlives it
  brokers::stream_scrubber scan;
  body_search search;  // refers to scan
};

std::unique_ptr<request_relay::body_scan_state> request_relay::body_scan(
    const brokers::request_context& where) const {
  const auto& credentials = s_.io.ctx.credentials();
  if (credentials.empty()) return nullptr;
  return std::make_unique<body_scan_state>(credentials.request_body_scan(where), s_.body_codings);
}

asio::awaitable<std::optional<next_step>> request_relay::send_body_here(
    const brokers::request_context& where) {
  auto scan = body_scan(where);
  bool body_done = false;
  std::exception_ptr failed;  // a refused body, answered in a frame of its own (refuse_body)
  try {
    co_await pump_request_body(scan, body_done);
    co_return std::nullopt;
  } catch (...) {
    failed = body_refusal();
  }
  co_return co_await refuse_body(failed, scan.get(), where);
}

asio::awaitable<next_step> request_relay::relay_while_pumping(const brokers::request_context& where,
                                                              bool client_keep_alive) {
  auto scan = body_scan(where);
  bool body_done = false;
  std::exception_ptr failed;  // a refused body, answered in a frame of its own (refuse_body)
  try {
    // Neither side destroys the upstream connection while the other may be using it; it is
    // released here, once both have finished. The pump's frames are freed once the body is
    // through, while the response streams on.
    response_relay response(ex_);
    const next_step next = co_await base::beside(pump_request_body(scan, body_done),
                                                 response.run(s_.entry.method, client_keep_alive));
    if (body_done) {
      release_upstream();
      co_return next;
    }
    // The upstream answered before the body was through; the client's stream cannot be
    // resynchronized, so both connections end here.
    s_.upstream.reset();
    co_return next_step::close;
  } catch (...) {
    failed = body_refusal();
  }
  co_return co_await refuse_body(failed, scan.get(), where);
}

std::exception_ptr request_relay::body_refusal() {
  // Whatever ended the exchange, its upstream is not used again: a client gone left it with the
  // head and what body came (allowed, cut short, no one to answer); a refused body's bytes never
  // went up, so it saw a request that never ends. Let go of here, before any co_await, which a
  // cancelled exchange would not get past.
  s_.upstream.reset();
  try {
    throw;
  } catch (const client_gone&) {
    throw;  // a body_error, but no one is left to answer
  } catch (const value_in_body&) {
  } catch (const body_error&) {
  } catch (const body_unreadable&) {
  } catch (const brokers::body_refused_error&) {
  }
  return std::current_exception();
}

asio::awaitable<next_step> request_relay::refuse_body(std::exception_ptr refused,
                                                      const body_scan_state* scan,
                                                      const brokers::request_context& where) {
  // Once the response has begun, only the connection's end can tell the client.
  std::optional<live::refusal> answer;
  try {
    std::rethrow_exception(refused);
  } catch (const value_in_body& e) {
    if (s_.response_started) throw upstream_error("request body refused mid-response");
    const auto decision = scan->checks.decision(e.pattern);  // thrown before the body was through
    s_.entry.credential = decision.credential;
    answer = live::refusal::of(decision, s_.entry.host, where.plaintext);
  } catch (const body_error& e) {
    if (s_.response_started) throw;
    answer = live::refusal::bad_request(std::string("malformed request body: ") + e.what());
  } catch (const body_unreadable& e) {
    // A coded body the broker could not search through: its unsearched bytes never went up.
    if (s_.response_started) throw upstream_error("request body refused mid-response");
    answer = e.answer;
  } catch (const brokers::body_refused_error& e) {
    // The body's rewriter refused a piece (a chunk whose signature does not verify).
    if (s_.response_started) throw upstream_error("request body refused mid-response");
    answer = live::refusal::of(e.decision(), s_.entry.host, where.plaintext);
  }
  co_return co_await ex_.refuse(*answer, false);
}

// What a scanned request body reuses from one piece to the next.
struct request_relay::scan_buffers {
  std::string released, rewritten;
};

asio::awaitable<void> request_relay::pump_request_body(std::unique_ptr<body_scan_state>& scan,
                                                       bool& done) {
  body_search* search = scan ? &scan->search : nullptr;
  // Unsearched, the body goes up as the client framed it (the head went up with its framing).
  const bool as_framed = !search && s_.io.client.carries_wire() && s_.upstream->carries_wire();
  scan_buffers buffers;
  for (;;) {
    const auto piece = co_await s_.io.client.read_body(!as_framed);
    if (as_framed) {
      if (!piece.wire.empty()) co_await write_request_body(piece.wire, false, true);
    } else if (search) {
      co_await pump_scanned_piece(piece, *search, buffers);
    } else {
      co_await write_request_body(piece.data, piece.last);
    }
    if (piece.last) break;
  }
  done = true;
  scan.reset();
  s_.io.timer.arm(ex_.timeouts().upstream, live::waiting_for::upstream);
}

asio::awaitable<void> request_relay::pump_scanned_piece(const client_side::body_piece& piece,
                                                        body_search& search, scan_buffers& b) {
  b.released.clear();
  if (auto stop = search.feed(piece.data, piece.last, b.released)) throw_stop(std::move(*stop));
  if (auto* rewriter = s_.plan ? s_.plan->rewriter() : nullptr) {
    b.rewritten.clear();
    rewriter->feed(b.released, b.rewritten);
    if (piece.last) rewriter->finish();
    b.released.swap(b.rewritten);
  }
  co_await write_request_body(b.released, piece.last);
}

asio::awaitable<void> request_relay::write_request_body(std::string_view data, bool last,
                                                        bool framed) {
  const auto ec =
      framed ? co_await s_.upstream->send_wire(data) : co_await s_.upstream->send_body(data, last);
  if (ec) throw upstream_error("upstream write failed: " + ec.message());
}

}  // namespace broker::proxy
