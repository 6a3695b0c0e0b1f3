#include "proxy/h2_upstream.hpp"

#include <nghttp2/nghttp2.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <array>
#include <vector>

#include "config/request_target.hpp"
#include "live/refusal.hpp"
#include "proxy/limits.hpp"
#include "proxy/relay_errors.hpp"

namespace broker::proxy {

// One exchange's stream: its request up, its response as the exchange reads it.
class h2_upstream::stream_side final : public upstream_side {
 public:
  explicit stream_side(std::shared_ptr<h2_upstream> c)
      : c_(std::move(c)),
        event_(c_->conn_->io.get_executor(), std::chrono::steady_clock::time_point::max()) {}

  ~stream_side() override {
    if (id_ == 0) return;
    c_->streams_.erase(id_);
    // Let go of before its response ended: the upstream stops working on it.
    if (!ended_ && !reset_) c_->session_.reset(id_, NGHTTP2_CANCEL);
    if (c_->streams_.empty()) c_->idle_since_ = std::chrono::steady_clock::now();
    c_->wake_writer();
  }

  // What the connection hears for this stream.
  void response(http::message_head head, bool end_stream) {
    heads_.emplace_back(std::move(head), end_stream);
    if (end_stream) ended_ = true;
    heard();
  }
  void data(std::string_view bytes, bool last) {
    data_.append(bytes);
    count_in(bytes.size());
    if (last) ended_ = true;
    heard();
  }
  void trailers(std::vector<http::header_field> fields) {
    trailers_ = std::move(fields);
    ended_ = true;
    heard();
  }
  void reset(std::uint32_t code) {
    reset_ = true;
    reset_code_ = code;
    wake();
  }
  void wake() { event_.cancel(); }

  bool carries_wire() const override { return false; }

  asio::awaitable<error_code> send_head(const http::message_head& head, const std::string& target,
                                        const config::destination& dest, bool https,
                                        bool) override {
    if (c_->closed_) co_return make_error_code(asio::error::connection_reset);
    const bool default_port = dest.port == (https ? 443 : 80);
    const std::string authority =
        default_port ? (dest.ip && !dest.ip->v4 ? "[" + dest.host + "]" : dest.host)
                     : to_string(dest);
    id_ = c_->session_.request(head, https ? "https" : "http", authority, target, !head.has_body);
    if (id_ == 0) co_return make_error_code(asio::error::connection_aborted);
    c_->streams_[id_] = this;
    for (const auto& f : head.headers) count_out(f.name.size() + f.value.size() + 4);
    c_->wake_writer();
    co_return error_code{};
  }

  asio::awaitable<error_code> send_body(std::string_view data, bool last) override {
    if (reset_ || c_->closed_) co_return make_error_code(asio::error::connection_reset);
    c_->session_.send_data(id_, data, last);
    count_out(data.size());
    c_->wake_writer();
    // The upstream's window decides how fast this goes; hold no more than the bound meanwhile.
    while (!reset_ && !c_->closed_ && c_->session_.unsent(id_) > limits::max_unsent_per_h2_stream)
      co_await wait();
    co_return reset_ || c_->closed_ ? make_error_code(asio::error::connection_reset) : error_code{};
  }

  asio::awaitable<error_code> send_wire(std::string_view) override {
    co_return make_error_code(asio::error::operation_not_supported);
  }

  asio::awaitable<response_head> read_head(const std::string&) override {
    while (heads_.empty() && !reset_ && !c_->closed_) co_await wait();
    if (heads_.empty()) co_return response_head{nullptr, false, response_head::failure::closed, {}};
    auto [head, complete] = std::move(heads_.front());
    heads_.erase(heads_.begin());
    if (heads_.empty()) heads_.shrink_to_fit();  // none waiting: no room held for the body's life
    head_ = std::move(head);
    head_.reason = std::string(http::status_text(head_.status));
    // Without a length of its own, an HTTP/1.1 client gets the body chunked (not until close).
    if (head_.status >= 200 && head_.has_body && !head_.content_length) {
      head_.chunked = true;
      head_.headers.push_back({"transfer-encoding", "chunked"});
    }
    for (const auto& f : head_.headers) count_in(f.name.size() + f.value.size() + 4);
    co_return response_head{&head_, complete, response_head::failure::none, {}};
  }

  bool has_buffered() const override { return !data_.empty() || ended_; }

  asio::awaitable<body_piece> read_body(bool) override {
    give_back_taken();
    if (data_.empty() && !ended_ && !reset_ && !c_->closed_) {
      // Waiting, perhaps for long (a streamed answer's next event): no buffer held meanwhile.
      std::string().swap(data_);
      std::string().swap(taken_);
      // Waited on here, not in wait(): no frame of its own for the whole wait.
      do {
        event_.expires_at(std::chrono::steady_clock::time_point::max());
        co_await event_.async_wait(use_tuple);
      } while (data_.empty() && !ended_ && !reset_ && !c_->closed_);
    }
    if (data_.empty() && !ended_)
      throw upstream_error(reset_ ? "the upstream reset the stream (HTTP/2 error " +
                                        std::to_string(reset_code_) + ")"
                                  : "the upstream's HTTP/2 connection ended mid-response");
    taken_.swap(data_);
    data_.clear();
    body_piece piece{taken_, taken_, ended_, false};
    if (ended_ && trailers_) piece.trailers = &*trailers_;
    co_return piece;
  }

