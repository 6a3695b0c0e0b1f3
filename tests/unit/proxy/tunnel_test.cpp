// The CONNECT tunnel's relay under faults: bytes that arrive one per packet, and either side
// resetting its connection after N writes. The relay passes every byte it got, counts exactly
// what it passed, and ends (no hang) however either side goes away.
#include "proxy/tunnel.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>
#include <string>

#include "tests/unit/proxy/faults.hpp"

namespace broker::proxy {
namespace {

using test::faults;

// Reads until the peer's end (EOF or reset).
asio::awaitable<std::string> read_to_end(tcp::socket& s) {
  std::string got, buf(1024, '\0');
  for (;;) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_tuple);
    got.append(buf.data(), n);
    if (ec) co_return got;
  }
}

// One side of the tunnel: sends `data` with `f`, then half-closes, and reads what comes back
// until the end.
asio::awaitable<void> play(tcp::socket& s, std::string data, faults f, std::string& received) {
  int writes = 0;
  if (co_await test::write_with_faults(s, data, f, writes)) {
    error_code ignored;
    s.shutdown(tcp::socket::shutdown_send, ignored);
    received = co_await read_to_end(s);
  }
}

struct tunnel_run {
  std::string client_got, upstream_got;
  std::uint64_t bytes_out = 0, bytes_in = 0;
};

tunnel_run run_tunnel(const std::string& from_client, faults client_faults,
                      const std::string& from_upstream, faults upstream_faults) {
  asio::io_context io;
  auto pair = [&io](tcp::socket& a, tcp::socket& b) {
    tcp::acceptor acc(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    a.connect(acc.local_endpoint());
    acc.accept(b);
  };
  tcp::socket client_app(io), proxy_client(io), proxy_upstream(io), upstream_app(io);
  pair(client_app, proxy_client);
  pair(proxy_upstream, upstream_app);
  read_buffer early;
  live::connection_deadline idle(io.get_executor());
  tunnel_run out;
  bool done = false;
  asio::co_spawn(io, play(client_app, from_client, client_faults, out.client_got), asio::detached);
  asio::co_spawn(io, play(upstream_app, from_upstream, upstream_faults, out.upstream_got),
                 asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await relay_tunnel(proxy_client, proxy_upstream, early, idle, std::chrono::seconds(30),
                              out.bytes_out, out.bytes_in);
        proxy_client.close();
        proxy_upstream.close();
        done = true;
      },
      asio::detached);
  io.run_for(std::chrono::seconds(20));
  REQUIRE(done);
  return out;
}

std::string bytes(std::size_t n, char first) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(first + i % 26);
  return s;
}

}  // namespace

TEST_CASE("a tunnel passes bytes that arrive one per packet, both ways, and counts them",
          "[proxy][tunnel][faults]") {
  const auto up = bytes(300, 'a'), down = bytes(200, 'A');
  const auto out = run_tunnel(up, faults{1, 0, 0}, down, faults{1, 0, 0});
  CHECK(out.upstream_got == up);
  CHECK(out.client_got == down);
  CHECK(out.bytes_out == up.size());
  CHECK(out.bytes_in == down.size());
}

TEST_CASE("a tunnel ends when either side resets, having counted what it passed",
          "[proxy][tunnel][faults]") {
  const int fail_write = GENERATE(1, 2, 5, 10);
  const bool client_resets = GENERATE(true, false);
  INFO("reset in place of write " << fail_write
                                  << (client_resets ? " by the client" : " upstream"));
  const auto up = bytes(100, 'a'), down = bytes(100, 'A');
  const faults resetting{10, 0, fail_write}, steady{10, 0, 0};
  const auto out = client_resets ? run_tunnel(up, resetting, down, steady)
                                 : run_tunnel(up, steady, down, resetting);
  // What each side got is a prefix of what the other sent, and the counts say how much passed.
  CHECK(up.starts_with(out.upstream_got));
  CHECK(down.starts_with(out.client_got));
  CHECK(out.bytes_out >= out.upstream_got.size());
  CHECK(out.bytes_out <= up.size());
  CHECK(out.bytes_in >= out.client_got.size());
  CHECK(out.bytes_in <= down.size());
  // The resetting side sent only what came before its reset.
  if (client_resets)
    CHECK(out.bytes_out <= 10u * static_cast<unsigned>(fail_write - 1));
  else
    CHECK(out.bytes_in <= 10u * static_cast<unsigned>(fail_write - 1));
}

}  // namespace broker::proxy
