// Long streamed model answers by the thousand, for the gateway scale benchmark
// (bench/gateway_streams.py). Two roles, each one thread of Asio coroutines:
//
//   streams serve --listen ADDR:PORT --cert FILE --key FILE [--events N] [--interval S]
//       a fake api.openai.com over TLS: every POST is answered with an SSE stream of N
//       chat.completion.chunk events, one every S seconds, the last with the usage fields the
//       broker's meter reads, then `data: [DONE]`; then the next request on the connection. As
//       the real API does, it offers HTTP/2 (ALPN h2, at most --max-streams streams on a
//       connection, 100 by default) and HTTP/1.1 (chunked).
//       Each event carries the moment it was written (CLOCK_MONOTONIC ns, "sent_ns"). Prints
//       {"event":"listening","port":P}, and at SIGTERM the streams and events it served.
//   streams run --proxy H:P --target HOST:PORT --ca FILE --sessions FILE [--per-session K]
//               [--duration S] [--concurrency C]
//       K streams for each line of the sessions file (`ID:TOKEN DUMMY`: the session's proxy
//       credential and the dummy of its bearer credential): each a CONNECT tunnel through the
//       proxy with that session's Proxy-Authorization, TLS in it, and POSTs back to back, each
//       read as the events come. Prints {"event":"ready",...} once every stream is set up (or
//       failed), a {"event":"tick",...} line every second (streams open, events and answers so
//       far, errors), and after S seconds {"event":"done",...} with each event's delay (read
//       whole less written; one machine, one clock) p50/p99/max.
// A stream that fails counts an error and reconnects after a pause; a stream cut at the end is
// not an error.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nghttp2/nghttp2.h>
#include <CLI/CLI.hpp>
#include <boost/beast/http.hpp>

#include "load_client.hpp"

using namespace bench;
using namespace std::chrono_literals;

namespace {

std::int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

clock_type::duration seconds(double s) {
  return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
}

// ---- serve ----

struct serve_options {
  std::string listen = "127.0.0.1:0";
  std::string cert, key;
  int events = 60;
  double interval = 1.0;
  unsigned max_streams = 100;
};

struct serve_counts {
  long streams = 0, events = 0, connections = 0;
};

// One SSE event as a chunk of the chunked body.
std::string event_chunk(int i, int n) {
  std::string data = R"(data: {"id":"chatcmpl-bench","object":"chat.completion.chunk",)"
                     R"("model":"gpt-4o","choices":[{"index":0,"delta":{"content":"tok)" +
                     std::to_string(i) + R"( "}}])";
  if (i == n - 1)
    data += R"(,"usage":{"prompt_tokens":12,"completion_tokens":)" + std::to_string(n) +
            R"(,"total_tokens":)" + std::to_string(12 + n) + "}";
  data += R"(,"sent_ns":)" + std::to_string(monotonic_ns()) + "}\n\n";
  if (i == n - 1) data += "data: [DONE]\n\n";
  char size[16];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
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
      const std::string chunk = event_chunk(i, o.events);
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

