// streams serve: the fake api.openai.com (streams.cpp's usage): SSE answers paced from their
// start, over HTTP/1.1 (chunked) or HTTP/2 (nghttp2), whichever the client's ALPN chooses.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include <boost/beast/http.hpp>

#include "streams.hpp"

using namespace bench;
using namespace std::chrono_literals;

namespace {

struct serve_counts {
  long streams = 0, events = 0, connections = 0;
};

// One SSE event: the bytes of a chat.completion.chunk event (the last with the usage, then
// `data: [DONE]`), stamped with the moment it is made.
std::string event_data(int i, int n) {
  std::string data = R"(data: {"id":"chatcmpl-bench","object":"chat.completion.chunk",)"
                     R"("model":"gpt-4o","choices":[{"index":0,"delta":{"content":"tok)" +
                     std::to_string(i) + R"( "}}])";
  if (i == n - 1)
    data += R"(,"usage":{"prompt_tokens":12,"completion_tokens":)" + std::to_string(n) +
            R"(,"total_tokens":)" + std::to_string(12 + n) + "}";
  data += R"(,"sent_ns":)" + std::to_string(monotonic_ns()) + "}\n\n";
  if (i == n - 1) data += "data: [DONE]\n\n";
  return data;
}

// HTTP/1.1: chunked answers, one after another.
asio::awaitable<void> serve_h1(ssl::stream<tcp::socket>& s, const serve_options& o,
                               serve_counts& counts) {
  error_code ec;
  boost::beast::flat_buffer buffer;
  asio::steady_timer pace(s.get_executor());
  static constexpr std::string_view head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (;;) {
    http::request<http::string_body> request;
    co_await http::async_read(s, buffer, request, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    co_await asio::async_write(s, asio::buffer(head),
                               asio::redirect_error(asio::use_awaitable, ec));
    // Paced from the answer's start, so one late write does not shift the rest.
    const auto start = clock_type::now();
    for (int i = 0; i < o.events && !ec; ++i) {
      pace.expires_at(start + seconds(o.interval * i));
      co_await pace.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      const std::string data = event_data(i, o.events);
      char size[16];
      std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      const std::string chunk = size + data + "\r\n";
      co_await asio::async_write(s, asio::buffer(chunk),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (!ec) ++counts.events;
    }
    if (ec) break;
    co_await asio::async_write(s, asio::buffer("0\r\n\r\n", 5),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    ++counts.streams;
  }
}

// An HTTP/2 connection (nghttp2): one reader feeding the session, one writer sending what it has
// to say, and each answer's events paced by a coroutine of its own that hands them to the
// session's data source.
class h2_connection : public std::enable_shared_from_this<h2_connection> {
 public:
  h2_connection(ssl::stream<tcp::socket> s, const serve_options& o, serve_counts& counts)
      : s_(std::move(s)), wake_(s_.get_executor()), o_(o), counts_(counts) {}
  ~h2_connection() { nghttp2_session_del(session_); }

  asio::awaitable<void> run() {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_server_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o_.max_streams}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 1);
    auto self = shared_from_this();
    asio::co_spawn(s_.get_executor(), write_loop(), asio::detached);
    char block[16384];
    for (;;) {
      error_code ec;
      const std::size_t n = co_await s_.async_read_some(
          asio::buffer(block), asio::redirect_error(asio::use_awaitable, ec));
      if (ec || nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(block), n) < 0)
        break;
      kick();
    }
    closed_ = true;
    for (auto& [id, st] : streams_) st->closed = true;
    kick();
  }

 private:
  struct answer {
    std::string pending;  // events not yet taken by the session
    bool done = false, closed = false;
  };

  void kick() { wake_.cancel(); }

  asio::awaitable<void> write_loop() {
    auto self = shared_from_this();
    co_await send_h2_output(session_, s_, wake_, closed_);
    error_code ignored;
    s_.next_layer().close(ignored);
  }

  asio::awaitable<void> pace(int32_t id, std::shared_ptr<answer> a) {
    auto self = shared_from_this();
    asio::steady_timer pace(s_.get_executor());
    const auto start = clock_type::now();
    for (int i = 0; i < o_.events && !a->closed; ++i) {
      pace.expires_at(start + seconds(o_.interval * i));
      co_await pace.async_wait(asio::as_tuple(asio::use_awaitable));
      if (a->closed) co_return;
      a->pending += event_data(i, o_.events);
      ++counts_.events;
      if (i == o_.events - 1) a->done = true;
      nghttp2_session_resume_data(session_, id);
      kick();
    }
  }

  static ssize_t read_data(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void*) {
    auto* a = static_cast<answer*>(source->ptr);
    const std::size_t n = std::min(length, a->pending.size());
    std::memcpy(buf, a->pending.data(), n);
    a->pending.erase(0, n);
    if (a->pending.empty() && a->done)
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    else if (n == 0)
      return NGHTTP2_ERR_DEFERRED;
    return static_cast<ssize_t>(n);
  }

  static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* self = static_cast<h2_connection*>(user);
    const bool request_ended =
        (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
    if (!request_ended) return 0;
    const int32_t id = frame->hd.stream_id;
    auto a = std::make_shared<answer>();
    self->streams_[id] = a;
    static constexpr char status[] = ":status", ok[] = "200", type[] = "content-type",
                          sse[] = "text/event-stream";
    const nghttp2_nv head[] = {
        {(uint8_t*)status, (uint8_t*)ok, sizeof status - 1, sizeof ok - 1, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t*)type, (uint8_t*)sse, sizeof type - 1, sizeof sse - 1, NGHTTP2_NV_FLAG_NONE}};
    nghttp2_data_provider body{};
    body.source.ptr = a.get();
    body.read_callback = read_data;
    nghttp2_submit_response(session, id, head, 2, &body);
    asio::co_spawn(self->s_.get_executor(), self->pace(id, a), asio::detached);
    return 0;
  }

  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* user) {
    auto* self = static_cast<h2_connection*>(user);
    if (auto it = self->streams_.find(id); it != self->streams_.end()) {
      it->second->closed = true;
      if (error == NGHTTP2_NO_ERROR && it->second->done) ++self->counts_.streams;
      self->streams_.erase(it);
    }
    return 0;
  }

  ssl::stream<tcp::socket> s_;
  asio::steady_timer wake_;
  const serve_options& o_;
  serve_counts& counts_;
  nghttp2_session* session_ = nullptr;
  std::map<int32_t, std::shared_ptr<answer>> streams_;
  bool closed_ = false;
};

