#include "wrap/home_guard.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "wrap/path_lists.hpp"

namespace broker::wrap {

namespace {

namespace fs = std::filesystem;

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::size_t depth(const std::string& p) {
  return static_cast<std::size_t>(std::count(p.begin(), p.end(), '/'));
}

using format = settings_file::format;

// The agents' settings that name commands (DESIGN §8.1; the floor, more where the agents have
// more): Claude Code's hooks, status line, MCP servers, key and credential helpers and the
// environment its commands get; Codex's notify program and MCP servers; Gemini CLI's hooks,
// MCP servers and tool commands.
const std::pair<const char*, settings_file> agent_settings[] = {
    {"/.claude/settings.json",
     {format::json,
      {"hooks", "statusLine", "mcpServers", "apiKeyHelper", "env", "awsAuthRefresh",
       "awsCredentialExport", "otelHeadersHelper"}}},
    {"/.claude/settings.local.json",
     {format::json,
      {"hooks", "statusLine", "mcpServers", "apiKeyHelper", "env", "awsAuthRefresh",
       "awsCredentialExport", "otelHeadersHelper"}}},
    {"/.claude.json",
     {format::json, {"mcpServers", "hooks", "projects.*.mcpServers", "projects.*.hooks"}}},
    {"/.codex/config.toml", {format::toml, {"notify", "mcp_servers"}}},
    {"/.gemini/settings.json",
     {format::json,
      {"hooks", "mcpServers", "toolDiscoveryCommand", "toolCallCommand", "tools.discoveryCommand",
       "tools.callCommand", "tools.sandbox"}}},
};

// Where agents store a key they are given (home_guard::agent_store), under the home.
constexpr const char* agent_key_stores[] = {"/.codex/auth.json",
                                            "/.gemini/gemini-credentials.json"};
constexpr const char* agent_files = "/.config/broker/agent-files";

}  // namespace

std::string home_guard::agent_store(const std::string& real) const {
  if (home_.empty() || home_ == "/") return {};
  for (const char* store : agent_key_stores)
    if (real == home_ + store) return home_ + agent_files + store;
  return {};
}

bool home_guard::discarded(const std::string& real) const {
  for (const auto& p : protected_)
    if (within(real, p.path)) return p.discard;
  return false;
}

std::vector<std::string> home_guard::agent_stores() const {
  std::vector<std::string> out;
  if (home_.empty() || home_ == "/") return out;
  for (const char* store : agent_key_stores) out.push_back(home_ + store);
  return out;
}

const settings_file* home_guard::settings(const std::string& real) const {
  for (const auto& [path, file] : settings_)
    if (path == real) return &file;
  return nullptr;
}

home_guard::home_guard(std::vector<protected_path> protected_paths, std::string home,
                       const std::string& path_variable)
    : protected_(std::move(protected_paths)), home_(std::move(home)) {
  while (home_.size() > 1 && home_.back() == '/') home_.pop_back();
  if (!home_.empty() && home_ != "/")
    for (const auto& [path, file] : agent_settings) settings_.emplace_back(home_ + path, file);
  std::string path =
      path_variable + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (std::size_t start = 0; start <= path.size();) {
    std::size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = fs::path(path.substr(start, colon - start)).lexically_normal().string();
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    start = colon + 1;
    if (dir.empty() || dir.front() != '/') continue;
    if (!home_.empty() && within(dir, home_) && dir != home_)
      add_unique(own_path_dirs_, dir);
    else
      add_unique(other_path_dirs_, dir);
  }
  for (const char* mine : {"/.local/bin", "/bin"})
    if (!home_.empty()) add_unique(own_path_dirs_, home_ + mine);
  std::erase_if(other_path_dirs_, [&](const std::string& d) {
    return std::find(own_path_dirs_.begin(), own_path_dirs_.end(), d) != own_path_dirs_.end();
  });
}

std::string home_guard::kept_reason(const std::string& real, bool executable) const {
  for (const auto& p : protected_)
    if (within(real, p.path)) return p.reason;
  if (!agent_store(real).empty())
    return "an agent's stored key, a dummy: the agent outside broker would send it instead of "
           "your key; kept for broker's sessions";
  const fs::path path(real);
  const std::string dir = path.parent_path().string(), name = path.filename().string();
  // A repository made inside the session (in a directory that is a view): its hooks stay out.
  if (dir.ends_with("/.git/hooks") && !name.ends_with(".sample")) return "a git hook";
  if (!executable || !is_path_directory(dir)) return {};
  for (const auto& other : other_path_dirs_) {
    const std::string shadowed = other + "/" + name;
    if (::access(shadowed.c_str(), X_OK) == 0 && !is_directory(shadowed))
      return "shadows " + shadowed;
  }
  return {};
}

bool home_guard::is_path_directory(const std::string& dir) const {
  return std::find(own_path_dirs_.begin(), own_path_dirs_.end(), dir) != own_path_dirs_.end();
}

std::vector<std::string> home_guard::view_directories(const std::string& cwd,
                                                      std::vector<std::string>& warnings) const {
  std::vector<std::string> out;
  if (home_.empty() || home_ == "/" || !is_directory(home_)) return out;
  for (const auto& p : protected_) {
    if (!within(p.path, home_) || p.path == home_ || exists(p.path)) continue;
    std::string dir = fs::path(p.path).parent_path().string();
    while (dir != home_ && !is_directory(dir)) dir = fs::path(dir).parent_path().string();
    add_unique(out, dir);
  }
  for (const auto& [path, file] : settings_) {
    std::string dir = fs::path(path).parent_path().string();
    while (dir != home_ && !is_directory(dir)) dir = fs::path(dir).parent_path().string();
    add_unique(out, dir);
  }
  for (const auto& dir : own_path_dirs_) {
    if (!within(dir, home_)) continue;
    std::string d = dir;
    while (d != home_ && !is_directory(d)) d = fs::path(d).parent_path().string();
    add_unique(out, d);
  }
  if (std::find(out.begin(), out.end(), cwd) != out.end()) {
    std::erase(out, cwd);
    warnings.push_back("the working directory is " + cwd +
                       ": what does not exist in it yet and must not run later (startup files, "
                       "package managers' sources) is not guarded; run from a project directory");
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const std::string& a, const std::string& b) { return depth(a) < depth(b); });
  return out;
}

}  // namespace broker::wrap
