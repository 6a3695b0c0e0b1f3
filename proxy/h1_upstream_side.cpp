#include "proxy/h1_upstream_side.hpp"

#include <array>

#include "base/secret.hpp"
#include "config/request_target.hpp"
#include "http/message.hpp"
#include "proxy/relay_errors.hpp"

namespace broker::proxy {

namespace {

void insert_before_blank_line(std::string& head, std::string_view lines) {
  head.insert(head.size() - 2, lines);
}

// A request body with no length of its own (an HTTP/2 client may send one without
// Content-Length): HTTP/1.1 carries it chunked.
bool needs_chunking(const http::message_head& head) {
  return head.has_body && !head.chunked && !head.content_length;
}

}  // namespace

std::string upstream_head(const http::message_head& head, std::string_view target,
                          const config::destination& dest, bool https, bool websocket) {
  std::string out = http::serialize_request_head(head, target);
  if (!head.find("host")) {
    // HTTP/1.0 clients may omit Host; the upstream needs it (RFC 9112 §3.2).
    const auto line_end = out.find("\r\n") + 2;
    const bool default_port = dest.port == (https ? 443 : 80);
    out.insert(line_end,
               "Host: " +
                   (default_port ? (dest.ip && !dest.ip->v4 ? "[" + dest.host + "]" : dest.host)
                                 : to_string(dest)) +
                   "\r\n");
  }
  if (needs_chunking(head)) insert_before_blank_line(out, "Transfer-Encoding: chunked\r\n");
  // Connection and Upgrade are hop-by-hop; a WebSocket handshake needs them on this hop too.
  if (websocket) insert_before_blank_line(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
  return out;
}

h1_upstream_side::h1_upstream_side(std::unique_ptr<upstream_connection> c) : conn_(std::move(c)) {}

asio::awaitable<error_code> h1_upstream_side::write(std::string_view bytes) {
  auto [ec, n] = co_await conn_->io.write(bytes);
  count_out(n);
  co_return ec;
}

asio::awaitable<error_code> h1_upstream_side::send_head(const http::message_head& head,
                                                        const std::string& target,
                                                        const config::destination& dest, bool https,
                                                        bool websocket) {
  chunked_ = head.chunked || needs_chunking(head);
  std::string out = upstream_head(head, target, dest, https, websocket);
  // The head may carry a real value: wiped once sent, or however the exchange ends.
  const base::wipe_on_exit wipe_head([&out] { base::wipe(out); });
  co_return co_await write(out);
}

asio::awaitable<error_code> h1_upstream_side::send_body(std::string_view data, bool last) {
  if (!chunked_) co_return data.empty() ? error_code{} : co_await write(data);
  // Framed around rather than copied: a body read whole may be tens of MiB.
  std::string before, after;
  if (!data.empty()) {
    http::append_chunk_size(before, data.size());
    after = "\r\n";
  }
  if (last) http::frame_body(after, {}, true, true);
  const std::array<std::string_view, 3> pieces{before, data, after};
  for (std::string_view piece : pieces) {
    if (piece.empty()) continue;
    if (auto ec = co_await write(piece)) co_return ec;
  }
  co_return error_code{};
}

asio::awaitable<error_code> h1_upstream_side::send_wire(std::string_view framed) {
  co_return co_await write(framed);
}

asio::awaitable<upstream_side::response_head> h1_upstream_side::read_head(
    const std::string& method) {
  consume_last_piece();
  auto& response = response_.emplace(http::parser::kind::response, method);
  auto& in = conn_->in;
  for (;;) {
    if (!in.empty()) {
      const auto r = response.feed(in.view());
      in.consume(r.consumed);
      count_in(r.consumed);
      if (r.status == http::parse_status::head_complete ||
          r.status == http::parse_status::message_complete)
        co_return response_head{&response.head(), response.message_done(), {}, {}};
      if (r.status == http::parse_status::error)
        co_return response_head{nullptr, false, response_head::failure::malformed,
                                response.error_reason()};
    }
    auto [ec, n] = co_await conn_->io.read_some(in.space());
    // Abandoned: the request body failed first.
    if (ec == asio::error::operation_aborted)
      co_return response_head{nullptr, false, response_head::failure::abandoned, {}};
    if (ec) co_return response_head{nullptr, false, response_head::failure::closed, {}};
    in.commit(n);
    heard_from_upstream();
  }
}

void h1_upstream_side::consume_last_piece() {
  conn_->in.consume(handed_out_);
  handed_out_ = 0;
  decoded_.clear();
}

asio::awaitable<upstream_side::body_piece> h1_upstream_side::read_body(bool decode) {
  consume_last_piece();
  auto& response = *response_;
  auto& in = conn_->in;
  const auto& head = response.head();
  // Only chunked bodies need decoding; otherwise the bytes consumed are the body itself.
  decode = decode && head.chunked;
  for (;;) {
    if (!in.empty()) {
      const auto r = response.feed(in.view(), decode ? &decoded_ : nullptr);
      if (r.status == http::parse_status::error)
        throw upstream_error("malformed response body: " + response.error_reason());
      count_in(r.consumed);
      const bool last = r.status == http::parse_status::message_complete;
      handed_out_ = r.consumed;
      const auto raw = in.view().substr(0, r.consumed);
      if (r.consumed > 0 || last)
        co_return body_piece{decode ? std::string_view(decoded_) : raw, raw, last};
    }
    auto [ec, n] = co_await conn_->io.read_some(in.space());
    if (ec == asio::error::eof ||
        (ec == asio::ssl::error::stream_truncated && !head.chunked && !head.content_length)) {
      // Read-until-close ends here (a missing close_notify is tolerated only there, where the
      // length is unknown anyway, as browsers and curl do).
      if (response.finish().status != http::parse_status::message_complete)
        throw upstream_error("upstream closed mid-response");
      response_.reset();  // not reusable
      co_return body_piece{{}, {}, true, true};
    }
    if (ec) throw upstream_error("upstream read failed: " + ec.message());
    in.commit(n);
    heard_from_upstream();
  }
}

bool h1_upstream_side::reusable() {
  consume_last_piece();
  return response_ && response_->message_done() && response_->keep_alive() && conn_->in.empty();
}

void h1_upstream_side::give_back(upstream_pool& pool) {
  pool.give_back(std::move(conn_));
}

std::optional<client_side::raw_connection> h1_upstream_side::raw() {
  consume_last_piece();
  return client_side::raw_connection{conn_->io, conn_->in};
}

}  // namespace broker::proxy
