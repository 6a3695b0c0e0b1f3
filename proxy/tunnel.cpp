#include "proxy/tunnel.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "proxy/idle_read.hpp"
#include "proxy/limits.hpp"

namespace broker::proxy {

using namespace asio::experimental::awaitable_operators;

namespace {

using idle_duration = live::connection_deadline::clock::duration;

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

// Moves what `from` has now through the pipe into `to`. Returns false at EOF on `from`.
asio::awaitable<bool> splice_once(tcp::socket& from, tcp::socket& to, kernel_pipe& pipe,
                                  std::uint64_t& counter) {
  constexpr unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
  for (;;) {
    const ssize_t n = ::splice(from.native_handle(), nullptr, pipe.write_end(), nullptr,
                               limits::tunnel_pipe_bytes, flags);
    if (n == 0) co_return false;
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
      const ssize_t m =
          ::splice(pipe.read_end(), nullptr, to.native_handle(), nullptr, buffered, flags);
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
    co_return true;
  }
}

// One direction of the tunnel. It copies through `buffer` until reads show a bulk transfer
// (limits::splice_after_large_reads large reads in a row); the rest then moves by splice(2).
// Short exchanges (a TLS handshake, API calls) thus never pay for a pipe.
asio::awaitable<void> pump(tcp::socket& from, tcp::socket& to, read_buffer& buffer,
                           live::connection_deadline& idle, idle_duration idle_timeout,
                           std::uint64_t& counter, byte_watch watch = {}) {
  std::optional<kernel_pipe> pipe;
  int large_reads = 0;
  for (;;) {
    co_await write_early_bytes(to, buffer, counter);
    idle.arm(idle_timeout, live::waiting_for::tunnel);
    if (!pipe && !watch && large_reads >= limits::splice_after_large_reads) {
      pipe.emplace();
      if (pipe->ok()) {
        from.native_non_blocking(true);
        to.native_non_blocking(true);
      }
    }
    if (pipe && pipe->ok()) {
      if (!co_await splice_once(from, to, *pipe, counter)) break;
      continue;
    }
    // A quiet tunnel holds no buffer block (idle_read).
    auto [ec, n] = co_await read_idle(from, buffer);
    if (ec == asio::error::eof) break;
    if (ec) throw boost::system::system_error(ec);
    large_reads = n >= limits::splice_read_bytes ? large_reads + 1 : 0;
    if (watch && !watch(buffer.view())) watch = nullptr;
  }
  pass_on_eof(to);
}

asio::awaitable<void> relay(tcp::socket& client, tcp::socket& upstream, read_buffer& early,
                            live::connection_deadline& idle, idle_duration idle_timeout,
                            std::uint64_t& bytes_out, std::uint64_t& bytes_in,
                            byte_watch upstream_watch) {
  read_buffer back;
  co_await (pump(client, upstream, early, idle, idle_timeout, bytes_out) &&
            pump(upstream, client, back, idle, idle_timeout, bytes_in, std::move(upstream_watch)));
}

}  // namespace

asio::awaitable<void> relay_tunnel(tcp::socket& client, tcp::socket& upstream, read_buffer& early,
                                   live::connection_deadline& idle, idle_duration idle_timeout,
                                   std::uint64_t& bytes_out, std::uint64_t& bytes_in,
                                   byte_watch upstream_watch) {
  idle.arm(idle_timeout, live::waiting_for::tunnel);
  try {
    try {
      co_await relay(client, upstream, early, idle, idle_timeout, bytes_out, bytes_in,
                     std::move(upstream_watch));
    } catch (const asio::multiple_exceptions& e) {
      // Both directions failed (each side reset, or one reset broke the other's write): the
      // first failure says how the tunnel ended.
      std::rethrow_exception(e.first_exception());
    }
  } catch (const boost::system::system_error& e) {
    // A reset or broken pipe on either side ends the tunnel; that is its normal way to end too.
    const auto ec = e.code();
    if (ec != asio::error::connection_reset && ec != asio::error::broken_pipe &&
        ec != asio::error::operation_aborted && ec != asio::error::eof)
      throw;
  }
}

}  // namespace broker::proxy
