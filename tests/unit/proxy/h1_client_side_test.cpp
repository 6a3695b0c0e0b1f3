// An exchange's client side on an HTTP/1.1 connection, over a real loopback socket: the head
// held back to leave with the first body bytes, a body framed as its head says, Connection:
// close when the connection ends, and a request body handed out in pieces (decoded and as
// framed) that leave the next request's bytes in the connection's buffer.
#include "proxy/h1_client_side.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>
#include <string>

#include "base/deadline.hpp"
#include "brokers/credential_set.hpp"
#include "config/policy_set.hpp"
#include "session/audit_log.hpp"
#include "tests/unit/temp_dir.hpp"

namespace broker::proxy {
namespace {

// The connection's side (a stream, its buffer, deadline and context) and the client's socket.
struct h1_fixture {
  asio::io_context io;
  test::temp_dir dir;
  tcp::socket client{io};
  std::optional<stream> server;
  read_buffer in;
  live::connection_deadline timer{io.get_executor()};
  std::shared_ptr<live::live_session> ctx;
  bool draining = false;
  std::optional<h1_client_side> side;

  h1_fixture() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    client.connect(acceptor.local_endpoint());
    server.emplace(acceptor.accept());
    std::vector<config::policy> layers;
    layers.push_back(config::parse_policy(R"({"allow": [{"host": "api.test"}]})", "p.json"));
    ctx = std::make_shared<live::live_session>(
        live::session_options{}, std::make_shared<const config::policy_set>(std::move(layers)),
        session::audit_log::open(dir.path, "s-h1"), std::make_shared<brokers::credential_set>(),
        nullptr);
    side.emplace(*server, in, timer, ctx, draining);
  }

  // Runs `steps` on the connection's side to their end.
  template <typename Steps>
  void run(Steps steps) {
    bool done = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await steps(*side);
          done = true;
        },
        asio::detached);
    io.run_for(std::chrono::seconds(10));
    io.restart();
    REQUIRE(done);
  }

  // What the client has been sent so far, in its first read (a single write arrives whole).
  std::string first_read() {
    std::string buf(4096, '\0');
    const auto n = client.read_some(asio::buffer(buf));
    return buf.substr(0, n);
  }
};

http::message_head response_head(bool chunked) {
  http::message_head head;
  head.status = 200;
  head.reason = "OK";
  head.has_body = true;
  head.chunked = chunked;
  if (chunked) {
    head.headers = {{"Transfer-Encoding", "chunked"}};
  } else {
    head.headers = {{"Content-Length", "5"}};
    head.content_length = 5;
  }
  return head;
}

}  // namespace

TEST_CASE("a response head waits for the first body bytes and leaves with them",
          "[proxy][h1_client_side]") {
  h1_fixture f;
  f.run([](h1_client_side& side) -> asio::awaitable<void> {
    co_await side.send_head(response_head(false), true, false);
  });
  CHECK(f.client.available() == 0);  // held back
  f.run([](h1_client_side& side) -> asio::awaitable<void> {
    co_await side.send_body("hello", true);
  });
  CHECK(f.first_read() == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
  // With nothing to go with, flush() sends a held head alone.
  f.run([](h1_client_side& side) -> asio::awaitable<void> {
    co_await side.send_head(response_head(false), true, false);
    co_await side.flush();
  });
  CHECK(f.first_read() == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
}

TEST_CASE("a chunked body is framed, and a connection that ends says so",
          "[proxy][h1_client_side]") {
  h1_fixture f;
  f.run([](h1_client_side& side) -> asio::awaitable<void> {
    co_await side.send_head(response_head(true), false, false);
    co_await side.send_body("abc", false);
    co_await side.send_body("", true);
  });
  std::string got;
  while (got.find("0\r\n\r\n") == std::string::npos) got += f.first_read();
  CHECK(got ==
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n");
}

TEST_CASE("an upstream's framing passes through, after a head that waited for it",
          "[proxy][h1_client_side]") {
  h1_fixture f;
  f.run([](h1_client_side& side) -> asio::awaitable<void> {
    co_await side.send_head(response_head(true), true, false);
  });
  CHECK(f.client.available() == 0);
  f.run([](h1_client_side& side) -> asio::awaitable<void> {
    co_await side.send_wire("5\r\nhello\r\n0\r\n\r\n");
  });
  CHECK(f.first_read() ==
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
}

TEST_CASE("a request body comes in pieces, and the next request stays in the buffer",
          "[proxy][h1_client_side]") {
  h1_fixture f;
  const std::string body_wire = "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
  const std::string next = "GET /next HTTP/1.1\r\nHost: api.test\r\n\r\n";
  asio::write(f.client, asio::buffer("POST /up HTTP/1.1\r\nHost: api.test\r\n"
                                     "Transfer-Encoding: chunked\r\n\r\n" +
                                     body_wire + next));
  http::parser request(http::parser::kind::request);
  std::string data, wire;
  f.run([&](h1_client_side& side) -> asio::awaitable<void> {
    // As the connection reads a head: into its buffer, then the parser up to the head's end.
    while (!request.head_done()) {
      auto [ec, n] = co_await f.server->read_some(f.in.space());
      REQUIRE_FALSE(ec);
      f.in.commit(n);
      f.in.consume(request.feed(f.in.view()).consumed);
    }
    side.start(request);
    CHECK(side.keep_alive());
    for (;;) {
      const auto piece = co_await side.read_body(true);
      data.append(piece.data);
      wire.append(piece.wire);
      if (piece.last) break;
    }
    side.end();
  });
  CHECK(data == "abcdefg");
  CHECK(wire == body_wire);
  CHECK(f.in.view().substr(0, next.size()) == next);
}

TEST_CASE("a body is all here only when its Content-Length says where it ends inside the buffer",
          "[proxy][h1_client_side]") {
  // What lets an exchange send it before reading the response (request_relay): reading it never
  // waits for the client.
  struct shape {
    std::string head_fields, sent;
    std::size_t limit;
    bool here;
  };
  const std::string next = "GET /next HTTP/1.1\r\nHost: api.test\r\n\r\n";
  const auto s = GENERATE_COPY(
      shape{"Content-Length: 5\r\n", "abcde", 16, true},
      shape{"Content-Length: 5\r\n", "abcde" + next, 16, true},  // a pipelined request after it
      shape{"Content-Length: 5\r\n", "abc", 16, false},          // part of it
      shape{"Content-Length: 5\r\n", "abcde", 4, false},         // over the bound
      shape{"Transfer-Encoding: chunked\r\n", "5\r\nabcde\r\n0\r\n\r\n", 64, false});
  h1_fixture f;
  asio::write(f.client, asio::buffer("POST /up HTTP/1.1\r\nHost: api.test\r\n" + s.head_fields +
                                     "\r\n" + s.sent));
  http::parser request(http::parser::kind::request);
  bool here = false;
  f.run([&](h1_client_side& side) -> asio::awaitable<void> {
    while (!request.head_done() || f.in.size() < s.sent.size()) {
      auto [ec, n] = co_await f.server->read_some(f.in.space());
      REQUIRE_FALSE(ec);
      f.in.commit(n);
      if (!request.head_done()) f.in.consume(request.feed(f.in.view()).consumed);
    }
    side.start(request);
    here = side.body_here(s.limit);
  });
  CHECK(here == s.here);
}

}  // namespace broker::proxy