// Sends what an HTTP/2 session has to say until `ended`, the session is done, or the socket
// fails; waits on `wake` (cancelled by whoever gives the session more to say) when it has nothing.
asio::awaitable<void> send_h2_output(nghttp2_session* session, ssl::stream<tcp::socket>& s,
                                     asio::steady_timer& wake, const bool& ended) {
  std::string out;
  while (!ended) {
    out.clear();
    const uint8_t* data = nullptr;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(session, &data)) > 0)
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    if (n < 0) co_return;
    if (!out.empty()) {
      error_code ec;
      co_await asio::async_write(s, asio::buffer(out),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      continue;
    }
    if (!nghttp2_session_want_read(session) && !nghttp2_session_want_write(session)) co_return;
    wake.expires_at(clock_type::time_point::max());
    co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
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
    int next = 0;
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
      std::string chunk = event_chunk(i, o_.events);
      // The chunk's size line and CRLF are HTTP/1.1's: HTTP/2 frames the data itself.
      a->pending += chunk.substr(chunk.find("\r\n") + 2, chunk.size() - chunk.find("\r\n") - 4);
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

int serve(const serve_options& o) {
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

// ---- run ----

struct run_options : route {
  std::string proxy, ca, sessions_file;
  int per_session = 10;
  double duration = 300;
  int concurrency = 64;
  bool h2 = false;  // a session's streams on one HTTP/2 connection (ALPN h2 in the tunnel)
};

struct session_line {
  std::string proxy_authorization;  // Basic base64(ID:TOKEN)
  std::string dummy;                // the bearer credential's dummy
};

class streams {
 public:
  streams(asio::io_context& io, ssl::context& tls, const run_options& o,
          std::vector<session_line> sessions)
      : io_(io), tls_(tls), o_(o), sessions_(std::move(sessions)) {
    total_ = static_cast<int>(sessions_.size()) * o_.per_session;
  }

  asio::awaitable<void> run() {
    const auto setup_start = clock_type::now();
    auto set_up = std::make_shared<asio::steady_timer>(io_, clock_type::time_point::max());
    int workers = std::min(o_.concurrency, total_);
    for (int w = 0; w < std::min(o_.concurrency, total_); ++w)
      asio::co_spawn(io_, worker(), [&workers, set_up](std::exception_ptr) {
        if (--workers == 0) set_up->cancel();
      });
    if (workers > 0) co_await set_up->async_wait(asio::as_tuple(asio::use_awaitable));
    std::printf("{\"event\":\"ready\",\"streams\":%d,\"open\":%ld", total_, open_);
    print_errors(counts_);
    std::printf(",\"setup_seconds\":%.2f}\n",
                std::chrono::duration<double>(clock_type::now() - setup_start).count());
    std::fflush(stdout);
    delays_.clear();  // the delays while the others were still set up are not the run's

    const auto end = clock_type::now() + seconds(o_.duration);
    asio::steady_timer tick(io_);
    asio::signal_set signals(io_, SIGINT, SIGTERM);
    bool signalled = false;
    signals.async_wait([&](error_code ec, int) {
      if (ec) return;
      signalled = true;
      tick.cancel();
    });
    for (auto next = clock_type::now() + 1s; !signalled && clock_type::now() < end; next += 1s) {
      tick.expires_at(std::min(next, end));
      co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
      std::printf(
          "{\"event\":\"tick\",\"open\":%ld,\"events\":%ld,\"answers\":%ld,\"errors\":%ld}\n",
          open_, events_, counts_.ok, counts_.errors);
      std::fflush(stdout);
    }
    signals.cancel();
    stopping_ = true;
    for (auto& c : live_)
      if (c) c->close();
    std::sort(delays_.begin(), delays_.end());
    std::printf("{\"event\":\"done\",\"streams\":%d,\"open\":%ld,\"events\":%ld,\"answers\":%ld",
                total_, open_, events_, counts_.ok);
    print_errors(counts_);
    std::printf(
        ",\"delay_p50_ms\":%.3f,\"delay_p99_ms\":%.3f,\"delay_max_ms\":%.3f,"
        "\"cpu_seconds\":%.2f}\n",
        percentile(delays_, 50), percentile(delays_, 99),
        delays_.empty() ? 0.0 : ms(delays_.back()), cpu_seconds());
    std::fflush(stdout);
  }

 private:
  // Sets up streams in turn (at most `concurrency` at once); each goes on in its own coroutine.
  // Over HTTP/2 a session's streams share its one connection, set up in turn the same way.
  asio::awaitable<void> worker() {
    const int units = o_.h2 ? static_cast<int>(sessions_.size()) : total_;
    while (next_ < units) {
      const int k = next_++;
      live_.emplace_back();
      const std::size_t slot = live_.size() - 1;
      auto c = co_await connect(o_.h2 ? k * o_.per_session : k);
      live_[slot] = c;
      if (o_.h2) {
        asio::co_spawn(io_, h2_streams(k, slot, c), asio::detached);
      } else {
        if (c) ++open_;
        asio::co_spawn(io_, stream(k, slot, c), asio::detached);
      }
    }
  }

  route route_of(int k) const {
    route r = o_;
    r.proxy_authorization =
        sessions_[static_cast<std::size_t>(k / o_.per_session)].proxy_authorization;
    return r;
  }

  // A connection through the proxy; nullptr (an error counted) when it fails.
  asio::awaitable<std::shared_ptr<connection>> connect(int k) {
    auto c = std::make_shared<connection>(io_, tls_);
    try {
      co_await open_connection(c, route_of(k));
      co_return c;
    } catch (const std::exception& e) {
      counts_.fail(e, c->step, c->timed_out);
      c->close();
      co_return nullptr;
    }
  }

  asio::awaitable<void> stream(int k, std::size_t slot, std::shared_ptr<connection> c) {
    const std::string& dummy = sessions_[static_cast<std::size_t>(k / o_.per_session)].dummy;
    const std::string body =
        R"({"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},)"
        R"("messages":[{"role":"user","content":"go on"}]})";
    const std::string request =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: " + o_.host + "\r\nAuthorization: Bearer " +
        dummy +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n" + body;
    while (!stopping_) {
      if (!c) {
        asio::steady_timer pause(io_, 1s);  // a refusing proxy answers at once: no spinning
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        if (stopping_) break;
        c = co_await connect(k);
        if (c) ++open_;
        live_[slot] = c;
        continue;
      }
      try {
        co_await answer(c, request);
        ++counts_.ok;
      } catch (const std::exception& e) {
        if (stopping_) break;
        --open_;
        counts_.fail(e, c->step, c->timed_out);
        c->close();
        c.reset();
        live_[slot] = nullptr;
      }
    }
  }

  // One POST and its whole streamed answer; every event's delay is kept.
  asio::awaitable<void> answer(const std::shared_ptr<connection>& c, const std::string& request) {
    arm(c, o_.step_timeout);
    c->step = "POST";
    co_await asio::async_write(c->stream, asio::buffer(request), asio::use_awaitable);
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    co_await http::async_read_header(c->stream, c->buffer, parser, asio::use_awaitable);
    if (parser.get().result_int() != 200)
      throw std::runtime_error("POST answered " + std::to_string(parser.get().result_int()));
    c->step = "stream";
    std::string pending;
    char block[4096];
    while (!parser.is_done()) {
      arm(c, o_.step_timeout);  // an event a second: a stall is an error, not a wait
      parser.get().body().data = block;
      parser.get().body().size = sizeof block;
      error_code ec;
      co_await http::async_read_some(c->stream, c->buffer, parser,
                                     asio::redirect_error(asio::use_awaitable, ec));
      if (ec && ec != http::error::need_buffer) throw boost::system::system_error(ec);
      pending.append(block, sizeof block - parser.get().body().size);
      take_events(pending);
    }
    disarm(c);
  }

  // A session's streams over one HTTP/2 connection (nghttp2): per_session requests at once, each
  // answered as a stream of events, the next request as soon as one ends. One reader, one writer.
  class h2_client : public std::enable_shared_from_this<h2_client> {
   public:
    h2_client(streams& owner, std::shared_ptr<connection> c, const session_line& session)
        : owner_(owner), c_(std::move(c)), login_(session), wake_(owner.io_) {}
    ~h2_client() { nghttp2_session_del(session_); }

    // Until the connection ends (or the run does).
    asio::awaitable<void> run() {
      nghttp2_session_callbacks* cb = nullptr;
      nghttp2_session_callbacks_new(&cb);
      nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
      nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
      nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
      nghttp2_session_client_new(&session_, cb, this);
      nghttp2_session_callbacks_del(cb);
      nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
      for (int i = 0; i < owner_.o_.per_session; ++i) submit();
      auto self = shared_from_this();
      asio::co_spawn(owner_.io_, write_loop(), asio::detached);
      char block[16384];
      for (;;) {
        error_code ec;
        const std::size_t n = co_await c_->stream.async_read_some(
            asio::buffer(block), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
          if (!owner_.stopping_) owner_.counts_.fail(boost::system::system_error(ec), "h2", false);
          break;
        }
        if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(block), n) < 0) {
          owner_.counts_.fail(std::runtime_error("HTTP/2 protocol error"), "h2", false);
          break;
        }
        wake_.cancel();
      }
      ended_ = true;
      wake_.cancel();
    }

   private:
    struct request {
      std::size_t sent = 0;  // of the body
      int status = 0;
      std::string pending;  // event bytes not yet whole
    };

    void submit() {
      const std::string& host = owner_.o_.host;
      const std::string auth = "Bearer " + login_.dummy;
      const std::string length = std::to_string(body().size());
      auto nv = [](std::string_view name, std::string_view value) {
        return nghttp2_nv{(uint8_t*)name.data(), (uint8_t*)value.data(), name.size(), value.size(),
                          NGHTTP2_NV_FLAG_NONE};
      };
      const nghttp2_nv head[] = {
          nv(":method", "POST"),       nv(":scheme", "https"),
          nv(":authority", host),      nv(":path", "/v1/chat/completions"),
          nv("authorization", auth),   nv("content-type", "application/json"),
          nv("content-length", length)};
      auto r = std::make_unique<request>();
      nghttp2_data_provider provider{};
      provider.source.ptr = r.get();
      provider.read_callback = read_body;
      const int32_t id =
          nghttp2_submit_request(session_, nullptr, head, std::size(head), &provider, nullptr);
      if (id > 0) requests_[id] = std::move(r);
      wake_.cancel();
    }

    asio::awaitable<void> write_loop() {
      auto self = shared_from_this();
      co_await send_h2_output(session_, c_->stream, wake_, ended_);
      c_->close();
    }

    static const std::string& body() {
      static const std::string b =
          R"({"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},)"
          R"("messages":[{"role":"user","content":"go on"}]})";
      return b;
    }
    static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source* source, void*) {
      auto* r = static_cast<request*>(source->ptr);
      const std::size_t n = std::min(length, body().size() - r->sent);
      std::memcpy(buf, body().data() + r->sent, n);
      r->sent += n;
      if (r->sent == body().size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }
    static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                         size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                         void* user) {
      auto* self = static_cast<h2_client*>(user);
      const std::string_view n(reinterpret_cast<const char*>(name), namelen);
      if (n != ":status") return 0;
      if (auto it = self->requests_.find(frame->hd.stream_id); it != self->requests_.end())
        it->second->status =
            std::atoi(std::string(reinterpret_cast<const char*>(value), valuelen).c_str());
      return 0;
    }
    static int on_data(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len,
                       void* user) {
      auto* self = static_cast<h2_client*>(user);
      if (auto it = self->requests_.find(id); it != self->requests_.end()) {
        it->second->pending.append(reinterpret_cast<const char*>(data), len);
        self->owner_.take_events(it->second->pending);
      }
      return 0;
    }
    static int on_close(nghttp2_session*, int32_t id, uint32_t error, void* user) {
      auto* self = static_cast<h2_client*>(user);
      auto it = self->requests_.find(id);
      if (it == self->requests_.end()) return 0;
      const int status = it->second->status;
      self->requests_.erase(it);
      if (self->owner_.stopping_ || self->ended_) return 0;
      if (error != NGHTTP2_NO_ERROR || status != 200)
        self->owner_.counts_.fail(
            std::runtime_error(error ? "stream reset" : "POST answered " + std::to_string(status)),
            "stream", false);
      else
        ++self->owner_.counts_.ok;
      self->submit();
      return 0;
    }

    streams& owner_;
    std::shared_ptr<connection> c_;
    const session_line& login_;  // the session's proxy credential and dummy
    asio::steady_timer wake_;
    nghttp2_session* session_ = nullptr;
    std::map<int32_t, std::unique_ptr<request>> requests_;
    bool ended_ = false;
  };

  // A session's streams over HTTP/2, reconnecting after a pause when its connection fails.
  asio::awaitable<void> h2_streams(int s, std::size_t slot, std::shared_ptr<connection> c) {
    while (!stopping_) {
      if (!c) {
        asio::steady_timer pause(io_, 1s);
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        if (stopping_) break;
        c = co_await connect(s * o_.per_session);
        live_[slot] = c;
        continue;
      }
      const unsigned char* alpn = nullptr;
      unsigned length = 0;
      SSL_get0_alpn_selected(c->stream.native_handle(), &alpn, &length);
      if (length == 2 && alpn[0] == 'h' && alpn[1] == '2') {
        open_ += o_.per_session;
        co_await std::make_shared<h2_client>(*this, c, sessions_[static_cast<std::size_t>(s)])
            ->run();
        open_ -= o_.per_session;
      } else {
        counts_.fail(std::runtime_error("the proxy's TLS did not choose h2"), "ALPN", false);
      }
      c->close();
      c = nullptr;
      live_[slot] = nullptr;
    }
  }

  // Each whole event ("...\n\n") out of `pending`: counted, and its delay kept.
  void take_events(std::string& pending) {
    std::size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string_view event(pending.data(), end);
      const auto at = event.find("\"sent_ns\":");
      if (at != std::string_view::npos) {
        const std::int64_t sent = std::strtoll(event.data() + at + 10, nullptr, 10);
        delays_.push_back(std::chrono::nanoseconds(monotonic_ns() - sent));
        ++events_;
      }
      pending.erase(0, end + 2);
    }
  }

  asio::io_context& io_;
  ssl::context& tls_;
  const run_options& o_;
  std::vector<session_line> sessions_;
  int total_ = 0, next_ = 0;
  long open_ = 0, events_ = 0;
  bool stopping_ = false;
  counters counts_;
  std::vector<std::shared_ptr<connection>> live_;
  std::vector<clock_type::duration> delays_;
};

