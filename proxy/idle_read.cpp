#include "proxy/idle_read.hpp"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace broker::proxy {

namespace {

// Big enough for most request heads and a TLS alert; small enough to sit in an idle frame.
constexpr std::size_t probe_bytes = 1024;

}  // namespace

asio::awaitable<std::tuple<error_code, std::size_t>> read_idle(tcp::socket& from,
                                                               read_buffer& into) {
  if (!into.empty()) {
    const auto space = into.space();
    auto [ec, n] =
        co_await from.async_read_some(asio::buffer(space.data(), space.size()), use_tuple);
    into.commit(n);
    co_return std::tuple{ec, n};
  }
  // Nothing read yet: wait in the reactor's own read, into a probe in the frame. Asio then keeps
  // count of the socket's readiness: after a short read it waits without trying recv(2) first,
  // and its read needs no epoll_ctl(2), as a readiness wait does (two system calls a read less).
  into.release();
  std::array<char, probe_bytes> probe;
  auto [ec, n] = co_await from.async_read_some(asio::buffer(probe.data(), probe.size()), use_tuple);
  if (ec) co_return std::tuple{ec, std::size_t{0}};
  std::memcpy(into.space().data(), probe.data(), n);
  into.commit(n);
  if (n < probe.size()) co_return std::tuple{error_code{}, n};
  // The probe was filled: take what else has arrived without waiting (an error or the end is
  // left for the next read to report).
  for (;;) {
    const auto space = into.space();
    const ssize_t more = ::recv(from.native_handle(), space.data(), space.size(), MSG_DONTWAIT);
    if (more < 0 && errno == EINTR) continue;
    if (more > 0) {
      into.commit(static_cast<std::size_t>(more));
      n += static_cast<std::size_t>(more);
    }
    co_return std::tuple{error_code{}, n};
  }
}

asio::awaitable<std::tuple<error_code, std::size_t>> read_idle(stream& from, read_buffer& into) {
  if (!from.is_tls()) co_return co_await read_idle(from.socket(), into);
  if (!into.empty()) {
    auto [ec, n] = co_await from.read_some(into.space());
    into.commit(n);
    co_return std::tuple{ec, n};
  }
  into.release();
  std::array<char, probe_bytes> probe;
  auto [ec, n] = co_await from.read_some(probe);
  if (ec) co_return std::tuple{ec, std::size_t{0}};
  std::memcpy(into.space().data(), probe.data(), n);
  into.commit(n);
  co_return std::tuple{error_code{}, n};
}

}  // namespace broker::proxy
