// A load generator for the footprint, scale and gateway benchmarks (bench/footprint.sh,
// bench/scale.sh, bench/gateway.sh): connections through an HTTP proxy's CONNECT, optionally TLS
// through the tunnel and HTTP/1.1 requests on it; or, with --plain, plain-HTTP requests to the
// proxy itself (absolute-form, RFC 9112 §3.2.2). One thread (the broker under test shares two
// cores with it and nginx), Asio coroutines, one JSON line of figures per phase on stdout.
// --proxy-auth ID:TOKEN sends `Proxy-Authorization: Basic base64(ID:TOKEN)` (a gateway session's
// credential, RFC 9110 §11.7.2) on every CONNECT and every plain request.
//
//   loadgen idle   --proxy H:P --target HOST:PORT --n N [--tls --ca FILE] [--get PATH] [--hold S]
//       opens N connections (CONNECT + 200, then TLS, then one GET if asked) and keeps them open
//       and silent; prints {"event":"ready",...} once every one is set up or failed, then holds
//       until --hold seconds pass (0: forever) or SIGTERM/SIGINT, and prints {"event":"done",...}
//       with how many the far side closed meanwhile.
//   loadgen burst  ... --n N [--tls --ca FILE] [--get PATH]
//       N connections that each do their steps and close at once (a GET says Connection: close).
//   loadgen active --clients C --duration S --tls --ca FILE [--get PATH]
//       C keep-alive clients sending GETs back to back for S seconds: requests, errors, rps,
//       latency percentiles. A client whose connection fails counts an error and reconnects.
//   loadgen active --plain --clients C --duration S [--get PATH]
//       the same with `GET http://TARGET/PATH` sent to the proxy: no CONNECT, no TLS.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <boost/beast/http.hpp>

#include "load_client.hpp"

using namespace bench;
using namespace std::chrono_literals;

namespace {

struct options : bench::route {
  std::string mode;
  std::string proxy = "127.0.0.1:3128";
  int n = 1;
  int concurrency = 64;  // connections being set up at once (idle, burst)
  std::string ca;
  std::string get;       // request path; empty: no request
  double hold = 0;       // idle: seconds to hold (0: until a signal)
  int clients = 200;     // active
  double duration = 20;  // active, seconds
};

// One GET on the connection; throws unless the answer is 200 with its whole body.
asio::awaitable<void> get(const std::shared_ptr<connection>& c, const options& o, bool close) {
  arm(c, o.step_timeout);
  c->step = "GET";
  // Through a tunnel the origin-form path; to a proxy the absolute form (RFC 9112 §3.2.2).
  http::request<http::empty_body> request{http::verb::get,
                                          o.plain ? "http://" + o.target + o.get : o.get, 11};
  request.set(http::field::host, o.target);
  request.set(http::field::user_agent, "broker-loadgen");
  if (o.plain && !o.proxy_authorization.empty())
    request.set(http::field::proxy_authorization, o.proxy_authorization);
  if (close) request.set(http::field::connection, "close");
  http::response<http::string_body> response;
  if (c->secured) {
    co_await http::async_write(c->stream, request, asio::use_awaitable);
    co_await http::async_read(c->stream, c->buffer, response, asio::use_awaitable);
  } else {
    co_await http::async_write(c->socket(), request, asio::use_awaitable);
    co_await http::async_read(c->socket(), c->buffer, response, asio::use_awaitable);
  }
  if (response.result_int() != 200)
    throw std::runtime_error("GET answered " + std::to_string(response.result_int()));
  disarm(c);
}

class load {
 public:
  load(asio::io_context& io, ssl::context& tls, const options& o) : io_(io), tls_(tls), o_(o) {}

  // idle and burst: `concurrency` workers take connection numbers until n are done.
  asio::awaitable<void> set_up_all(bool keep) {
    const auto start = clock_type::now();
    const int workers = std::min(o_.concurrency, o_.n);
    if (workers <= 0) co_return;
    auto finished = std::make_shared<asio::steady_timer>(io_, clock_type::time_point::max());
    int running = workers;
    for (int w = 0; w < workers; ++w) {
      asio::co_spawn(io_, worker(keep), [&running, finished](std::exception_ptr) {
        if (--running == 0) finished->cancel();
      });
    }
    co_await finished->async_wait(asio::as_tuple(asio::use_awaitable));
    elapsed_ = clock_type::now() - start;
  }

