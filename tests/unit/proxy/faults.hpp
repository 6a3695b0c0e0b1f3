// Faults to inject under the exchange and tunnel tests: a transport that hands its bytes over in
// short pieces and fails its Nth read or Nth write, as a client or upstream that goes away
// mid-message (or sends one byte per packet) does.
#pragma once

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <string_view>

#include "base/asio.hpp"

namespace broker::test {

struct faults {
  std::size_t piece = 0;  // bytes per read or write (0: as many as there are)
  int fail_read = 0;      // the read that fails (1 = the first; 0 = none)
  int fail_write = 0;     // the write that fails
};

// Hands the peer a moment, so bytes written piece by piece arrive as pieces too.
inline asio::awaitable<void> let_peer_read() {
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(1));
  co_await t.async_wait(use_tuple);
}

// Writes `data` in `f.piece`-sized writes; with `f.fail_write`, the socket is reset (RST) in place
// of that write. False when it was reset.
inline asio::awaitable<bool> write_with_faults(tcp::socket& s, std::string_view data, faults f,
                                               int& writes) {
  const std::size_t step = f.piece ? f.piece : data.size();
  for (std::size_t at = 0; at < data.size(); at += step) {
    if (++writes == f.fail_write) {
      s.set_option(asio::socket_base::linger(true, 0));
      s.close();
      co_return false;
    }
    const auto n = std::min(step, data.size() - at);
    auto [ec, sent] = co_await asio::async_write(s, asio::buffer(data.data() + at, n), use_tuple);
    if (ec) co_return false;
    if (f.piece) co_await let_peer_read();
  }
  co_return true;
}

}  // namespace broker::test
