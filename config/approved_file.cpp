#include "config/approved_file.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/atomic_file.hpp"

namespace broker::config {

std::filesystem::path default_approved_path() {
  const char* home = std::getenv("HOME");
  if (!home || home[0] != '/') return {};
  return std::filesystem::path(home) / ".config" / "broker" / "approved.json";
}

std::optional<policy> load_approved(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  policy p = load_policy_file(file);
  const bool only_allow = p.deny.empty() && p.credentials.empty() && p.env.pass.empty() &&
                          p.env.strip.empty() && p.files.mask.empty() && p.files.pass.empty() &&
                          p.files.readonly.empty() && p.files.writable.empty() &&
                          p.never_approve.empty() && p.on_deny == on_deny::unset &&
                          p.enforcement == enforcement::enforce;
  if (!only_allow)
    throw policy_error(p.source, 0, "",
                       "approved.json holds \"allow\" rules only (what broker approve --always "
                       "wrote, or rules written like them)");
  return p;
}

namespace {

std::vector<std::string> prefix_patterns(const std::string& prefix) {
  if (prefix.empty()) return {};
  if (prefix.front() != '/') throw std::invalid_argument("a path prefix starts with \"/\"");
  if (prefix.find('*') != std::string::npos)
    throw std::invalid_argument("a path prefix is a path, without \"*\"");
  if (prefix.back() == '/') return {prefix + "*"};
  return {prefix, prefix + "/*"};
}

nlohmann::ordered_json rule_json(const approval_rule& a) {
  nlohmann::ordered_json j;
  j["host"] = a.host;
  j["ports"] = {a.port};
  if (auto paths = prefix_patterns(a.path_prefix); !paths.empty()) j["paths"] = paths;
  if (a.tunnel) j["tunnel"] = true;
  return j;
}

}  // namespace

rule make_approval_rule(const approval_rule& a, std::string name) {
  rule r;
  r.name = std::move(name);
  r.host = host_pattern::parse(a.host);
  if (!r.host) throw std::invalid_argument("\"" + a.host + "\" is not a host name");
  r.ports = {a.port};
  r.tunnel = a.tunnel;
  if (a.tunnel && !a.path_prefix.empty())
    throw std::invalid_argument("a tunnel is not inspected: its approval cannot name a path");
  for (const auto& text : prefix_patterns(a.path_prefix)) {
    auto p = path_pattern::parse(text);
    if (!p) throw std::invalid_argument("\"" + a.path_prefix + "\" is not a path a rule can hold");
    r.paths.push_back(std::move(*p));
  }
  r.approved = true;
  return r;
}

void append_approved(const std::filesystem::path& file, const approval_rule& a) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  if (load_approved(file)) {
    // Parsed once above with lines for its errors; read again for its members (comments go).
    std::FILE* f = std::fopen(file.c_str(), "rb");
    if (f) {
      doc = nlohmann::ordered_json::parse(f, nullptr, true, /*ignore_comments=*/true);
      std::fclose(f);
    }
  }
  auto& allow = doc["allow"];
  if (!allow.is_array()) allow = nlohmann::ordered_json::array();
  const auto wanted = rule_json(a);
  for (const auto& existing : allow)
    if (existing == wanted) return;
  allow.push_back(wanted);
  std::filesystem::create_directories(file.parent_path());
  ::chmod(file.parent_path().c_str(), 0700);
  base::write_file_atomically(file, doc.dump(2) + "\n", 0600);
}

}  // namespace broker::config
