#include "http/h2_client_session.hpp"

#include <nghttp2/nghttp2.h>

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <string_view>

#include "tests/unit/http/h2_peer.hpp"

using namespace broker::http;
using broker::test::frame;
using broker::test::goaway_code;
using broker::test::recording_handler;
using broker::test::rst_code;

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

// An upstream by hand: the client session with three requests open, as the fuzz target has them
// (streams 1 and 5 GET, 3 a POST whose body is still going up), fed frames no real server sends.
struct hand_upstream {
  client_record told;
  h2_client_session client{told};
  std::string sent;  // the frames the client session wrote

  hand_upstream() {
    told.session = &client;
    client.request(get(), "https", "", "/a", true);
    auto post = get("POST");
    post.has_body = true;
    client.send_data(client.request(post, "https", "", "/b", false), "up", false);
    client.request(get(), "https", "", "/c", true);
    drain();
    sent.erase(0, 24);  // the connection preface: frames follow
  }
  bool feed(std::string_view bytes) {
    const bool more = client.receive(bytes);
    drain();
    return more;
  }
  void drain() {
    for (auto out = client.output(); !out.empty(); out = client.output()) sent += out;
  }
};

// Response header blocks in HPACK: ":status" as a literal (its name from the static table), and
// fields as literals with new names; none indexed.
std::string status(std::string_view code) {
  return std::string("\x08\x03", 2) + std::string(code);
}
std::string field(std::string_view name, std::string_view value) {
  return std::string(1, '\0') + char(name.size()) + std::string(name) + char(value.size()) +
         std::string(value);
}

std::string from_hex(std::string_view hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return bytes;
}

constexpr auto end_headers = NGHTTP2_FLAG_END_HEADERS;
constexpr auto end_both = NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM;

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
  // A whole head gives back the room reserved while its fields came (it lives as long as the
  // exchange): on both sides.
  CHECK(seen.head.headers.capacity() - seen.head.headers.size() <= 3);

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
  CHECK(p.told.heads[id][0].headers.capacity() - p.told.heads[id][0].headers.size() <= 3);
  CHECK(p.told.bodies[id] == "body");
  REQUIRE(p.told.trailers[id].size() == 1);
  CHECK(p.told.trailers[id][0].value == "0");
  CHECK(p.told.ended[id]);
  CHECK(p.told.resets.empty());
  CHECK(p.client.open_streams() == 0);
}

