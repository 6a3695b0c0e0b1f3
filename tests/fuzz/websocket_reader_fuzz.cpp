// The WebSocket frame reader (http/websocket.hpp) on a client's and an upstream's bytes: never
// more than the message limit held, control frames at most 125 bytes, and the messages, the
// failure and its code the same however the bytes were split into feeds. Every message read
// back encodes to frames the reader reads again as the same message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "http/websocket.hpp"

namespace {

using namespace broker;
namespace ws = http::websocket;
using fuzz::check;

constexpr std::size_t max_bytewise = 1024;
const ws::limits small{4096};  // small enough that inputs reach it

struct run {
  std::vector<ws::message> messages;
  std::uint16_t code = 0;
};

run read(bool from_client, const std::vector<std::string_view>& pieces) {
  ws::reader reader(from_client, small);
  run r;
  for (std::string_view piece : pieces) {
    reader.feed(piece);
    while (auto m = reader.next()) {
      check(m->payload.size() <= small.max_message, "a message over the limit came out");
      const bool control = m->type == ws::opcode::close || m->type == ws::opcode::ping ||
                           m->type == ws::opcode::pong;
      check(!control || m->payload.size() <= 125, "a control frame over 125 bytes came out");
      check(m->type != ws::opcode::continuation, "a continuation came out as a message");
      r.messages.push_back(std::move(*m));
    }
    if (reader.failed()) break;
  }
  r.code = reader.code();
  check(!reader.failed() || r.code == ws::close_protocol_error || r.code == ws::close_too_big,
        "a failure with a code the reader does not send");
  return r;
}

void check_same(const run& a, const run& b) {
  check(a.code == b.code, "the failure depends on how the bytes were split");
  check(a.messages.size() == b.messages.size(), "the messages depend on the split");
  for (std::size_t i = 0; i < a.messages.size(); ++i)
    check(
        a.messages[i].type == b.messages[i].type && a.messages[i].payload == b.messages[i].payload,
        "a message depends on the split");
}

void check_direction(bool from_client, std::string_view bytes) {
  const run whole = read(from_client, {bytes});
  check_same(whole, read(from_client, fuzz::pieces_of(bytes, fuzz::hash_of(bytes) + from_client)));
  if (bytes.size() <= max_bytewise) check_same(whole, read(from_client, fuzz::bytes_of(bytes)));
  // What came out goes back in as the broker sends it, and reads the same.
  std::string again;
  for (const auto& m : whole.messages)
    again += ws::encode_frame(
        m.type, m.payload, from_client ? std::optional<std::uint32_t>(0x1234abcdu) : std::nullopt);
  const run reread = read(from_client, {again});
  check(reread.code == 0, "a re-encoded message does not read back");
  check_same(run{whole.messages, 0}, reread);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = fuzz::as_text(data, size);
  check_direction(true, bytes);
  check_direction(false, bytes);
  return 0;
}
