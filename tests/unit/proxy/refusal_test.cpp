#include "proxy/refusal.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace broker::proxy;

TEST_CASE("refusals render as DESIGN §6 responses", "[refusal]") {
  const auto text = render_refusal(refusal::policy_denied("deny[0]", "gist.github.com"),
                                   "gist.github.com", "s-1", true);
  const auto split = text.find("\r\n\r\n");
  REQUIRE(split != std::string::npos);
  const std::string head = text.substr(0, split);
  const std::string body = text.substr(split + 4);
  CHECK(head.rfind("HTTP/1.1 403 Forbidden\r\n", 0) == 0);
  CHECK(head.find("Content-Type: application/json") != std::string::npos);
  CHECK(head.find("X-Broker-Error: policy_denied") != std::string::npos);
  CHECK(head.find("Content-Length: " + std::to_string(body.size())) != std::string::npos);
  CHECK(head.find("Connection: keep-alive") != std::string::npos);
  const auto j = nlohmann::json::parse(body);
  CHECK(j["error"] == "policy_denied");
  CHECK(j["host"] == "gist.github.com");
  CHECK(j["rule"] == "deny[0]");
  CHECK(j["session"] == "s-1");
  CHECK_FALSE(j["message"].get<std::string>().empty());
}

TEST_CASE("each refusal has its status", "[refusal]") {
  CHECK(refusal::header_too_large().status == 431);
  CHECK(refusal::bad_request("x").status == 400);
  CHECK(refusal::host_mismatch("x").status == 421);
  CHECK(refusal::private_address("h", "10.0.0.1", "private").code == "private_address_blocked");
  CHECK(refusal::upstream_timeout("h").status == 504);
  CHECK(refusal::dns_failed("h", "x").status == 502);
  CHECK(refusal::audit_unavailable().status == 503);
  const auto closing = render_refusal(refusal::bad_request("x"), "", "s", false);
  CHECK(closing.find("Connection: close") != std::string::npos);
}
