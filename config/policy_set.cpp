#include "config/policy_set.hpp"

#include <algorithm>
#include <vector>

namespace broker::config {
namespace {

constexpr std::string_view default_deny = "default_deny";

// What a request adds to a connection decision; absent for check_connect.
struct request_line {
  std::string_view method;
  std::string_view target;  // as sent, for ambiguous_path
  // Each reading of the path an upstream may serve: with ";parameters", and without them when
  // there are any. Empty when the target could not be normalized.
  std::vector<std::string> paths;
};

bool port_matches(const rule& r, std::uint16_t port) {
  if (r.ports.empty()) return true;  // deny rules without "ports": every port
  return std::find(r.ports.begin(), r.ports.end(), port) != r.ports.end();
}

bool address_matches(const rule& r, const ip_address& address, bool deny) {
  if (!r.net) return false;
  if (r.net->contains(address)) return true;
  // ::ffff:a.b.c.d reaches a.b.c.d, so a deny rule for the IPv4 block must catch it too (allow
  // rules deliberately do not unwrap: cidr::contains keeps the families apart).
  auto v4 = deny ? unwrap_v4_mapped(address) : std::nullopt;
  return v4 && r.net->contains(*v4);
}

// Host names match host rules only, IP literals cidr rules only (docs/policy.md).
bool target_matches(const rule& r, const destination& d, bool deny) {
  if (!port_matches(r, d.port)) return false;
  if (d.ip) return address_matches(r, *d.ip, deny);
  return r.host && r.host->matches(d.host);
}

bool l7_matches(const rule& r, const request_line& req, bool deny) {
  if (!r.methods.empty() &&
      std::find(r.methods.begin(), r.methods.end(), req.method) == r.methods.end())
    return false;
  if (r.paths.empty()) return true;
  // A path that cannot be normalized matches no allow rule and every deny rule: fail closed.
  if (req.paths.empty()) return deny;
  auto rule_matches = [&](const std::string& path) {
    return std::any_of(r.paths.begin(), r.paths.end(),
                       [&](const path_pattern& p) { return p.matches(path); });
  };
  // Whichever reading the upstream takes must be decided the same way: a deny rule refuses if
  // any reading matches, an allow rule admits only if every reading does.
  return deny ? std::any_of(req.paths.begin(), req.paths.end(), rule_matches)
              : std::all_of(req.paths.begin(), req.paths.end(), rule_matches);
}

struct layer_result {
  bool refused = false;
  bool allowed_by_rule = false;  // false: the layer has no allow rules (deny-only)
  std::string rule;
  bool tunnel = false;      // this layer agrees to tunnelling the connection
  bool ssh = false;         // its tunnel rule is an ssh rule
  bool approved = false;    // the deciding allow rule is one a person approved
  bool http1_only = false;  // an allow rule matching the host and port says "http2": false
  const config::rule* decided = nullptr;  // the deciding allow rule
};

bool program_allowed(const rule& r, const client_program& who) {
  return r.programs.empty() || who.any || program_matches(r.programs, who.client);
}

// `never_approved`: the destination is one no approval may open, so approved rules do not match.
layer_result evaluate(const policy& layer, const destination& d, const request_line* req,
                      const client_program& who, bool never_approved) {
  layer_result out;
  // A deny rule with methods/paths cannot be enforced inside a tunnel, so when one matches the
  // connection the layer insists on interception.
  bool l7_deny_applies = false;
  for (const rule& r : layer.deny) {
    if (!target_matches(r, d, /*deny=*/true)) continue;
    if (r.has_l7_conditions()) {
      l7_deny_applies = true;
      if (!req || !l7_matches(r, *req, /*deny=*/true)) continue;
    }
    out.refused = true;
    out.rule = r.name;
    return out;
  }
  if (layer.allow.empty()) {
    out.tunnel = !l7_deny_applies;
    return out;
  }
  const rule* first = nullptr;
  const rule* tunnel_rule = nullptr;
  for (const rule& r : layer.allow) {
    if (r.approved && never_approved) continue;
    if (!target_matches(r, d, /*deny=*/false) || !program_allowed(r, who)) continue;
    if (r.tunnel && !tunnel_rule) tunnel_rule = &r;
    if (!r.http2) out.http1_only = true;
    if (!first && (!req || l7_matches(r, *req, /*deny=*/false))) first = &r;
  }
  if (!first) {
    out.refused = true;
    out.rule = default_deny;
    return out;
  }
  out.allowed_by_rule = true;
  out.tunnel = tunnel_rule && !l7_deny_applies;
  out.ssh = out.tunnel && tunnel_rule->ssh;
  // At connection level a tunnel rule, when one matches, is the one that decides.
  const rule& decided = (!req && out.tunnel) ? *tunnel_rule : *first;
  out.rule = decided.name;
  out.approved = decided.approved;
  out.decided = &decided;
  return out;
}

// Host name destinations are normalized again here so a caller that passed a raw name (or an
// IP literal as text) gets the same answer as one that normalized first.
std::optional<destination> normalized(const destination& d) {
  destination out = d;
  if (!out.ip) out.ip = ip_address::parse(d.host);
  if (out.ip) {
    out.host = out.ip->to_string();
    return out;
  }
  auto host = normalize_host(d.host);
  if (!host) return std::nullopt;
  out.host = std::move(*host);
  return out;
}

// A host name some layer lists under "approvals": {"never": [...]}.
bool never_approvable(const std::vector<policy>& layers, const destination& d) {
  if (d.ip) return true;  // approvals name host names only
  for (const policy& layer : layers)
    for (const host_pattern& h : layer.never_approve)
      if (h.matches(d.host)) return true;
  return false;
}

// Layers an approval extends: enforcing, asking, and with allow rules (only they refuse for
// want of one; an allow rule added to a layer without any would narrow it to that rule).
bool takes_approvals(const policy& layer) {
  return layer.asks() && layer.enforcement == enforcement::enforce && !layer.allow.empty();
}

bool credential_bound(const std::vector<policy>& layers, const destination& d) {
  if (d.ip) return false;  // credentials bind host names only
  for (const policy& layer : layers)
    for (const auto& [name, cred] : layer.credentials)
      for (const host_pattern& h : cred.hosts)
        if (h.matches(d.host)) return true;
  return false;
}

}  // namespace

policy_set::policy_set(std::vector<policy> layers) : layers_(std::move(layers)) {}

namespace {

std::string rule_name(const std::vector<policy>& layers, const policy& layer,
                      const std::string& rule) {
  return layers.size() > 1 ? layer.source + "#" + rule : rule;
}

// The first rule with "paths" (any layer, deny rules first) that applies to the destination's
// host and port: where one exists the path decides, so it must mean one thing to every server.
std::optional<std::string> first_path_rule(const std::vector<policy>& layers,
                                           const destination& d) {
  for (const policy& layer : layers) {
    if (layer.enforcement == enforcement::audit) continue;
    for (const rule& r : layer.deny)
      if (!r.paths.empty() && target_matches(r, d, /*deny=*/true))
        return rule_name(layers, layer, r.name);
    for (const rule& r : layer.allow)
      if (!r.paths.empty() && target_matches(r, d, /*deny=*/false))
        return rule_name(layers, layer, r.name);
  }
  return std::nullopt;
}

verdict refused(std::string rule) {
  verdict v;
  v.rule = std::move(rule);
  return v;
}

// What the audit-only layers would refuse, as decide() names a refusal; empty when none would.
std::string audit_refusal(const std::vector<policy>& layers, const destination& d,
                          const request_line* req, const client_program& who) {
  std::string first_deny, first_default_deny;
  for (const policy& layer : layers) {
    if (!layer.has_egress_rules() || layer.enforcement != enforcement::audit) continue;
    const layer_result r = evaluate(layer, d, req, who, false);
    if (!r.refused) continue;
    std::string& slot = r.rule == default_deny ? first_default_deny : first_deny;
    if (slot.empty()) slot = rule_name(layers, layer, r.rule);
  }
  return first_deny.empty() ? first_default_deny : first_deny;
}

verdict decide(const std::vector<policy>& layers, const destination& raw, const request_line* req,
               const client_program& who) {
  auto name = [&](const policy& layer, const std::string& rule) {
    return rule_name(layers, layer, rule);
  };
  auto d = normalized(raw);
  if (!d) return refused(std::string(default_deny));
  if (req) {
    if (auto path_rule = first_path_rule(layers, *d)) {
      if (auto why = ambiguous_path(req->target)) {
        // Refused whatever the path says: report that decision (403) rather than the path.
        verdict host_level = decide(layers, *d, nullptr, who);
        if (!host_level.allowed) return host_level;
        verdict v = refused(std::move(*path_rule));
        v.ambiguous_path = std::move(*why);
        return v;
      }
    }
  }

  std::string first_allow, first_deny, first_default_deny, first_approved;
  bool any_allow = false;
  std::vector<verdict::mcp_scope> mcp;
  bool tunnel = true;
  bool ssh = false;
  bool http2 = true;
  const bool never = never_approvable(layers, *d);
  bool askable = !never;
  for (const policy& layer : layers) {
    if (!layer.has_egress_rules() || layer.enforcement == enforcement::audit) continue;
    layer_result r = evaluate(layer, *d, req, who, never);
    if (r.refused) {
      // Report an explicit deny rule in preference to a layer that merely had no allow rule.
      std::string& slot = r.rule == default_deny ? first_default_deny : first_deny;
      if (slot.empty()) slot = name(layer, r.rule);
      askable = askable && r.rule == default_deny && takes_approvals(layer);
      continue;
    }
    tunnel = tunnel && r.tunnel;
    ssh = ssh || r.ssh;
    http2 = http2 && !r.http1_only;
    if (r.allowed_by_rule) {
      any_allow = true;
      if (first_allow.empty()) first_allow = name(layer, r.rule);
      if (r.approved && first_approved.empty()) first_approved = name(layer, r.rule);
      if (req && r.decided->mcp)
        mcp.push_back(
            {&*r.decided->mcp, name(layer, r.rule), !never && takes_approvals(layer), !never});
    }
  }
  if (!first_deny.empty()) return refused(first_deny);
  if (!first_default_deny.empty()) {
    verdict v = refused(first_default_deny);
    v.askable = askable;
    v.askable_tunnel = askable && !req && any_allow && tunnel && !credential_bound(layers, *d);
    return v;
  }
  // Egress needs at least one allow rule somewhere: deny-only layers only ever narrow.
  if (!any_allow) return refused(std::string(default_deny));
  // A credential can never be swapped inside a tunnel (docs/architecture.md); the parser refuses
  // that within one file, and this catches a tunnel in one layer meeting a binding in another.
  // An ssh rule's tunnel carries SSH, where no HTTP credential is swapped.
  if (tunnel && !ssh && credential_bound(layers, *d)) tunnel = false;
  verdict v;
  v.allowed = true;
  // What a person approved is what let it go: named before the other layers' rules.
  v.rule = std::move(first_approved.empty() ? first_allow : first_approved);
  v.tunnel = tunnel;
  v.ssh = tunnel && ssh && !req;
  v.http2 = http2;
  v.mcp = std::move(mcp);
  v.would_deny = audit_refusal(layers, *d, req, who);
  return v;
}

}  // namespace

policy_set policy_set::with_approval(rule approved) const {
  approved.approved = true;
  std::vector<policy> layers = layers_;
  for (policy& layer : layers)
    if (takes_approvals(layer)) layer.allow.push_back(approved);
  return policy_set(std::move(layers));
}

std::vector<destination> policy_set::ssh_destinations() const {
  std::vector<destination> out;
  for (const policy& layer : layers_) {
    for (const rule& r : layer.allow) {
      if (!r.ssh || !r.host) continue;
      for (const std::uint16_t port : r.ports) {
        destination d{r.host->text(), std::nullopt, port};
        if (std::any_of(out.begin(), out.end(), [&](const destination& seen) {
              return seen.host == d.host && seen.port == d.port;
            }))
          continue;
        const verdict v = check_connect(d, {nullptr, true});
        if (v.allowed && v.ssh) out.push_back(std::move(d));
      }
    }
  }
  return out;
}

void ask_on_every_layer(std::vector<policy>& layers) {
  for (policy& layer : layers)
    if (layer.on_deny == on_deny::unset) layer.on_deny = on_deny::ask;
}

bool session_asks(const std::vector<policy>& layers) {
  for (const policy& layer : layers) {
    if (layer.asks()) return true;
    if (layer.enforcement != enforcement::enforce) continue;
    for (const rule& r : layer.allow)
      if (r.mcp && r.mcp->on_change == mcp_on_change::ask) return true;
  }
  return false;
}

void add_approved_rules(std::vector<policy>& layers, const policy& approvals) {
  for (policy& layer : layers) {
    if (!takes_approvals(layer)) continue;
    for (rule r : approvals.allow) {
      r.approved = true;
      r.name = "approved.json:" + r.name;
      layer.allow.push_back(std::move(r));
    }
  }
}

verdict policy_set::check_connect(const destination& dest, client_program who) const {
  return decide(layers_, dest, nullptr, who);
}

verdict policy_set::check_request(const destination& dest, std::string_view method,
                                  std::string_view path, client_program who) const {
  request_line req{method, path, {}};
  if (auto kept = normalize_path(path)) {
    auto stripped = normalize_path(path, path_params::strip);
    req.paths.push_back(std::move(*kept));
    if (stripped && *stripped != req.paths.front()) req.paths.push_back(std::move(*stripped));
  }
  return decide(layers_, dest, &req, who);
}

verdict policy_set::check_name(const std::string& host) const {
  const auto name = normalize_host(host);
  if (!name) return refused(std::string(default_deny));
  std::vector<std::uint16_t> ports;
  for (const policy& layer : layers_)
    for (const rule& r : layer.allow)
      if (r.host && r.host->matches(*name))
        for (std::uint16_t port : r.ports)
          if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  if (ports.empty()) ports.push_back(443);
  std::optional<verdict> first;
  for (std::uint16_t port : ports) {
    // Whoever asks the name: the connection is decided for its program when it comes.
    verdict v = check_connect({*name, std::nullopt, port}, client_program{nullptr, true});
    if (v.allowed) return v;
    if (!first) first = std::move(v);
  }
  return *first;
}

policy_set::address_verdict policy_set::check_address(const ip_address& address,
                                                      std::uint16_t port) const {
  address_verdict out;
  bool any_allow_layer = false;
  bool every_allows = true;
  for (const policy& layer : layers_) {
    for (const rule& r : layer.deny) {
      if (r.has_l7_conditions() || !port_matches(r, port) || !address_matches(r, address, true))
        continue;
      if (!out.denied) {
        out.denied = true;
        out.rule = layers_.size() > 1 ? layer.source + "#" + r.name : r.name;
      }
    }
    if (layer.allow.empty()) continue;  // deny-only layers never grant anything
    any_allow_layer = true;
    bool covered = std::any_of(layer.allow.begin(), layer.allow.end(), [&](const rule& r) {
      return port_matches(r, port) && address_matches(r, address, false);
    });
    every_allows = every_allows && covered;
  }
  out.private_ok = !out.denied && any_allow_layer && every_allows;
  return out;
}

}  // namespace broker::config