TEST_CASE("h2 client: the hop-by-hop fields HTTP/1.1 drops are dropped here too; TE: trailers goes",
          "[h2]") {
  pair p;
  auto head = get();
  head.headers = {{"Host", "api.test"},
                  {"Proxy-Authorization", "Basic dXNlcjpwYXNz"},
                  {"Proxy-Authenticate", "Basic"},
                  {"Keep-Alive", "timeout=5"},
                  {"Proxy-Connection", "keep-alive"},
                  {"Upgrade", "websocket"},
                  {"Transfer-Encoding", "chunked"},
                  {"TE", "trailers"},
                  {"X-Kept", "1"}};
  REQUIRE(p.client.request(head, "https", "", "/", true) > 0);
  p.pump();
  REQUIRE(p.served.requests.size() == 1);
  const auto& seen = p.served.requests[0].request.head;
  for (const char* name : {"proxy-authorization", "proxy-authenticate", "keep-alive",
                           "proxy-connection", "upgrade", "transfer-encoding"}) {
    INFO(name);
    CHECK(is_hop_by_hop(name, head) == (std::string_view(name) != "transfer-encoding"));
    CHECK_FALSE(seen.find(name));
  }
  REQUIRE(seen.find("te"));
  CHECK(*seen.find("te") == "trailers");  // gRPC's (RFC 9113 §8.2.2)
  CHECK(*seen.find("x-kept") == "1");
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

TEST_CASE("h2 client: a status outside 100-599 is malformed; its DATA is never handed out",
          "[h2]") {
  // Found by the fuzz smoke (tests/fuzz/corpus/h2_client_session/status-001): SETTINGS, then
  // on stream 5 a head with :status "001" (final to nghttp2, which takes any three digits
  // outside 1xx, and interim to a check of status < 200) and one byte of DATA ending the
  // stream; on stream 1 a head with no :status at all.
  const std::string found = from_hex(
      "00002a0400000000000000040000ffff0005000040000008005d00000003"
      "0000009c0000040100000000000000040100000000000004010400000005"
      "4882000100000001050000000100000100010000000589");
  hand_upstream up;
  SECTION("whole") {
    up.feed(found);
  }
  SECTION("a byte at a time") {
    for (char c : found) up.feed(std::string_view(&c, 1));
  }
  CHECK(up.told.bodies.empty());
  CHECK(up.told.heads.empty());
  CHECK(up.told.resets.at(5) == NGHTTP2_PROTOCOL_ERROR);
  CHECK(up.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
  CHECK(rst_code(up.sent, 5) == NGHTTP2_PROTOCOL_ERROR);
  CHECK(up.told.resets.count(3) == 0);  // the others go on
  CHECK(up.client.failure().empty());

  for (const char* code : {"099", "600"}) {
    hand_upstream other;
    other.feed(frame(NGHTTP2_SETTINGS, 0, 0) +
               frame(NGHTTP2_HEADERS, end_headers, 1, status(code)) +
               frame(NGHTTP2_DATA, 0, 1, "body"));
    CHECK(other.told.heads.empty());
    CHECK(other.told.bodies.empty());
    CHECK(other.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
  }
  // One that ends the stream too: the stream closes at once, and is told it was malformed.
  hand_upstream ended;
  ended.feed(frame(NGHTTP2_SETTINGS, 0, 0) + frame(NGHTTP2_HEADERS, end_both, 1, status("600")));
  CHECK(ended.told.heads.empty());
  CHECK(ended.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
}

TEST_CASE("h2 client: a malformed response is a reset, never a body (RFC 9113 §8.1.1)", "[h2]") {
  hand_upstream up;
  up.feed(frame(NGHTTP2_SETTINGS, 0, 0));
  const std::string ok = status("200");
  SECTION("DATA after an interim head") {
    up.feed(frame(NGHTTP2_HEADERS, end_headers, 1, status("103")) +
            frame(NGHTTP2_DATA, 0, 1, "body"));
    REQUIRE(up.told.heads[1].size() == 1);
    CHECK(up.told.heads[1][0].status == 103);
    CHECK(up.told.bodies[1].empty());
    CHECK(up.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
    CHECK(rst_code(up.sent, 1) == NGHTTP2_PROTOCOL_ERROR);
  }
  SECTION("an interim head that ends the stream") {
    up.feed(frame(NGHTTP2_HEADERS, end_both, 1, status("103")));
    CHECK(up.told.heads[1].empty());
    CHECK(up.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
  }
  SECTION("more DATA than its content-length") {
    up.feed(frame(NGHTTP2_HEADERS, end_headers, 1, ok + field("content-length", "3")) +
            frame(NGHTTP2_DATA, 0, 1, "abcd"));
    CHECK(up.told.heads[1].size() == 1);
    CHECK(up.told.bodies[1].empty());
    CHECK(up.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
  }
  SECTION("less DATA than its content-length") {
    up.feed(frame(NGHTTP2_HEADERS, end_headers, 1, ok + field("content-length", "3")) +
            frame(NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 1, "ab"));
    CHECK(up.told.bodies[1] == "ab");
    CHECK_FALSE(up.told.ended[1]);  // never a whole body
    CHECK(up.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
  }
  SECTION("trailers that do not end the stream") {
    up.feed(frame(NGHTTP2_HEADERS, end_headers, 1, ok) + frame(NGHTTP2_DATA, 0, 1, "ab") +
            frame(NGHTTP2_HEADERS, end_headers, 1, field("grpc-status", "0")));
    CHECK(up.told.trailers.count(1) == 0);
    CHECK(up.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
  }
  SECTION("a body of no length after an interim head") {
    up.feed(frame(NGHTTP2_HEADERS, end_headers, 1, status("100")) +
            frame(NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 1));
    CHECK_FALSE(up.told.ended[1]);
    CHECK(up.told.resets.at(1) == NGHTTP2_PROTOCOL_ERROR);
  }
  CHECK(up.told.resets.count(3) == 0);  // a stream's error, not the connection's
  CHECK(up.client.failure().empty());
}

TEST_CASE("h2 client: DATA after a response's end is never handed out", "[h2]") {
  hand_upstream up;
  up.feed(frame(NGHTTP2_SETTINGS, 0, 0));
  const auto trailers = field("grpc-status", "0");
  SECTION("on a stream still sending its request: the connection fails") {
    // Half-closed (remote): a connection error STREAM_CLOSED (RFC 9113 §5.1).
    up.feed(frame(NGHTTP2_HEADERS, end_headers, 3, status("200")) +
            frame(NGHTTP2_HEADERS, end_both, 3, trailers) + frame(NGHTTP2_DATA, 0, 3, "more"));
    CHECK(up.told.trailers.count(3) == 1);
    CHECK(up.told.bodies[3].empty());
    CHECK(goaway_code(up.sent) == NGHTTP2_STREAM_CLOSED);
    CHECK_FALSE(up.client.wants_read());  // its reader tells the streams still open
    CHECK_FALSE(up.client.can_start());
  }
  SECTION("on a stream closed both ways: ignored") {
    // nghttp2 keeps no closed streams here, so it cannot tell this from a stream it reset.
    up.feed(frame(NGHTTP2_HEADERS, end_headers, 1, status("200")) +
            frame(NGHTTP2_HEADERS, end_both, 1, trailers) + frame(NGHTTP2_DATA, 0, 1, "more"));
    CHECK(up.told.trailers.count(1) == 1);
    CHECK(up.told.bodies[1].empty());
    CHECK(up.client.wants_read());
  }
}

TEST_CASE("h2 client: DATA on a stream with no head fails the connection", "[h2]") {
  hand_upstream up;
  // nghttp2 takes DATA on a stream it has no response for as the connection's error (stricter
  // than RFC 9113 §8.1.1's stream error).
  up.feed(frame(NGHTTP2_SETTINGS, 0, 0) + frame(NGHTTP2_DATA, 0, 1, "body"));
  CHECK(up.told.bodies.empty());
  CHECK(goaway_code(up.sent) == NGHTTP2_PROTOCOL_ERROR);
  CHECK_FALSE(up.client.wants_read());
  CHECK_FALSE(up.client.can_start());
}
