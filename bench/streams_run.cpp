// streams run: the agents' streams through the gateway (streams.cpp's usage), over HTTP/1.1
// (a connection each) or HTTP/2 (a session's streams on one connection), counted as they come.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <boost/beast/http.hpp>

#include "streams.hpp"

using namespace bench;
using namespace std::chrono_literals;

namespace {

// What every stream POSTs: a streamed chat completion asking for the usage.
const std::string& request_body() {
  static const std::string body =
      R"({"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},)"
      R"("messages":[{"role":"user","content":"go on"}]})";
  return body;
}

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
    const int units = o_.h2 ? static_cast<int>(sessions_.size()) : total_;
    int workers = std::min(o_.concurrency, units);
    for (int w = 0, n = workers; w < n; ++w)
      asio::co_spawn(io_, worker(units), [&workers, set_up](std::exception_ptr) {
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
  // `units`: streams, or over HTTP/2 sessions.
  asio::awaitable<void> worker(int units) {
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
    const std::string& body = request_body();
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
      const std::string length = std::to_string(request_body().size());
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

    static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source* source, void*) {
      auto* r = static_cast<request*>(source->ptr);
      const std::size_t n = std::min(length, request_body().size() - r->sent);
      std::memcpy(buf, request_body().data() + r->sent, n);
      r->sent += n;
      if (r->sent == request_body().size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
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

}  // namespace

int bench::run(run_options& o) {
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
