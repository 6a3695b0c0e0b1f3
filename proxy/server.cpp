#include "proxy/server.hpp"

#include <spdlog/spdlog.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/asio.hpp"
#include "base/listener.hpp"
#include "capture/dns_responder.hpp"
#include "live/refusal.hpp"
#include "proxy/buffer_pool.hpp"
#include "proxy/client_connection.hpp"
#include "proxy/limits.hpp"
#include "session/log.hpp"

namespace broker::proxy {

struct server::impl {
  explicit impl(unsigned threads)
      : workers(make_workers(threads)), pools(threads), connection_limit(raise_fd_limit()) {}

  // Raises the soft descriptor limit toward the hard one (the default soft limit, 1024, would
  // stop a gateway at ~250 connections with EMFILE), and returns how many connections fit.
  static std::size_t raise_fd_limit() {
    // A connection holds two descriptors (client, upstream; a tunnel that finds none left for a
    // splice pipe copies instead). `reserve`: the listeners, the audit log, the control socket,
    // epoll, DNS.
    constexpr std::size_t per_connection = 2, reserve = 64;
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return limits::max_connections;
    const rlim_t wanted = per_connection * limits::max_connections + reserve;
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
      rlimit raised = limit;
      raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= wanted) return limits::max_connections;
    const rlim_t usable = limit.rlim_cur > reserve ? limit.rlim_cur - reserve : 0;
    return std::max<std::size_t>(1, usable / per_connection);
  }

  static std::vector<std::unique_ptr<asio::io_context>> make_workers(unsigned threads) {
    std::vector<std::unique_ptr<asio::io_context>> out;
    for (unsigned i = 0; i < threads; ++i) out.push_back(std::make_unique<asio::io_context>(1));
    return out;
  }

  std::shared_ptr<live::live_session> ctx;
  // One single-threaded io_context per thread, each connection living on one of them: both
  // directions of a relay then run on one thread with no cross-thread wake-ups or strand
  // hand-offs, which is what per-request latency through the proxy is made of.
  std::vector<std::unique_ptr<asio::io_context>> workers;
  // One upstream pool per worker, declared after the workers so that its sockets go first.
  std::vector<upstream_pool> pools;
  std::size_t next_worker = 0;
  const std::size_t connection_limit;  // limits::max_connections, or fewer if descriptors are short
  asio::io_context& io = *workers.front();
  tcp::acceptor acceptor{io};
  // wrap's transparent capture: connections the child dialed directly (docs/architecture.md).
  tcp::acceptor capture_acceptor{io};
  // serve: installed at construction, before the ready line, so no early signal takes the
  // default path. wrap: none; its main thread takes the signals (they go to the child).
  std::optional<asio::signal_set> signal_set;
  std::function<void()> on_reload;

  // Live connections, so that a drain can reach the idle ones.
  std::mutex mutex;
  std::unordered_map<client_connection*, std::weak_ptr<client_connection>> live;
  // The most connections open at once since memory was last given back (guarded by `mutex`).
  std::size_t peak = 0;

  // After a burst, the heap pages its connections used (coroutine frames, sockets, TLS objects)
  // are free but stay in the process: glibc returns only the top of a fragmented heap. Once a
  // burst has drained to a quarter of its peak (and at least 64 have gone), malloc_trim gives every
  // free page back (a few milliseconds for a heap of tens of MiB, once per burst). True when it is
  // time; called with `mutex` held, the trim itself runs after it is released.
  bool burst_drained(std::size_t open) {
    peak = std::max(peak, open);
    if (peak < open + burst_connections || open > peak / 4) return false;
    peak = open;
    return true;
  }
  static constexpr std::size_t burst_connections = 64;

