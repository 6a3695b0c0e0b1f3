#include "proxy/interception.hpp"

#include "config/request_target.hpp"

namespace broker::proxy {

namespace {

bool names_target(const config::destination& named, const config::destination& dest) {
  return named.host == dest.host && named.port == dest.port;
}

}  // namespace

std::variant<std::string, live::refusal> check_inner_request(const interception& in,
                                                             const inner_request& r) {
  using live::refusal;
  if (in.refused) return *in.refused;
  if (r.method == "CONNECT")
    return refusal::bad_request("CONNECT inside an intercepted connection");
  std::string path;
  std::optional<std::string> scheme;
  if (r.scheme) scheme = std::string(*r.scheme);
  if (!r.target.empty() && r.target.front() == '/') {
    path = r.target;
  } else if (r.target == "*") {
    if (r.method != "OPTIONS") return refusal::bad_request("only OPTIONS has the target *");
    path = "*";
  } else if (r.http2) {
    return refusal::bad_request("the request's :path is not a path");
  } else {
    // Absolute-form (RFC 9112 §3.2.2), allowed when it names the CONNECT target.
    auto uri = config::parse_absolute_uri(r.target);
    if (!uri) return refusal::bad_request("the request target is neither a path nor a URI");
    if (!names_target(uri->where.dest, in.dest))
      return refusal::host_mismatch("the request target does not name the CONNECT host");
    scheme = uri->scheme;
    path = uri->path_and_query;
  }
  if (scheme && *scheme != in.scheme)
    return refusal::host_mismatch("the request's scheme is not the connection's");
  const std::uint16_t default_port = in.scheme == "https" ? 443 : 80;
  const config::authority where{in.dest, true};
  if (r.authority && !r.authority->empty() &&
      !config::host_header_matches(*r.authority, where, default_port))
    return refusal::host_mismatch("the request's authority is not the CONNECT host");
  if (!r.host) return refusal::host_mismatch("the request has no Host header");
  if (!config::host_header_matches(*r.host, where, default_port))
    return refusal::host_mismatch("the Host header is not the CONNECT host");
  return path;
}

std::optional<std::string> inner_request_path(const interception& in, const inner_request& r) {
  auto checked = check_inner_request(in, r);
  if (auto* path = std::get_if<std::string>(&checked)) return std::move(*path);
  return std::nullopt;
}

}  // namespace broker::proxy
