// The WebSocket relay (websocket_relay.hpp).
#include "proxy/websocket_relay.hpp"

#include <openssl/rand.h>

#include <array>
#include <cstring>

#include "base/race.hpp"
#include "proxy/held_bytes.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/idle_read.hpp"
#include "proxy/limits.hpp"
#include "proxy/relay_errors.hpp"
#include "proxy/websocket_inspector.hpp"
#include "session/llm_usage.hpp"

namespace broker::proxy {

websocket_relay::websocket_relay(http_exchange& ex) : ex_(ex), s_(ex.state()) {}

namespace {

// Masking keys from the CSPRNG (RFC 6455 §5.3: unpredictable to the application that sends
// the data), drawn a batch at a time.
class mask_keys {
 public:
  std::uint32_t next() {
    if (used_ == keys_.size()) {
      if (RAND_bytes(reinterpret_cast<unsigned char*>(keys_.data()),
                     static_cast<int>(keys_.size() * sizeof(std::uint32_t))) != 1)
        throw std::runtime_error("the system random number generator failed");
      used_ = 0;
    }
    return keys_[used_++];
  }

 private:
  std::array<std::uint32_t, 64> keys_{};
  std::size_t used_ = keys_.size();
};

// What the two directions share. Each pump_frames writes only toward its own destination, so no
// stream has two writes outstanding; a pump_frames that finds the connection ending while the other
// is mid-write waits for that write rather than cut it short (race() would cancel it half sent).
struct websocket_pumps {
  websocket_inspector& inspect;
  session::audit_entry& entry;  // its message counts kept current: a deadline may end the relay
  live::connection_deadline& idle;
  live::connection_deadline::clock::duration idle_timeout;
  bool writing_upstream = false;
  bool writing_client = false;
  // A message on its way in is held whole, against the process's allowance for bytes held.
  held_bytes held_from_client{}, held_from_server{};
};

// One direction: bytes read from `from`, inspected, written to `to` as frames; returns when
// `from` ends, a write fails, or the inspector ends the connection.
asio::awaitable<void> pump_frames(websocket_pumps& p, bool from_client, stream& from,
                                  read_buffer& in, stream& to, std::uint64_t& written) {
  bool& writing = from_client ? p.writing_upstream : p.writing_client;
  const bool& other_writing = from_client ? p.writing_client : p.writing_upstream;
  held_bytes& hold = from_client ? p.held_from_client : p.held_from_server;
  std::string out;
  for (;;) {
    if (!in.empty()) {
      out.clear();
      if (from_client)
        p.inspect.from_client(in.view(), out);
      else
        p.inspect.from_server(in.view(), out);
      in.consume(in.size());
      const std::size_t pending =
          from_client ? p.inspect.pending_from_client() : p.inspect.pending_from_server();
      // Up to a read buffer's worth is the connection's own; beyond it a share of the
      // allowance (released as the message completes).
      if (!hold.hold(pending > limits::relay_buffer_bytes ? pending : 0))
        p.inspect.end_overloaded();
      p.entry.ws_messages_out = p.inspect.messages_out();
      p.entry.ws_messages_in = p.inspect.messages_in();
      if (!out.empty()) {
        writing = true;
        auto [ec, n] = co_await to.write(out);
        writing = false;
        if (ec) co_return;
        written += n;
      }
      if (p.inspect.ending() || p.inspect.closed()) {
        if (other_writing) co_await base::hold_until_cancelled();
        co_return;
      }
    }
    p.idle.arm(p.idle_timeout, live::waiting_for::tunnel);
    auto [ec, n] = co_await read_idle(from, in);
    if (ec) co_return;
  }
}

// An LLM answer that came over the WebSocket: metered as an HTTP response is
// (account_llm_usage) and recorded on its own, since the connection's record comes when it ends,
// maybe hours later. False when the record could not be written.
bool record_llm_answer(live::live_session& ctx, const session::audit_entry& connection,
                       const session::llm_usage& usage,
                       std::chrono::steady_clock::time_point started) {
  if (auto* budget = ctx.budget())
    budget->add_llm_usage(connection.host, usage.model, usage.input_tokens, usage.output_tokens);
  session::audit_entry response = connection;
  response.method = "WS";
  response.status = 0;
  response.bytes_out = response.bytes_in = 0;  // counted in the connection's record
  response.ws_messages_out.reset();
  response.ws_messages_in.reset();
  response.llm_tokens = usage.total();
  response.llm_estimated = usage.estimated;
  response.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return ctx.record(response);
}

}  // namespace

asio::awaitable<next_step> websocket_relay::run(const http::message_head& head) {
  if (!s_.websocket)
    co_return co_await ex_.refuse(
        live::refusal::upstream_protocol_error(s_.entry.host, "an upgrade that was not asked for"),
        false);
  // The offer was taken out of the request (http_exchange.cpp): compressed frames could carry a
  // value past the checks.
  if (head.find("sec-websocket-extensions"))
    co_return co_await ex_.refuse(
        live::refusal::upstream_protocol_error(
            s_.entry.host,
            "the upstream agreed to a WebSocket extension (compression) "
            "that was not offered; the broker inspects frames uncompressed"),
        false);
  s_.response_started = true;
  s_.entry.status = 101;
  auto client = co_await s_.io.client.accept_websocket(head);
  if (!client) {
    s_.response_started = false;
    co_return co_await ex_.refuse(live::refusal::upstream_protocol_error(
                                      s_.entry.host, "a WebSocket this connection cannot carry"),
                                  false);
  }
  // Nothing HTTP follows a 101: the connection ends with the WebSocket.
  co_await relay(*client);
  co_return next_step::handed_over;
}

asio::awaitable<void> websocket_relay::relay(client_side::raw_connection client) {
  auto up = *s_.upstream->raw();  // an HTTP/1.1 connection: WebSockets are dialed on it
  auto& entry = s_.entry;
  const auto& credentials = s_.io.ctx.credentials();
  const bool plaintext = entry.scheme == "http";
  brokers::body_scan outbound;  // the inspector's patterns view into it: declared first
  if (!credentials.empty())
    outbound = credentials.request_body_scan(
        brokers::request_context{entry.host, plaintext, s_.loopback, entry.client.get()});
  const auto llm = session::classify_llm_websocket(entry.host, entry.target);

  mask_keys keys;
  auto response_started = std::chrono::steady_clock::now();
  websocket_hooks hooks;
  hooks.mask_key = [&keys] { return keys.next(); };
  hooks.admit_llm_request = [&]() -> std::optional<live::refusal> {
    s_.io.ctx.charge(entry);  // the bytes so far count toward the budget's verdict
    response_started = std::chrono::steady_clock::now();
    return ex_.admit_by_session(entry.host);
  };
  hooks.llm_usage = [&](const session::llm_usage& usage) {
    return record_llm_answer(s_.io.ctx, entry, usage, response_started);
  };
  websocket_inspector inspect(
      websocket_checks{credentials.empty() ? nullptr : &outbound, entry.host, plaintext,
                       s_.scrub_patterns, llm, limits::max_websocket_message},
      std::move(hooks));

  entry.ws_messages_out = entry.ws_messages_in = 0;
  websocket_pumps pumps{inspect, entry, s_.io.timer, ex_.timeouts().tunnel};
  co_await base::race(pump_frames(pumps, true, client.io, client.in, up.io, entry.bytes_out),
                      pump_frames(pumps, false, up.io, up.in, client.io, entry.bytes_in));
  // A deadline (idle, or the drain after SIGTERM) cut it short: the connection records why.
  const auto cancelled = (co_await asio::this_coro::cancellation_state).cancelled();
  if (cancelled != asio::cancellation_type::none) co_return;

  const auto& ending = inspect.ending();
  if (!ending) {
    ex_.finish(101, true);
    co_return;
  }
  bool allowed = true;
  if (const auto& r = ending->refused) {
    // As its HTTP counterpart is recorded (ex_.refuse()): a dummy on its way to the wrong host is
    // the canary docs/policy.md asks to record as such.
    entry.event = r->code == "credential_not_bound" ? "exfiltration_blocked" : "refused";
    if (!ending->credential.empty()) entry.credential = ending->credential;
    allowed = false;
    session::log(spdlog::level::debug, s_.io.tag, "WebSocket {} {}: {}",
                 s_.io.ctx.scrub(entry.host), r->code, s_.io.ctx.scrub(r->message));
  }
  ex_.finish(101, allowed, ending->error);
  // Each side is told, within a bounded time: neither has to read.
  s_.io.timer.arm(ex_.timeouts().body, live::waiting_for::tunnel);
  co_await up.io.write(ending->to_upstream);
  co_await write_all(client.io, ending->to_client);
}

}  // namespace broker::proxy
