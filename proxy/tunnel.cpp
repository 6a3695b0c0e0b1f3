#include "proxy/tunnel.hpp"

#include "proxy/limits.hpp"

namespace broker::proxy {

using namespace asio::experimental::awaitable_operators;

namespace {

asio::awaitable<void> pump(tcp::socket& from, tcp::socket& to, read_buffer& buffer,
                           deadline& idle, deadline::clock::duration idle_timeout,
                           std::uint64_t& counter) {
  for (;;) {
    if (!buffer.empty()) {
      const auto data = buffer.view();
      auto [ec, n] = co_await asio::async_write(to, asio::buffer(data.data(), data.size()), use_tuple);
      if (ec) throw boost::system::system_error(ec);
      counter += n;
      buffer.consume(n);
      idle.arm(idle_timeout, deadline::phase::tunnel);
    }
    auto [ec, n] = co_await from.async_read_some(asio::buffer(buffer.tail(), buffer.tail_size()),
                                                 use_tuple);
    if (ec == asio::error::eof) {
      // Half-close: the other side may still be sending (RFC 9110 §9.3.6 leaves it open).
      error_code ignored;
      to.shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
    if (ec) throw boost::system::system_error(ec);
    buffer.commit(n);
  }
}

}  // namespace

asio::awaitable<void> relay_tunnel(tcp::socket& client, tcp::socket& upstream, read_buffer& early,
                                   deadline& idle, deadline::clock::duration idle_timeout,
                                   std::uint64_t& bytes_out, std::uint64_t& bytes_in) {
  read_buffer back(limits::relay_buffer_bytes);
  idle.arm(idle_timeout, deadline::phase::tunnel);
  try {
    co_await (pump(client, upstream, early, idle, idle_timeout, bytes_out) &&
              pump(upstream, client, back, idle, idle_timeout, bytes_in));
  } catch (const boost::system::system_error& e) {
    // A reset or broken pipe on either side ends the tunnel; that is its normal way to end too.
    const auto ec = e.code();
    if (ec != asio::error::connection_reset && ec != asio::error::broken_pipe &&
        ec != asio::error::operation_aborted && ec != asio::error::eof)
      throw;
  }
}

}  // namespace broker::proxy
