#include "proxy/idle_read.hpp"

#include <boost/asio/io_context.hpp>

#include <string>

#include <catch2/catch.hpp>

#include "proxy/buffer_pool.hpp"

namespace asio = boost::asio;
using broker::tcp;
using broker::proxy::read_buffer;
using broker::proxy::read_idle;
namespace buffer_pool = broker::proxy::buffer_pool;

TEST_CASE("a read buffer takes its block on the first read and gives it back when emptied",
          "[buffers]") {
  const auto before = buffer_pool::outstanding();
  {
    read_buffer in;
    CHECK_FALSE(in.holds_block());
    auto space = in.space();
    REQUIRE(space.size() == read_buffer::capacity());
    CHECK(buffer_pool::outstanding() == before + 1);
    space[0] = 'a';
    space[1] = 'b';
    in.commit(2);
    in.release();  // unconsumed bytes: kept
    CHECK(in.holds_block());
    CHECK(in.view() == "ab");
    in.consume(2);
    in.release();
    CHECK_FALSE(in.holds_block());
    CHECK(buffer_pool::outstanding() == before);
    in.space();  // taken again
    CHECK(in.holds_block());
  }
  CHECK(buffer_pool::outstanding() == before);  // the destructor gives it back
}

TEST_CASE("the pool keeps a bounded reserve and unmaps the rest", "[buffers]") {
  std::vector<char*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(buffer_pool::take());
  for (char* b : blocks) {
    b[0] = 'x';  // writable
    buffer_pool::give_back(b);
  }
  CHECK(buffer_pool::reserved_here() <= 16);
  CHECK(buffer_pool::reserved_here() > 0);
  buffer_pool::release_reserve();  // after a burst
  CHECK(buffer_pool::reserved_here() == 0);
}

TEST_CASE("an idle connection holds no block while it waits, and reads what arrives", "[buffers]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io), server(io);
  client.connect(acceptor.local_endpoint());
  acceptor.accept(server);

  read_buffer in;
  std::string got;
  boost::system::error_code end;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto [ec, n] = co_await read_idle(server, in);
        CHECK_FALSE(ec);
        got.assign(in.view());
        in.consume(n);
        auto [ec2, n2] = co_await read_idle(server, in);  // the peer closes
        end = ec2;
        CHECK(n2 == 0);
      },
      asio::detached);
  io.poll();  // the coroutine reaches its wait: nothing has arrived
  CHECK_FALSE(in.holds_block());
  asio::write(client, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
  while (got.empty()) io.run_one();
  CHECK(got == "GET / HTTP/1.1\r\n\r\n");
  client.close();
  io.run();
  CHECK(end == asio::error::eof);
  CHECK_FALSE(in.holds_block());
}

TEST_CASE("an idle read takes everything that has arrived, past its small first read",
          "[buffers]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io), server(io);
  client.connect(acceptor.local_endpoint());
  acceptor.accept(server);
  const std::string sent(40 * 1024, 'x');
  asio::write(client, asio::buffer(sent));

  read_buffer in;
  std::size_t first = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto [ec, n] = co_await read_idle(server, in);
        CHECK_FALSE(ec);
        first = n;
      },
      asio::detached);
  io.run();
  CHECK(first == sent.size());  // one read, not a probe's worth and another wake-up
  CHECK(in.view() == sent);
}
