#include "proxy/h2_connection.hpp"

#include <nghttp2/nghttp2.h>
#include <spdlog/spdlog.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <array>
#include <exception>

#include "config/request_target.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/limits.hpp"
#include "proxy/relay_errors.hpp"

namespace broker::proxy {

namespace {

constexpr auto forever = std::chrono::steady_clock::time_point::max();

bool grpc_call(const http::message_head& request) {
  const std::string* type = request.find("content-type");
  return type && type->starts_with("application/grpc");
}

}  // namespace

// One stream as its exchange sees it: the request body from the session, the response to it.
class h2_connection::h2_stream final : public client_side {
 public:
  h2_stream(h2_connection& c, std::int32_t id, http::h2_request r, bool end_stream)
      : id(id),
        request(std::move(r)),
        grpc(grpc_call(request.head)),
        deadline(c.s_.client.get_executor()),
        c_(c),
        body_done_(end_stream),
        event_(c.s_.client.get_executor(), forever) {}

  const std::int32_t id;
  http::h2_request request;  // its fields let go of once the request is wholly up
  // Told at the start: a refusal at any time is a gRPC status for a gRPC call.
  const bool grpc;
  live::connection_deadline deadline;
  asio::cancellation_signal cancel;
  bool gone = false;      // reset by the client, or the connection ended
  bool answered = false;  // its response was given whole (the session sends it)

  void take(std::string_view data, bool last) {
    pending_.append(data);
    body_done_ = body_done_ || last;
    wake();
  }
  void end() {
    gone = true;
    wake();
    cancel.emit(asio::cancellation_type::terminal);
  }
  void wake() { event_.cancel(); }

  bool keep_alive() const override { return true; }
  bool carries_wire() const override { return false; }
  bool flushes_records() const override { return true; }  // writer() flushes first
  void record_staged() override { c_.records_staged_ = true; }

  asio::awaitable<body_piece> read_body(bool) override {
    // Each wait for body bytes is bounded by the body deadline, as on HTTP/1.1.
    deadline.arm(c_.s_.ctx->options().timeouts.body, live::waiting_for::request_body);
    while (!gone && pending_.empty() && !body_done_) co_await wait();
    if (gone) throw client_gone("the client reset the stream mid-body");
    // The bytes handed out last are taken: the client may send as many more.
    taken_ = std::move(pending_);
    pending_.clear();
    c_.session_.consumed(id, taken_.size());
    c_.wake_writer();
    co_return body_piece{taken_, {}, body_done_};
  }

  bool body_here(std::size_t bytes) const override {
    return gone || (body_done_ && pending_.size() <= bytes);
  }

  asio::awaitable<void> send_interim(const http::message_head&) override {
    co_return;  // 1xx are HTTP/1.1's business here (100-continue); an h2 client does not wait
  }

  asio::awaitable<void> send_head(const http::message_head& head, bool, bool complete) override {
    ensure_open();
    c_.session_.respond(id, head, complete);
    answered = complete;
    c_.wake_writer();
    co_return;
  }

  asio::awaitable<void> send_body(std::string_view data, bool last) override {
    ensure_open();
    c_.session_.send_data(id, data, last);
    answered = last;
    c_.wake_writer();
    // The client's window decides how fast this goes; hold no more than the bound meanwhile.
    while (!gone && c_.session_.unsent(id) > limits::max_unsent_per_h2_stream) co_await wait();
    ensure_open();
  }

  asio::awaitable<void> send_wire(std::string_view) override {
    throw std::logic_error("an HTTP/2 stream carries no HTTP/1.1 framing");
    co_return;
  }

  asio::awaitable<void> send_trailers(const std::vector<http::header_field>& fields) override {
    ensure_open();
    c_.session_.send_trailers(id, fields);
    answered = true;
    c_.wake_writer();
    co_return;
  }

  asio::awaitable<void> flush() override {
    c_.wake_writer();
    co_return;
  }

  asio::awaitable<void> send_refusal(const live::refusal& r, std::string_view host,
                                     std::string_view session, bool) override {
    ensure_open();
    refuse_now(r, host, session);
    co_return;
  }

  // The refusal given to the session at once (no wait): also from outside the exchange.
  void refuse_now(const live::refusal& r, std::string_view host, std::string_view session) {
    c_.respond_refused(id, grpc, r, host, session);
    answered = true;
    c_.wake_writer();
  }

  asio::awaitable<std::optional<raw_connection>> accept_websocket(
      const http::message_head&) override {
    co_return std::nullopt;  // no extended CONNECT (RFC 8441): WebSocket stays on HTTP/1.1
  }

