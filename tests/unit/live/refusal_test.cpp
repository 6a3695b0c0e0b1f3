#include "live/refusal.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace broker::live;

TEST_CASE("refusals render as docs/cli.md responses", "[refusal]") {
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
  CHECK(refusal::body_too_large("x").status == 413);
  CHECK(refusal::body_too_large("x").code == "body_too_large");
  CHECK(refusal::unsupported_encoding("x").status == 415);
  CHECK(refusal::unsupported_encoding("x").code == "unsupported_encoding");
  CHECK(render_refusal(refusal::body_too_large("x"), "h", "s", false)
            .starts_with("HTTP/1.1 413 Content Too Large\r\n"));
  CHECK(render_refusal(refusal::unsupported_encoding("x"), "h", "s", false)
            .starts_with("HTTP/1.1 415 Unsupported Media Type\r\n"));
  CHECK(refusal::bad_request("x").status == 400);
  CHECK(refusal::host_mismatch("x").status == 421);
  CHECK(refusal::private_address("h", "10.0.0.1", "private").code == "private_address_blocked");
  CHECK(refusal::upstream_timeout("h").status == 504);
  CHECK(refusal::dns_failed("h", "x").status == 502);
  CHECK(refusal::audit_unavailable().status == 503);
  const auto closing = render_refusal(refusal::bad_request("x"), "", "s", false);
  CHECK(closing.find("Connection: close") != std::string::npos);
}

TEST_CASE("every refused decision of the brokers has its one answer", "[refusal]") {
  using broker::brokers::request_action;
  using broker::brokers::request_decision;
  auto of = [](request_action a) {
    return refusal::of(request_decision{a, "github", "header authorization", 0}, "x.test", false);
  };
  CHECK(of(request_action::real_secret_blocked).code == "real_secret_blocked");
  CHECK(of(request_action::credential_not_bound).code == "credential_not_bound");
  CHECK(of(request_action::credential_not_bound).message.find("x.test") != std::string::npos);
  CHECK(of(request_action::scope_not_allowed).code == "credential_not_bound");
  CHECK(of(request_action::action_denied).code == "policy_denied");
  CHECK(of(request_action::action_denied).rule == "credentials.github");
  CHECK(of(request_action::signature_invalid).code == "signature_invalid");
  CHECK(of(request_action::signature_invalid).message == "header authorization");
  for (auto a : {request_action::real_secret_blocked, request_action::credential_not_bound,
                 request_action::scope_not_allowed, request_action::action_denied,
                 request_action::signature_invalid, request_action::credential_out_of_scope})
    CHECK(of(a).status == 403);
  auto scoped = refusal::of(
      request_decision{request_action::credential_out_of_scope, "github", "a reason", 0, "repos"},
      "x.test", false);
  CHECK(scoped.code == "credential_out_of_scope");
  CHECK(scoped.rule == "credentials.github.scope.repos");
  CHECK(scoped.message.find("a reason") != std::string::npos);
  auto unavailable = of(request_action::credential_unavailable);
  CHECK(unavailable.code == "credential_unavailable");
  CHECK(unavailable.status == 502);
  CHECK(unavailable.rule == "credentials.github");
  CHECK_THROWS_AS(of(request_action::pass), std::logic_error);
}
