#include "proxy/body_search.hpp"

#include <catch2/catch.hpp>

#include "../http/coded_samples.hpp"
#include "proxy/relay_errors.hpp"

using namespace broker;
using http::content_coding;

namespace {

http::message_head coded(std::vector<std::string> encodings) {
  http::message_head head;
  for (auto& e : encodings) head.headers.push_back({"Content-Encoding", std::move(e)});
  return head;
}

}  // namespace

TEST_CASE("a body's codings are read from every Content-Encoding field", "[body_search]") {
  std::vector<content_coding> applied;
  CHECK_FALSE(proxy::read_body_codings(coded({"identity", "gzip, br"}), std::nullopt, applied));
  CHECK(applied == std::vector<content_coding>{content_coding::gzip, content_coding::br});
  CHECK_FALSE(proxy::read_body_codings(coded({"aws-chunked"}), std::nullopt, applied));
  CHECK(applied.empty());
}

TEST_CASE("a coding the broker cannot read is 415", "[body_search]") {
  std::vector<content_coding> applied;
  const auto refused = proxy::read_body_codings(coded({"gzip", "compress"}), std::nullopt, applied);
  REQUIRE(refused);
  CHECK(refused->code == "unsupported_encoding");
  CHECK(refused->status == 415);
  CHECK(refused->message.find("compress") != std::string::npos);
}

TEST_CASE("a coded body a family reads whole for what it says is 415", "[body_search]") {
  std::vector<content_coding> applied;
  const brokers::whole_body_need token{64 * 1024, "a token request", true};
  const brokers::whole_body_need hashed{32 * 1024 * 1024, "a signed payload", false};
  const auto refused = proxy::read_body_codings(coded({"gzip"}), token, applied);
  REQUIRE(refused);
  CHECK(refused->status == 415);
  CHECK(refused->message.find("a token request") != std::string::npos);
  // Only the bytes as sent matter to a payload hash: the coded body is searched and goes on.
  CHECK_FALSE(proxy::read_body_codings(coded({"gzip"}), hashed, applied));
  CHECK(applied == std::vector<content_coding>{content_coding::gzip});
  // Uncoded, the token request is read as ever.
  CHECK_FALSE(proxy::read_body_codings(coded({"identity"}), token, applied));
}

TEST_CASE("a coded body's search refuses what it cannot read through", "[body_search]") {
  const std::string_view value = "ghp_D0mmyT0kenForBodySearchTests0123456789";
  brokers::stream_scrubber scan(std::vector<brokers::scrub_pattern>{{value, value}});
  std::string out;
  {
    proxy::body_search search(scan, {content_coding::zstd});
    const auto stop = search.feed("definitely not zstd", false, out);
    REQUIRE(stop);
    REQUIRE(std::holds_alternative<live::refusal>(*stop));
    CHECK(std::get<live::refusal>(*stop).status == 400);
  }
  {
    proxy::body_search search(scan, {content_coding::gzip});
    const std::string body =
        test::encode(content_coding::gzip, "{\"t\":\"" + std::string(value) + "\"}");
    const auto stop = search.feed(body, true, out);
    REQUIRE(stop);
    CHECK(std::get<std::size_t>(*stop) == 0);  // the one pattern
  }
  CHECK(out.empty());
  brokers::stream_scrubber fresh(std::vector<brokers::scrub_pattern>{{value, value}});
  proxy::body_search search(fresh, {content_coding::br});
  const std::string body = test::encode(content_coding::br, test::sample_text(10'000));
  CHECK_FALSE(search.feed(body.substr(0, 100), false, out));
  CHECK_FALSE(search.feed(body.substr(100), true, out));
  CHECK(out == body);
  CHECK(search.held() == 0);
}
