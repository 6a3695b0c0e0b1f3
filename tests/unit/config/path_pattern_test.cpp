#include <catch2/catch.hpp>

#include "config/path_pattern.hpp"

using broker::config::ambiguous_path;
using broker::config::normalize_path;
using broker::config::path_params;
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
  CHECK(normalize_path("/a/..b/c") == "/a/..b/c");
}

TEST_CASE("normalize_path merges repeated slashes", "[config][path]") {
  CHECK(normalize_path("//denied/x") == "/denied/x");
  CHECK(normalize_path("/a//b") == "/a/b");
  CHECK(normalize_path("/a///b//") == "/a/b/");
  CHECK(normalize_path("//") == "/");
  CHECK(normalize_path("///a") == "/a");
  CHECK(normalize_path("/a/.//b") == "/a/b");
  CHECK(normalize_path("//%2e%2e//denied") == "/denied");
  CHECK(normalize_path("/a?x=//y") == "/a");  // the query is not a path
}

TEST_CASE("normalize_path keeps case and ;parameters unless told to strip them", "[config][path]") {
  CHECK(normalize_path("/Denied/X") == "/Denied/X");  // RFC 3986 §6.2.2.1
  CHECK(normalize_path("/ok/a;b=c") == "/ok/a;b=c");
  CHECK(normalize_path("/ok/a;b=c", path_params::strip) == "/ok/a");
  CHECK(normalize_path("/denied;jsessionid=1/x", path_params::strip) == "/denied/x");
  CHECK(normalize_path("/a;x/../b;y", path_params::strip) == "/b");
  CHECK(normalize_path("/a/b", path_params::strip) == "/a/b");
  CHECK(normalize_path("/a?x;y", path_params::strip) == "/a");
  CHECK_FALSE(normalize_path("/a;%zz", path_params::strip));
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

TEST_CASE("ambiguous paths: encoded '/' and '\\', raw '\\', control bytes", "[config][path]") {
  CHECK(ambiguous_path("/denied%2fx") ==
        "an encoded '/' (%2F) in the path is ambiguous on a host with path rules");
  CHECK(ambiguous_path("/denied%2Fx") == ambiguous_path("/denied%2fx"));
  CHECK(ambiguous_path("/x/..%5cdenied/x") ==
        "an encoded '\\' (%5C) in the path is ambiguous on a host with path rules");
  CHECK(ambiguous_path("/x/%5C") == ambiguous_path("/x/..%5cdenied/x"));
  CHECK(ambiguous_path("/x\\..\\denied") ==
        "a '\\' in the path is ambiguous on a host with path rules");
  CHECK(ambiguous_path("/a%00b") ==
        "an encoded control byte (%00) in the path is ambiguous on a host with path rules");
  CHECK(ambiguous_path("/a%0a") ==
        "an encoded control byte (%0A) in the path is ambiguous on a host with path rules");
  for (const char* bad : {"/a%01", "/a%09", "/a%0D", "/a%1f", "/a%7F"}) CHECK(ambiguous_path(bad));
}

TEST_CASE("ambiguous paths: dot segments with ;parameters", "[config][path]") {
  CHECK(ambiguous_path("/x/..;/denied/x") ==
        "a '..' segment with ';' parameters ('..;') in the path is ambiguous on a host with path "
        "rules");
  CHECK(ambiguous_path("/ok/..;/secret"));
  CHECK(ambiguous_path("/x/..;jsessionid=1/denied"));
  CHECK(ambiguous_path("/x/.;x/y") ==
        "a '.' segment with ';' parameters ('.;') in the path is ambiguous on a host with path "
        "rules");
  CHECK(ambiguous_path("/x/%2e%2e;/denied"));  // encoded dots are dots
  CHECK(ambiguous_path("/x/..%3b/denied"));    // and an encoded ';' is a ';' once decoded
  // Plain dot segments are RFC 3986 §5.2.4, resolved the same way everywhere.
  CHECK_FALSE(ambiguous_path("/x/.."));
  CHECK_FALSE(ambiguous_path("/x/../y"));
  CHECK_FALSE(ambiguous_path("/x/./y"));
  CHECK_FALSE(ambiguous_path("/x/...;/y"));  // "..." is a name
  CHECK_FALSE(ambiguous_path("/x/..a;/y"));
}

TEST_CASE("ambiguous paths: double encoding with %25", "[config][path]") {
  CHECK(ambiguous_path("/denied%252fx") ==
        "a double-encoded '/' (%252F) in the path is ambiguous on a host with path rules");
  CHECK(ambiguous_path("/x/..%255Cdenied") ==
        "a double-encoded '\\' (%255C) in the path is ambiguous on a host with path rules");
  CHECK(ambiguous_path("/a%2500") ==
        "a double-encoded control byte (%2500) in the path is ambiguous on a host with path "
        "rules");
  CHECK(ambiguous_path("/x/%252e%252e/denied") ==
        "a double-encoded dot segment (%252E) in the path is ambiguous on a host with path rules");
  CHECK(ambiguous_path("/x/.%252e/denied"));
  CHECK(ambiguous_path("/x/%252e"));
  CHECK(ambiguous_path("/x/..%253b/denied"));  // "..;" after two decodings
  CHECK(ambiguous_path("/x/%25%32%46"));       // "%2F" after one decoding
  CHECK(ambiguous_path("/a%252525b") ==
        "a '%' encoded twice (%2525) in the path is ambiguous on a host with path rules");
  CHECK_FALSE(ambiguous_path("/a%25b"));  // a literal '%'
  CHECK_FALSE(ambiguous_path("/a%2520b"));
  CHECK_FALSE(ambiguous_path("/a%25"));
  CHECK_FALSE(ambiguous_path("/a%25zz"));
}

TEST_CASE("ambiguous paths: '..' after an empty segment", "[config][path]") {
  // RFC 3986 §5.2.4 alone: "/ok/secret"; merging slashes first (nginx): "/secret".
  CHECK(ambiguous_path("/ok//../secret") ==
        "a '..' after an empty segment ('//..') in the path is ambiguous on a host with path "
        "rules");
  CHECK(ambiguous_path("/a//./../b"));
  CHECK(ambiguous_path("/a//.."));
  CHECK(ambiguous_path("/ok/;x/../secret"));  // "/ok//../secret" once ";x" is dropped
  CHECK_FALSE(ambiguous_path("//denied/x"));  // merged, but read the same either way
  CHECK_FALSE(ambiguous_path("/a/..//b"));
  CHECK_FALSE(ambiguous_path("/a//b/../c"));
}

TEST_CASE("legitimate paths are not ambiguous", "[config][path]") {
  for (const char* ok :
       {"/", "/ok/x", "/ok/a%20b", "/ok/a;b=c", "/ok/%41", "/ok/%7e", "/ok/caf%C3%A9", "/ok/a+b",
        "/ok/a:b@c", "/ok/x?q=%2F%5C%00..;\\", "/ok/x#%2F", "/ok/a.b", "/ok/.well-known/x",
        "/ok/..a", "/ok/a;", "/ok/;a", "/ok/x%3By"})
    CHECK_FALSE(ambiguous_path(ok));
  // Not origin-form or malformed: normalize_path refuses these; they are not "ambiguous".
  CHECK_FALSE(ambiguous_path("*"));
  CHECK_FALSE(ambiguous_path("/a%zz%2F"));
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
  // Never matches an admitted request: such paths are refused as ambiguous.
  for (const char* bad : {"/a%2Fb", "/a%5c*", "/a\\b", "/a%00", "/x/..;/y", "/x/.;a", "/a%252F"})
    CHECK_FALSE(path_pattern::parse(bad));
  auto merged = path_pattern::parse("//v1//*");
  REQUIRE(merged);
  CHECK(merged->text() == "/v1/*");
  auto params = path_pattern::parse("/ok/a;b=*");
  REQUIRE(params);
  CHECK(params->matches(*normalize_path("/ok/a;b=c")));
}

TEST_CASE("paths match case-sensitively", "[config][path]") {
  auto p = path_pattern::parse("/denied/*");
  REQUIRE(p);
  CHECK(p->matches(*normalize_path("/denied/x")));
  CHECK_FALSE(p->matches(*normalize_path("/Denied/x")));
  CHECK_FALSE(p->matches(*normalize_path("/DENIED/x")));
  CHECK(p->matches(*normalize_path("/%64enied/x")));  // %64 is 'd': unreserved, decoded
}

TEST_CASE("a traversal cannot escape an allowed prefix", "[config][path]") {
  auto p = path_pattern::parse("/v1/*");
  REQUIRE(p);
  CHECK_FALSE(p->matches(*normalize_path("/v1/../admin")));
  CHECK_FALSE(p->matches(*normalize_path("/v1/%2e%2e/admin")));
  CHECK(p->matches(*normalize_path("/v1/./chat")));
}

TEST_CASE("merged slashes cannot dodge a rule", "[config][path]") {
  auto p = path_pattern::parse("/denied/*");
  REQUIRE(p);
  CHECK(p->matches(*normalize_path("//denied/x")));
  CHECK(p->matches(*normalize_path("/denied//x")));
  CHECK(p->matches(*normalize_path("///denied///x")));
  CHECK(p->matches(*normalize_path("/x/..//denied/x")));
}