  asio::awaitable<void> idle() {
    co_await set_up_all(true);
    std::printf("{\"event\":\"ready\",\"mode\":\"idle\",\"n\":%d,\"established\":%ld", o_.n,
                counts_.ok);
    print_errors(counts_);
    std::printf(",\"setup_seconds\":%.2f}\n", std::chrono::duration<double>(elapsed_).count());
    std::fflush(stdout);

    auto hold = std::make_shared<asio::steady_timer>(io_, clock_type::time_point::max());
    if (o_.hold > 0)
      hold->expires_after(
          std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o_.hold)));
    asio::signal_set signals(io_, SIGINT, SIGTERM);
    signals.async_wait([hold](error_code ec, int) {
      if (!ec) hold->cancel();
    });
    co_await hold->async_wait(asio::as_tuple(asio::use_awaitable));
    signals.cancel();
    stopping_ = true;
    const long open = static_cast<long>(held_.size()) - counts_.dropped;
    for (auto& c : held_) c->close();
    std::printf("{\"event\":\"done\",\"mode\":\"idle\",\"held\":%ld,\"dropped\":%ld}\n", open,
                counts_.dropped);
    std::fflush(stdout);
  }

  asio::awaitable<void> burst() {
    co_await set_up_all(false);
    std::sort(latencies_.begin(), latencies_.end());
    const double seconds = std::chrono::duration<double>(elapsed_).count();
    std::printf("{\"mode\":\"burst\",\"n\":%d,\"ok\":%ld", o_.n, counts_.ok);
    print_errors(counts_);
    std::printf(
        ",\"seconds\":%.2f,\"per_second\":%.1f,\"p50_ms\":%.2f,\"p99_ms\":%.2f,"
        "\"cpu_seconds\":%.2f}\n",
        seconds, static_cast<double>(counts_.ok) / seconds, percentile(latencies_, 50),
        percentile(latencies_, 99), cpu_seconds());
  }

  asio::awaitable<void> active() {
    auto ready_timer = std::make_shared<asio::steady_timer>(io_, clock_type::time_point::max());
    go_ = ready_timer;
    auto finished = std::make_shared<asio::steady_timer>(io_, clock_type::time_point::max());
    int running = o_.clients;
    for (int i = 0; i < o_.clients; ++i) {
      asio::co_spawn(io_, client(), [&running, finished](std::exception_ptr) {
        if (--running == 0) finished->cancel();
      });
    }
    co_await finished->async_wait(asio::as_tuple(asio::use_awaitable));
    const double seconds = std::chrono::duration<double>(clock_type::now() - start_).count();
    std::sort(latencies_.begin(), latencies_.end());
    std::printf("{\"mode\":\"active\",\"clients\":%d,\"requests\":%ld", o_.clients, counts_.ok);
    print_errors(counts_);
    std::printf(
        ",\"setup_errors\":%ld,\"seconds\":%.2f,\"rps\":%.1f,\"p50_ms\":%.2f,"
        "\"p99_ms\":%.2f,\"max_ms\":%.2f,\"cpu_seconds\":%.2f}\n",
        setup_errors_, seconds, static_cast<double>(counts_.ok) / seconds,
        percentile(latencies_, 50), percentile(latencies_, 99),
        latencies_.empty() ? 0.0 : ms(latencies_.back()), cpu_seconds() - cpu_at_start_);
  }

 private:
  asio::awaitable<void> worker(bool keep) {
    while (next_ < o_.n) {
      ++next_;
      auto c = std::make_shared<connection>(io_, tls_);
      const auto start = clock_type::now();
      try {
        co_await open_connection(c, o_);
        if (!o_.get.empty()) co_await get(c, o_, !keep);
        ++counts_.ok;
        latencies_.push_back(clock_type::now() - start);
      } catch (const std::exception& e) {
        counts_.fail(e, c ? c->step : "connect", c && c->timed_out);
        c->close();
        continue;
      }
      if (keep) {
        held_.push_back(c);
        asio::co_spawn(io_, hold(c), asio::detached);
      } else {
        c->close();
      }
    }
  }

  // Waits for the far side: an idle connection should hear nothing (TLS 1.3 session tickets
  // aside) until the loadgen closes it.
  asio::awaitable<void> hold(std::shared_ptr<connection> c) {
    char sink[512];
    for (;;) {
      error_code ec;
      if (c->secured)
        co_await c->stream.async_read_some(asio::buffer(sink),
                                           asio::redirect_error(asio::use_awaitable, ec));
      else
        co_await c->socket().async_read_some(asio::buffer(sink),
                                             asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (!stopping_) ++counts_.dropped;
        co_return;
      }
    }
  }

  // active: set up, wait for every client to be set up, then requests until the deadline.
  asio::awaitable<void> client() {
    std::shared_ptr<connection> c;
    try {
      c = std::make_shared<connection>(io_, tls_);
      co_await open_connection(c, o_);
    } catch (const std::exception& e) {
      ++setup_errors_;
      counts_.fail(e, c ? c->step : "connect", c && c->timed_out);
      c->close();
      c.reset();
    }
    if (++ready_ == o_.clients) {
      start_ = clock_type::now();
      cpu_at_start_ = cpu_seconds();
      end_ = start_ + std::chrono::duration_cast<clock_type::duration>(
                          std::chrono::duration<double>(o_.duration));
      go_->cancel();
    } else {
      auto go = go_;
      co_await go->async_wait(asio::as_tuple(asio::use_awaitable));
    }
    while (clock_type::now() < end_) {
      bool failed = false;
      try {
        if (!c) {
          c = std::make_shared<connection>(io_, tls_);
          co_await open_connection(c, o_);
        }
        const auto start = clock_type::now();
        co_await get(c, o_, false);
        latencies_.push_back(clock_type::now() - start);
        ++counts_.ok;
      } catch (const std::exception& e) {
        counts_.fail(e, c ? c->step : "connect", c && c->timed_out);
        if (c) c->close();
        c.reset();
        failed = true;
      }
      if (failed) {
        // A refusing proxy answers at once: pace the retries instead of spinning.
        asio::steady_timer pause(io_, 50ms);
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      }
    }
    if (c) c->close();
  }

  asio::io_context& io_;
  ssl::context& tls_;
  const options& o_;
  counters counts_;
  int next_ = 0;
  bool stopping_ = false;
  clock_type::duration elapsed_{};
  std::vector<clock_type::duration> latencies_;
  std::deque<std::shared_ptr<connection>> held_;
  // active
  std::shared_ptr<asio::steady_timer> go_;
  int ready_ = 0;
  long setup_errors_ = 0;
  clock_type::time_point start_, end_;
  double cpu_at_start_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  options o;
  std::string proxy_auth;
  CLI::App app{"Connections through an HTTP CONNECT proxy, for the footprint and scale benchmarks"};
  app.require_subcommand(1);
  auto common = [&o, &proxy_auth](CLI::App* sub) {
    sub->add_option("--proxy", o.proxy, "proxy HOST:PORT (an IP address)")->required();
    sub->add_option("--target", o.target, "CONNECT target HOST:PORT")->capture_default_str();
    sub->add_flag("--tls", o.tls, "TLS handshake through the tunnel (SNI and name checked)");
    sub->add_option("--ca", o.ca, "CA file that verifies the TLS peer");
    sub->add_option("--get", o.get,
                    "GET this path on the connection (implies --tls unless --plain)");
    sub->add_option("--timeout", o.step_timeout, "seconds for each step")->capture_default_str();
    sub->add_option("--proxy-auth", proxy_auth,
                    "ID:TOKEN sent as Proxy-Authorization: Basic on CONNECT and plain requests");
  };
  auto* idle = app.add_subcommand("idle", "open N connections and hold them silent");
  auto* burst = app.add_subcommand("burst", "N connections that come and go");
  auto* active = app.add_subcommand("active", "keep-alive clients sending requests back to back");
  for (auto* sub : {idle, burst}) {
    common(sub);
    sub->add_option("--n", o.n, "connections")->capture_default_str();
    sub->add_option("--concurrency", o.concurrency, "connections set up at once")
        ->capture_default_str();
  }
  common(active);
  active
      ->add_flag("--plain", o.plain,
                 "plain-HTTP GETs to the proxy (absolute form), no CONNECT and no TLS")
      ->excludes("--tls");
  idle->add_option("--hold", o.hold, "seconds to hold (0: until SIGTERM)")->capture_default_str();
  active->add_option("--clients", o.clients, "clients")->capture_default_str();
  active->add_option("--duration", o.duration, "seconds")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  o.mode = app.get_subcommands().front()->get_name();
  if (o.mode == "active" && o.get.empty()) o.get = "/small";
  if (!o.get.empty() && !o.plain) o.tls = true;
  if (o.tls && o.ca.empty()) {
    std::fprintf(stderr, "loadgen: --tls needs --ca\n");
    return 2;
  }

  try {
    o.proxy_endpoint = parse_endpoint(o.proxy);
    if (!proxy_auth.empty()) o.proxy_authorization = basic_credentials(proxy_auth);
    o.host = o.target.substr(0, o.target.rfind(':'));
    raise_fd_limit((o.mode == "active" ? o.clients : o.n) + 64L);

    ssl::context tls(ssl::context::tls_client);
    tls.set_verify_mode(ssl::verify_peer);
    if (o.tls) tls.load_verify_file(o.ca);

    asio::io_context io(1);
    load l(io, tls, o);
    auto run = o.mode == "idle" ? l.idle() : o.mode == "burst" ? l.burst() : l.active();
    asio::co_spawn(io, std::move(run), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    io.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loadgen: %s\n", e.what());
    return 1;
  }
  return 0;
}
