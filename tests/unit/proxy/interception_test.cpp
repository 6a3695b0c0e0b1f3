#include "proxy/interception.hpp"

#include <string>
#include <variant>

#include <catch2/catch.hpp>

using namespace broker;
using proxy::check_inner_request;
using proxy::inner_request;
using proxy::interception;

namespace {

const interception https_target{config::destination{"api.github.com", std::nullopt, 8443}, "https",
                                std::nullopt};

// The code a request gets, or "" when it goes (with `path` the path it goes up with).
std::string code_of(const interception& in, const inner_request& r, std::string* path = nullptr) {
  const auto checked = check_inner_request(in, r);
  if (const auto* refused = std::get_if<live::refusal>(&checked)) return refused->code;
  if (path) *path = std::get<std::string>(checked);
  return "";
}

// The same request as an HTTP/1.1 client sends it (request line and Host) and as an HTTP/2
// client does (its pseudo-header fields; nghttp2 adds Host from :authority when there is none).
struct same_request {
  std::string method, scheme, authority, path, host;
  bool has_host = true;

  std::string h1() const {
    // An authority other than the Host, or a scheme, needs absolute-form in HTTP/1.1.
    const bool absolute = authority != host || scheme != "https";
    const std::string target = absolute ? scheme + "://" + authority + path : path;
    return code_of(https_target,
                   {.method = method, .target = target, .host = has_host ? &host : nullptr});
  }
  std::string h2() const {
    return code_of(https_target, {.method = method,
                                  .target = path,
                                  .host = has_host ? &host : nullptr,
                                  .scheme = scheme,
                                  .authority = authority,
                                  .http2 = true});
  }
};

}  // namespace

TEST_CASE("HTTP/1.1 and HTTP/2 refuse the same inner requests with the same codes",
          "[interception]") {
  const std::string target = "api.github.com:8443";
  const std::string other = "evil.example:8443";
  const same_request cases[] = {
      {"GET", "https", target, "/user", target},              // goes
      {"OPTIONS", "https", target, "*", target},              // goes
      {"GET", "https", target, "/user", other},               // Host elsewhere
      {"GET", "https", other, "/user", target},               // authority elsewhere
      {"GET", "https", other, "/user", other},                // both elsewhere
      {"GET", "http", target, "/user", target},               // not the connection's scheme
      {"GET", "https", target, "/user", target, false},       // no Host at all
      {"GET", "https", target, "*", target},                  // * without OPTIONS
      {"CONNECT", "https", target, "/", target},              // CONNECT inside
      {"GET", "https", "API.GitHub.com:8443", "/x", target},  // the same host, spelled larger
  };
  const char* expected[] = {"",
                            "",
                            "host_mismatch",
                            "host_mismatch",
                            "host_mismatch",
                            "host_mismatch",
                            "host_mismatch",
                            "bad_request",
                            "bad_request",
                            ""};
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    INFO("case " << i << ": " << cases[i].method << " " << cases[i].scheme << "://"
                 << cases[i].authority << cases[i].path << " Host " << cases[i].host);
    CHECK(cases[i].h1() == expected[i]);
    CHECK(cases[i].h2() == expected[i]);
  }
}

namespace {

// A GET as HTTP/1.1 sends it (its request-target and Host) and as HTTP/2 does (:path, :scheme
// https, :authority and the Host nghttp2 makes of it).
inner_request h1_get(std::string_view target, const std::string& host) {
  return {.method = "GET", .target = target, .host = &host};
}
inner_request h2_get(std::string_view path, const std::string& authority) {
  return {.method = "GET",
          .target = path,
          .host = &authority,
          .scheme = "https",
          .authority = authority,
          .http2 = true};
}

}  // namespace

TEST_CASE("a refusal decided at CONNECT answers every request inside", "[interception]") {
  interception refused = https_target;
  refused.refused = live::refusal::policy_denied("default_deny", "api.github.com");
  const std::string host = "api.github.com:8443";
  CHECK(code_of(refused, h1_get("/", host)) == "policy_denied");
  CHECK(code_of(refused, h2_get("/", host)) == "policy_denied");
}

TEST_CASE("an absolute-form target goes up as its path; HTTP/2's :path is never a URI",
          "[interception]") {
  const std::string host = "api.github.com:8443";
  std::string path;
  CHECK(code_of(https_target, h1_get("https://api.github.com:8443/a?b=1", host), &path) == "");
  CHECK(path == "/a?b=1");
  CHECK(code_of(https_target, h2_get("https://api.github.com:8443/a", host)) == "bad_request");
  // Neither a path nor a URI, on either protocol.
  CHECK(code_of(https_target, h1_get("user", host)) == "bad_request");
  CHECK(code_of(https_target, h2_get("user", host)) == "bad_request");
}

TEST_CASE("plain HTTP inside a CONNECT defaults to port 80", "[interception]") {
  const interception plain{config::destination{"example.com", std::nullopt, 80}, "http",
                           std::nullopt};
  const std::string bare = "example.com";
  const std::string tls_port = "example.com:443";
  CHECK(code_of(plain, {.method = "GET", .target = "/", .host = &bare}) == "");
  CHECK(code_of(plain, {.method = "GET", .target = "/", .host = &tls_port}) == "host_mismatch");
  CHECK(code_of(plain, {.method = "GET", .target = "https://example.com/", .host = &bare}) ==
        "host_mismatch");
}
