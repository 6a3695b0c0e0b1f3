#include <catch2/catch.hpp>

#include "config/path_pattern.hpp"

using broker::config::normalize_path;
using broker::config::path_pattern;

TEST_CASE("normalize_path drops query and fragment", "[config][path]") {
  CHECK(normalize_path("/v1/chat?x=1") == "/v1/chat");
  CHECK(normalize_path("/v1/chat#frag") == "/v1/chat");
  CHECK(normalize_path("/?") == "/");
  CHECK(normalize_path("/") == "/");
}

TEST_CASE("normalize_path removes dot segments (RFC 3986 5.2.4)", "[config][path]") {
  CHECK(normalize_path("/v1/../admin") == "/admin");
  CHECK(normalize_path("/a/b/c/./../../g") == "/a/g");
  CHECK(normalize_path("/a/.") == "/a/");
  CHECK(normalize_path("/a/..") == "/");
  CHECK(normalize_path("/../../etc") == "/etc");
  CHECK(normalize_path("/a/./b") == "/a/b");
  CHECK(normalize_path("/a//b") == "/a//b");  // empty segments are kept
  CHECK(normalize_path("/a/..b/c") == "/a/..b/c");
}

TEST_CASE("normalize_path decodes only unreserved escapes", "[config][path]") {
  CHECK(normalize_path("/%76%31/x") == "/v1/x");
  CHECK(normalize_path("/v1/%7e%41") == "/v1/~A");
  CHECK(normalize_path("/a%2fb") == "/a%2Fb");  // reserved: stays encoded, hex upper-cased
  CHECK(normalize_path("/a%20b") == "/a%20b");
  // Encoded dots are dots: "/v1/%2e%2e/admin" is "/admin" to the upstream.
  CHECK(normalize_path("/v1/%2e%2e/admin") == "/admin");
  CHECK(normalize_path("/v1/%2E/x") == "/v1/x");
}

TEST_CASE("normalize_path refuses what is not origin-form", "[config][path]") {
  CHECK_FALSE(normalize_path(""));
  CHECK_FALSE(normalize_path("*"));
  CHECK_FALSE(normalize_path("v1/x"));
  CHECK_FALSE(normalize_path("http://example.com/x"));
  CHECK_FALSE(normalize_path("/a%2"));
  CHECK_FALSE(normalize_path("/a%zz"));
  CHECK_FALSE(normalize_path("/a%"));
  CHECK(normalize_path("/a?%zz") == "/a");  // the query is not looked at
}

TEST_CASE("path globs", "[config][path]") {
  auto p = path_pattern::parse("/v1/*");
  REQUIRE(p);
  CHECK(p->matches("/v1/"));
  CHECK(p->matches("/v1/chat/completions"));  // '*' crosses '/'
  CHECK_FALSE(p->matches("/v1"));
  CHECK_FALSE(p->matches("/v2/x"));
  CHECK_FALSE(p->matches("/api/v1/x"));

  auto exact = path_pattern::parse("/repos");
  REQUIRE(exact);
  CHECK(exact->matches("/repos"));
  CHECK_FALSE(exact->matches("/repos/x"));

  auto middle = path_pattern::parse("/repos/*/issues");
  REQUIRE(middle);
  CHECK(middle->matches("/repos/o/r/issues"));
  CHECK_FALSE(middle->matches("/repos/o/r/issues/1"));

  auto multi = path_pattern::parse("/a*b*c");
  REQUIRE(multi);
  CHECK(multi->matches("/abc"));
  CHECK(multi->matches("/axxbyybzc"));
  CHECK_FALSE(multi->matches("/axxbyy"));

  auto all = path_pattern::parse("/*");
  REQUIRE(all);
  CHECK(all->matches("/"));
  CHECK(all->matches("/anything/at/all"));
}

TEST_CASE("path patterns are normalized and validated", "[config][path]") {
  auto p = path_pattern::parse("/%76%31/*");
  REQUIRE(p);
  CHECK(p->text() == "/v1/*");
  CHECK(p->matches(*normalize_path("/v1/x")));
  for (const char* bad : {"", "v1/*", "*", "/v1/../x", "/./x", "/x?y", "/x#y", "/x%g0"})
    CHECK_FALSE(path_pattern::parse(bad));
}

TEST_CASE("a traversal cannot escape an allowed prefix", "[config][path]") {
  auto p = path_pattern::parse("/v1/*");
  REQUIRE(p);
  CHECK_FALSE(p->matches(*normalize_path("/v1/../admin")));
  CHECK_FALSE(p->matches(*normalize_path("/v1/%2e%2e/admin")));
  CHECK(p->matches(*normalize_path("/v1/./chat")));
}