asio::awaitable<void> serve_connection(ssl::stream<tcp::socket> s, const serve_options& o,
                                       serve_counts& counts) {
  error_code ec;
  co_await s.async_handshake(ssl::stream_base::server,
                             asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return;
  ++counts.connections;
  const unsigned char* alpn = nullptr;
  unsigned length = 0;
  SSL_get0_alpn_selected(s.native_handle(), &alpn, &length);
  if (length == 2 && alpn[0] == 'h' && alpn[1] == '2')
    co_await std::make_shared<h2_connection>(std::move(s), o, counts)->run();
  else
    co_await serve_h1(s, o, counts);
  --counts.connections;
}

// h2 when the client offers it, else HTTP/1.1.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned inlen, void*) {
  static constexpr unsigned char ours[] = "\x02h2\x08http/1.1";
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, ours, sizeof ours - 1, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

int bench::serve(const serve_options& o) {
  asio::io_context io(1);
  ssl::context tls(ssl::context::tls_server);
  tls.use_certificate_chain_file(o.cert);
  tls.use_private_key_file(o.key, ssl::context::pem);
  SSL_CTX_set_mode(tls.native_handle(), SSL_MODE_RELEASE_BUFFERS);
  if (o.max_streams > 0) SSL_CTX_set_alpn_select_cb(tls.native_handle(), select_alpn, nullptr);
  tcp::acceptor acceptor(io, parse_endpoint(o.listen));
  std::printf("{\"event\":\"listening\",\"port\":%u}\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  serve_counts counts;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (;;) {
          auto socket = co_await acceptor.async_accept(asio::use_awaitable);
          socket.set_option(tcp::no_delay(true));
          asio::co_spawn(
              io, serve_connection(ssl::stream<tcp::socket>(std::move(socket), tls), o, counts),
              asio::detached);
        }
      },
      asio::detached);
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](error_code, int) { io.stop(); });
  io.run();
  std::printf("{\"event\":\"done\",\"streams\":%ld,\"events\":%ld,\"open\":%ld}\n", counts.streams,
              counts.events, counts.connections);
  return 0;
}
