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
  for (;;) {
    const auto space = into.space();
    const ssize_t n = ::recv(from.native_handle(), space.data(), space.size(), MSG_DONTWAIT);
    if (n > 0) {
      into.commit(static_cast<std::size_t>(n));
      co_return std::tuple{error_code{}, static_cast<std::size_t>(n)};
    }
    const int err = n < 0 ? errno : 0;
    if (err == EINTR) continue;
    into.release();
    if (n == 0) co_return std::tuple{error_code(asio::error::eof), std::size_t{0}};
    if (err != EAGAIN && err != EWOULDBLOCK)
      co_return std::tuple{error_code(err, boost::system::system_category()), std::size_t{0}};
    // Nothing there: wait without a block. The wait follows an EAGAIN, so the edge-triggered
    // reactor reports the next arrival.
    auto [ec] = co_await from.async_wait(tcp::socket::wait_read, use_tuple);
    if (ec) co_return std::tuple{ec, std::size_t{0}};
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
