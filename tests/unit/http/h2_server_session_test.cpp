#include "http/h2_server_session.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "tests/unit/http/h2_peer.hpp"

using namespace broker::http;
using broker::test::client_preface;
using broker::test::frame;
using broker::test::get_block;
using broker::test::goaway_code;
using broker::test::h2_client;
using broker::test::pump;
using broker::test::recording_handler;
using broker::test::rst_code;

namespace {

// A server session and its recording handler, wired.
struct server {
  recording_handler handler;
  h2_server_session session;
  explicit server(h2_limits limits = {}) : session(handler, limits) { handler.session = &session; }
};

const std::string* field_of(const std::vector<header_field>& fields, std::string_view name) {
  for (const auto& f : fields)
    if (f.name == name) return &f.value;
  return nullptr;
}

}  // namespace

TEST_CASE("h2: requests become heads and bodies; responses and trailers arrive whole", "[h2]") {
  server s;
  h2_client c;
  const std::string body = "hello";
  const auto get =
      c.request("GET", "/a?x=1", {{"x-one", "1"}, {"cookie", "a=1"}, {"cookie", "b=2"}});
  const auto post = c.request("POST", "/b", {{"content-length", "5"}}, &body);
  pump(c, s.session);

  REQUIRE(s.handler.requests.size() == 2);
  const auto& g = s.handler.requests[0];
  CHECK(g.stream == get);
  CHECK(g.end_stream);
  CHECK(g.request.head.method == "GET");
  CHECK(g.request.head.target == "/a?x=1");
  CHECK(g.request.head.version_major == 2);
  CHECK(g.request.scheme == "https");
  CHECK(g.request.authority == "api.test");
  CHECK(g.request.head.headers.front().name == "host");  // made from :authority
  CHECK(*g.request.head.find("host") == "api.test");
  CHECK(*g.request.head.find("x-one") == "1");
  CHECK(*g.request.head.find("cookie") == "a=1; b=2");  // RFC 9113 §8.2.3
  CHECK_FALSE(g.request.head.has_body);
  const auto& p = s.handler.requests[1];
  CHECK(p.request.head.has_body);
  CHECK(p.request.head.content_length == 5u);
  CHECK(s.handler.bodies[post] == "hello");
  CHECK(s.handler.ended.count(post) == 1);

  message_head ok;
  ok.status = 200;
  ok.headers = {
      {"Content-Type", "text/plain"}, {"Connection", "close"}, {"Transfer-Encoding", "chunked"}};
  s.session.respond(get, ok, false);
  s.session.send_data(get, "one", true);
  s.session.respond(post, ok, false);
  s.session.send_data(post, "par", false);
  pump(c, s.session);
  s.session.send_data(post, "t", false);
  s.session.send_trailers(post, {{"Grpc-Status", "0"}});
  pump(c, s.session);

  const auto& a = c.responses[get];
  CHECK(a.status == 200);
  CHECK(a.body == "one");
  CHECK(a.closed);
  CHECK(a.error == 0);
  CHECK(*field_of(a.fields, "content-type") == "text/plain");  // names lower-cased
  CHECK(field_of(a.fields, "connection") == nullptr);          // connection-specific: left out
  CHECK(field_of(a.fields, "transfer-encoding") == nullptr);
  const auto& b = c.responses[post];
  CHECK(b.body == "part");
  CHECK(b.trailers.size() == 1);
  CHECK(*field_of(b.trailers, "grpc-status") == "0");
  CHECK(b.closed);
  CHECK(s.handler.resets.empty());  // answered whole: nobody is told of a reset
  CHECK(s.session.failure().empty());
}

TEST_CASE("h2: request trailers end the request", "[h2]") {
  server s;
  h2_client c;
  const std::string body = "x";
  const auto id = c.request("POST", "/t", {{"te", "trailers"}}, &body, true);
  pump(c, s.session);
  CHECK(s.handler.bodies[id] == "x");
  CHECK(s.handler.ended.count(id) == 0);
  // nghttp2's client sends trailers only with submit_trailer: hand-made, an end of the stream
  // with one field (literal, new name, not indexed).
  const std::string trailer = std::string("\x00\x0bgrpc-status\x01", 14) + "0";
  s.session.receive(frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS,
                          static_cast<std::uint32_t>(id), trailer),
                    h2_server_session::clock::now());
  REQUIRE(s.handler.trailers.count(id) == 1);
  CHECK(s.handler.trailers[id].front().name == "grpc-status");
  CHECK(s.handler.trailers[id].front().value == "0");
  CHECK(s.handler.ended.count(id) == 1);
}

