#include "proxy/upstream_pool.hpp"

#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>

using broker::tcp;
using broker::proxy::stream;
using broker::proxy::upstream_connection;
using broker::proxy::upstream_pool;
namespace asio = boost::asio;

namespace {

// A connected pair on loopback: `far` plays the upstream server.
struct connection_pair {
  tcp::socket near, far;
  connection_pair(asio::io_context& io, tcp::acceptor& acceptor) : near(io), far(io) {
    near.connect(acceptor.local_endpoint());
    acceptor.accept(far);
  }
};

}  // namespace

TEST_CASE("the pool's stale connections are evicted: idle too long or closed by the server",
          "[upstream_pool]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  upstream_pool pool;
  connection_pair fresh(io, acceptor), old(io, acceptor), closed(io, acceptor);

  auto give = [&](tcp::socket& s, const char* key) {
    pool.give_back(std::make_unique<upstream_connection>(stream(std::move(s)), key, true));
  };
  give(fresh.near, "https://a:443");
  give(old.near, "https://b:443");
  give(closed.near, "https://c:443");
  REQUIRE(pool.idle() == 3);

  pool.evict_stale();  // nothing stale yet
  CHECK(pool.idle() == 3);

  closed.far.close();  // the server ends its side of "c"
  pool.evict_stale();
  CHECK(pool.idle() == 2);
  CHECK(pool.take("https://c:443") == nullptr);

  // Past the idle limit everything goes, open or not.
  pool.evict_stale(std::chrono::steady_clock::now() + upstream_pool::max_idle_time);
  CHECK(pool.idle() == 0);
  CHECK(pool.take("https://a:443") == nullptr);
  CHECK(pool.take("https://b:443") == nullptr);
}
