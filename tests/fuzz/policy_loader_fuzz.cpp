// The policy loader (config/policy.hpp parse_policy): the input is a policy file's text.
// policy_error is the documented refusal, and it must name a line of the text and a key; any
// other exception is a finding. A layer that loads is printed (to_json, as `policy check` does)
// and asked about the hosts its own rules name: with no deny rules, each allow rule admits its
// host and port; a plain deny rule (no methods/paths) refuses its own.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/address.hpp"
#include "config/host_pattern.hpp"
#include "config/policy.hpp"
#include "config/policy_set.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace broker;
using fuzz::check;

const std::string source = "fuzz.json";

// A host name the pattern matches: "*.example.com" -> "fuzz.example.com", "*" -> any name.
std::optional<config::destination> destination_of(const config::rule& r, std::uint16_t port) {
  config::destination d;
  d.port = port;
  if (r.net) {
    d.ip = r.net->network();
    d.host = d.ip->to_string();
    return d;
  }
  if (!r.host) return std::nullopt;
  std::string name = r.host->text();
  if (name == "*")
    name = "fuzz.test";
  else if (name.starts_with("*."))
    name.replace(0, 1, "fuzz");
  auto normalized = config::normalize_host(name);
  if (!normalized || !r.host->matches(*normalized)) return std::nullopt;
  d.host = std::move(*normalized);
  return d;
}

void check_decisions(const config::policy& layer) {
  const config::policy_set one({layer});
  const config::policy_set twice({layer, layer});
  for (const config::rule& r : layer.allow) {
    const std::uint16_t port = r.ports.empty() ? 443 : r.ports.front();
    const auto d = destination_of(r, port);
    if (!d) continue;
    const config::verdict v = one.check_connect(*d);
    check(twice.check_connect(*d).allowed == v.allowed, "the same layer twice decided otherwise");
    if (layer.deny.empty()) check(v.allowed, "an allow rule does not admit its own host and port");
    (void)one.check_request(*d, r.methods.empty() ? "GET" : r.methods.front(),
                            r.paths.empty() ? "/" : r.paths.front().text());
    if (d->ip) (void)one.check_address(*d->ip, port);
  }
  for (const config::rule& r : layer.deny) {
    const std::uint16_t port = r.ports.empty() ? 443 : r.ports.front();
    const auto d = destination_of(r, port);
    if (!d) continue;
    const config::verdict v = one.check_connect(*d);
    if (!r.has_l7_conditions()) check(!v.allowed, "a deny rule does not refuse its own host");
    (void)one.check_request(*d, "POST", "/fuzz/../x");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  std::optional<config::policy> layer;
  try {
    layer = config::parse_policy(text, source);
  } catch (const config::policy_error& e) {
    const auto lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
    check(e.file() == source, "policy_error names another file");
    check(e.line() >= 1 && e.line() <= lines, "policy_error names a line outside the text");
    // Even an empty JSON key ("") is named ("<empty key>").
    check(!e.key().empty(), "policy_error names no key");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parse_policy threw %s\n", e.what());
    fuzz::fail("parse_policy threw something other than policy_error");
  }
  (void)config::to_json(*layer).dump();
  check_decisions(*layer);
  return 0;
}
