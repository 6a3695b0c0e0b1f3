#include "config/request_target.hpp"

#include <catch2/catch.hpp>

using namespace broker::config;

TEST_CASE("CONNECT authorities", "[target]") {
  auto a = parse_authority("API.GitHub.com.:443");
  REQUIRE(a);
  CHECK(a->dest.host == "api.github.com");
  CHECK(a->dest.port == 443);
  CHECK_FALSE(a->dest.ip);

  auto v6 = parse_authority("[::1]:8443");
  REQUIRE(v6);
  REQUIRE(v6->dest.ip);
  CHECK(v6->dest.host == "::1");
  CHECK(to_string(v6->dest) == "[::1]:8443");

  auto v4 = parse_authority("127.0.0.1:80");
  REQUIRE(v4);
  CHECK(v4->dest.ip);

  CHECK_FALSE(parse_authority("example.com"));  // CONNECT needs a port
  CHECK_FALSE(parse_authority("example.com:0"));
  CHECK_FALSE(parse_authority("example.com:65536"));
  CHECK_FALSE(parse_authority("user@example.com:443"));
  CHECK_FALSE(parse_authority("::1:443"));   // IPv6 needs brackets
  CHECK_FALSE(parse_authority("127.1:80"));  // resolver-dependent shorthand
  CHECK_FALSE(parse_authority("0x7f.0.0.1:80"));
  CHECK_FALSE(parse_authority("bad host:80"));
}

TEST_CASE("absolute-form URIs", "[target]") {
  auto u = parse_absolute_uri("http://Example.COM/a/b?c=d#frag");
  REQUIRE(u);
  CHECK(u->scheme == "http");
  CHECK(u->where.dest.host == "example.com");
  CHECK(u->where.dest.port == 80);
  CHECK(u->path_and_query == "/a/b?c=d");

  auto q = parse_absolute_uri("http://example.com?x=1");
  REQUIRE(q);
  CHECK(q->path_and_query == "/?x=1");

  auto p = parse_absolute_uri("http://example.com:8080");
  REQUIRE(p);
  CHECK(p->where.dest.port == 8080);
  CHECK(p->path_and_query == "/");

  CHECK_FALSE(parse_absolute_uri("/relative"));
  CHECK_FALSE(parse_absolute_uri("http:///nohost"));
  CHECK_FALSE(parse_absolute_uri("ftp://example.com/"));  // no default port, none given
}

TEST_CASE("Host header must name the URI authority", "[target]") {
  auto u = parse_absolute_uri("http://example.com/x");
  REQUIRE(u);
  CHECK(host_header_matches("example.com", u->where, 80));
  CHECK(host_header_matches("EXAMPLE.com:80", u->where, 80));
  CHECK_FALSE(host_header_matches("example.com:8080", u->where, 80));
  CHECK_FALSE(host_header_matches("evil.com", u->where, 80));
}
