// The normalized layer as JSON, for `broker policy check` (docs/cli.md): patterns in their
// normalized form, defaults filled in, sizes in bytes, so a reader sees what is enforced.
#include <nlohmann/json.hpp>

#include "config/policy.hpp"

namespace broker::config {
namespace {

using nlohmann::ordered_json;

ordered_json names_json(const mcp_names& names) {
  ordered_json j = ordered_json::object();
  if (names.allow) j["allow"] = *names.allow;
  if (!names.deny.empty()) j["deny"] = names.deny;
  return j;
}

ordered_json mcp_json(const mcp_rules& m) {
  ordered_json j;
  j["tools"] = names_json(m.tools);
  if (!m.arguments.empty()) {
    ordered_json args = ordered_json::object();
    for (const auto& a : m.arguments) {
      ordered_json checks = ordered_json::object();
      for (const auto& c : a.checks) {
        // As the policy can say it again: an object to equal is {"equals": ...}.
        ordered_json value =
            c.glob ? ordered_json{{"glob", *c.glob}} : ordered_json::parse(c.equals);
        if (!c.glob && value.is_object()) value = ordered_json{{"equals", std::move(value)}};
        checks[c.pointer] = std::move(value);
      }
      args[a.tool] = std::move(checks);
    }
    j["tools"]["arguments"] = std::move(args);
  }
  j["resources"] = names_json(m.resources);
  j["prompts"] = names_json(m.prompts);
  j["on_change"] = m.on_change == mcp_on_change::ask ? "ask" : "deny";
  if (m.pins) j["pins"] = m.pins->path;
  return j;
}

ordered_json rule_json(const rule& r, bool allow_list) {
  ordered_json j;
  j["name"] = r.name;
  if (r.host) j["host"] = r.host->text();
  if (r.net) j["cidr"] = r.net->to_string();
  if (r.ports.empty())
    j["ports"] = "any";
  else
    j["ports"] = r.ports;
  if (!r.methods.empty()) j["methods"] = r.methods;
  if (!r.paths.empty()) {
    ordered_json paths = ordered_json::array();
    for (const auto& p : r.paths) paths.push_back(p.text());
    j["paths"] = std::move(paths);
  }
  if (allow_list) j["tunnel"] = r.tunnel;
  if (r.ssh) j["ssh"] = true;
  if (allow_list && !r.http2) j["http2"] = false;
  if (!r.programs.empty()) {
    j["programs"] = r.programs;
    j["programs_note"] =
        "matches only connections whose every holder runs one of them, as wrap attributes; "
        "never in serve";
  }
  if (r.mcp) j["mcp"] = mcp_json(*r.mcp);
  if (r.approved) j["approved"] = true;
  return j;
}

ordered_json rules_json(const std::vector<rule>& rules, bool allow_list) {
  ordered_json out = ordered_json::array();
  for (const auto& r : rules) out.push_back(rule_json(r, allow_list));
  return out;
}

ordered_json scope_json(const credential_scope& s) {
  ordered_json j;
  if (s.allow) {
    ordered_json allow = ordered_json::array();
    for (const scope_rule& r : *s.allow) {
      ordered_json e;
      if (!r.methods.empty()) e["methods"] = r.methods;
      if (!r.paths.empty()) {
        ordered_json paths = ordered_json::array();
        for (const auto& p : r.paths) paths.push_back(p.text());
        e["paths"] = std::move(paths);
      }
      allow.push_back(std::move(e));
    }
    j["allow"] = std::move(allow);
  }
  if (s.repos) {
    ordered_json repos = ordered_json::array();
    for (const repo_pattern& r : *s.repos) repos.push_back(r.text());
    j["repos"] = std::move(repos);
  }
  if (s.graphql_read) j["graphql"] = "read";
  if (s.s3) {
    ordered_json s3 = ordered_json::array();
    for (const s3_grant& g : *s.s3) s3.push_back({{"bucket", g.bucket}, {"prefix", g.prefix}});
    j["s3"] = std::move(s3);
  }
  if (s.actions) j["actions"] = *s.actions;
  return j;
}

ordered_json credential_json(const credential_spec& c) {
  ordered_json j;
  j["type"] = c.type;
  ordered_json hosts = ordered_json::array();
  for (const auto& h : c.hosts) hosts.push_back(h.text());
  j["hosts"] = std::move(hosts);
  j["env"] = c.env;
  if (!c.login_file) j["source"] = c.source;
  if (!c.header.empty()) j["header"] = c.header;
  if (!c.prefix.empty()) j["prefix"] = c.prefix;
  if (c.also_bearer) j["also_bearer"] = true;
  if (!c.query.empty()) j["query"] = c.query;
  if (!c.regions.empty()) j["regions"] = c.regions;
  if (!c.services.empty()) j["services"] = c.services;
  if (!c.scopes.empty()) j["scopes"] = c.scopes;
  j["allow_plaintext"] = c.allow_plaintext;
  if (c.scope) j["scope"] = scope_json(*c.scope);
  if (c.mcp_tools) j["mcp_tools"] = *c.mcp_tools;
  if (!c.access_boundary.empty())
    j["access_boundary"] =
        nlohmann::json::parse(c.access_boundary)["accessBoundary"]["accessBoundaryRules"];
  if (const auto& role = c.assume_role) {
    ordered_json r;
    r["arn"] = role->arn;
    if (!role->policy.empty()) r["policy"] = nlohmann::json::parse(role->policy);
    r["duration_s"] = role->duration.count();
    j["assume_role"] = std::move(r);
  }
  if (const auto& app = c.github_app) {
    j.erase("source");
    j["app_id"] = app->app_id;
    j["installation_id"] = app->installation_id;
    j["private_key"] = app->private_key;
    j["api_url"] = app->api_url;
    if (!app->repositories.empty()) j["repositories"] = app->repositories;
    if (!app->permissions.empty()) {
      ordered_json permissions = ordered_json::object();
      for (const auto& [name, level] : app->permissions) permissions[name] = level;
      j["permissions"] = std::move(permissions);
    }
  }
  if (!c.programs.empty()) {
    j["programs"] = c.programs;
    j["programs_note"] =
        "swapped only for connections whose every holder runs one of them, as wrap attributes; "
        "never in serve";
  }
  if (c.login_file) {
    j["file"] = c.login_file->path;
    j["fields"] = c.login_file->fields;
    if (const auto& r = c.login_file->refresh) {
      ordered_json refresh;
      refresh["url"] = r->url;
      refresh["token"] = r->token;
      ordered_json response = ordered_json::object();
      for (const auto& [member, path] : r->response) response[member] = path;
      refresh["response"] = std::move(response);
      if (!r->expires_at_ms.empty()) refresh["expires_at_ms"] = r->expires_at_ms;
      j["refresh"] = std::move(refresh);
    }
  }
  return j;
}

void add_amounts(ordered_json& j, const budget_amounts& b) {
  if (b.requests) j["requests"] = *b.requests;
  if (b.bytes_out) j["bytes_out"] = *b.bytes_out;
  if (b.bytes_in) j["bytes_in"] = *b.bytes_in;
  if (b.llm_tokens) j["llm_tokens"] = *b.llm_tokens;
  if (b.cost_usd) j["cost_usd"] = *b.cost_usd;
  if (b.request_rate)
    j["rate"] = {{"per_second", b.request_rate->per_second}, {"burst", b.request_rate->burst}};
}

ordered_json budgets_json(const budget_spec& b) {
  ordered_json j = ordered_json::object();
  add_amounts(j, b);
  if (b.duration) {
    j["duration"] = format_duration(*b.duration);
    j["duration_ms"] = b.duration->count();
  }
  if (!b.prices.empty()) {
    ordered_json prices = ordered_json::object();
    for (const auto& [model, price] : b.prices)
      prices[model] = {{"input_per_mtok", price.input_per_mtok},
                       {"output_per_mtok", price.output_per_mtok}};
    j["prices"] = std::move(prices);
  }
  if (!b.per_host.empty()) {
    ordered_json per_host = ordered_json::object();
    for (const auto& h : b.per_host) {
      ordered_json entry = ordered_json::object();
      add_amounts(entry, h);
      per_host[h.host.text()] = std::move(entry);
    }
    j["per_host"] = std::move(per_host);
  }
  j["on_exhaust"] = b.on_exhaust == exhaust_action::kill ? "kill" : "deny";
  if (b.allow_without_state) j["on_state_unavailable"] = *b.allow_without_state ? "allow" : "deny";
  return j;
}

}  // namespace

nlohmann::ordered_json to_json(const policy& layer) {
  ordered_json j;
  j["source"] = layer.source;
  j["sha256"] = layer.sha256;
  j["enforcement"] = layer.enforcement == enforcement::audit ? "audit" : "enforce";
  j["on_deny"] = layer.asks() ? "ask" : "deny";
  if (!layer.never_approve.empty()) {
    ordered_json never = ordered_json::array();
    for (const auto& h : layer.never_approve) never.push_back(h.text());
    j["approvals"] = {{"never", std::move(never)}};
  }
  j["allow"] = rules_json(layer.allow, true);
  j["deny"] = rules_json(layer.deny, false);
  ordered_json credentials = ordered_json::object();
  for (const auto& [name, c] : layer.credentials) credentials[name] = credential_json(c);
  j["credentials"] = std::move(credentials);
  j["budgets"] = budgets_json(layer.budgets);
  j["env"] = {{"pass", layer.env.pass}, {"strip", layer.env.strip}};
  j["files"] = {{"mask", layer.files.mask},
                {"pass", layer.files.pass},
                {"readonly", layer.files.readonly},
                {"writable", layer.files.writable}};
  if (!layer.ssh.keys.empty() || !layer.ssh.host_keys.empty())
    j["ssh"] = {{"keys", layer.ssh.keys}, {"host_keys", layer.ssh.host_keys}};
  return j;
}

}  // namespace broker::config
