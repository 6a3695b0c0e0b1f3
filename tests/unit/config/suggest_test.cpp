#include <catch2/catch.hpp>

#include "config/policy_set.hpp"
#include "config/suggest.hpp"

using broker::config::observed_request;
using broker::config::parse_policy;
using broker::config::policy;
using broker::config::policy_set;
using broker::config::suggest_layer;

namespace {

observed_request req(std::string host, std::string method, std::string path,
                     std::uint16_t port = 443, bool learned = true) {
  return {std::move(host), port, std::move(method), std::move(path), false, learned};
}

policy_set as_layer(const std::string& text) {
  std::vector<policy> layers;
  layers.push_back(parse_policy(text, "suggested.json"));
  return policy_set(std::move(layers));
}

bool allows(const policy_set& set, const observed_request& r) {
  broker::config::destination d{r.host, std::nullopt, r.port};
  return r.tunnel ? set.check_connect(d).allowed : set.check_request(d, r.method, r.path).allowed;
}

}  // namespace

TEST_CASE("suggest: the layer allows exactly what was seen, merged where many",
          "[config][suggest]") {
  std::vector<observed_request> seen = {
      req("pypi.org", "GET", "/simple/requests/"),
      req("pypi.org", "GET", "/simple/idna/"),
      req("pypi.org", "GET", "/simple/certifi/"),
      req("pypi.org", "GET", "/simple/urllib3/?x=<redacted>"),
      req("files.example.test", "GET", "/packages/a.whl"),
      req("api.example.test", "POST", "/v1/items", 8443),
      req("api.example.test", "GET", "/v1/items/7", 8443, false),
      req("a.cdn.test", "GET", "/x"),
      req("b.cdn.test", "GET", "/y"),
      req("c.cdn.test", "HEAD", "/z"),
      {"pinned.test", 443, "", "", true, true},
      req("192.0.2.7", "GET", "/status", 80),
  };
  const auto text = suggest_layer(seen, "test");
  INFO(text);
  const auto set = as_layer(text);  // what policy check accepts
  for (const auto& r : seen) {
    INFO(r.host << " " << r.method << " " << r.path);
    CHECK(allows(set, r));
  }
  // Many paths under one segment: a wildcard; few: exact. Methods as seen.
  CHECK(text.find(R"("paths":["/simple/*"])") != std::string::npos);
  CHECK(text.find(R"("paths":["/packages/a.whl"])") != std::string::npos);
  CHECK_FALSE(allows(set, req("pypi.org", "GET", "/admin")));
  CHECK_FALSE(allows(set, req("pypi.org", "POST", "/simple/x/")));
  CHECK_FALSE(allows(set, req("files.example.test", "GET", "/packages/b.whl")));
  CHECK_FALSE(allows(set, req("api.example.test", "DELETE", "/v1/items/7", 8443)));
  CHECK_FALSE(allows(set, req("api.example.test", "GET", "/v1/items/7", 443)));
  // Three subdomains of one parent: "*.cdn.test"; the parent itself is not opened.
  CHECK(text.find(R"("host":"*.cdn.test")") != std::string::npos);
  CHECK(allows(set, req("d.cdn.test", "GET", "/x")));
  CHECK_FALSE(allows(set, req("cdn.test", "GET", "/x")));
  // A tunnel stays one; an IP literal is a cidr rule for that address alone.
  CHECK(text.find(R"({"host":"pinned.test","ports":[443],"tunnel":true})") != std::string::npos);
  CHECK(text.find(R"("cidr":"192.0.2.7/32")") != std::string::npos);
  // Counts as comments.
  CHECK(text.find("// 4 requests, 4 learned") != std::string::npos);
  CHECK(text.find("// 2 requests, 1 learned") != std::string::npos);
  CHECK(text.find("12 requests, 11 of them learned") != std::string::npos);
}

TEST_CASE("suggest: a path no pattern can hold allows the host's every path", "[config][suggest]") {
  std::vector<observed_request> seen = {req("a.test", "GET", "/x%2Fy"),
                                        req("a.test", "GET", "not-origin-form")};
  const auto text = suggest_layer(seen, "test");
  INFO(text);
  const auto set = as_layer(text);
  for (const auto& r : seen) CHECK(allows(set, r));
  CHECK(text.find("paths") == std::string::npos);
}

TEST_CASE("suggest: nothing seen is a layer that allows nothing", "[config][suggest]") {
  const auto text = suggest_layer({}, "empty");
  const auto set = as_layer(text);
  CHECK_FALSE(set.check_connect({"a.test", std::nullopt, 443}).allowed);
}

TEST_CASE("suggest: an MCP server gets \"mcp\" allowing exactly what was called",
          "[config][suggest][mcp]") {
  auto call = [](std::string kind, std::string target) {
    auto r = req("mcp.example.test", "POST", "/mcp");
    r.mcp = true;
    r.mcp_kind = std::move(kind);
    r.mcp_target = std::move(target);
    return r;
  };
  std::vector<observed_request> seen = {
      call("", ""),  // initialize, tools/list...
      call("tool", "get_issue"),
      call("tool", "create_issue"),
      call("tool", "get_issue"),
      call("tool", "odd*name"),  // a glob character: not named, never widened
      call("resource", "file:///docs/readme.md"),
      req("api.example.test", "GET", "/v1"),
  };
  const std::string text = suggest_layer(seen, "t");
  INFO(text);
  const auto layer = parse_policy(text, "suggested.json");
  REQUIRE(layer.allow.size() == 2);
  const auto& api = layer.allow[0];
  CHECK_FALSE(api.mcp);  // no MCP read there
  const auto& m = *layer.allow[1].mcp;
  CHECK(*m.tools.allow == std::vector<std::string>{"create_issue", "get_issue"});
  CHECK(*m.resources.allow == std::vector<std::string>{"file:///docs/readme.md"});
  CHECK(m.prompts.allow->empty());  // none was got: none is allowed
  const auto set = as_layer(text);
  for (const auto& r : seen) CHECK(allows(set, r));
}
