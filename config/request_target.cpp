#include "config/request_target.hpp"

#include <algorithm>
#include <charconv>

#include "config/host_pattern.hpp"

namespace broker::config {

namespace {

std::optional<std::uint16_t> parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535)
    return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

}  // namespace

std::optional<authority> parse_authority(std::string_view text,
                                         std::optional<std::uint16_t> default_port) {
  if (text.empty() || text.find('@') != std::string_view::npos) return std::nullopt;
  std::string_view host;
  std::string_view port_text;
  bool has_port = false;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    const auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port_text = rest.substr(1);
      has_port = true;
    }
    if (host.find(':') == std::string_view::npos) return std::nullopt;  // brackets only for v6
  } else {
    const auto colon = text.rfind(':');
    if (colon != std::string_view::npos) {
      host = text.substr(0, colon);
      port_text = text.substr(colon + 1);
      has_port = true;
      if (host.find(':') != std::string_view::npos) return std::nullopt;  // bare IPv6
    } else {
      host = text;
    }
  }
  authority out;
  if (has_port) {
    auto port = parse_port(port_text);
    if (!port) return std::nullopt;
    out.dest.port = *port;
    out.port_given = true;
  } else if (default_port) {
    out.dest.port = *default_port;
  } else {
    return std::nullopt;
  }
  if (auto ip = config::ip_address::parse(host)) {
    if (text.front() != '[' && !ip->v4) return std::nullopt;
    out.dest.ip = *ip;
    out.dest.host = ip->to_string();
    return out;
  }
  // A dotted all-numeric name that inet_pton refused ("127.1", "0x7f.1") is an IP in some
  // resolvers' eyes; refuse it rather than let a resolver reinterpret it.
  if (!host.empty() &&
      std::all_of(
          host.begin(), host.end(),
          [](char c) { return (c >= '0' && c <= '9') || c == '.' || c == 'x' || c == 'X'; }) &&
      std::any_of(host.begin(), host.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  auto normalized = config::normalize_host(host);
  if (!normalized) return std::nullopt;
  out.dest.host = std::move(*normalized);
  return out;
}

std::optional<absolute_uri> parse_absolute_uri(std::string_view target) {
  const auto scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos || scheme_end == 0) return std::nullopt;
  absolute_uri out;
  out.scheme.assign(target.substr(0, scheme_end));
  std::transform(out.scheme.begin(), out.scheme.end(), out.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (char c : out.scheme)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.')
      return std::nullopt;
  std::string_view rest = target.substr(scheme_end + 3);
  const auto path_start = rest.find_first_of("/?#");
  const std::string_view auth_text = rest.substr(0, path_start);
  std::optional<std::uint16_t> default_port;
  if (out.scheme == "http") default_port = 80;
  if (out.scheme == "https") default_port = 443;
  auto auth = parse_authority(auth_text, default_port);
  if (!auth) return std::nullopt;
  out.where = std::move(*auth);
  std::string_view path = path_start == std::string_view::npos ? "" : rest.substr(path_start);
  if (const auto hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
  if (path.empty() || path.front() == '?') out.path_and_query = "/";
  out.path_and_query.append(path);
  return out;
}

bool host_header_matches(std::string_view host_header, const authority& where,
                         std::uint16_t scheme_default_port) {
  auto header = parse_authority(host_header, scheme_default_port);
  if (!header) return false;
  return header->dest.host == where.dest.host && header->dest.port == where.dest.port;
}

std::string to_string(const config::destination& dest) {
  const bool v6 = dest.ip && !dest.ip->v4;
  std::string out = v6 ? "[" + dest.host + "]" : dest.host;
  out.append(":").append(std::to_string(dest.port));
  return out;
}

}  // namespace broker::config