TEST_CASE("h2: a client stops at its window until the handler takes the bytes", "[h2]") {
  h2_limits limits;
  limits.stream_window = 16 * 1024;
  server s(limits);
  s.handler.consume = false;
  h2_client c;
  const std::string body(200 * 1024, 'b');
  const auto id = c.request("POST", "/big", {}, &body);
  pump(c, s.session);
  // Before the server's SETTINGS the client may send the default 64 KiB; not one byte more.
  const auto first = s.handler.bodies[id].size();
  CHECK(first > 0);
  CHECK(first <= 65535);
  pump(c, s.session);
  CHECK(s.handler.bodies[id].size() == first);
  // Taken: more comes, a window at a time, until all of it.
  for (int i = 0; i < 100 && s.handler.ended.count(id) == 0; ++i) {
    s.session.consumed(id, s.handler.bodies[id].size());
    s.handler.consume = true;
    pump(c, s.session);
  }
  CHECK(s.handler.bodies[id] == body);
  CHECK(s.handler.ended.count(id) == 1);
}

TEST_CASE("h2: a reset from the client is told; its unread bytes do not hold the connection",
          "[h2]") {
  h2_limits limits;
  limits.connection_window = 65535;  // the protocol's default: one stream can fill it
  server s(limits);
  s.handler.consume = false;
  h2_client c;
  const std::string part(60 * 1024, 'p');
  const auto id = c.request("POST", "/cut", {}, &part, true);
  pump(c, s.session);
  CHECK(s.handler.bodies[id] == part);
  c.reset(id, NGHTTP2_CANCEL);
  pump(c, s.session);
  REQUIRE(s.handler.resets.size() == 1);
  CHECK(s.handler.resets[0] == std::pair<std::int32_t, std::uint32_t>(id, NGHTTP2_CANCEL));
  // What the gone stream never gave back no longer holds the connection's window: the next
  // stream gets all of it, still without anything consumed.
  const auto next = c.request("POST", "/next", {}, &part);
  pump(c, s.session);
  CHECK(s.handler.bodies[next] == part);
  // A stream the handler resets itself is not told back to it.
  const auto own = c.request("GET", "/mine");
  pump(c, s.session);
  s.session.reset(own, NGHTTP2_INTERNAL_ERROR);
  pump(c, s.session);
  CHECK(s.handler.resets.size() == 1);
  CHECK(c.responses[own].closed);
  CHECK(c.responses[own].error == NGHTTP2_INTERNAL_ERROR);
}

TEST_CASE("h2: a stream answered whole before its body ends stops holding the connection", "[h2]") {
  h2_limits limits;
  limits.connection_window = 65535;  // the protocol's default: one stream can fill it
  server s(limits);
  s.handler.consume = false;
  h2_client c;
  const std::string part(60 * 1024, 'p');
  const auto id = c.request("POST", "/refused", {}, &part, true);
  pump(c, s.session);
  CHECK(s.handler.bodies[id] == part);
  // Answered (a refusal, say) while the client is still sending, nothing of it taken.
  message_head refused;
  refused.status = 403;
  s.session.respond(id, refused, false);
  s.session.send_data(id, "no", true);
  pump(c, s.session);
  CHECK(c.responses[id].status == 403);
  CHECK(c.responses[id].body == "no");
  // What it had sent, and the rest of its body (more than the connection's window), no longer
  // hold the connection: the next stream gets a whole window, nothing consumed by the handler.
  c.more(id, std::string(100 * 1024, 'r'), false);
  pump(c, s.session);
  const std::string half(30 * 1024, 'h');  // nghttp2 gives a window back once half is consumed
  const auto next = c.request("POST", "/next", {}, &half);
  pump(c, s.session);
  CHECK(s.handler.bodies[next] == half);
  CHECK(s.handler.bodies[id] == part);  // nothing more of the answered stream reaches the handler
  c.more(id, "end", true);
  pump(c, s.session);
  CHECK(c.responses[id].closed);
  CHECK(c.responses[id].error == NGHTTP2_NO_ERROR);
  CHECK(s.handler.resets.empty());
}

TEST_CASE("h2: streams over the concurrency limit are refused, the others go on", "[h2]") {
  h2_limits limits;
  limits.max_concurrent_streams = 3;
  server s(limits);
  h2_client c;
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(c.request("GET", "/" + std::to_string(i)));
  pump(c, s.session);
  CHECK(s.handler.requests.size() == 3);
  CHECK(c.responses[ids[3]].closed);
  CHECK(c.responses[ids[3]].error == NGHTTP2_REFUSED_STREAM);
  message_head ok;
  ok.status = 204;
  s.session.respond(ids[0], ok, true);
  pump(c, s.session);
  CHECK(c.responses[ids[0]].status == 204);
  const auto again = c.request("GET", "/again");
  pump(c, s.session);
  CHECK(s.handler.requests.back().stream == again);
  CHECK(s.session.failure().empty());
}

