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
// not an error. The roles are streams_serve.cpp and streams_run.cpp; here are the command line
// and what both use.
#include <time.h>

#include <csignal>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "streams.hpp"

namespace bench {

std::int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

clock_type::duration seconds(double s) {
  return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
}

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

}  // namespace bench

using namespace bench;

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