  asio::awaitable<void> accept_loop(tcp::acceptor& listener, bool captured) {
    for (;;) {
      const std::size_t index = next_worker++ % workers.size();
      auto [ec, socket] = co_await listener.async_accept(*workers[index], use_tuple);
      if (ec == asio::error::operation_aborted || !listener.is_open()) co_return;
      if (ec) {
        // EMFILE and friends: back off briefly instead of spinning.
        session::log(spdlog::level::warn, session::log_tag(ctx->session_id()), "accept failed: {}",
                     ec.message());
        asio::steady_timer pause(io, std::chrono::milliseconds(50));
        co_await pause.async_wait(use_tuple);
        continue;
      }
      if (ctx->counters().active_connections.load() >= connection_limit) {
        const auto text =
            live::render_refusal(live::refusal::overloaded(), "", ctx->session_id(), false);
        error_code ignored;
        socket.write_some(asio::buffer(text), ignored);
        continue;
      }
      start(std::move(socket), pools[index], captured);
    }
  }

  void start(tcp::socket socket, upstream_pool& pool, bool captured) {
    auto conn = std::make_shared<client_connection>(std::move(socket), ctx, pool, captured);
    {
      std::lock_guard lock(mutex);
      live.emplace(conn.get(), conn);
      peak = std::max(peak, live.size());
    }
    ++ctx->counters().active_connections;
    auto executor = conn->executor();
    auto work = conn->run();
    // The completion handler owns the connection until run() has finished: the coroutine may
    // start later, on another thread.
    auto ended = [this, conn](std::exception_ptr) {
      // run() catches everything it can expect; whatever is left ends just this connection.
      bool trim = false;
      {
        std::lock_guard lock(mutex);
        live.erase(conn.get());
        --ctx->counters().active_connections;
        trim = burst_drained(live.size());
      }
      if (trim) give_back_memory();
    };
    // Bound to the connection's slot: its deadline cancels run()'s work through it.
    asio::co_spawn(executor, std::move(work),
                   asio::bind_cancellation_slot(conn->cancel_slot(), std::move(ended)));
  }

  asio::awaitable<void> signals() {
    for (;;) {
      auto [ec, signo] = co_await signal_set->async_wait(use_tuple);
      if (ec) co_return;
      if (signo == SIGHUP) {
        if (on_reload) on_reload();
        continue;
      }
      session::log(spdlog::level::info, session::log_tag(ctx->session_id()),
                   "signal {}: draining {} connection(s)", signo,
                   ctx->counters().active_connections.load());
      co_await shut_down(ctx->options().timeouts.drain);
      co_return;
    }
  }

  // Stops accepting, lets open connections finish (up to `drain`), cuts the rest and stops the
  // threads.
  asio::awaitable<void> shut_down(std::chrono::steady_clock::duration drain) {
    error_code ignored;
    // Connections the kernel has already completed are taken in and drained with the rest: wrap's
    // child may have connected (and been answered by the kernel) just before it exited, and
    // every connection it made gets its record.
    take_backlog(acceptor, false);
    take_backlog(capture_acceptor, true);
    acceptor.close(ignored);
    capture_acceptor.close(ignored);
    if (signal_set) signal_set->cancel(ignored);
    drain_all(false);
    co_await wait_for_idle(drain);
    // What is still open (long tunnels, slow transfers) is cut, so that its audit record is
    // written before session_end.
    drain_all(true);
    co_await wait_for_idle(std::chrono::seconds(2));
    for (auto& w : workers) w->stop();
  }

  // After a burst: every worker's buffer reserve, then the heap's free pages.
  void give_back_memory() {
    for (auto& w : workers) asio::post(*w, [] { buffer_pool::release_reserve(); });
    ::malloc_trim(0);
  }

  // Every 10 s on each worker, its pool's stale upstream connections go (and, when a burst's
  // worth went, the heap pages their TLS state held).
  asio::awaitable<void> evict_stale_upstreams(std::size_t index) {
    asio::steady_timer tick(*workers[index]);
    for (;;) {
      tick.expires_after(std::chrono::seconds(10));
      if (auto [ec] = co_await tick.async_wait(use_tuple); ec) co_return;
      if (pools[index].evict_stale() >= 8) ::malloc_trim(0);
    }
  }

