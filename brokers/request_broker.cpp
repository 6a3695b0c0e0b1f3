// What every family shares: its binding, and the stages a family without a part in them skips.
#include "brokers/request_broker.hpp"

#include "config/mcp_rules.hpp"

namespace broker::brokers {

request_broker::request_broker(config::credential_spec spec, layer_bindings other_layers)
    : spec_(std::move(spec)), other_layers_(std::move(other_layers)) {}

request_broker::~request_broker() = default;

void request_broker::narrow(const config::credential_spec& layer) {
  other_layers_.hosts.push_back(layer.hosts);
  if (layer.scope) other_layers_.scopes.push_back(*layer.scope);
}

bool request_broker::bound(std::string_view host) const {
  auto any_matches = [host](const std::vector<config::host_pattern>& hosts) {
    for (const config::host_pattern& p : hosts)
      if (p.matches(host)) return true;
    return false;
  };
  if (!any_matches(spec_.hosts)) return false;
  for (const auto& hosts : other_layers_.hosts)
    if (!any_matches(hosts)) return false;
  return true;
}

bool request_broker::usable(const request_context& where) const {
  if (!bound(where.host)) return false;
  if (!spec_.programs.empty() && !config::program_matches(spec_.programs, where.client))
    return false;
  return !where.plaintext || where.loopback || spec_.allow_plaintext;
}

scope_verdict request_broker::judge_mcp_tool(const request_context& where) const {
  if (!spec_.mcp_tools) return {};
  if (where.mcp_tool)
    for (const auto& glob : *spec_.mcp_tools)
      if (config::mcp_glob_matches(glob, *where.mcp_tool)) return {};
  return scope_refusal("mcp_tools",
                       where.mcp_tool
                           ? "the MCP tool called is not one it names"
                           : "it is swapped only in an MCP request that calls one of its tools");
}

scope_verdict request_broker::judge_scope(std::string_view host, std::string_view method,
                                          std::string_view target) const {
  scope_verdict inside;
  auto judge = [&](const config::credential_scope& s) {
    scope_verdict v = brokers::judge_scope(s, spec_.type, host, method, target);
    if (v.refused()) return v;
    inside.graphql_body = inside.graphql_body || v.graphql_body;
    return inside;
  };
  if (spec_.scope)
    if (scope_verdict v = judge(*spec_.scope); v.refused()) return v;
  for (const auto& s : other_layers_.scopes)
    if (scope_verdict v = judge(s); v.refused()) return v;
  return inside;
}

void request_broker::rotated_values(std::chrono::system_clock::time_point,
                                    std::vector<scrub_pattern>&) const {}
void request_broker::rotated_dummies(std::vector<std::string_view>&) const {}
void request_broker::dummy_files(std::vector<dummy_file>&) const {}
void request_broker::displaced_variables(std::vector<std::string>&) const {}
int request_broker::swap_header(std::string_view, std::string&) const {
  return 0;
}
int request_broker::swap_query(std::string&) const {
  return 0;
}
std::unique_ptr<request_step> request_broker::claim(const request_context&, std::string_view,
                                                    std::string_view,
                                                    const std::vector<http::header_field>&, bool,
                                                    request_decision&) const {
  return nullptr;
}

}  // namespace broker::brokers
