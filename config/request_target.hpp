// Request targets as a proxy receives them: CONNECT authority-form and absolute-form URIs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/policy_set.hpp"

namespace broker::config {

struct authority {
  config::destination dest;  // normalized host (or IP literal) and port
  bool port_given = false;
};

// "host:port", "[v6]:port", or with `default_port` also a bare host. Host names are normalized
// (case, trailing dot, punycode); userinfo is refused. nullopt when malformed.
std::optional<authority> parse_authority(std::string_view text,
                                         std::optional<std::uint16_t> default_port = {});

struct absolute_uri {
  std::string scheme;  // lower-case
  authority where;
  std::string path_and_query;  // origin-form for the upstream: "/" when the URI had no path
};
// "http://host[:port]/path?query" (no fragment). nullopt when not absolute-form.
std::optional<absolute_uri> parse_absolute_uri(std::string_view target);

// Host header value vs. the URI authority (RFC 9112 §3.2.2): same host and same effective port.
bool host_header_matches(std::string_view host_header, const authority& where,
                         std::uint16_t scheme_default_port);

// "host:port" for logs and messages, IPv6 in brackets.
std::string to_string(const config::destination& dest);

}  // namespace broker::config