  void take_backlog(tcp::acceptor& listener, bool captured) {
    if (!listener.is_open()) return;
    error_code ec;
    listener.non_blocking(true, ec);
    while (!ec && ctx->counters().active_connections.load() < connection_limit) {
      const std::size_t index = next_worker++ % workers.size();
      tcp::socket socket(*workers[index]);
      listener.accept(socket, ec);
      if (!ec) start(std::move(socket), pools[index], captured);
    }
  }

  void drain_all(bool now) {
    std::lock_guard lock(mutex);
    for (auto& [key, weak] : live) {
      if (auto conn = weak.lock()) asio::post(conn->executor(), [conn, now] { conn->drain(now); });
    }
  }

  asio::awaitable<void> wait_for_idle(std::chrono::steady_clock::duration limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (ctx->counters().active_connections.load() > 0 &&
           std::chrono::steady_clock::now() < until) {
      asio::steady_timer tick(io, std::chrono::milliseconds(20));
      co_await tick.async_wait(use_tuple);
    }
  }
};

server::server(std::shared_ptr<live::live_session> ctx, const std::string& host, std::uint16_t port,
               unsigned threads)
    : impl_(std::make_unique<impl>(threads == 0 ? 1 : threads)) {
  impl_->ctx = std::move(ctx);
  impl_->signal_set.emplace(impl_->io, SIGINT, SIGTERM, SIGHUP);
  error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("--listen " + host + ": not an IP address");
  ec = base::listen_on(impl_->acceptor, tcp::endpoint(address, port));
  if (ec)
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                             ec.message());
}

server::server(std::shared_ptr<live::live_session> ctx, int listener_fd, unsigned threads)
    : impl_(std::make_unique<impl>(threads == 0 ? 1 : threads)) {
  impl_->ctx = std::move(ctx);
  error_code ec;
  impl_->acceptor.assign(tcp::v4(), listener_fd, ec);
  if (ec) throw std::runtime_error("cannot use the sandbox's listener: " + ec.message());
}

void server::add_capture(int listener_fd, int dns_udp_fd, int dns_tcp_fd) {
  error_code ec;
  impl_->capture_acceptor.assign(tcp::v6(), listener_fd, ec);
  if (ec) {
    ::close(dns_udp_fd);
    ::close(dns_tcp_fd);
    throw std::runtime_error("cannot use the sandbox's capture listener: " + ec.message());
  }
  capture::start_dns_responder(impl_->io, dns_udp_fd, dns_tcp_fd, impl_->ctx);
}

server::~server() = default;

void server::stop(std::chrono::steady_clock::duration drain) {
  asio::co_spawn(impl_->io, impl_->shut_down(drain), asio::detached);
}

std::string server::host() const {
  return impl_->acceptor.local_endpoint().address().to_string();
}
std::uint16_t server::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void server::run(std::function<void()> on_reload) {
  impl_->on_reload = std::move(on_reload);
  if (impl_->signal_set) asio::co_spawn(impl_->io, impl_->signals(), asio::detached);
  asio::co_spawn(impl_->io, impl_->accept_loop(impl_->acceptor, false), asio::detached);
  if (impl_->capture_acceptor.is_open())
    asio::co_spawn(impl_->io, impl_->accept_loop(impl_->capture_acceptor, true), asio::detached);
  for (std::size_t i = 0; i < impl_->workers.size(); ++i)
    asio::co_spawn(*impl_->workers[i], impl_->evict_stale_upstreams(i), asio::detached);
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < impl_->workers.size(); ++i) {
    auto& w = *impl_->workers[i];
    keep_running.push_back(asio::make_work_guard(w));
    pool.emplace_back([&w] { w.run(); });
  }
  impl_->io.run();
  for (auto& t : pool) t.join();
}

}  // namespace broker::proxy
