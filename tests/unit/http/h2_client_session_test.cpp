#include "http/h2_client_session.hpp"

#include <nghttp2/nghttp2.h>

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "tests/unit/http/h2_peer.hpp"

using namespace broker::http;
using broker::test::recording_handler;

namespace {

// What the client session is told, per stream.
struct client_record final : h2_client_session::handler {
  std::map<std::int32_t, std::vector<message_head>> heads;
  std::map<std::int32_t, std::string> bodies;
  std::map<std::int32_t, std::vector<header_field>> trailers;
  std::map<std::int32_t, bool> ended;
  std::map<std::int32_t, std::uint32_t> resets;
  h2_client_session* session = nullptr;

  void on_response(std::int32_t id, message_head head, bool end_stream) override {
    heads[id].push_back(std::move(head));
    if (end_stream) ended[id] = true;
  }
  void on_data(std::int32_t id, std::string_view data, bool last) override {
    bodies[id] += data;
    if (last) ended[id] = true;
    if (session && !data.empty()) session->consumed(id, data.size());
  }
  void on_trailers(std::int32_t id, std::vector<header_field> fields) override {
    trailers[id] = std::move(fields);
    ended[id] = true;
  }
  void on_reset(std::int32_t id, std::uint32_t code) override { resets[id] = code; }
};

// The broker's client session against its own server session, bytes carried in memory.
struct pair {
  client_record told;
  h2_client_session client;
  recording_handler served;
  h2_server_session server;

  explicit pair(h2_limits limits = {}) : client(told), server(served, limits) {
    told.session = &client;
    served.session = &server;
  }
  void pump() {
    for (int round = 0; round < 10000; ++round) {
      const auto up = client.output();
      if (!up.empty()) server.receive(up, h2_server_session::clock::now());
      const auto down = server.output();
      if (!down.empty()) client.receive(down);
      if (up.empty() && down.empty()) return;
    }
    throw std::runtime_error("pump: the peers never went quiet");
  }
};

message_head get(std::string method = "GET") {
  message_head h;
  h.method = std::move(method);
  h.headers = {{"Host", "api.test"}, {"Connection", "keep-alive"}, {"TE", "gzip"}, {"X-One", "1"}};
  return h;
}

}  // namespace

TEST_CASE("h2 client: a request goes up with its pseudo-headers; the response comes back whole",
          "[h2]") {
  pair p;
  auto head = get("POST");
  head.has_body = true;
  const auto id = p.client.request(head, "https", "", "/a?b=1", false);
  REQUIRE(id > 0);
  p.client.send_data(id, "hello ", false);
  p.client.send_data(id, "world", true);
  p.pump();
  REQUIRE(p.served.requests.size() == 1);
  const auto& seen = p.served.requests[0].request;
  CHECK(seen.head.method == "POST");
  CHECK(seen.head.target == "/a?b=1");
  CHECK(seen.scheme == "https");
  CHECK(seen.authority == "api.test");  // from Host
  CHECK(*seen.head.find("x-one") == "1");
  CHECK_FALSE(seen.head.find("connection"));  // connection-specific: never on HTTP/2
  CHECK_FALSE(seen.head.find("te"));          // only "trailers" may go
  CHECK(p.served.bodies[id] == "hello world");

  message_head ok;
  ok.status = 200;
  ok.headers = {{"content-type", "text/plain"}};
  p.server.respond(id, ok, false);
  p.server.send_data(id, "body", false);
  p.server.send_trailers(id, {{"grpc-status", "0"}});
  p.pump();
  REQUIRE(p.told.heads[id].size() == 1);
  CHECK(p.told.heads[id][0].status == 200);
  CHECK(p.told.heads[id][0].has_body);
  CHECK(p.told.bodies[id] == "body");
  REQUIRE(p.told.trailers[id].size() == 1);
  CHECK(p.told.trailers[id][0].value == "0");
  CHECK(p.told.ended[id]);
  CHECK(p.told.resets.empty());
  CHECK(p.client.open_streams() == 0);
}

TEST_CASE("h2 client: no more streams than the upstream allows; GOAWAY ends new ones", "[h2]") {
  h2_limits limits;
  limits.max_concurrent_streams = 2;
  pair p(limits);
  p.pump();  // the server's SETTINGS arrive
  const auto a = p.client.request(get(), "https", "", "/a", true);
  const auto b = p.client.request(get(), "https", "", "/b", true);
  CHECK(a > 0);
  CHECK(b > 0);
  CHECK_FALSE(p.client.can_start());
  CHECK(p.client.request(get(), "https", "", "/c", true) == 0);
  p.pump();
  message_head ok;
  ok.status = 204;
  p.server.respond(a, ok, true);
  p.pump();
  CHECK(p.client.can_start());  // one has ended
  p.server.shut_down();
  p.pump();
  CHECK_FALSE(p.client.can_start());
  CHECK_FALSE(p.client.failure().empty());
}

TEST_CASE("h2 client: an upstream's reset reaches the handler; an own reset does not", "[h2]") {
  pair p;
  const auto a = p.client.request(get(), "https", "", "/a", true);
  const auto b = p.client.request(get(), "https", "", "/b", true);
  p.pump();
  message_head ok;
  ok.status = 200;
  p.server.respond(a, ok, false);
  p.server.send_data(a, "part", false);
  p.pump();
  p.server.reset(a, NGHTTP2_INTERNAL_ERROR);
  p.client.reset(b, NGHTTP2_CANCEL);
  p.pump();
  CHECK(p.told.bodies[a] == "part");
  CHECK(p.told.resets.at(a) == NGHTTP2_INTERNAL_ERROR);
  CHECK(p.told.resets.count(b) == 0);
  REQUIRE(p.served.resets.size() == 1);
  CHECK(p.served.resets[0] == std::pair<std::int32_t, std::uint32_t>(b, NGHTTP2_CANCEL));
}

TEST_CASE("h2 client: a response head over the limits is a reset, not a response", "[h2]") {
  h2_client_session::limits small;
  small.max_header_fields = 3;
  client_record told;
  h2_client_session client(told, small);
  recording_handler served;
  h2_server_session server(served);
  served.session = &server;
  const auto id = client.request(get(), "https", "", "/a", true);
  const auto pump = [&] {
    for (int i = 0; i < 100; ++i) {
      const auto up = client.output();
      if (!up.empty()) server.receive(up, h2_server_session::clock::now());
      const auto down = server.output();
      if (!down.empty()) client.receive(down);
      if (up.empty() && down.empty()) return;
    }
  };
  pump();
  message_head big;
  big.status = 200;
  for (int i = 0; i < 5; ++i) big.headers.push_back({"x-f" + std::to_string(i), "v"});
  server.respond(id, big, true);
  pump();
  CHECK(told.heads[id].empty());
  CHECK(told.resets.count(id) == 1);
}