std::vector<session_line> read_sessions(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file + ": cannot be read");
  std::vector<session_line> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string auth, dummy;
    if (!(fields >> auth >> dummy)) continue;
    out.push_back({basic_credentials(auth), dummy});
  }
  if (out.empty()) throw std::runtime_error(file + ": no `ID:TOKEN DUMMY` lines");
  return out;
}

int run(run_options& o) {
  auto sessions = read_sessions(o.sessions_file);
  o.proxy_endpoint = parse_endpoint(o.proxy);
  o.host = o.target.substr(0, o.target.rfind(':'));
  o.tls = true;
  raise_fd_limit(static_cast<long>(sessions.size()) * o.per_session + 64);
  ssl::context tls(ssl::context::tls_client);
  tls.set_verify_mode(ssl::verify_peer);
  tls.load_verify_file(o.ca);
  SSL_CTX_set_mode(tls.native_handle(), SSL_MODE_RELEASE_BUFFERS);
  static constexpr unsigned char h2_only[] = "\x02h2";
  if (o.h2) SSL_CTX_set_alpn_protos(tls.native_handle(), h2_only, sizeof h2_only - 1);
  asio::io_context io(1);
  streams s(io, tls, o, std::move(sessions));
  asio::co_spawn(io, s.run(), [&io](std::exception_ptr e) {
    io.stop();
    if (e) std::rethrow_exception(e);
  });
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  serve_options so;
  run_options ro;
  CLI::App app{"Long streamed model answers by the thousand, for bench/gateway_streams.py"};
  app.require_subcommand(1);
  auto* serve_cmd = app.add_subcommand("serve", "a fake model host streaming SSE answers");
  serve_cmd->add_option("--listen", so.listen, "ADDR:PORT")->capture_default_str();
  serve_cmd->add_option("--cert", so.cert, "certificate chain (PEM)")->required();
  serve_cmd->add_option("--key", so.key, "private key (PEM)")->required();
  serve_cmd->add_option("--events", so.events, "events an answer")->capture_default_str();
  serve_cmd->add_option("--interval", so.interval, "seconds between events")->capture_default_str();
  serve_cmd
      ->add_option("--max-streams", so.max_streams,
                   "HTTP/2's concurrent streams a connection (0: no HTTP/2, HTTP/1.1 only)")
      ->capture_default_str();
  auto* run_cmd = app.add_subcommand("run", "streams through a proxy, K for each session");
  run_cmd->add_option("--proxy", ro.proxy, "proxy HOST:PORT (an IP address)")->required();
  run_cmd->add_option("--target", ro.target, "CONNECT target HOST:PORT")->required();
  run_cmd->add_option("--ca", ro.ca, "CA file that verifies the TLS peer")->required();
  run_cmd->add_option("--sessions", ro.sessions_file, "`ID:TOKEN DUMMY` lines")->required();
  run_cmd->add_option("--per-session", ro.per_session, "streams a session")->capture_default_str();
  run_cmd->add_option("--duration", ro.duration, "seconds after set-up")->capture_default_str();
  run_cmd->add_option("--concurrency", ro.concurrency, "streams being set up at once")
      ->capture_default_str();
  run_cmd->add_option("--timeout", ro.step_timeout, "seconds for each step")->capture_default_str();
  run_cmd->add_flag("--h2", ro.h2, "a session's streams on one HTTP/2 connection");
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return serve_cmd->parsed() ? serve(so) : run(ro);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streams: %s\n", e.what());
    return 1;
  }
}
