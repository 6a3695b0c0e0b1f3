// "allow" and "deny" rule lists (docs/policy.md).

#include <algorithm>
#include <string_view>

#include "config/address.hpp"
#include "config/policy_sections.hpp"

namespace broker::config {
namespace {

bool is_tchar(char c) {  // RFC 9110 §5.6.2
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void parse_target(const json_node& item, rule& r) {
  auto host = item.find("host");
  auto net = item.find("cidr");
  if (host.has_value() == net.has_value())
    item.fail("a rule needs exactly one of \"host\" or \"cidr\"");
  if (host) {
    std::string text = host->as_string();
    r.host = host_pattern::parse(text);
    if (r.host) return;
    if (ip_address::parse(text) || cidr::parse(text))
      host->fail("\"" + text + "\" is an IP address; IP literals match only \"cidr\" rules");
    host->fail("invalid host pattern \"" + text +
               "\" (a host name, \"*.\" + a host name, or \"*\")");
  }
  std::string text = net->as_string();
  r.net = cidr::parse(text);
  if (!r.net)
    net->fail("invalid CIDR block \"" + text + "\" (address/prefix with no host bits set)");
}

std::vector<std::uint16_t> parse_ports(const json_node& node) {
  auto items = node.elements("expected array of integers");
  if (items.empty()) node.fail("expected a non-empty array of integers");
  std::vector<std::uint16_t> ports;
  for (const auto& item : items)
    if (!item.value().is_number_integer()) node.fail("expected array of integers");
  for (const auto& item : items) {
    auto value = item.value().get<std::int64_t>();
    if (item.value().is_number_unsigned() && item.value().get<std::uint64_t>() > 65535) value = -1;
    if (value < 1 || value > 65535) item.fail("port out of range 1..65535");
    auto port = static_cast<std::uint16_t>(value);
    if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  }
  return ports;
}

}  // namespace

std::vector<std::string> parse_methods(const json_node& node) {
  std::vector<std::string> methods;
  for (auto& [text, item] : node.string_elements()) {
    if (text.empty() || text.size() > 32 || !std::all_of(text.begin(), text.end(), is_tchar))
      item.fail("\"" + text + "\" is not an HTTP method");
    // Methods are case-sensitive on the wire (RFC 9110 §9.1) but every registered one is
    // upper-case; "get" in a policy means GET.
    std::string upper = text;
    for (char& c : upper)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    if (std::find(methods.begin(), methods.end(), upper) == methods.end()) methods.push_back(upper);
  }
  return methods;
}

std::vector<path_pattern> parse_path_patterns(const json_node& node) {
  std::vector<path_pattern> paths;
  for (auto& [text, item] : node.string_elements()) {
    if (text.empty() || text.front() != '/') item.fail("path pattern must start with \"/\"");
    auto pattern = path_pattern::parse(text);
    if (!pattern)
      item.fail("invalid path pattern \"" + text +
                "\" (no query, fragment, \".\" or \"..\" segments, bad %-escapes, or what a "
                "request may not carry on a host with path rules: %2F, %5C, \"\\\", encoded "
                "control bytes, \"..;\")");
    paths.push_back(std::move(*pattern));
  }
  return paths;
}

void parse_programs(const json_node& node, std::vector<std::string>& programs,
                    std::vector<int>& lines) {
  auto items = node.string_elements();
  if (items.empty()) node.fail("expected a non-empty array of program paths or globs");
  for (auto& [text, item] : items) {
    // A program is named by its path: a bare name ("git") would match nothing.
    if (text.empty() || (text.front() != '/' && text.front() != '*'))
      item.fail("\"" + text + "\" is not a path or a glob starting with \"*\" (e.g. " +
                "\"/usr/bin/git\", \"/usr/bin/gh\")");
    if (std::find(programs.begin(), programs.end(), text) != programs.end()) continue;
    programs.push_back(text);
    lines.push_back(item.line());
  }
}

namespace {

// "ssh": true: a tunnel to one named host, on port 22 unless the rule names ports.
void parse_ssh_rule(const json_node& item, const json_node& ssh, rule& r) {
  r.ssh = ssh.as_bool();
  if (!r.ssh) return;
  if (auto tunnel = item.find("tunnel"); tunnel && !r.tunnel)
    tunnel->fail("an ssh rule is a tunnel (ssh traffic is encrypted end to end)");
  // The agent binds keys to one host's own keys (ssh-add -h), so the rule names that host.
  if (!r.host || r.host->text().find('*') != std::string::npos)
    ssh.fail("an ssh rule names one host (\"host\": \"github.com\"), not a pattern or \"cidr\"");
  if (r.mcp) ssh.fail("an ssh rule cannot have \"mcp\"");
  if (r.has_l7_conditions())
    ssh.fail("an ssh rule cannot have \"methods\" or \"paths\" (it is not HTTP)");
  r.tunnel = true;
  if (!item.find("ports")) r.ports = {22};
}

}  // namespace

std::vector<rule> parse_rules(const json_node& list, bool allow_list) {
  std::vector<rule> rules;
  for (const auto& item : list.elements("expected array of rule objects")) {
    item.expect_object("expected a rule object");
    if (!allow_list) {
      if (auto tunnel = item.find("tunnel")) tunnel->fail("\"tunnel\" applies only to allow rules");
      if (auto http2 = item.find("http2")) http2->fail("\"http2\" applies only to allow rules");
      if (auto programs = item.find("programs"))
        programs->fail("\"programs\" applies only to allow rules (and credentials)");
      if (auto mcp = item.find("mcp")) mcp->fail("\"mcp\" applies only to allow rules");
      if (auto ssh = item.find("ssh")) ssh->fail("\"ssh\" applies only to allow rules");
      item.reject_unknown_keys({"host", "cidr", "ports", "methods", "paths"});
    } else {
      item.reject_unknown_keys({"host", "cidr", "ports", "methods", "paths", "tunnel", "programs",
                                "http2", "mcp", "ssh"});
    }
    rule r;
    r.name = item.key().substr(item.key().rfind('.') + 1);  // "allow[3]"
    r.line = item.line();
    parse_target(item, r);
    // An allow rule opens the web ports unless it names others; a deny rule without ports
    // refuses the host on every port ("never this host" must not leave port 8080 open).
    if (allow_list) r.ports = {80, 443};
    if (auto ports = item.find("ports")) r.ports = parse_ports(*ports);
    if (auto methods = item.find("methods")) r.methods = parse_methods(*methods);
    if (auto paths = item.find("paths")) r.paths = parse_path_patterns(*paths);
    if (auto programs = item.find("programs"))
      parse_programs(*programs, r.programs, r.program_lines);
    if (auto http2 = item.find("http2")) r.http2 = http2->as_bool();
    if (auto mcp = item.find("mcp")) r.mcp = parse_mcp(*mcp);
    if (auto tunnel = item.find("tunnel")) {
      r.tunnel = tunnel->as_bool();
      if (r.tunnel && r.mcp)
        tunnel->fail("a tunnel rule cannot have \"mcp\" (tunnelled traffic is not read)");
      // A tunnel is never parsed, so a method or path condition could never be enforced.
      if (r.tunnel && r.has_l7_conditions())
        tunnel->fail(
            "a tunnel rule cannot have \"methods\" or \"paths\" (tunnelled traffic is not "
            "inspected)");
    }
    if (auto ssh = item.find("ssh")) parse_ssh_rule(item, *ssh, r);
    rules.push_back(std::move(r));
  }
  return rules;
}

std::vector<host_pattern> parse_approvals(const json_node& section) {
  section.expect_object("expected an object: {\"never\": [host patterns]}");
  section.reject_unknown_keys({"never"});
  std::vector<host_pattern> never;
  auto list = section.find("never");
  if (!list) return never;
  for (auto& [text, item] : list->string_elements()) {
    auto pattern = host_pattern::parse(text);
    if (!pattern)
      item.fail("invalid host pattern \"" + text +
                "\" (a host name, \"*.\" + a host name, or \"*\")");
    never.push_back(std::move(*pattern));
  }
  return never;
}

}  // namespace broker::config
