#include "gateway/redis/redis_protocol.hpp"

#include <catch2/catch.hpp>

using broker::gateway::append_command;
using broker::gateway::redis_reply;
using broker::gateway::reply_reader;
using kind = redis_reply::kind;

TEST_CASE("commands are formatted as RESP arrays of bulk strings, binary-safe", "[redis]") {
  std::string out;
  append_command(out, {"SET", "k", std::string("a\0b", 3)});
  append_command(out, {"PING"});
  using namespace std::string_literals;
  CHECK(out == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n*1\r\n$4\r\nPING\r\n"s);
  CHECK_THROWS_AS(append_command(out, {}), std::invalid_argument);
}

TEST_CASE("the reply reader turns bytes into replies, however the bytes are split", "[redis]") {
  const std::string bytes =
      "+OK\r\n:42\r\n$5\r\nhello\r\n$-1\r\n-ERR wrong\r\n*3\r\n:1\r\n*-1\r\n*1\r\n$1\r\nx\r\n";
  for (std::size_t step : {std::size_t{1}, std::size_t{3}, bytes.size()}) {
    reply_reader reader;
    std::vector<redis_reply> replies;
    for (std::size_t at = 0; at < bytes.size(); at += step) {
      REQUIRE(reader.feed(bytes.data() + at, std::min(step, bytes.size() - at)));
      while (auto r = reader.next()) replies.push_back(std::move(*r));
    }
    REQUIRE(replies.size() == 6);
    CHECK(replies[0].type == kind::status);
    CHECK(replies[0].text == "OK");
    CHECK(replies[1].type == kind::integer);
    CHECK(replies[1].integer == 42);
    CHECK(replies[2].type == kind::string);
    CHECK(replies[2].text == "hello");
    CHECK(replies[3].is_nil());
    CHECK(replies[4].is_error());
    CHECK(replies[4].is_error("ERR"));
    CHECK_FALSE(replies[4].is_error("ER"));
    CHECK(replies[4].text == "ERR wrong");
    REQUIRE(replies[5].type == kind::array);
    REQUIRE(replies[5].elements.size() == 3);
    CHECK(replies[5].elements[0].integer == 1);
    CHECK(replies[5].elements[1].is_nil());
    CHECK(replies[5].elements[2].elements.at(0).text == "x");
    CHECK(reader.buffered() == 0);
    CHECK_FALSE(reader.failed());
  }
}

TEST_CASE("a partial reply stays buffered until it is complete", "[redis]") {
  reply_reader reader;
  REQUIRE(reader.feed("$10\r\n01234", 10));
  CHECK_FALSE(reader.next());
  CHECK(reader.buffered() >= 9);  // hiredis may have taken the type byte
  REQUIRE(reader.feed("56789\r\n", 7));
  const auto reply = reader.next();
  REQUIRE(reply);
  CHECK(reply->text == "0123456789");
}

TEST_CASE("bytes that are not RESP fail the reader, and it stays failed", "[redis]") {
  reply_reader reader;
  reader.feed("HTTP/1.1 400 Bad Request\r\n", 26);
  CHECK_FALSE(reader.next());
  CHECK(reader.failed());
  CHECK_THAT(reader.error(), Catch::Contains("Protocol error"));
  CHECK_FALSE(reader.feed("+OK\r\n", 5));
  CHECK_FALSE(reader.next());
}

TEST_CASE("checked() returns a reply and throws redis_error for an error reply", "[redis]") {
  redis_reply ok;
  ok.type = kind::status;
  ok.text = "OK";
  CHECK(ok.checked().text == "OK");
  redis_reply bad;
  bad.type = kind::error;
  bad.text = "WRONGTYPE Operation against a key holding the wrong kind of value";
  CHECK_THROWS_AS(bad.checked(), broker::gateway::redis_error);
  CHECK_THROWS_WITH(redis_reply(bad).checked(), Catch::StartsWith("WRONGTYPE"));
}
