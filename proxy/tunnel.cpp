#include "proxy/tunnel.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "proxy/limits.hpp"

namespace broker::proxy {

using namespace asio::experimental::awaitable_operators;

namespace {

using idle_duration = deadline::clock::duration;

[[noreturn]] void throw_errno() {
  throw boost::system::system_error(error_code(errno, boost::system::system_category()));
}

// A kernel pipe between two sockets: splice(2) moves the bytes socket -> pipe -> socket without
// copying them through user space, which is what bulk transfers through a tunnel cost.
class kernel_pipe {
 public:
  kernel_pipe() {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return;
    read_end_ = fds[0];
    write_end_ = fds[1];
    // A larger pipe means fewer splice calls per megabyte; failing to grow it is harmless.
    (void)::fcntl(write_end_, F_SETPIPE_SZ, static_cast<int>(limits::tunnel_pipe_bytes));
  }
  ~kernel_pipe() {
    if (read_end_ >= 0) ::close(read_end_);
    if (write_end_ >= 0) ::close(write_end_);
  }
  kernel_pipe(const kernel_pipe&) = delete;
  kernel_pipe& operator=(const kernel_pipe&) = delete;

  bool ok() const { return read_end_ >= 0; }
  int read_end() const { return read_end_; }
  int write_end() const { return write_end_; }

 private:
  int read_end_ = -1;
  int write_end_ = -1;
};

// Passes the end of one direction on as a half-close: the other side may still be sending
// (RFC 9110 §9.3.6 leaves it open).
void pass_on_eof(tcp::socket& to) {
  error_code ignored;
  to.shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> write_early_bytes(tcp::socket& to, read_buffer& early,
                                        std::uint64_t& counter) {
  if (early.empty()) co_return;
  const auto data = early.view();
  auto [ec, n] = co_await asio::async_write(to, asio::buffer(data.data(), data.size()), use_tuple);
  if (ec) throw boost::system::system_error(ec);
  counter += n;
  early.consume(n);
}

asio::awaitable<void> splice_pump(tcp::socket& from, tcp::socket& to, kernel_pipe& pipe,
                                  deadline& idle, idle_duration idle_timeout,
                                  std::uint64_t& counter) {
  const int in = from.native_handle();
  const int out = to.native_handle();
  constexpr unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
  for (;;) {
    const ssize_t n =
        ::splice(in, nullptr, pipe.write_end(), nullptr, limits::tunnel_pipe_bytes, flags);
    if (n == 0) {
      pass_on_eof(to);
      co_return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) throw_errno();
      // The pipe is always drained below, so EAGAIN means the socket has nothing to read.
      auto [ec] = co_await from.async_wait(tcp::socket::wait_read, use_tuple);
      if (ec) throw boost::system::system_error(ec);
      continue;
    }
    std::size_t buffered = static_cast<std::size_t>(n);
    while (buffered > 0) {
      const ssize_t m = ::splice(pipe.read_end(), nullptr, out, nullptr, buffered, flags);
      if (m > 0) {
        buffered -= static_cast<std::size_t>(m);
        counter += static_cast<std::uint64_t>(m);
        continue;
      }
      if (m < 0 && errno == EINTR) continue;
      if (m < 0 && errno == EAGAIN) {
        auto [ec] = co_await to.async_wait(tcp::socket::wait_write, use_tuple);
        if (ec) throw boost::system::system_error(ec);
        continue;
      }
      throw_errno();
    }
    idle.arm(idle_timeout, deadline::phase::tunnel);
  }
}

// The portable relay, for when no pipe can be had (file descriptor limit).
asio::awaitable<void> copy_pump(tcp::socket& from, tcp::socket& to, read_buffer& buffer,
                                deadline& idle, idle_duration idle_timeout,
                                std::uint64_t& counter) {
  for (;;) {
    co_await write_early_bytes(to, buffer, counter);
    idle.arm(idle_timeout, deadline::phase::tunnel);
    auto [ec, n] =
        co_await from.async_read_some(asio::buffer(buffer.tail(), buffer.tail_size()), use_tuple);
    if (ec == asio::error::eof) {
      pass_on_eof(to);
      co_return;
    }
    if (ec) throw boost::system::system_error(ec);
    buffer.commit(n);
  }
}

asio::awaitable<void> relay(tcp::socket& client, tcp::socket& upstream, read_buffer& early,
                            deadline& idle, idle_duration idle_timeout, std::uint64_t& bytes_out,
                            std::uint64_t& bytes_in) {
  co_await write_early_bytes(upstream, early, bytes_out);
  kernel_pipe out_pipe;
  kernel_pipe in_pipe;
  if (out_pipe.ok() && in_pipe.ok()) {
    client.native_non_blocking(true);
    upstream.native_non_blocking(true);
    co_await (splice_pump(client, upstream, out_pipe, idle, idle_timeout, bytes_out) &&
              splice_pump(upstream, client, in_pipe, idle, idle_timeout, bytes_in));
  } else {
    read_buffer back(limits::relay_buffer_bytes);
    co_await (copy_pump(client, upstream, early, idle, idle_timeout, bytes_out) &&
              copy_pump(upstream, client, back, idle, idle_timeout, bytes_in));
  }
}

}  // namespace

asio::awaitable<void> relay_tunnel(tcp::socket& client, tcp::socket& upstream, read_buffer& early,
                                   deadline& idle, idle_duration idle_timeout,
                                   std::uint64_t& bytes_out, std::uint64_t& bytes_in) {
  idle.arm(idle_timeout, deadline::phase::tunnel);
  try {
    co_await relay(client, upstream, early, idle, idle_timeout, bytes_out, bytes_in);
  } catch (const boost::system::system_error& e) {
    // A reset or broken pipe on either side ends the tunnel; that is its normal way to end too.
    const auto ec = e.code();
    if (ec != asio::error::connection_reset && ec != asio::error::broken_pipe &&
        ec != asio::error::operation_aborted && ec != asio::error::eof)
      throw;
  }
}

}  // namespace broker::proxy
