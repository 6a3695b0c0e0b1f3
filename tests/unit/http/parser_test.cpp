#include "http/parser.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace broker;

namespace {

http::parser::result feed_all(http::parser& p, std::string_view data) {
  return p.feed(data);
}

std::string many_fields(int n) {
  std::string head = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n";
  for (int i = 1; i < n; ++i) head += "X-F" + std::to_string(i) + ": v\r\n";
  return head + "\r\n";
}

}  // namespace

TEST_CASE("request head is parsed and stops at the head's end", "[http_parser]") {
  http::parser p(http::parser::kind::request);
  const std::string wire =
      "POST http://a.test/x?y=1 HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\nabcGET";
  const auto r = feed_all(p, wire);
  REQUIRE(r.status == http::parse_status::head_complete);
  CHECK(wire.substr(r.consumed) == "abcGET");
  CHECK(p.head().method == "POST");
  CHECK(p.head().target == "http://a.test/x?y=1");
  CHECK(p.head().has_body);
  CHECK(p.head().content_length == 3u);
  REQUIRE(p.head().find("HOST") != nullptr);
  CHECK(*p.head().find("host") == "a.test");

  const auto body = p.feed(wire.substr(r.consumed));
  CHECK(body.status == http::parse_status::message_complete);
  CHECK(body.consumed == 3);
}

TEST_CASE("a whole head keeps no more room than its fields need, give or take three",
          "[http_parser]") {
  // Heads live as long as their exchange (a streamed answer's for minutes): the room reserved
  // while parsing is given back, but for the two fields a proxy may add.
  for (const int fields : {2, 12, 15, 16, 40}) {
    http::parser p(http::parser::kind::request);
    REQUIRE(feed_all(p, many_fields(fields)).status == http::parse_status::head_complete);
    auto& headers = p.head().headers;
    CHECK(headers.size() == static_cast<std::size_t>(fields));
    CHECK(headers.capacity() - headers.size() >= 2);
    CHECK(headers.capacity() - headers.size() <= 3);
    const auto* block = headers.data();
    headers.push_back({"Accept-Encoding", "identity"});
    headers.push_back({"X-Two", "2"});
    CHECK(headers.data() == block);
  }
}

TEST_CASE("a head split at every byte parses the same", "[http_parser]") {
  const std::string wire = "GET http://a.test/p HTTP/1.1\r\nHost: a.test\r\nX-Long: abcdef\r\n\r\n";
  for (std::size_t split = 1; split < wire.size(); ++split) {
    http::parser p(http::parser::kind::request);
    const auto first = p.feed(wire.substr(0, split));
    REQUIRE(first.status == http::parse_status::need_more);
    REQUIRE(first.consumed == split);
    const auto second = p.feed(wire.substr(split));
    REQUIRE(second.status == http::parse_status::head_complete);
    CHECK(p.head().headers.size() == 2);
    CHECK(*p.head().find("x-long") == "abcdef");
  }
}

TEST_CASE("chunked bodies end at the last chunk, pipelined bytes stay", "[http_parser]") {
  http::parser p(http::parser::kind::request);
  const std::string head =
      "POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n";
  REQUIRE(p.feed(head).status == http::parse_status::head_complete);
  CHECK(p.head().chunked);
  const std::string body = "3\r\nabc\r\n0\r\n\r\n";
  const std::string next = "GET http://a.test/ HTTP/1.1\r\n";
  const auto r = p.feed(body + next);
  CHECK(r.status == http::parse_status::message_complete);
  CHECK(r.consumed == body.size());
}

TEST_CASE("trailer fields are not added to the head", "[http_parser]") {
  // Found by the request-parser fuzz target: a trailing Content-Length had joined the head's
  // fields, so the head re-serialized as chunked and Content-Length at once.
  http::parser p(http::parser::kind::request);
  REQUIRE(p.feed("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n"
                 "Trailer: X-Sum\r\n\r\n")
              .status == http::parse_status::head_complete);
  const auto r = p.feed("3\r\nabc\r\n0\r\nX-Sum: 1\r\nContent-Length: 13\r\n\r\n");
  CHECK(r.status == http::parse_status::message_complete);
  CHECK(p.head().headers.size() == 3);
  CHECK(p.head().find("content-length") == nullptr);
  CHECK(p.head().find("x-sum") == nullptr);
  CHECK(p.head().chunked);
  // A malformed trailer field is still refused.
  http::parser q(http::parser::kind::request);
  REQUIRE(
      q.feed("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n")
          .status == http::parse_status::head_complete);
  CHECK(q.feed("0\r\nBad Name: 1\r\n\r\n").status == http::parse_status::error);
}

