#include "http/message.hpp"

#include <catch2/catch.hpp>

using namespace broker;

namespace {

http::message_head with(std::vector<http::header_field> headers) {
  http::message_head head;
  head.headers = std::move(headers);
  return head;
}

}  // namespace

TEST_CASE("a list header is one list over all its fields", "[http_message]") {
  const auto head = with({{"Accept", "a, b"}, {"X", "y"}, {"accept", " ,c ,, d\t"}});
  CHECK(head.list("ACCEPT") == std::vector<std::string_view>{"a", "b", "c", "d"});
  CHECK(head.list("missing").empty());
  CHECK(head.has_token("accept", "D"));
  CHECK_FALSE(head.has_token("accept", "e"));
}

TEST_CASE("header names match with ASCII case folding only", "[http_message]") {
  const auto head = with({{"Content-Type", "a"}, {"X-\xc3\x89t\xc3\xa9", "b"}, {"X[", "c"}});
  CHECK(head.find("CONTENT-type"));
  CHECK(head.find("x-\xc3\x89t\xc3\xa9"));
  CHECK_FALSE(head.find("x-\xc3\xa9t\xc3\xa9"));  // É and é are not the same byte, folded or not
  CHECK_FALSE(head.find("X{"));                   // '[' + 0x20 is '{': only letters fold
  CHECK_FALSE(head.find("content-typ"));
}

TEST_CASE("a coded body is named by every field of its coding headers", "[http_message]") {
  CHECK(http::coded_body(with({})).empty());
  CHECK(http::coded_body(with({{"Content-Encoding", "identity"}})).empty());
  CHECK(http::coded_body(with({{"Transfer-Encoding", "chunked"}})).empty());
  CHECK(http::coded_body(with({{"Content-Encoding", "gzip"}})) == "Content-Encoding: gzip");
  CHECK(http::coded_body(with({{"Content-Encoding", "identity"}, {"Content-Encoding", "br"}})) ==
        "Content-Encoding: identity, br");
  CHECK(http::coded_body(with({{"Content-Encoding", "identity, gzip"}})) ==
        "Content-Encoding: identity, gzip");
  CHECK(http::coded_body(with({{"Transfer-Encoding", "gzip, chunked"}})) ==
        "Transfer-Encoding: gzip, chunked");
  CHECK(http::coded_body(with({{"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}})) ==
        "Transfer-Encoding: gzip, chunked");
}

TEST_CASE("status_text gives RFC 9110's reason phrases, none for a code it does not name",
          "[message]") {
  CHECK(broker::http::status_text(100) == "Continue");
  CHECK(broker::http::status_text(200) == "OK");
  CHECK(broker::http::status_text(404) == "Not Found");
  CHECK(broker::http::status_text(503) == "Service Unavailable");
  CHECK(broker::http::status_text(299).empty());
}