 private:
  void ensure_open() const {
    if (gone) throw boost::system::system_error(asio::error::connection_reset);
  }
  asio::awaitable<void> wait() {
    event_.expires_at(forever);
    co_await event_.async_wait(use_tuple);
  }

  h2_connection& c_;
  std::string pending_;  // body bytes received, not yet handed out
  std::string taken_;    // the piece handed out last
  bool body_done_;
  asio::steady_timer event_;  // cancelled to wake the exchange waiting on this stream
};

h2_connection::h2_connection(setup s)
    : s_(std::move(s)), session_(*this), writer_wake_(s_.client.get_executor(), forever) {}

h2_connection::~h2_connection() = default;

asio::awaitable<void> h2_connection::run() {
  using namespace asio::experimental::awaitable_operators;
  arm_idle();
  std::exception_ptr failure;
  try {
    co_await (reader() && writer());
  } catch (...) {
    failure = std::current_exception();
  }
  // The streams' coroutines hold this connection: they end before it goes, cancelled or not.
  co_await asio::this_coro::reset_cancellation_state();
  co_await asio::this_coro::throw_if_cancelled(false);
  for (auto& [id, st] : streams_) st->end();
  while (!streams_.empty()) {
    writer_wake_.expires_at(forever);
    co_await writer_wake_.async_wait(use_tuple);
  }
  // The records of the streams that ended after the writer did.
  s_.ctx->flush_records();
  if (failure) std::rethrow_exception(failure);
}

void h2_connection::arm_idle() {
  const auto& t = s_.ctx->options().timeouts;
  if (streams_.empty())
    s_.idle.arm(t.idle, live::waiting_for::client_idle);
  else
    s_.idle.arm(std::chrono::hours(24), live::waiting_for::request_body);
}

void h2_connection::drain(bool now) {
  session_.shut_down();
  if (now) {
    cut_short_ = true;
    for (auto& [id, st] : streams_) st->end();
  }
  wake_writer();
}

void h2_connection::wake_writer() {
  writer_wake_.cancel();
}

void h2_connection::stop_reading() {
  if (reading_done_) return;
  error_code ignored;
  s_.client.socket().cancel(ignored);
}

void h2_connection::wake_senders() {
  for (auto& [id, st] : streams_) st->wake();
}

asio::awaitable<void> h2_connection::reader() {
  std::array<char, 16 * 1024> buffer;
  for (;;) {
    auto [ec, n] = co_await s_.client.read_some(buffer);
    if (ec || n == 0) break;
    const bool more = session_.receive({buffer.data(), n}, std::chrono::steady_clock::now());
    wake_writer();
    if (!more) break;
  }
  reading_done_ = true;
  if (!session_.failure().empty())
    session::log(spdlog::level::info, s_.tag, "HTTP/2 connection ended: {}", session_.failure());
  // Nothing more comes from the client: what its streams wait for never will.
  for (auto& [id, st] : streams_) st->end();
  wake_writer();
}

asio::awaitable<void> h2_connection::writer() {
  for (;;) {
    // The records of the streams this output ends reach the log before the client hears the end
    // (docs/audit-log.md); those of all the streams that ended since the last write go in one
    // write(2). Records that cannot be written end the connection without the responses they
    // describe. (A stream refused because the log had already failed staged nothing: its 503 goes
    // out.)
    if (records_staged_) {
      records_staged_ = false;
      if (!s_.ctx->flush_records()) {
        for (auto& [id, st] : streams_) st->end();
        throw std::runtime_error("the audit log cannot be written");
      }
    }
    const std::string out = session_.output();
    if (!out.empty()) {
      auto [ec, n] = co_await s_.client.write(out);
      if (ec) {
        for (auto& [id, st] : streams_) st->end();
        throw boost::system::system_error(ec);  // ends the reader too
      }
      wake_senders();
      continue;
    }
    if (!session_.wants_read() && !session_.wants_write()) {
      // The session is over (a GOAWAY for an error is out, RFC 9113 §5.4.1): the connection
      // closes now, not when the client next sends something or goes idle.
      stop_reading();
      if (streams_.empty()) co_return;
    }
    if (reading_done_ && streams_.empty()) co_return;
    writer_wake_.expires_at(forever);
    co_await writer_wake_.async_wait(use_tuple);
  }
}

void h2_connection::on_request(std::int32_t id, http::h2_request request, bool end_stream) {
  auto st = std::make_shared<h2_stream>(*this, id, std::move(request), end_stream);
  streams_[id] = st;
  arm_idle();
  asio::co_spawn(s_.client.get_executor(), serve_stream(st),
                 asio::bind_cancellation_slot(st->cancel.slot(), [this, id](std::exception_ptr) {
                   streams_.erase(id);
                   arm_idle();
                   wake_writer();
                 }));
}

void h2_connection::on_head_too_large(std::int32_t id) {
  respond_refused(id, false, live::refusal::header_too_large(), s_.ctx->scrub(s_.target.dest.host),
                  s_.ctx->session_id());
}

void h2_connection::respond_refused(std::int32_t id, bool grpc, const live::refusal& r,
                                    std::string_view host, std::string_view session) {
  const std::string body = live::refusal_body(r, host, session);
  if (grpc) {
    session_.respond(id, live::grpc_refusal_head(r, body), true);
    return;
  }
  session_.respond(id, live::refusal_head(r, body.size()), false);
  session_.send_data(id, body, true);
}

void h2_connection::on_data(std::int32_t id, std::string_view data, bool last) {
  if (auto it = streams_.find(id); it != streams_.end()) it->second->take(data, last);
}

void h2_connection::on_trailers(std::int32_t id, std::vector<http::header_field>) {
  // Request trailers end the body; what they say does not go up yet (HTTP/1.1 upstreams).
  if (auto it = streams_.find(id); it != streams_.end()) it->second->take({}, true);
}

void h2_connection::on_reset(std::int32_t id, std::uint32_t) {
  if (auto it = streams_.find(id); it != streams_.end()) it->second->end();
}

inner_request h2_connection::inner_request_of(const h2_stream& st) {
  const auto& head = st.request.head;
  return {.method = head.method,
          .target = head.target,
          .host = head.find("host"),
          .scheme = st.request.scheme,
          .authority = st.request.authority,
          .http2 = true};
}

asio::awaitable<void> h2_connection::refuse_inner(http_exchange& ex, const h2_stream& st) {
  // Named, not a temporary in the co_await: GCC 12 destroys such temporaries twice.
  const auto checked = check_inner_request(s_.target, inner_request_of(st));
  co_await ex.refuse(std::get<live::refusal>(checked), true);
}

void h2_connection::expire_stream(http_exchange& ex, h2_stream& st) {
  const auto refused = ex.expire(st.deadline.waiting(), cut_short_);
  if (refused && !st.gone)
    st.refuse_now(*refused, s_.ctx->scrub(ex.entry().host), s_.ctx->session_id());
}

asio::awaitable<void> h2_connection::serve_stream(std::shared_ptr<h2_stream> st) {
  auto& ctx = *s_.ctx;
  auto& head = st->request.head;
  const auto& target = s_.target;
  http_exchange ex({*st, st->deadline, ctx, s_.pool, s_.tag}, head.method, s_.holders);
  auto& entry = ex.entry();
  ex.identify("https", target.dest, head.target);
  entry.captured = s_.captured;
  entry.http2 = true;
  try {
    // The check's refusal is made and answered in a frame of its own: this one lives as long as
    // the response.
    auto path = inner_request_path(target, inner_request_of(*st));
    if (!path) {
      co_await refuse_inner(ex, *st);
    } else {
      st->deadline.arm(ctx.options().timeouts.body, live::waiting_for::request_body);
      // The deadline cancels the exchange (through the stream's cancellation slot, as a reset by
      // the client does) rather than racing it: a race is two coroutines spawned per stream.
      bool expired = false;
      st->deadline.cancel_on_expiry(st, st->cancel, expired);
      std::exception_ptr failure;
      try {
        // Named, not a temporary in the co_await: GCC 12 destroys such temporaries twice.
        const request_target to{target.dest, "https", std::move(*path), true};
        co_await ex.forward(head, to);
      } catch (...) {
        failure = std::current_exception();
      }
      st->deadline.stop();
      // What the deadline's cancellation threw is its timeout, handled below.
      if (failure && !expired) std::rethrow_exception(failure);
      if (expired) expire_stream(ex, *st);
    }
  } catch (const std::exception& e) {
    session::log(spdlog::level::debug, s_.tag, "stream {}: {}", st->id, ctx.scrub(e.what()));
  }
  if (ex.active())
    ex.finish(entry.status, true, cut_short_ ? "shutdown" : st->gone ? "cancelled" : "aborted");
  // A response not given whole is never left looking whole: the stream is reset.
  if (!st->gone && !st->answered) session_.reset(st->id, NGHTTP2_INTERNAL_ERROR);
  wake_writer();
}

}  // namespace broker::proxy