TEST_CASE("smuggling shapes are refused", "[http_parser]") {
  auto error_of = [](const std::string& wire) {
    http::parser p(http::parser::kind::request);
    auto r = p.feed(wire);
    if (r.status == http::parse_status::head_complete && p.head().has_body)
      r = p.feed(std::string_view(wire).substr(r.consumed));
    return std::pair{r.status, p.error()};
  };
  SECTION("Content-Length with Transfer-Encoding") {
    auto [status, err] = error_of(
        "POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: "
        "chunked\r\n\r\n");
    CHECK(status == http::parse_status::error);
    CHECK(err == http::parse_error::bad_request);
  }
  SECTION("obs-fold") {
    auto [status, err] = error_of("GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n");
    CHECK(status == http::parse_status::error);
    CHECK(err == http::parse_error::bad_request);
    auto [tab, tab_err] = error_of("GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n");
    CHECK(tab == http::parse_status::error);
  }
  SECTION("obs-fold whose line feed ended the previous read") {
    http::parser p(http::parser::kind::request);
    CHECK(p.feed("GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a\r\n").status ==
          http::parse_status::need_more);
    CHECK(p.feed(" b\r\n\r\n").status == http::parse_status::error);
    CHECK(p.error() == http::parse_error::bad_request);
  }
  SECTION("white space inside a value is no fold") {
    auto [status, err] = error_of("GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a \t b\r\n\r\n");
    CHECK(status == http::parse_status::head_complete);
  }
  SECTION("whitespace before the colon") {
    auto [status, err] = error_of("GET http://a/ HTTP/1.1\r\nHost : a\r\n\r\n");
    CHECK(status == http::parse_status::error);
  }
  SECTION("a field name outside RFC 9110's token characters") {
    for (const char* name : {"X\xc3\xa9", "X@", "X[y]", "\"X\"", "X/Y"}) {
      INFO(name);
      auto [status, err] =
          error_of(std::string("GET http://a/ HTTP/1.1\r\nHost: a\r\n") + name + ": v\r\n\r\n");
      CHECK(status == http::parse_status::error);
    }
    auto [status, err] =
        error_of("GET http://a/ HTTP/1.1\r\nHost: a\r\nX-a_B.9!#$%&'*+^`|~: v\r\n\r\n");
    CHECK(status == http::parse_status::head_complete);
  }
  SECTION("bad chunk size") {
    auto [status, err] =
        error_of("POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    CHECK(status == http::parse_status::error);
    CHECK(err == http::parse_error::bad_request);
  }
  SECTION("bare LF line ends") {
    auto [status, err] = error_of("GET http://a/ HTTP/1.1\nHost: a\n\n");
    CHECK(status == http::parse_status::error);
  }
  SECTION("a transfer coding other than chunked alone (RFC 9112 §6.1)") {
    const char* codings[] = {"Transfer-Encoding: xchunked\r\n",
                             "Transfer-Encoding: gzip, chunked\r\n",
                             "Transfer-Encoding: chunked, identity\r\n",
                             "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
                             "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                             "Transfer-Encoding: \r\n"};
    for (const char* te : codings) {
      INFO(te);
      auto [status, err] =
          error_of(std::string("POST http://a/ HTTP/1.1\r\nHost: a\r\n") + te + "\r\n0\r\n\r\n");
      CHECK(status == http::parse_status::error);
      CHECK(err == http::parse_error::bad_request);
    }
  }
}

TEST_CASE("chunked alone, in any case, is a request's transfer coding", "[http_parser]") {
  http::parser p(http::parser::kind::request);
  const auto r =
      p.feed("POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:  Chunked \r\n\r\n");
  REQUIRE(r.status == http::parse_status::head_complete);
  CHECK(p.head().chunked);
}

TEST_CASE("head limits: 100 fields and 64 KiB", "[http_parser]") {
  {
    http::parser p(http::parser::kind::request);
    CHECK(p.feed(many_fields(100)).status == http::parse_status::head_complete);
  }
  {
    http::parser p(http::parser::kind::request);
    CHECK(p.feed(many_fields(101)).status == http::parse_status::error);
    CHECK(p.error() == http::parse_error::header_too_large);
  }
  {
    http::parser p(http::parser::kind::request);
    std::string big = "GET http://a/ HTTP/1.1\r\nHost: a\r\nX: " + std::string(70 * 1024, 'a');
    // Fed in pieces, as reads arrive: the limit trips before the head ends.
    const auto r1 = p.feed(big.substr(0, 40000));
    CHECK(r1.status == http::parse_status::need_more);
    const auto r2 = p.feed(big.substr(40000));
    CHECK(r2.status == http::parse_status::error);
    CHECK(p.error() == http::parse_error::header_too_large);
  }
}

// A caller that looks at head_done() or message_done() after a failed feed must not see the
// head or message of the refused bytes as complete.
TEST_CASE("after an error neither the head nor the message is done", "[http_parser]") {
  auto check_refused = [](http::parser& p) {
    CHECK(p.error() != http::parse_error::none);
    CHECK_FALSE(p.head_done());
    CHECK_FALSE(p.message_done());
    CHECK(p.feed("GET http://a/ HTTP/1.1\r\n\r\n").status == http::parse_status::error);
    CHECK(p.finish().status == http::parse_status::error);
    CHECK_FALSE(p.head_done());
    CHECK_FALSE(p.message_done());
  };
  SECTION("a whole head past 64 KiB in one feed (llhttp completes it, the limit refuses it)") {
    http::parser p(http::parser::kind::request);
    const auto r = p.feed("GET http://a/ HTTP/1.1\r\nHost: a\r\nX: " + std::string(70 * 1024, 'a') +
                          "\r\n\r\n");
    CHECK(r.status == http::parse_status::error);
    CHECK(p.error() == http::parse_error::header_too_large);
    check_refused(p);
  }
  SECTION("obs-fold in a head that ends in the same feed") {
    http::parser p(http::parser::kind::request);
    CHECK(p.feed("GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n").status ==
          http::parse_status::error);
    check_refused(p);
  }
  SECTION("a bad chunk after a good head") {
    http::parser p(http::parser::kind::request);
    REQUIRE(
        p.feed("POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n").status ==
        http::parse_status::head_complete);
    CHECK(p.feed("zz\r\n").status == http::parse_status::error);
    check_refused(p);
  }
  SECTION("a response body cut short at close") {
    http::parser p(http::parser::kind::response, "GET");
    REQUIRE(p.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").status ==
            http::parse_status::head_complete);
    CHECK(p.finish().status == http::parse_status::error);
    check_refused(p);
  }
}

TEST_CASE("responses: framing, HEAD, 204, read-until-close, interim", "[http_parser]") {
  SECTION("content-length body") {
    http::parser p(http::parser::kind::response, "GET");
    const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    auto r = p.feed(wire);
    REQUIRE(r.status == http::parse_status::head_complete);
    CHECK(p.head().status == 200);
    CHECK(p.head().reason == "OK");
    r = p.feed(std::string_view(wire).substr(r.consumed));
    CHECK(r.status == http::parse_status::message_complete);
    CHECK(p.keep_alive());
  }
  SECTION("HEAD responses carry no body despite Content-Length") {
    http::parser p(http::parser::kind::response, "HEAD");
    const auto r = p.feed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
    CHECK(r.status == http::parse_status::head_complete);
    CHECK(p.message_done());
  }
  SECTION("204 has no body") {
    http::parser p(http::parser::kind::response, "GET");
    p.feed("HTTP/1.1 204 No Content\r\n\r\n");
    CHECK(p.message_done());
  }
  SECTION("no framing: the body runs until the upstream closes") {
    http::parser p(http::parser::kind::response, "GET");
    auto r = p.feed("HTTP/1.1 200 OK\r\n\r\nabc");
    REQUIRE(r.status == http::parse_status::head_complete);
    CHECK(p.head().has_body);
    CHECK(p.feed("abc").status == http::parse_status::need_more);
    CHECK(p.finish().status == http::parse_status::message_complete);
    CHECK_FALSE(p.keep_alive());
  }
  SECTION("a body cut short is an error at close") {
    http::parser p(http::parser::kind::response, "GET");
    p.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    CHECK(p.finish().status == http::parse_status::error);
  }
  SECTION("100 Continue is a complete message of its own") {
    http::parser p(http::parser::kind::response, "POST");
    const auto r = p.feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n");
    CHECK(r.status == http::parse_status::head_complete);
    CHECK(p.message_done());
    CHECK(p.head().status == 100);
  }
}

TEST_CASE("hop-by-hop headers are dropped when serializing", "[http_parser]") {
  http::parser p(http::parser::kind::request);
  p.feed(
      "GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\nProxy-Connection: keep-alive\r\n"
      "Proxy-Authorization: Basic eA==\r\nConnection: X-Private, keep-alive\r\nX-Private: 1\r\n"
      "Keep-Alive: 5\r\nX-Kept: yes\r\n\r\n");
  const auto out = http::serialize_request_head(p.head(), "/x");
  CHECK(out == "GET /x HTTP/1.1\r\nHost: a.test\r\nX-Kept: yes\r\n\r\n");
}

TEST_CASE("every name Connection lists is dropped, over several fields and past eight names",
          "[http_parser]") {
  http::parser p(http::parser::kind::response, "GET");
  p.feed(
      "HTTP/1.1 200 OK\r\nConnection: a, b, c, d, e\r\nConnection: f,g , h, i, j, "
      "Content-Length\r\nA: 1\r\nd: 1\r\nJ: 1\r\nI: 1\r\nX-Kept: yes\r\nContent-Length: "
      "0\r\n\r\n");
  // Framing is never dropped this way: the body goes on as framed.
  CHECK(http::serialize_response_head(p.head()) ==
        "HTTP/1.1 200 OK\r\nX-Kept: yes\r\nContent-Length: 0\r\n\r\n");
  CHECK(http::is_hop_by_hop("j", p.head()));
  CHECK_FALSE(http::is_hop_by_hop("content-length", p.head()));
  CHECK_FALSE(http::is_hop_by_hop("x-kept", p.head()));
}

TEST_CASE("an HTTP/1.0 request goes upstream as HTTP/1.0", "[http_parser]") {
  http::parser p(http::parser::kind::request);
  REQUIRE(p.feed("GET http://a.test/x HTTP/1.0\r\nHost: a.test\r\n\r\n").status ==
          http::parse_status::head_complete);
  CHECK(http::serialize_request_head(p.head(), "/x") == "GET /x HTTP/1.0\r\nHost: a.test\r\n\r\n");
  CHECK_FALSE(p.keep_alive());
}

// Found by tests/fuzz/request_parser_fuzz.cpp: llhttp does not frame "chunked<TAB>" (or
// "chunked,") as chunked, yet the field went upstream trimmed, as "chunked": the broker read a
// message with no body, the next hop a chunked one.
TEST_CASE("a Transfer-Encoding that names chunked but is not framed as chunked is refused",
          "[http_parser]") {
  for (const std::string value : {"chunked\t", "chunked,", "chunked \t"}) {
    INFO("Transfer-Encoding: " << value);
    http::parser request(http::parser::kind::request);
    CHECK(request
              .feed("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: " + value +
                    "\r\n\r\n0\r\n\r\n")
              .status == http::parse_status::error);
    CHECK(request.error() == http::parse_error::bad_request);
    http::parser response(http::parser::kind::response, "GET");
    CHECK(response.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: " + value + "\r\n\r\n0\r\n\r\n")
              .status == http::parse_status::error);
  }
  // What llhttp does frame as chunked still passes.
  http::parser spaced(http::parser::kind::request);
  CHECK(spaced
            .feed("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding:\tchunked "
                  "\r\n\r\n")
            .status == http::parse_status::head_complete);
  CHECK(spaced.head().chunked);
}