TEST_CASE("h2: a header list over the limit is answered by the handler; HPACK stays in step",
          "[h2]") {
  h2_limits limits;
  limits.max_header_list_bytes = 4096;
  limits.max_header_fields = 10;
  server s(limits);
  h2_client c;
  const auto big = c.request("GET", "/big", {{"x-big", std::string(5000, 'v')}});
  std::vector<header_field> many;
  for (int i = 0; i < 11; ++i) many.push_back({"x-f" + std::to_string(i), "v"});
  const auto wide = c.request("GET", "/wide", many);
  const auto fine = c.request("GET", "/fine", {{"x-f1", "v"}});
  pump(c, s.session);
  CHECK(s.handler.too_large == std::vector<std::int32_t>{big, wide});
  REQUIRE(s.handler.requests.size() == 1);
  CHECK(s.handler.requests[0].stream == fine);
  CHECK(*s.handler.requests[0].request.head.find("x-f1") == "v");
  message_head refused;
  refused.status = 431;
  s.session.respond(big, refused, true);
  pump(c, s.session);
  CHECK(c.responses[big].status == 431);
}

TEST_CASE("h2: floods end the connection with GOAWAY ENHANCE_YOUR_CALM", "[h2]") {
  const auto now = h2_server_session::clock::now();
  const std::uint32_t calm = NGHTTP2_ENHANCE_YOUR_CALM;
  std::string attack = client_preface;
  std::string what;
  SECTION("PING") {
    what = "control frames";
    for (int i = 0; i < 600; ++i) attack += frame(NGHTTP2_PING, 0, 0, std::string(8, '\0'));
  }
  SECTION("SETTINGS") {
    what = "control frames";
    for (int i = 0; i < 600; ++i) attack += frame(NGHTTP2_SETTINGS, 0, 0);
  }
  SECTION("empty DATA") {
    what = "empty DATA";
    attack += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, get_block());
    for (int i = 0; i < 150; ++i) attack += frame(NGHTTP2_DATA, 0, 1);
  }
  SECTION("rapid reset (CVE-2023-44487)") {
    what = "reset";
    for (std::uint32_t id = 1; id < 2 * 300; id += 2) {
      attack += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS, id,
                      get_block());
      attack += frame(NGHTTP2_RST_STREAM, 0, id, std::string("\0\0\0\x08", 4));
    }
  }
  SECTION("CONTINUATION (CVE-2024-27316)") {
    what = "CONTINUATION";
    attack += frame(NGHTTP2_HEADERS, 0, 1, get_block());
    // Each a valid fragment (accept-encoding from the static table), never the block's end.
    for (int i = 0; i < 1000; ++i) attack += frame(NGHTTP2_CONTINUATION, 0, 1, "\x90");
  }
  server s;
  s.session.receive(attack, now);
  const auto out = s.session.output();
  CHECK(goaway_code(out) == calm);
  CHECK(s.session.failure().find(what) != std::string::npos);
  CHECK_FALSE(s.session.wants_read());
  CHECK(s.handler.requests.size() <= 300);
}

TEST_CASE("h2: the flood limits are per second; a busy honest client is not refused", "[h2]") {
  server s;
  h2_client c;
  auto now = h2_server_session::clock::now();
  for (int second = 0; second < 5; ++second) {
    for (int i = 0; i < 200; ++i) c.ping();
    for (int i = 0; i < 50; ++i) c.request("GET", "/" + std::to_string(i));
    pump(c, s.session, now);
    for (const auto& r : s.handler.requests) {
      message_head ok;
      ok.status = 204;
      s.session.respond(r.stream, ok, true);
    }
    s.handler.requests.clear();
    pump(c, s.session, now);
    now += std::chrono::milliseconds(1100);
  }
  CHECK(s.session.failure().empty());
  CHECK_FALSE(c.goaway);
}

TEST_CASE("h2: a request nghttp2 finds malformed is reset without reaching the handler", "[h2]") {
  server s;
  const auto now = h2_server_session::clock::now();
  // A connection-specific field (RFC 9113 §8.2.2): "connection: close", literal, new name.
  const std::string block =
      get_block() + std::string("\x00\x0a", 2) + "connection" + "\x05" + "close";
  s.session.receive(
      client_preface +
          frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS, 1, block),
      now);
  CHECK(s.handler.requests.empty());
  CHECK(s.session.failure().empty());  // the stream, not the connection
  CHECK(goaway_code(s.session.output()) == -1);
}

TEST_CASE("h2: DATA before a request's head fails the connection; the handler sees nothing",
          "[h2]") {
  server s;
  s.session.receive(client_preface + frame(NGHTTP2_DATA, 0, 1, "body"),
                    h2_server_session::clock::now());
  CHECK(s.handler.requests.empty());
  CHECK(s.handler.bodies.empty());
  CHECK(goaway_code(s.session.output()) == NGHTTP2_PROTOCOL_ERROR);  // RFC 9113 §5.1: idle
}

