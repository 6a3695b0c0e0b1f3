#include "ssh/agent_filter.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "base/asio.hpp"
#include "base/race.hpp"
#include "live/live_session.hpp"
#include "session/audit_record.hpp"
#include "session/log.hpp"
#include "ssh/agent_messages.hpp"
#include "ssh/wire.hpp"

namespace broker::ssh {

namespace {

using unix_socket = asio::local::stream_protocol::socket;
using unix_acceptor = asio::local::stream_protocol::acceptor;

// The agent answers at once (no key here asks for confirmation); a stuck one ends the client.
constexpr auto agent_answer_timeout = std::chrono::seconds(30);
constexpr std::uint8_t agent_success = 6;

// One framed message: its payload, or nullopt at the end of the stream or past the bound.
asio::awaitable<std::optional<std::string>> read_message(unix_socket& from) {
  unsigned char head[4];
  auto [ec, n] = co_await asio::async_read(from, asio::buffer(head), use_tuple);
  if (ec) co_return std::nullopt;
  const std::size_t length = (std::size_t(head[0]) << 24) | (std::size_t(head[1]) << 16) |
                             (std::size_t(head[2]) << 8) | head[3];
  if (length == 0 || length > max_agent_message) co_return std::nullopt;
  std::string payload(length, '\0');
  auto [ec2, m] = co_await asio::async_read(from, asio::buffer(payload), use_tuple);
  if (ec2) co_return std::nullopt;
  co_return payload;
}

asio::awaitable<bool> write_message(unix_socket& to, std::string_view payload) {
  std::string framed;
  framed.reserve(payload.size() + 4);
  put_u32(framed, static_cast<std::uint32_t>(payload.size()));
  framed.append(payload);
  auto [ec, n] = co_await asio::async_write(to, asio::buffer(framed), use_tuple);
  co_return !ec;
}

std::string exe_of(int pid) {
  if (pid <= 0) return {};
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return ec ? std::string() : path.string();
}

}  // namespace

int agent_listener(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path)
    throw std::runtime_error(path + ": too long for a unix socket's path");
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, sizeof addr.sun_path - 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const mode_t old = ::umask(077);
  const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::umask(old);
  if (!bound || ::listen(fd, 64) < 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(path + ": cannot listen on it");
  }
  return fd;
}

struct agent_filter::impl {
  impl(int listener, std::string agent_socket, std::uint32_t keys,
       std::shared_ptr<live::live_session> ctx)
      : acceptor(io), agent_socket(std::move(agent_socket)), keys(keys), ctx(std::move(ctx)) {
    acceptor.assign(asio::local::stream_protocol(), listener);
  }

  // One client inside and its own connection to the agent.
  struct client {
    client(unix_socket inside, asio::io_context& io) : inside(std::move(inside)), agent(io) {}
    unix_socket inside;
    unix_socket agent;
    int pid = 0;
    std::string exe;
    // The bind this connection carries (session-bind@openssh.com), once the agent took it.
    std::string host_key;
    std::string signature;
    std::optional<live::ssh_joins::joined> tunnel;
  };

  asio::awaitable<void> accept() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) continue;
      if (clients.load() >= max_clients) continue;  // closed as it goes out of scope
      ++clients;
      asio::co_spawn(io, serve(std::move(socket)), [this](std::exception_ptr) { --clients; });
    }
  }

  asio::awaitable<void> serve(unix_socket inside) {
    client c(std::move(inside), io);
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(c.inside.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0)
      c.pid = peer.pid;
    c.exe = exe_of(c.pid);
    error_code ec;
    c.agent.connect(asio::local::stream_protocol::endpoint(agent_socket), ec);
    if (ec) {
      session::log(spdlog::level::warn, session::log_tag(ctx->session_id()),
                   "ssh: the agent cannot be reached: {}", ec.message());
      co_return;
    }
    while (auto payload = co_await read_message(c.inside)) {
      if (!co_await pass(c, *payload)) co_return;
    }
  }

  // One message: refused here, or passed to the agent and its answer back. False ends the client.
  asio::awaitable<bool> pass(client& c, std::string_view payload) {
    const auto m = read_client_message(payload);
    if (m.what == client_message::kind::refused) {
      record(c, "message", [&](session::ssh_agent_event& e) { e.message = m.name; });
      co_return co_await write_message(c.inside, failure_answer().substr(4));
    }
    if (!co_await write_message(c.agent, payload)) co_return false;
    std::optional<std::string> answer;
    asio::steady_timer timer(io, agent_answer_timeout);
    const auto first = co_await base::race(
        [&]() -> asio::awaitable<void> { answer = co_await read_message(c.agent); }(),
        [&]() -> asio::awaitable<void> { co_await timer.async_wait(use_tuple); }());
    if (first != 0 || !answer) co_return false;
    const auto type = answer->empty() ? 0 : static_cast<std::uint8_t>((*answer)[0]);
    if (m.what == client_message::kind::bind && type == agent_success) {
      c.host_key = m.host_key_fingerprint;
      c.signature = m.signature;
      c.tunnel = ctx->ssh().find(m.signature);
    } else if (m.what == client_message::kind::sign) {
      if (type == agent_sign_response) {
        if (!c.signature.empty())
          ctx->ssh().signed_with(c.signature, m.key_fingerprint, ctx->scrub(m.user));
      } else {
        record(c, "sign", [&](session::ssh_agent_event& e) {
          e.key = m.key_fingerprint;
          e.user = ctx->scrub(m.user);
        });
      }
    } else if (m.what == client_message::kind::list && !c.host_key.empty()) {
      const auto count = identities_count(*answer);
      if (count && *count < keys)
        record(c, "key_hidden", [&](session::ssh_agent_event& e) { e.hidden = keys - *count; });
    }
    co_return co_await write_message(c.inside, *answer);
  }

  template <class Fill>
  void record(const client& c, const char* refused, Fill fill) {
    session::ssh_agent_event e;
    e.refused = refused;
    e.pid = c.pid;
    e.exe = c.exe;
    e.host_key = c.host_key;
    if (c.tunnel) {
      e.host = ctx->scrub(c.tunnel->host);
      e.port = c.tunnel->port;
    }
    fill(e);
    ctx->audit_log().write(session::ssh_agent_record(e));
  }

  asio::io_context io;
  unix_acceptor acceptor;
  std::string agent_socket;
  std::uint32_t keys;
  std::shared_ptr<live::live_session> ctx;
  std::atomic<std::size_t> clients{0};
  std::thread thread;
};

agent_filter::agent_filter(int listener, std::string agent_socket, std::uint32_t keys,
                           std::shared_ptr<live::live_session> ctx)
    : impl_(std::make_unique<impl>(listener, std::move(agent_socket), keys, std::move(ctx))) {
  asio::co_spawn(impl_->io, impl_->accept(), asio::detached);
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

agent_filter::~agent_filter() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace broker::ssh
