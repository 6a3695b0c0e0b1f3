// What a client connection is after an intercepted CONNECT, or a captured connection
// (docs/architecture.md): every request on it goes to one target, over TLS toward the client or as
// plain bytes. The checks that hold each request inside it to that target are written once, here,
// for the HTTP/1.1 loop and the HTTP/2 stream alike: the same inputs get the same refusals.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "config/policy_set.hpp"
#include "live/refusal.hpp"

namespace broker::proxy {

struct interception {
  config::destination dest;
  std::string scheme;                    // "https" after a TLS handshake, "http" for plain bytes
  std::optional<live::refusal> refused;  // decided at CONNECT time, answered to every request
  bool h2 = false;                       // the client chose HTTP/2 (ALPN): h2_connection serves it
};

// A request inside an interception, as its protocol gives it.
struct inner_request {
  std::string_view method;
  std::string_view target;  // HTTP/1.1: the request-target; HTTP/2: :path
  const std::string* host;  // the Host field; null when there is none
  // HTTP/2's :scheme and :authority (HTTP/1.1 carries both in an absolute-form target, which
  // HTTP/2's :path may not be: RFC 9113 §8.3.1); nullopt when the request has none.
  std::optional<std::string_view> scheme{};
  std::optional<std::string_view> authority{};
  bool http2 = false;
};

// The path and query the request goes upstream with, or its refusal: the connection's own (a
// refused CONNECT), a CONNECT inside it (400 bad_request), a target that is not a path (400), or
// a scheme, authority or Host that is not the connection's target (421 host_mismatch).
std::variant<std::string, live::refusal> check_inner_request(const interception& in,
                                                             const inner_request& r);
// The same check's path, or nullopt when it refuses the request: what a coroutine that lives as
// long as the response keeps, rather than the check's 200-odd bytes (the refusal is made again
// where it is answered).
std::optional<std::string> inner_request_path(const interception& in, const inner_request& r);

}  // namespace broker::proxy