TEST_CASE("h2: a malformed body or trailers reset the stream; the handler is told", "[h2]") {
  server s;
  const auto now = h2_server_session::clock::now();
  // POST https "/" api.test, and content-length: 3 (a literal, its name from the static table).
  const std::string post = std::string("\x83\x87\x84\x01\x08", 5) + "api.test";
  const std::string three = std::string("\x0f\x0d\x01", 3) + "3";
  const std::string trailer = std::string("\x00\x0bgrpc-status\x01", 14) + "0";
  const auto end_both = NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS;
  std::string sent = client_preface;
  SECTION("more DATA than its content-length") {
    sent += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, post + three) +
            frame(NGHTTP2_DATA, 0, 1, "abcd");
  }
  SECTION("less DATA than its content-length") {
    sent += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, post + three) +
            frame(NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 1, "ab");
  }
  SECTION("trailers that do not end the stream") {
    sent += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, post) +
            frame(NGHTTP2_DATA, 0, 1, "ab") +
            frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, trailer);
  }
  SECTION("trailers with a pseudo-header") {
    sent += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, post) +
            frame(NGHTTP2_DATA, 0, 1, "ab") + frame(NGHTTP2_HEADERS, end_both, 1, "\x84");
  }
  s.session.receive(sent, now);
  const auto answer = s.session.output();  // the stream closes as its RST_STREAM goes
  REQUIRE(s.handler.requests.size() == 1);
  CHECK(s.handler.bodies[1].size() <= 2);  // never past its content-length
  CHECK(s.handler.ended.count(1) == 0);    // never a whole request
  CHECK(s.handler.trailers.empty());
  REQUIRE(s.handler.resets.size() == 1);
  CHECK(s.handler.resets[0] == std::pair<std::int32_t, std::uint32_t>(1, NGHTTP2_PROTOCOL_ERROR));
  CHECK(rst_code(answer, 1) == NGHTTP2_PROTOCOL_ERROR);
  CHECK(s.session.failure().empty());  // the stream's error, not the connection's
}

TEST_CASE("h2: DATA after a request's trailers fails the connection", "[h2]") {
  server s;
  const std::string post = std::string("\x83\x87\x84\x01\x08", 5) + "api.test";
  const std::string trailer = std::string("\x00\x0bgrpc-status\x01", 14) + "0";
  s.session.receive(
      client_preface + frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, post) +
          frame(NGHTTP2_DATA, 0, 1, "ab") +
          frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS, 1, trailer) +
          frame(NGHTTP2_DATA, 0, 1, "more"),
      h2_server_session::clock::now());
  CHECK(s.handler.bodies[1] == "ab");
  CHECK(s.handler.trailers.count(1) == 1);
  CHECK(goaway_code(s.session.output()) == NGHTTP2_STREAM_CLOSED);  // RFC 9113 §5.1
}

TEST_CASE("h2: no h2c, no extended CONNECT: a bad preface fails the session", "[h2]") {
  server s;
  CHECK_FALSE(s.session.receive("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\n\r\n",
                                h2_server_session::clock::now()));
  CHECK_FALSE(s.session.failure().empty());
  // ENABLE_CONNECT_PROTOCOL is never offered: :protocol makes the request malformed.
  server t;
  const std::string block = std::string("\x02\x07", 2) + "CONNECT" + std::string("\x00\x09", 2) +
                            ":protocol" + "\x09" + "websocket" + "\x87\x84\x01\x08" + "api.test";
  t.session.receive(client_preface + frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, block),
                    h2_server_session::clock::now());
  CHECK(t.handler.requests.empty());
}

TEST_CASE("h2: a connection's memory is counted and bounded", "[h2]") {
  server s;
  h2_client c;
  c.request("GET", "/");
  pump(c, s.session);
  const auto idle = s.session.memory();
  CHECK(idle > 0);
  CHECK(idle < 48 * 1024);
  // Unsent response bytes count until the client's window lets them go.
  message_head ok;
  ok.status = 200;
  s.session.respond(s.handler.requests[0].stream, ok, false);
  s.session.send_data(s.handler.requests[0].stream, std::string(200 * 1024, 'r'), true);
  CHECK(s.session.memory() >= idle + 100 * 1024);
  CHECK(s.session.unsent(s.handler.requests[0].stream) > 0);
  pump(c, s.session);
  CHECK(c.responses[s.handler.requests[0].stream].body.size() == 200 * 1024);
  CHECK(s.session.memory() < idle + 32 * 1024);
}
