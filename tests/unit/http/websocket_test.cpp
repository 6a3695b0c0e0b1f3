#include "http/websocket.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace ws = broker::http::websocket;
using ws::opcode;

namespace {

// Any frame, FIN or not, as a peer would write it (encode_frame writes only whole ones).
std::string raw_frame(bool fin, std::uint8_t op, std::string_view payload, bool masked,
                      std::uint8_t rsv = 0) {
  std::string f =
      ws::encode_frame(static_cast<opcode>(op), payload,
                       masked ? std::optional<std::uint32_t>(0x37fa213d) : std::nullopt);
  f[0] = static_cast<char>((fin ? 0x80 : 0) | rsv | op);
  return f;
}

struct seen {
  opcode type;
  std::string payload;
  bool operator==(const seen&) const = default;
};

std::vector<seen> drain(ws::reader& r) {
  std::vector<seen> out;
  while (auto m = r.next()) out.push_back({m->type, m->payload});
  return out;
}

// A client's stream: a text message in three fragments with a ping between them, a 300-byte
// binary message (16-bit length), a 70,000-byte one (64-bit length), and a close.
std::string client_stream() {
  return raw_frame(false, 0x1, "hel", true) + raw_frame(true, 0x9, "are you there", true) +
         raw_frame(false, 0x0, "lo, ", true) + raw_frame(true, 0x0, "world", true) +
         ws::encode_frame(opcode::binary, std::string(300, 'b'), 0x01020304) +
         ws::encode_frame(opcode::binary, std::string(70000, 'c'), 0xa0b0c0d0) +
         ws::encode_frame(opcode::close, ws::close_payload(1000, "bye"), 0x11111111);
}

const std::vector<seen> expected{{opcode::ping, "are you there"},
                                 {opcode::text, "hello, world"},
                                 {opcode::binary, std::string(300, 'b')},
                                 {opcode::binary, std::string(70000, 'c')},
                                 {opcode::close, std::string("\x03\xe8", 2) + "bye"}};

}  // namespace

TEST_CASE("websocket reader: the same messages whatever the split", "[http][websocket]") {
  const std::string stream = client_stream();
  {
    ws::reader r(true);
    r.feed(stream);
    CHECK(drain(r) == expected);
    CHECK(r.pending() == 0);
  }
  for (std::size_t at = 0; at <= stream.size(); at += (at < 400 ? 1 : 997)) {
    ws::reader r(true);
    r.feed(std::string_view(stream).substr(0, at));
    auto got = drain(r);
    r.feed(std::string_view(stream).substr(at));
    for (auto& m : drain(r)) got.push_back(std::move(m));
    REQUIRE(got == expected);
    REQUIRE_FALSE(r.failed());
  }
  ws::reader bytewise(true);
  std::vector<seen> got;
  for (char c : stream) {
    bytewise.feed(std::string_view(&c, 1));
    for (auto& m : drain(bytewise)) got.push_back(std::move(m));
  }
  CHECK(got == expected);
}

TEST_CASE("websocket reader: server frames are unmasked, and round-trip", "[http][websocket]") {
  ws::reader r(false);
  r.feed(ws::encode_frame(opcode::text, "{\"type\":\"response.completed\"}"));
  const auto m = r.next();
  REQUIRE(m);
  CHECK(m->type == opcode::text);
  CHECK(m->payload == "{\"type\":\"response.completed\"}");
  CHECK_FALSE(r.next());
}

TEST_CASE("websocket reader: protocol violations fail with the close code", "[http][websocket]") {
  const auto failure = [](bool from_client, const std::string& bytes, bool compressed = false) {
    ws::reader r(from_client, {}, compressed);
    r.feed(bytes);
    while (r.next()) {
    }
    return std::pair{r.code(), r.error()};
  };
  CHECK(failure(true, raw_frame(true, 0x1, "x", false)).first == ws::close_protocol_error);
  CHECK(failure(false, raw_frame(true, 0x1, "x", true)).second == "a masked frame from the server");
  CHECK(failure(true, raw_frame(true, 0x1, "x", true, 0x20)).second == "a reserved bit is set");
  CHECK(failure(true, raw_frame(true, 0x1, "x", true, 0x40)).second == "a reserved bit is set");
  CHECK(failure(true, raw_frame(true, 0x3, "x", true)).second == "unknown opcode 3");
  CHECK(failure(true, raw_frame(false, 0x9, "x", true)).first == ws::close_protocol_error);
  CHECK(failure(true, raw_frame(true, 0x9, std::string(126, 'p'), true)).first ==
        ws::close_protocol_error);
  CHECK(failure(true, raw_frame(true, 0x0, "x", true)).second ==
        "a continuation frame with no message to continue");
  CHECK(failure(true, raw_frame(false, 0x1, "a", true) + raw_frame(true, 0x1, "b", true)).second ==
        "a new message before the last one ended");
  // A 16-bit length field holding 5.
  const std::string long_form = std::string("\x82\x7e\x00\x05", 4) + "abcde";
  CHECK(failure(false, long_form).second == "a length not in its shortest form");
  // RSV1 marks a compressed message only when permessage-deflate was agreed, on its first frame.
  ws::reader deflate(true, {}, true);
  deflate.feed(raw_frame(false, 0x1, "a", true, 0x40) + raw_frame(true, 0x0, "b", true));
  const auto m = deflate.next();
  REQUIRE(m);
  CHECK(deflate.last_compressed());
  CHECK(failure(true, raw_frame(true, 0x9, "x", true, 0x40), true).first ==
        ws::close_protocol_error);
}

TEST_CASE("websocket reader: a message over the limit fails with 1009 before it is buffered",
          "[http][websocket]") {
  ws::reader r(true, {1000});
  r.feed(raw_frame(false, 0x2, std::string(600, 'a'), true));
  CHECK_FALSE(r.next());
  CHECK_FALSE(r.failed());
  // The second fragment's header alone says the message would pass the limit.
  r.feed(raw_frame(true, 0x0, std::string(600, 'b'), true).substr(0, 4));
  CHECK_FALSE(r.next());
  CHECK(r.code() == ws::close_too_big);
  r.feed(ws::encode_frame(opcode::text, "later", 1));
  CHECK_FALSE(r.next());  // failed for good
  // One frame's declared length is enough too.
  ws::reader big(false, {1000});
  big.feed(std::string("\x82\x7f\x00\x00\x00\x01\x00\x00\x00\x00", 10));
  CHECK_FALSE(big.next());
  CHECK(big.code() == ws::close_too_big);
}

TEST_CASE("websocket close_payload: code first, reason cut to fit", "[http][websocket]") {
  CHECK(ws::close_payload(1008, "no") == std::string("\x03\xf0no", 4));
  CHECK(ws::close_payload(1008, std::string(300, 'r')).size() == 125);
}
