#include "live/connect_to.hpp"

#include <charconv>
#include <stdexcept>

#include "config/address.hpp"
#include "config/host_pattern.hpp"

namespace broker::live {

namespace {

// Splits "a:b" where a may be "[v6]"; returns {a, rest after the colon}.
std::pair<std::string_view, std::string_view> split_host(std::string_view s, bool& ok) {
  ok = true;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      ok = false;
      return {};
    }
    return {s.substr(1, close - 1), s.substr(close + 2)};
  }
  const auto colon = s.find(':');
  if (colon == std::string_view::npos) {
    ok = false;
    return {};
  }
  return {s.substr(0, colon), s.substr(colon + 1)};
}

std::optional<std::uint16_t> port_or_empty(std::string_view text, const std::string& spec) {
  if (text.empty()) return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535)
    throw std::invalid_argument("--connect-to " + spec + ": bad port '" + std::string(text) + "'");
  return static_cast<std::uint16_t>(value);
}

std::string normalize_or_throw(std::string_view host, const std::string& spec) {
  if (host.empty()) return {};
  if (auto ip = config::ip_address::parse(host)) return ip->to_string();
  auto normalized = config::normalize_host(host);
  if (!normalized)
    throw std::invalid_argument("--connect-to " + spec + ": bad host '" + std::string(host) + "'");
  return *normalized;
}

}  // namespace

connect_to_rule parse_connect_to(std::string_view spec_view) {
  const std::string spec(spec_view);
  bool ok = false;
  auto [host, rest] = split_host(spec_view, ok);
  if (!ok) throw std::invalid_argument("--connect-to " + spec + ": expected HOST:PORT:ADDR:PORT");
  const auto colon = rest.find(':');
  if (colon == std::string_view::npos)
    throw std::invalid_argument("--connect-to " + spec + ": expected HOST:PORT:ADDR:PORT");
  const std::string_view port = rest.substr(0, colon);
  auto [target_host, target_port] = split_host(rest.substr(colon + 1), ok);
  if (!ok) throw std::invalid_argument("--connect-to " + spec + ": expected HOST:PORT:ADDR:PORT");
  connect_to_rule rule;
  rule.host = normalize_or_throw(host, spec);
  rule.port = port_or_empty(port, spec);
  rule.target_host = normalize_or_throw(target_host, spec);
  rule.target_port = port_or_empty(target_port, spec);
  return rule;
}

std::optional<dial_target> apply_connect_to(const std::vector<connect_to_rule>& rules,
                                            std::string_view host, std::uint16_t port) {
  for (const auto& r : rules) {
    if (!r.host.empty() && r.host != host) continue;
    if (r.port && *r.port != port) continue;
    return dial_target{r.target_host.empty() ? std::string(host) : r.target_host,
                       r.target_port.value_or(port)};
  }
  return std::nullopt;
}

}  // namespace broker::live
