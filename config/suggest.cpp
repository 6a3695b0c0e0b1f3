#include "config/suggest.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "config/address.hpp"
#include "config/mcp_rules.hpp"
#include "config/path_pattern.hpp"
#include "config/policy_set.hpp"

namespace broker::config {
namespace {

// Distinct hosts under one parent before they become "*.parent", and paths of one rule (and of
// one first segment) before they are merged.
constexpr std::size_t merge_hosts_at = 3;
constexpr std::size_t exact_paths_up_to = 3;
constexpr std::size_t paths_per_rule_max = 12;

struct suggestion {
  std::string host;  // a host name, "*.parent", or an IP literal (a cidr rule)
  std::uint16_t port = 0;
  bool tunnel = false;
  std::set<std::string> methods;
  std::set<std::string> paths;  // normalized; "" = a path that does not normalize
  std::size_t count = 0;
  std::size_t learned = 0;
  std::vector<const observed_request*> from;
  // Read as MCP: what its calls named, by kind ("tool", "resource", "prompt").
  bool mcp = false;
  std::map<std::string, std::set<std::string>> called;
};

std::string parent_of(const std::string& host) {
  const auto dot = host.find('.');
  if (dot == std::string::npos) return {};
  std::string parent = host.substr(dot + 1);
  // "*.com" would be a wildcard over a whole top-level domain: never.
  return parent.find('.') == std::string::npos ? std::string() : parent;
}

std::string first_segment(const std::string& path) {
  const auto next = path.find('/', 1);
  return next == std::string::npos ? path : path.substr(0, next);
}

// The path patterns of a rule: exact when few, else merged under first segments.
std::vector<std::string> path_patterns(const std::set<std::string>& paths) {
  if (paths.count("")) return {};  // a path that does not normalize: any path
  std::vector<std::string> out;
  auto literal = [](const std::string& p) {
    // '*' is the patterns' wildcard: a path holding one is allowed from there on.
    const auto star = p.find('*');
    return star == std::string::npos ? p : p.substr(0, star + 1);
  };
  if (paths.size() <= exact_paths_up_to) {
    for (const auto& p : paths) out.push_back(literal(p));
  } else {
    std::map<std::string, std::vector<std::string>> by_segment;
    for (const auto& p : paths) by_segment[first_segment(p)].push_back(p);
    for (const auto& group : by_segment) {
      const std::string& segment = group.first;
      const auto& members = group.second;
      const bool deeper = std::any_of(members.begin(), members.end(),
                                      [&](const std::string& p) { return p != segment; });
      if (std::find(members.begin(), members.end(), segment) != members.end())
        out.push_back(literal(segment));
      if (deeper) out.push_back(segment == "/" ? "/*" : segment + "/*");
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > paths_per_rule_max) return {};
  for (const auto& p : out)
    if (!path_pattern::parse(p)) return {};
  return out;
}

nlohmann::ordered_json rule_json(const suggestion& s, bool with_methods, bool with_paths) {
  nlohmann::ordered_json j;
  if (auto ip = ip_address::parse(s.host))
    j["cidr"] = ip->to_string() + (ip->v4 ? "/32" : "/128");
  else
    j["host"] = s.host;
  j["ports"] = {s.port};
  if (s.tunnel) {
    j["tunnel"] = true;
    return j;
  }
  if (with_methods && !s.methods.empty())
    j["methods"] = std::vector<std::string>(s.methods.begin(), s.methods.end());
  if (with_paths)
    if (auto paths = path_patterns(s.paths); !paths.empty()) j["paths"] = paths;
  if (s.mcp) {
    // Exactly what was called: a name holding '*' (a glob here) or a control byte (no policy
    // can name it) is left out, never widened.
    auto& m = j["mcp"] = nlohmann::ordered_json::object();
    for (const char* kind : {"tool", "resource", "prompt"}) {
      auto allow = nlohmann::ordered_json::array();
      if (auto it = s.called.find(kind); it != s.called.end())
        for (const auto& name : it->second)
          if (name.find('*') == std::string::npos && mcp_printable(name)) allow.push_back(name);
      m[std::string(kind) + "s"] = {{"allow", std::move(allow)}};
    }
  }
  return j;
}

// Whether the rule, as a layer of its own, allows every request it was made from.
bool allows_all(const nlohmann::ordered_json& rule, const suggestion& s) {
  nlohmann::ordered_json layer;
  layer["allow"] = nlohmann::ordered_json::array({rule});
  try {
    std::vector<policy> layers;
    layers.push_back(parse_policy(layer.dump(), "<suggested>"));
    const policy_set set(std::move(layers));
    for (const auto* r : s.from) {
      const destination d{r->host, std::nullopt, r->port};
      const auto v = r->tunnel ? set.check_connect(d) : set.check_request(d, r->method, r->path);
      if (!v.allowed) return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string suggest_layer(const std::vector<observed_request>& seen, const std::string& title) {
  // One suggestion per host, port and kind (tunnelled or inspected).
  std::map<std::tuple<std::string, std::uint16_t, bool>, suggestion> rules;
  std::set<std::pair<std::string, std::uint16_t>> inspected;
  for (const auto& r : seen)
    if (!r.tunnel) inspected.emplace(r.host, r.port);
  for (const auto& r : seen) {
    // A host also reached inspected is not suggested as a tunnel (its requests are decided).
    const bool tunnel = r.tunnel && !inspected.count({r.host, r.port});
    auto& s = rules[{r.host, r.port, tunnel}];
    s.host = r.host;
    s.port = r.port;
    s.tunnel = tunnel;
    ++s.count;
    s.learned += r.learned ? 1 : 0;
    if (!r.tunnel) {
      s.methods.insert(r.method);
      const auto query = r.path.find('?');
      auto normalized = normalize_path(r.path.substr(0, query));
      s.paths.insert(normalized ? *normalized : std::string());
    }
    s.from.push_back(&r);
    if (r.mcp) {
      s.mcp = true;
      if (!r.mcp_kind.empty() && !r.mcp_target.empty()) s.called[r.mcp_kind].insert(r.mcp_target);
    }
  }
  // Many subdomains of one parent on one port: one "*.parent" rule.
  std::map<std::tuple<std::string, std::uint16_t, bool>, std::vector<suggestion*>> families;
  for (auto& [key, s] : rules)
    if (!ip_address::parse(s.host))
      if (auto parent = parent_of(s.host); !parent.empty())
        families[{parent, s.port, s.tunnel}].push_back(&s);
  std::vector<suggestion> out;
  std::set<const suggestion*> merged;
  for (auto& [key, members] : families) {
    if (members.size() < merge_hosts_at) continue;
    suggestion w;
    w.host = "*." + std::get<0>(key);
    w.port = std::get<1>(key);
    w.tunnel = std::get<2>(key);
    for (auto* m : members) {
      w.mcp = w.mcp || m->mcp;
      for (const auto& [kind, names] : m->called) w.called[kind].insert(names.begin(), names.end());
      w.methods.insert(m->methods.begin(), m->methods.end());
      w.paths.insert(m->paths.begin(), m->paths.end());
      w.count += m->count;
      w.learned += m->learned;
      w.from.insert(w.from.end(), m->from.begin(), m->from.end());
      merged.insert(m);
    }
    out.push_back(std::move(w));
  }
  for (auto& [key, s] : rules)
    if (!merged.count(&s)) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const suggestion& a, const suggestion& b) {
    return std::tie(a.host, a.port) < std::tie(b.host, b.port);
  });

  std::size_t total = 0, learned = 0;
  for (const auto& s : out) {
    total += s.count;
    learned += s.learned;
  }
  std::string text = "// " + title + "\n// " + std::to_string(total) + " requests, " +
                     std::to_string(learned) +
                     " of them learned (refused by the policy they ran under)\n{\n"
                     "  \"version\": 1,\n  \"allow\": [";
  bool first = true;
  for (const auto& s : out) {
    // The narrowest rule that still allows every request it stands for.
    auto rule = rule_json(s, true, true);
    if (!allows_all(rule, s)) rule = rule_json(s, true, false);
    if (!allows_all(rule, s)) rule = rule_json(s, false, false);
    std::string note = std::to_string(s.count) + (s.count == 1 ? " request" : " requests");
    if (s.learned) note += ", " + std::to_string(s.learned) + " learned";
    if (s.host.starts_with("*.")) note += "; subdomains merged";
    text += std::string(first ? "" : ",") + "\n    // " + note + "\n    " + rule.dump();
    first = false;
  }
  text += "\n  ]\n}\n";
  return text;
}

}  // namespace broker::config
