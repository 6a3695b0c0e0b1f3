#include "proxy/tls_socket.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/error.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"
#include "certs/tls_contexts.hpp"
#include "tests/unit/temp_dir.hpp"

namespace asio = boost::asio;
using broker::error_code;
using broker::tcp;
using broker::certs::tls_contexts;
using broker::proxy::tls_socket;

namespace {

// A server side with a leaf for "api.test" from a fresh CA, and a client side trusting that CA.
struct pki {
  broker::test::temp_dir dir;
  std::shared_ptr<broker::certs::certificate_authority> ca =
      std::make_shared<broker::certs::certificate_authority>(
          broker::certs::certificate_authority::generate("tls_socket test CA", 1));
  std::filesystem::path ca_file = [this] {
    auto file = dir.path / "ca.pem";
    std::ofstream(file) << ca->certificate_pem();
    return file;
  }();
  tls_contexts tls{std::make_shared<broker::certs::leaf_cache>(*ca), {ca_file}};
};

struct pair_of_sockets {
  asio::io_context io;
  tcp::socket client{io}, server{io};
  pair_of_sockets() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }
};

// The function object form of co_spawn keeps the lambda (and so its captures) alive.
template <typename F>
void run(asio::io_context& io, F f) {
  asio::co_spawn(io, std::move(f), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
}

}  // namespace

TEST_CASE("tls_socket: a handshake with early bytes, both ways at once, close_notify is EOF",
          "[tls_socket]") {
  pki p;
  pair_of_sockets s;
  // The server side has read the first bytes of the ClientHello before TLS starts (as the
  // interception does to tell TLS from plain HTTP): they are handed to the handshake.
  tls_socket client(std::move(s.client), p.tls.client().native_handle());
  REQUIRE(tls_contexts::expect_peer(client.native_handle(), "api.test", false));
  std::string early(5, '\0');
  error_code client_hs, server_hs, server_end;
  std::string server_got, client_got;
  run(s.io, [&]() -> asio::awaitable<void> {
    client_hs = co_await client.handshake_client();
    if (client_hs) co_return;
    co_await client.write(std::string(100'000, 'c'));
    while (client_got.size() < 200'000) {
      char buffer[4096];
      auto [ec, n] = co_await client.read_some(buffer);
      if (ec) co_return;
      client_got.append(buffer, n);
    }
    co_await client.shutdown();
  });
  s.io.run_one();  // the ClientHello is out
  asio::read(s.server, asio::buffer(early));
  tls_socket server(std::move(s.server), p.tls.server().native_handle());
  p.tls.use_leaf(server.native_handle(), "api.test");
  run(s.io, [&]() -> asio::awaitable<void> {
    server_hs = co_await server.handshake_server(early);
    if (server_hs) co_return;
    // Reads and writes in flight together, as a WebSocket relays.
    run(s.io, [&]() -> asio::awaitable<void> { co_await server.write(std::string(200'000, 's')); });
    for (;;) {
      char buffer[4096];
      auto [ec, n] = co_await server.read_some(buffer);
      if (ec) {
        server_end = ec;
        co_await server.shutdown();  // close_notify back: the client's shutdown waits for it
        co_return;
      }
      server_got.append(buffer, n);
    }
  });
  s.io.run();
  CHECK_FALSE(client_hs);
  CHECK_FALSE(server_hs);
  CHECK(server_got == std::string(100'000, 'c'));
  CHECK(client_got == std::string(200'000, 's'));
  CHECK(server_end == asio::error::eof);
}

TEST_CASE("tls_socket: a TCP close without close_notify is stream_truncated; a wrong name fails",
          "[tls_socket]") {
  pki p;
  SECTION("truncated") {
    pair_of_sockets s;
    tls_socket client(std::move(s.client), p.tls.client().native_handle());
    tls_socket server(std::move(s.server), p.tls.server().native_handle());
    REQUIRE(tls_contexts::expect_peer(client.native_handle(), "api.test", false));
    p.tls.use_leaf(server.native_handle(), "api.test");
    error_code end;
    std::string hello;
    run(s.io, [&]() -> asio::awaitable<void> {
      if (co_await server.handshake_server({})) co_return;
      co_await server.write("hello");
      server.socket().close();  // no close_notify
    });
    run(s.io, [&]() -> asio::awaitable<void> {
      if (co_await client.handshake_client()) co_return;
      std::string got;
      for (;;) {
        char buffer[64];
        auto [ec, n] = co_await client.read_some(buffer);
        if (ec) {
          end = ec;
          break;
        }
        got.append(buffer, n);
      }
      hello = got;
    });
    s.io.run();
    CHECK(hello == "hello");
    CHECK(end == asio::ssl::error::stream_truncated);
  }
  SECTION("the certificate does not name the host") {
    pair_of_sockets s;
    tls_socket client(std::move(s.client), p.tls.client().native_handle());
    tls_socket server(std::move(s.server), p.tls.server().native_handle());
    REQUIRE(tls_contexts::expect_peer(client.native_handle(), "other.test", false));
    p.tls.use_leaf(server.native_handle(), "api.test");
    error_code client_hs;
    run(s.io, [&]() -> asio::awaitable<void> { (void)co_await server.handshake_server({}); });
    run(s.io, [&]() -> asio::awaitable<void> { client_hs = co_await client.handshake_client(); });
    s.io.run();
    CHECK(client_hs);
    CHECK(SSL_get_verify_result(client.native_handle()) != X509_V_OK);
  }
}
