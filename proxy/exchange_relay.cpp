// An exchange with its upstream: the request body pumped up as framed while
// the response is relayed down, both streamed. With brokered credentials in the session, bodies
// are decoded on the way: a request body is searched for values that must not leave (before any
// of their bytes does) and a response has real values replaced by their dummies, across chunk
// and read boundaries; the decoded bytes are then framed again (same length, same coding).
#include <spdlog/spdlog.h>

#include <array>
#include <cstdio>

#include "brokers/scrubber.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/limits.hpp"
#include "proxy/race.hpp"
#include "proxy/relay_errors.hpp"
#include "session/llm_usage.hpp"

namespace broker::proxy {

namespace {

asio::awaitable<void> hold_until_cancelled() {
  asio::steady_timer forever(co_await asio::this_coro::executor,
                             std::chrono::steady_clock::time_point::max());
  co_await forever.async_wait(use_tuple);
}

// Decoded body bytes back to wire form: a chunk of their own under chunked coding, as they are
// otherwise. The last piece of a chunked body gets the terminating zero chunk.
void append_chunk_size(std::string& wire, std::size_t size) {
  char line[24];
  const int n = std::snprintf(line, sizeof line, "%zx\r\n", size);
  wire.append(line, static_cast<std::size_t>(n));
}

void frame(std::string& wire, std::string_view data, bool chunked, bool last) {
  if (!chunked) {
    wire.append(data);
    return;
  }
  if (!data.empty()) {
    append_chunk_size(wire, data.size());
    wire.append(data).append("\r\n");
  }
  if (last) wire.append("0\r\n\r\n");
}

// The final response's head as the client gets it, told when its connection ends after it.
std::string client_head(const http::message_head& head, bool keep_client) {
  std::string out = http::serialize_response_head(head);
  if (!keep_client) out.insert(out.size() - 2, "Connection: close\r\n");
  return out;
}

// One direction of an upgraded (WebSocket) connection, until either side ends.
asio::awaitable<void> copy_stream(stream& from, stream& to, read_buffer& buffer,
                                  std::uint64_t& counter, deadline& idle,
                                  deadline::clock::duration idle_timeout) {
  for (;;) {
    if (!buffer.empty()) {
      auto [ec, n] = co_await to.write(buffer.view());
      if (ec) co_return;
      counter += n;
      buffer.consume(n);
    }
    idle.arm(idle_timeout, deadline::phase::tunnel);
    auto [ec, n] = co_await from.read_some(buffer.space());
    if (ec) co_return;
    buffer.commit(n);
  }
}

}  // namespace

void http_exchange::release_upstream() {
  // Only a connection whose last response was relayed whole may carry another request.
  if (upstream_ && upstream_reusable_)
    io_.pool.give_back(std::move(upstream_));
  else
    upstream_.reset();
}

asio::awaitable<bool> http_exchange::exchange_with_upstream(http::parser& request, std::string head,
                                                            const brokers::request_context& where) {
  const bool client_keep_alive = request.keep_alive() && !io_.draining;
  // The head may carry a real value: wiped once sent, or however the exchange ends.
  const brokers::wipe_on_exit wipe_head([&head] { brokers::wipe(head); });
  io_.timer.arm(timeouts().upstream, deadline::phase::upstream);
  auto [ec, n] = co_await upstream_->io.write(head);
  brokers::wipe(head);
  if (ec) co_return co_await refuse_unsent(ec);
  entry_.bytes_out += n;
  const bool sent_whole = body_.has_value();
  if (sent_whole && !co_await send_whole_body(request.head().chunked)) co_return false;
  if (!request.head().has_body || sent_whole) {
    bool keep_alive = false;
    co_await relay_response(entry_.method, client_keep_alive, keep_alive);
    release_upstream();
    co_return keep_alive;
  }
  co_return co_await relay_while_pumping(request, where, client_keep_alive);
}

asio::awaitable<bool> http_exchange::refuse_unsent(const error_code& ec) {
  upstream_.reset();
  co_return co_await refuse(refusal::upstream_unreachable(entry_.host, ec.message()), false);
}

asio::awaitable<bool> http_exchange::send_whole_body(bool chunked) {
  // Read whole before the head was signed; it goes up in the coding the client sent it in,
  // framed around rather than copied (it may be tens of MiB), and is let go of, with its
  // share of the held-bytes allowance, once sent.
  const std::string& body = body_->bytes;
  std::string before, after;
  if (chunked) {
    if (!body.empty()) {
      append_chunk_size(before, body.size());
      after = "\r\n";
    }
    frame(after, {}, true, true);
  }
  const std::array<std::string_view, 3> pieces{before, body, after};
  for (std::string_view piece : pieces) {
    if (piece.empty()) continue;
    auto [ec, sent] = co_await upstream_->io.write(piece);
    if (ec) co_return co_await refuse_unsent(ec);
    entry_.bytes_out += sent;
  }
  body_.reset();
  co_return true;
}

asio::awaitable<bool> http_exchange::relay_while_pumping(http::parser& request,
                                                         const brokers::request_context& where,
                                                         bool client_keep_alive) {
  const auto& credentials = io_.ctx.credentials();
  brokers::body_scan checks;  // the scrubber's patterns view into it: declared first, outlives it
  std::optional<brokers::stream_scrubber> scan;
  if (!credentials.empty())
    scan.emplace((checks = credentials.request_body_scan(where)).patterns());
  bool body_done = false;
  bool keep_alive = false;
  std::optional<refusal> refused;
  try {
    // Neither side destroys the upstream connection while the other may be using it; it is
    // released here, once both have finished.
    co_await race(pump_request_body(request, scan ? &*scan : nullptr, body_done),
                  relay_response(entry_.method, client_keep_alive, keep_alive));
    if (body_done) {
      release_upstream();
      co_return keep_alive;
    }
    // The upstream answered before the body was through; the client's stream cannot be
    // resynchronized, so both connections end here.
    upstream_.reset();
    co_return false;
  } catch (const body_refused& e) {
    // None of the value's bytes went up; the upstream saw a request that never ends.
    upstream_.reset();
    if (response_started_) throw upstream_error("request body refused mid-response");
    const auto decision = checks.decision(e.pattern);
    entry_.credential = decision.credential;
    refused = refusal::of(decision, entry_.host, where.plaintext);
  } catch (const body_error& e) {
    upstream_.reset();
    if (response_started_) throw;
    refused = refusal::bad_request(std::string("malformed request body: ") + e.what());
  } catch (const brokers::body_refused_error& e) {
    // The body's rewriter refused a piece (a chunk whose signature does not verify): none of
    // it went up, and the upstream's request never ends.
    upstream_.reset();
    if (response_started_) throw upstream_error("request body refused mid-response");
    refused = refusal::of(e.decision(), entry_.host, where.plaintext);
  }
  co_return co_await refuse(*refused, false);
}

// What a scanned request body reuses from one read to the next.
struct http_exchange::scan_buffers {
  std::string decoded, released, rewritten, wire;
};

asio::awaitable<void> http_exchange::pump_request_body(http::parser& request,
                                                       brokers::stream_scrubber* scan, bool& done) {
  scan_buffers buffers;
  for (;;) {
    if (!io_.in.empty()) {
      const bool last = scan ? co_await pump_scanned_bytes(request, *scan, buffers)
                             : co_await pump_plain_bytes(request);
      if (last) break;
    }
    io_.timer.arm(timeouts().body, deadline::phase::request_body);
    auto [ec, n] = co_await io_.client.read_some(io_.in.space());
    if (ec) throw body_error("client closed the connection mid-body");
    io_.in.commit(n);
  }
  done = true;
  io_.timer.arm(timeouts().upstream, deadline::phase::upstream);
  co_await hold_until_cancelled();
}

asio::awaitable<bool> http_exchange::pump_plain_bytes(http::parser& request) {
  const auto r = request.feed(io_.in.view());
  if (r.status == http::parse_status::error) throw body_error(request.error_reason());
  if (r.consumed > 0) {
    co_await write_request_body(io_.in.view().substr(0, r.consumed));
    io_.in.consume(r.consumed);
  }
  co_return r.status == http::parse_status::message_complete;
}

asio::awaitable<bool> http_exchange::pump_scanned_bytes(http::parser& request,
                                                        brokers::stream_scrubber& scan,
                                                        scan_buffers& b) {
  b.decoded.clear();
  b.released.clear();
  b.wire.clear();
  const auto r = request.feed(io_.in.view(), &b.decoded);
  if (r.status == http::parse_status::error) throw body_error(request.error_reason());
  io_.in.consume(r.consumed);
  if (auto match = scan.feed(b.decoded, b.released)) throw body_refused(*match);
  const bool last = r.status == http::parse_status::message_complete;
  if (last)
    if (auto match = scan.finish(b.released)) throw body_refused(*match);
  if (auto* rewriter = plan_ ? plan_->rewriter() : nullptr) {
    b.rewritten.clear();
    rewriter->feed(b.released, b.rewritten);
    if (last) rewriter->finish();
    b.released.swap(b.rewritten);
  }
  frame(b.wire, b.released, request.head().chunked, last);
  if (!b.wire.empty()) co_await write_request_body(b.wire);
  co_return last;
}

asio::awaitable<void> http_exchange::write_request_body(std::string_view data) {
  auto [ec, n] = co_await upstream_->io.write(data);
  if (ec) throw upstream_error("upstream write failed: " + ec.message());
  entry_.bytes_out += n;
}

asio::awaitable<void> http_exchange::relay_response(const std::string& method,
                                                    bool client_keep_alive, bool& keep_alive) {
  keep_alive = false;
  std::optional<http::parser> response;
  if (!co_await read_final_head(method, response)) co_return;
  const http::message_head& head = response->head();
  if (head.status == 101) {
    co_await relay_upgrade(head);
    co_return;
  }
  if (auto refused = coded_body_refusal(head)) {
    co_await refuse(*refused, false);
    co_return;
  }
  // A body delimited by the upstream's close is delimited the same way for the client.
  const bool until_close = head.has_body && !head.chunked && !head.content_length;
  const bool keep_client = client_keep_alive && !until_close && !io_.draining;
  std::string out = client_head(head, keep_client);
  response_started_ = true;
  entry_.status = head.status;

  if (response->message_done()) {
    upstream_reusable_ = true;
    if (!finish(head.status, true)) throw upstream_error("audit log write failed");
    co_await write_client(out);
  } else {
    auto meter = usage_meter(head);
    co_await relay_body(*response, head, std::move(out), meter ? &*meter : nullptr);
  }
  upstream_reusable_ = upstream_reusable_ && response->keep_alive() && upstream_->in.empty();
  keep_alive = keep_client;
}

asio::awaitable<bool> http_exchange::read_final_head(const std::string& method,
                                                     std::optional<http::parser>& response) {
  int interim = 0;
  for (;;) {
    response.emplace(http::parser::kind::response, method);
    if (!co_await read_response_head(*response)) co_return false;
    auto& head = response->head();
    scrub_head(head);
    if (head.status >= 200) co_return true;
    // Each interim response re-arms the deadline; a bound keeps an upstream from holding the
    // exchange open forever with them.
    if (++interim > limits::max_interim_responses) {
      co_await refuse(refusal::upstream_unreachable(entry_.host, "too many interim responses"),
                      false);
      co_return false;
    }
    if (head.status == 101) co_return true;  // nothing HTTP follows it
    co_await write_client(http::serialize_response_head(head));
  }
}

asio::awaitable<bool> http_exchange::read_response_head(http::parser& response) {
  auto& up = *upstream_;
  for (;;) {
    if (!up.in.empty()) {
      const auto r = response.feed(up.in.view());
      up.in.consume(r.consumed);
      entry_.bytes_in += r.consumed;
      if (r.status == http::parse_status::head_complete ||
          r.status == http::parse_status::message_complete)
        co_return true;
      if (r.status == http::parse_status::error) {
        co_await refuse(refusal::upstream_unreachable(
                            entry_.host, "malformed response: " + response.error_reason()),
                        false);
        co_return false;
      }
    }
    auto [ec, n] = co_await up.io.read_some(up.in.space());
    if (ec == asio::error::operation_aborted) co_return false;  // the request body failed first
    if (ec) {
      co_await refuse(
          refusal::upstream_unreachable(entry_.host, "connection closed before a response"), false);
      co_return false;
    }
    up.in.commit(n);
    io_.timer.arm(timeouts().upstream, deadline::phase::upstream);
  }
}

asio::awaitable<void> http_exchange::relay_upgrade(const http::message_head& head) {
  if (!websocket_) {
    co_await refuse(
        refusal::upstream_unreachable(entry_.host, "protocol upgrade is not supported here"),
        false);
    co_return;
  }
  std::string out = http::serialize_response_head(head);
  out.insert(out.size() - 2, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
  response_started_ = true;
  entry_.status = 101;
  co_await write_client(out);
  co_await relay_websocket();
}

std::optional<refusal> http_exchange::coded_body_refusal(const http::message_head& head) const {
  if (!head.has_body || scrub_patterns_.empty()) return std::nullopt;
  const std::string coding = http::coded_body(head);
  if (coding.empty()) return std::nullopt;
  // It was asked for identity; a coded body could carry a real value past the scrubber.
  return refusal::upstream_unreachable(
      entry_.host, "compressed or coded response (" + coding +
                       ") to a request that asked for identity; the broker scrubs "
                       "real values from responses and cannot read through a coding");
}

std::optional<session::llm_usage_meter> http_exchange::usage_meter(
    const http::message_head& head) const {
  std::optional<session::llm_usage_meter> meter;
  if (llm_ == session::llm_api::none || head.status < 200 || head.status >= 300) return meter;
  const std::string* type = head.find("content-type");
  meter.emplace(llm_, type ? std::string_view(*type) : std::string_view());
  meter->set_request_bytes(entry_.bytes_out);
  return meter;
}

// A response body on its way down: what it passes through, and the buffers it reuses from one
// read to the next.
struct http_exchange::body_relay {
  http::parser& response;
  const http::message_head& head;
  session::llm_usage_meter* meter;                // null when the body is not metered
  std::optional<brokers::stream_scrubber> scrub;  // empty when there is nothing to scrub
  std::string wire;  // the head while it waits for body bytes to go with, then framed bytes
  std::string decoded, released;
};

asio::awaitable<void> http_exchange::relay_body(http::parser& response,
                                                const http::message_head& head,
                                                std::string pending_head,
                                                session::llm_usage_meter* meter) {
  auto& up = *upstream_;
  // The head goes out with the first body bytes when they are already here: one write, one TLS
  // record and one wake-up of the client instead of two.
  body_relay body{response, head, meter, std::nullopt, std::move(pending_head), {}, {}};
  if (!scrub_patterns_.empty()) body.scrub.emplace(scrub_patterns_);
  for (;;) {
    if (!up.in.empty() && co_await relay_body_bytes(body)) {
      upstream_reusable_ = true;
      co_return;
    }
    // Nothing to send with it: the head goes alone rather than wait for the body.
    if (!body.wire.empty()) {
      co_await write_client(body.wire);
      body.wire.clear();
    }
    auto [ec, n] = co_await up.io.read_some(up.in.space());
    if (ec == asio::error::eof ||
        (ec == asio::ssl::error::stream_truncated && !head.chunked && !head.content_length)) {
      co_await end_body_at_close(body);
      co_return;  // read until close: not reusable
    }
    if (ec) throw upstream_error("upstream read failed: " + ec.message());
    up.in.commit(n);
    io_.timer.arm(timeouts().upstream, deadline::phase::upstream);
  }
}

asio::awaitable<bool> http_exchange::relay_body_bytes(body_relay& b) {
  auto& up = *upstream_;
  // Only chunked bodies need decoding; otherwise the bytes consumed are the body itself.
  const bool decode = (b.scrub || b.meter) && b.head.chunked;
  const auto r = b.response.feed(up.in.view(), decode ? &b.decoded : nullptr);
  if (r.status == http::parse_status::error)
    throw upstream_error("malformed response body: " + b.response.error_reason());
  entry_.bytes_in += r.consumed;
  const bool last = r.status == http::parse_status::message_complete;
  const auto raw = up.in.view().substr(0, r.consumed);
  if (b.meter) {
    b.meter->feed(decode ? std::string_view(b.decoded) : raw);
    if (last) account_llm_usage(*b.meter);
  }
  // The record is written before the response completes (DESIGN §7).
  if (last && !finish(b.head.status, true)) throw upstream_error("audit log write failed");
  if (!b.scrub) {
    co_await write_client_after(b.wire, raw);
    up.in.consume(r.consumed);
    b.decoded.clear();  // metered above
  } else {
    b.scrub->feed(decode ? std::string_view(b.decoded) : raw, b.released);
    up.in.consume(r.consumed);
    if (last) b.scrub->finish(b.released);
    co_await write_scrubbed(b, last);
  }
  co_return last;
}

asio::awaitable<void> http_exchange::write_client_after(std::string& wire, std::string_view raw) {
  if (wire.empty()) {
    co_await write_client(raw);
  } else {
    wire.append(raw);
    co_await write_client(wire);
    wire.clear();
  }
}

asio::awaitable<void> http_exchange::write_scrubbed(body_relay& b, bool last) {
  if (!b.head.chunked && b.wire.empty()) {
    if (!b.released.empty()) co_await write_client(b.released);
  } else {
    frame(b.wire, b.released, b.head.chunked, last);
    if (!b.wire.empty()) co_await write_client(b.wire);
  }
  b.decoded.clear();
  b.released.clear();
  b.wire.clear();
}

asio::awaitable<void> http_exchange::end_body_at_close(body_relay& b) {
  // Read-until-close ends here (a missing close_notify is tolerated only there, where the
  // length is unknown anyway, as browsers and curl do).
  if (b.response.finish().status != http::parse_status::message_complete)
    throw upstream_error("upstream closed mid-response");
  if (b.meter) account_llm_usage(*b.meter);
  if (!finish(b.head.status, true)) throw upstream_error("audit log write failed");
  if (b.scrub) {
    b.scrub->finish(b.released);
    if (!b.released.empty()) co_await write_client(b.released);
  }
}

void http_exchange::account_llm_usage(session::llm_usage_meter& meter) {
  const auto usage = meter.finish();
  entry_.llm_tokens = usage.total();
  entry_.llm_estimated = usage.estimated;
  if (auto* budget = io_.ctx.budget())
    budget->add_llm_usage(entry_.host, usage.model, usage.input_tokens, usage.output_tokens);
}

void http_exchange::scrub_head(http::message_head& head) const {
  if (scrub_patterns_.empty()) return;
  brokers::scrub_value(head.reason, scrub_patterns_);
  for (auto& h : head.headers) {
    brokers::scrub_value(h.name, scrub_patterns_);
    brokers::scrub_value(h.value, scrub_patterns_);
  }
}

asio::awaitable<void> http_exchange::relay_websocket() {
  auto& up = *upstream_;
  // Frames are relayed as they are (not scrubbed); the upgrade request went through the brokers.
  co_await race(
      copy_stream(io_.client, up.io, io_.in, entry_.bytes_out, io_.timer, timeouts().tunnel),
      copy_stream(up.io, io_.client, up.in, entry_.bytes_in, io_.timer, timeouts().tunnel));
  finish(101, true);
  io_.draining = true;  // the connection was handed over; nothing HTTP follows
}

}  // namespace broker::proxy
