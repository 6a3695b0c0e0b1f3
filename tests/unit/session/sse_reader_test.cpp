#include "session/sse_reader.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

using broker::session::sse_reader;

namespace {

// Events as "type|data" strings.
using events = std::vector<std::string>;

events read_pieces(const std::vector<std::string_view>& pieces, std::size_t limit = 1024) {
  events out;
  const sse_reader::event_handler record = [&out](std::string_view type, std::string_view data) {
    out.push_back(std::string(type) + "|" + std::string(data));
  };
  sse_reader reader(limit);
  for (const std::string_view piece : pieces) reader.feed(piece, record);
  reader.finish(record);
  return out;
}

// Whole, split in two at every position, and byte by byte: the same events each time.
events read_every_way(std::string_view stream, std::size_t limit = 1024) {
  const events whole = read_pieces({stream}, limit);
  for (std::size_t at = 0; at <= stream.size(); ++at) {
    INFO("split at " << at);
    REQUIRE(read_pieces({stream.substr(0, at), stream.substr(at)}, limit) == whole);
  }
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < stream.size(); ++i) bytes.push_back(stream.substr(i, 1));
  CHECK(read_pieces(bytes, limit) == whole);
  return whole;
}

}  // namespace

TEST_CASE("SSE events dispatch at blank lines", "[sse_reader]") {
  CHECK(read_every_way("event: a\ndata: 1\n\ndata:2\n\n") == events{"a|1", "|2"});
  // Multiple data lines join with '\n'; only one leading space is dropped.
  CHECK(read_every_way("data: x\ndata:  y\ndata\n\n") == events{"|x\n y\n"});
  // An event with no data is not dispatched; its type does not leak into the next one.
  CHECK(read_every_way("event: lonely\n\ndata: d\n\n") == events{"|d"});
  // Comments, id, retry and unknown fields are ignored; a colon inside a value stays.
  CHECK(read_every_way(": hi\nid: 7\nretry: 10\nfoo: bar\ndata: a:b\n\n") == events{"|a:b"});
  CHECK(read_every_way("\n\n\n") == events{});
  CHECK(read_every_way("") == events{});
}

TEST_CASE("SSE line endings: LF, CRLF and CR, mixed", "[sse_reader]") {
  CHECK(read_every_way("data: 1\r\n\r\ndata: 2\r\rdata: 3\n\ndata: 4\r\n\n") ==
        events{"|1", "|2", "|3", "|4"});
  // A CRLF split between two pieces is still one line end, inside an event too.
  CHECK(read_every_way("event: e\r\ndata: 1\r\ndata: 2\r\n\r\n") == events{"e|1\n2"});
  CHECK(read_every_way("event: e\rdata: 1\rdata: 2\r\r") == events{"e|1\n2"});
  // "\r\n" is one line end, "\n\r" is two.
  CHECK(read_every_way("data: 1\n\rdata: 2\r\n\r\n") == events{"|1", "|2"});
}

TEST_CASE("SSE end of stream dispatches the last event", "[sse_reader]") {
  CHECK(read_every_way("data: 1\n\ndata: 2") == events{"|1", "|2"});
  CHECK(read_every_way("event: e\ndata: 2\n") == events{"e|2"});
  CHECK(read_every_way("data: 2\r") == events{"|2"});
}

TEST_CASE("SSE skips a leading byte order mark", "[sse_reader]") {
  CHECK(read_every_way("\xEF\xBB\xBF"
                       "data: 1\n\n") == events{"|1"});
  // Only at the very start.
  CHECK(read_every_way("data: 1\n\n\xEF\xBB\xBF"
                       "data: 2\n\n") == events{"|1"});
}

TEST_CASE("SSE drops an event that outgrows the limit and keeps reading", "[sse_reader]") {
  const std::string long_line = "data: " + std::string(100, 'x') + "\n";
  // One line over the limit.
  CHECK(read_every_way("data: a\n\n" + long_line + "\ndata: b\n\n", 64) == events{"|a", "|b"});
  // Many lines, each within the limit, whose data together is over it.
  std::string many = "event: big\n";
  for (int i = 0; i < 10; ++i) many += "data: 0123456789\n";
  CHECK(read_every_way(many + "\nevent: small\ndata: c\n\n", 64) == events{"small|c"});
  // An oversized line of any field drops its event, whether or not it came in one piece.
  CHECK(read_every_way("event: " + std::string(100, 'e') + "\ndata: a\n\ndata: b\n\n", 64) ==
        events{"|b"});
  // An oversized last line at end of stream.
  CHECK(read_every_way("data: a\n\n" + long_line.substr(0, 90), 64) == events{"|a"});
}

// Found by tests/fuzz/llm_usage_fuzz.cpp: the limit counted a first line's BOM only when the
// line straddled two pieces, and a first line dropped in pieces let the next line strip a BOM.
TEST_CASE("SSE limit and BOM agree however the first line is split", "[sse_reader]") {
  // Seven bytes with the BOM, four without: over a limit of 5 either way, and within 7.
  CHECK(read_every_way("\xEF\xBB\xBF"
                       "data\n\n",
                       5) == events{});
  CHECK(read_every_way("\xEF\xBB\xBF"
                       "data\n\n",
                       7) == events{"|"});
  // A BOM after a dropped first line is an unknown field, not the blank line ending the event.
  CHECK(read_every_way("xxxxxxxxxx\n\xEF\xBB\xBF\ndata: a\n\ndata: b\n\n", 8) == events{"|b"});
}

TEST_CASE("SSE holds no buffer between pieces unless an event is unfinished", "[sse_reader]") {
  sse_reader reader;
  std::vector<std::string> got;
  const auto on = [&](std::string_view, std::string_view data) { got.emplace_back(data); };
  const std::string event = "event: delta\ndata: " + std::string(200, 'x') + "\n\n";
  reader.feed(event, on);
  CHECK(got.size() == 1);
  CHECK(reader.held_bytes() == 0);
  // Cut inside a line, then inside an event: what is unfinished is held, then let go of.
  reader.feed(event.substr(0, 40), on);
  CHECK(reader.held_bytes() >= 40 - 19);
  reader.feed(event.substr(40, event.size() - 41), on);
  CHECK(got.size() == 1);
  CHECK(reader.held_bytes() >= 200);
  reader.feed("\n", on);
  CHECK(got.size() == 2);
  CHECK(got.back() == std::string(200, 'x'));
  CHECK(reader.held_bytes() == 0);
}
