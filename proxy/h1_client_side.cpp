// An exchange's client side on an HTTP/1.1 connection (h1_client_side.hpp).
#include "proxy/h1_client_side.hpp"

#include "base/deadline.hpp"
#include "live/refusal.hpp"
#include "proxy/relay_errors.hpp"

namespace broker::proxy {

void h1_client_side::start(http::parser& request) {
  end();
  request_ = &request;
}

void h1_client_side::end() {
  in_.consume(lent_);
  lent_ = 0;
  decoded_.clear();
}

bool h1_client_side::keep_alive() const {
  return request_ && request_->keep_alive() && !draining_;
}

bool h1_client_side::body_here(std::size_t bytes) const {
  // Only a Content-Length body says where it ends before it is read; none of it is read yet.
  if (!request_) return false;
  const auto& head = request_->head();
  return !head.chunked && head.content_length && *head.content_length <= bytes &&
         in_.size() - lent_ >= *head.content_length;
}

asio::awaitable<client_side::body_piece> h1_client_side::read_body(bool decode) {
  end();
  for (;;) {
    if (!in_.empty()) {
      const auto r = request_->feed(in_.view(), decode ? &decoded_ : nullptr);
      if (r.status == http::parse_status::error) throw body_error(request_->error_reason());
      const bool last = r.status == http::parse_status::message_complete;
      if (r.consumed > 0 || last) {
        lent_ = r.consumed;
        co_return body_piece{decoded_, in_.view().substr(0, r.consumed), last};
      }
    }
    timer_.arm(ctx_->options().timeouts.body, live::waiting_for::request_body);
    auto [ec, n] = co_await client_.read_some(in_.space());
    if (ec) throw client_gone("client closed the connection mid-body");
    in_.commit(n);
  }
}

asio::awaitable<void> h1_client_side::send_interim(const http::message_head& head) {
  co_await write_all(client_, http::serialize_response_head(head));
}

asio::awaitable<void> h1_client_side::send_head(const http::message_head& head, bool keep_alive,
                                                bool complete) {
  wire_ = http::serialize_response_head(head);
  if (!keep_alive) wire_.insert(wire_.size() - 2, "Connection: close\r\n");
  chunked_ = head.chunked;
  if (complete) co_await flush();
}

asio::awaitable<void> h1_client_side::send_body(std::string_view data, bool last) {
  if (!chunked_ && wire_.empty()) {
    if (!data.empty()) co_await write_all(client_, data);
    co_return;
  }
  http::frame_body(wire_, data, chunked_, last);
  co_await flush();
}

asio::awaitable<void> h1_client_side::send_wire(std::string_view framed) {
  // With the head when it still waits: one write, one TLS record and one wake-up of the client.
  if (wire_.empty()) {
    co_await write_all(client_, framed);
    co_return;
  }
  wire_.append(framed);
  co_await flush();
}

asio::awaitable<void> h1_client_side::flush() {
  if (wire_.empty()) co_return;
  co_await write_all(client_, wire_);
  // Let go of, not kept for the next piece: a streamed answer's connection waits most of its
  // life for the next event.
  std::string().swap(wire_);
}

asio::awaitable<void> h1_client_side::send_refusal(const live::refusal& r, std::string_view host,
                                                   std::string_view session, bool keep_alive) {
  co_await write_all(client_, live::render_refusal(r, host, session, keep_alive));
}

asio::awaitable<std::optional<client_side::raw_connection>> h1_client_side::accept_websocket(
    const http::message_head& head) {
  std::string out = http::serialize_response_head(head);
  // Connection and Upgrade are hop-by-hop: this hop's own.
  out.insert(out.size() - 2, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
  co_await write_all(client_, out);
  end();
  co_return raw_connection{client_, in_};
}

}  // namespace broker::proxy