  bool reusable() override { return ended_ && !reset_; }
  void give_back(upstream_pool&) override {}  // the connection stays pooled; the stream is done
  std::optional<client_side::raw_connection> raw() override { return std::nullopt; }

 private:
  void heard() {
    heard_from_upstream();
    wake();
  }
  // The bytes handed out last are taken: the upstream may send as many more.
  void give_back_taken() {
    if (taken_.empty()) return;
    c_->session_.consumed(id_, taken_.size());
    taken_.clear();
    c_->wake_writer();
  }
  asio::awaitable<void> wait() {
    event_.expires_at(std::chrono::steady_clock::time_point::max());
    co_await event_.async_wait(use_tuple);
  }

  std::shared_ptr<h2_upstream> c_;
  std::int32_t id_ = 0;
  asio::steady_timer event_;  // cancelled to wake the exchange waiting on this stream
  // Heads heard, not yet read: interim ones, then the final one. A vector: a deque allocates its
  // map and a block when made, and most streams hear one head.
  std::vector<std::pair<http::message_head, bool>> heads_;
  http::message_head head_;  // the head read_head() handed out last
  std::string data_;         // body bytes received, not yet handed out
  std::string taken_;        // the piece handed out last
  std::optional<std::vector<http::header_field>> trailers_;
  bool ended_ = false;
  bool reset_ = false;
  std::uint32_t reset_code_ = 0;
};

h2_upstream::h2_upstream(std::unique_ptr<upstream_connection> conn)
    : conn_(std::move(conn)),
      session_(*this),
      writer_wake_(conn_->io.get_executor(), std::chrono::steady_clock::time_point::max()),
      idle_since_(std::chrono::steady_clock::now()) {}

h2_upstream::~h2_upstream() = default;

void h2_upstream::start() {
  const auto ex = conn_->io.get_executor();
  asio::co_spawn(
      ex,
      [](std::shared_ptr<h2_upstream> self) -> asio::awaitable<void> {
        co_await self->reader();
      }(shared_from_this()),
      asio::detached);
  asio::co_spawn(
      ex,
      [](std::shared_ptr<h2_upstream> self) -> asio::awaitable<void> {
        co_await self->writer();
      }(shared_from_this()),
      asio::detached);
}

std::unique_ptr<upstream_side> h2_upstream::open_stream() {
  if (!can_start()) return nullptr;
  return std::make_unique<stream_side>(shared_from_this());
}

void h2_upstream::close() {
  end("closed by the broker");
}

void h2_upstream::end(const std::string&) {
  if (closed_) return;
  closed_ = true;
  for (auto& [id, st] : streams_) st->reset(NGHTTP2_INTERNAL_ERROR);
  wake_writer();
  // The reader, if still reading, stops.
  error_code ignored;
  conn_->io.socket().shutdown(tcp::socket::shutdown_both, ignored);
  conn_->io.socket().cancel(ignored);
}

void h2_upstream::wake_writer() {
  writer_wake_.cancel();
}

asio::awaitable<void> h2_upstream::reader() {
  std::array<char, 16 * 1024> buffer;
  for (;;) {
    auto [ec, n] = co_await conn_->io.read_some(buffer);
    if (ec || n == 0) break;
    const bool more = session_.receive({buffer.data(), n});
    wake_writer();
    if (!more) break;
  }
  end(session_.failure());
}

asio::awaitable<void> h2_upstream::writer() {
  for (;;) {
    const std::string out = session_.output();
    if (!out.empty() && !closed_) {
      auto [ec, n] = co_await conn_->io.write(out);
      if (ec) {
        end("write failed");
        co_return;
      }
      // Streams waiting for the upstream's window: what they gave may have left.
      for (auto& [id, st] : streams_) st->wake();
      continue;
    }
    if (closed_) co_return;
    writer_wake_.expires_at(std::chrono::steady_clock::time_point::max());
    co_await writer_wake_.async_wait(use_tuple);
  }
}

void h2_upstream::on_response(std::int32_t id, http::message_head head, bool end_stream) {
  if (auto it = streams_.find(id); it != streams_.end())
    it->second->response(std::move(head), end_stream);
}

void h2_upstream::on_data(std::int32_t id, std::string_view data, bool last) {
  if (auto it = streams_.find(id); it != streams_.end()) it->second->data(data, last);
}

void h2_upstream::on_trailers(std::int32_t id, std::vector<http::header_field> fields) {
  if (auto it = streams_.find(id); it != streams_.end()) it->second->trailers(std::move(fields));
}

void h2_upstream::on_reset(std::int32_t id, std::uint32_t error_code) {
  if (auto it = streams_.find(id); it != streams_.end()) it->second->reset(error_code);
}

}  // namespace broker::proxy
