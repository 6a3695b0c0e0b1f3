// The workspace's GitHub origin, and the layer that scopes github credentials to it.
#include "sandbox/workspace_origin.hpp"

#include <git2.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "base/text.hpp"

namespace broker::sandbox {
namespace {

bool valid_name(std::string_view s, bool repo) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || (repo && (c == '_' || c == '.'));
    if (!ok) return false;
  }
  return true;
}

// "OWNER/REPO[.git][/]" after the host.
std::optional<config::repo_pattern> owner_repo(std::string_view path) {
  while (path.starts_with('/')) path.remove_prefix(1);
  if (path.ends_with('/')) path.remove_suffix(1);
  if (path.ends_with(".git")) path.remove_suffix(4);
  const auto slash = path.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view owner = path.substr(0, slash), repo = path.substr(slash + 1);
  if (!valid_name(owner, false) || !valid_name(repo, true)) return std::nullopt;
  return config::repo_pattern{base::lower(owner), base::lower(repo)};
}

struct git_library {
  git_library() { git_libgit2_init(); }
  ~git_library() { git_libgit2_shutdown(); }
};

// What the configuration says of remote "origin" and of URL rewriting (git-config(1): the
// longest matching url.<base>.insteadOf prefix is replaced by <base>).
struct remote_config {
  std::optional<std::string> url, push_url;  // the last value wins, as in git
  std::vector<std::pair<std::string, std::string>> instead_of, push_instead_of;  // prefix, base
};

int collect_origin(const git_config_entry* entry, void* payload) {
  auto& c = *static_cast<remote_config*>(payload);
  const std::string_view name = entry->name;  // section and key lower-cased by libgit2
  const std::string value = entry->value ? entry->value : "";
  if (name == "remote.origin.url") c.url = value;
  if (name == "remote.origin.pushurl") c.push_url = value;
  if (name.starts_with("url.")) {
    const auto last = name.rfind('.');
    const std::string base(name.substr(4, last - 4));
    const std::string_view key = name.substr(last + 1);
    if (key == "insteadof") c.instead_of.emplace_back(value, base);
    if (key == "pushinsteadof") c.push_instead_of.emplace_back(value, base);
  }
  return 0;
}

std::optional<std::string> rewrite_if_any(
    const std::string& url, const std::vector<std::pair<std::string, std::string>>& rules) {
  const std::pair<std::string, std::string>* best = nullptr;
  for (const auto& r : rules)
    if (!r.first.empty() && url.starts_with(r.first) &&
        (!best || r.first.size() > best->first.size()))
      best = &r;
  if (!best) return std::nullopt;
  return best->second + url.substr(best->first.size());
}

std::string rewrite(const std::string& url,
                    const std::vector<std::pair<std::string, std::string>>& rules) {
  return rewrite_if_any(url, rules).value_or(url);
}

std::string git_error_text() {
  const git_error* e = git_error_last();
  return e && e->message ? e->message : "unknown libgit2 error";
}

}  // namespace

std::optional<github_remote> parse_github_remote(std::string_view url) {
  github_remote out;
  std::string_view rest;
  const auto scheme = url.find("://");
  if (scheme != std::string_view::npos) {
    const std::string_view name = url.substr(0, scheme);
    if (name != "https" && name != "http" && name != "ssh" && name != "git" && name != "git+ssh")
      return std::nullopt;
    std::string_view authority = url.substr(scheme + 3);
    const auto path = authority.find('/');
    if (path == std::string_view::npos) return std::nullopt;
    rest = authority.substr(path);
    authority = authority.substr(0, path);
    if (const auto at = authority.rfind('@'); at != std::string_view::npos)
      authority.remove_prefix(at + 1);
    out.ssh = name == "ssh" || name == "git+ssh";
    if (const auto colon = authority.find(':'); colon != std::string_view::npos) {
      out.ssh = out.ssh && authority.substr(colon + 1) == "22";
      authority = authority.substr(0, colon);
    }
    out.host = base::lower(authority);
  } else {
    // scp-like: [USER@]HOST:PATH (a ':' before any '/').
    const auto colon = url.find(':');
    const auto slash = url.find('/');
    if (colon == std::string_view::npos || (slash != std::string_view::npos && slash < colon))
      return std::nullopt;
    std::string_view host = url.substr(0, colon);
    if (const auto at = host.rfind('@'); at != std::string_view::npos) host.remove_prefix(at + 1);
    out.host = base::lower(host);
    out.ssh = true;
    rest = url.substr(colon + 1);
  }
  if (out.host.empty()) return std::nullopt;
  auto repo = owner_repo(rest);
  if (!repo) return std::nullopt;
  out.repo = std::move(*repo);
  return out;
}

github_remote workspace_origin(const std::filesystem::path& dir) {
  const git_library library;
  git_repository* raw_repo = nullptr;
  if (git_repository_open_ext(&raw_repo, dir.c_str(), 0, nullptr) != 0)
    throw std::runtime_error(dir.string() + " is not in a git repository (" + git_error_text() +
                             ")");
  const std::unique_ptr<git_repository, decltype(&git_repository_free)> repo(raw_repo,
                                                                             git_repository_free);
  // The configuration as git reads it (the repository's, the user's, includes), walked
  // entry by entry: libgit2 1.5's remote lookup matches names with a regex that leaks.
  git_config* raw_config = nullptr;
  if (git_repository_config_snapshot(&raw_config, repo.get()) != 0)
    throw std::runtime_error("the repository's configuration cannot be read (" + git_error_text() +
                             ")");
  const std::unique_ptr<git_config, decltype(&git_config_free)> config(raw_config, git_config_free);
  remote_config origin;
  git_config_foreach(config.get(), collect_origin, &origin);
  if (!origin.url) throw std::runtime_error("the repository has no remote \"origin\" with a URL");
  const std::string url = rewrite(*origin.url, origin.instead_of);
  auto parsed = parse_github_remote(url);
  if (!parsed)
    throw std::runtime_error("the remote \"origin\" (" + url + ") does not name HOST/OWNER/REPO");
  // A push goes where pushurl (or pushInsteadOf) says: it must name the same repository.
  std::optional<std::string> push;
  if (origin.push_url)
    push = rewrite(*origin.push_url, origin.instead_of);
  else if (auto pushed = rewrite_if_any(*origin.url, origin.push_instead_of))
    push = pushed;
  if (push) {
    auto push_parsed = parse_github_remote(*push);
    if (!push_parsed || push_parsed->host != parsed->host ||
        push_parsed->repo.text() != parsed->repo.text())
      throw std::runtime_error("the remote \"origin\" pushes to " + *push +
                               ", another repository than it fetches from");
  }
  return *parsed;
}

config::policy scope_to_origin_layer(const std::vector<config::policy>& layers,
                                     const github_remote& origin) {
  config::policy layer;
  layer.source = "<scope-to-workspace>";  // synthetic, like "<default>"
  for (const config::policy& l : layers)
    for (const auto& [name, spec] : l.credentials) {
      if (spec.type != "github" || layer.credentials.contains(name)) continue;
      bool bound = false;
      for (const auto& h : spec.hosts) bound = bound || h.matches(origin.host);
      if (!bound) continue;
      config::credential_spec narrowed = spec;  // the same binding: only the scope narrows
      config::credential_scope scope;
      scope.repos = std::vector<config::repo_pattern>{origin.repo};
      scope.graphql_read = true;
      narrowed.scope = std::move(scope);
      layer.credentials.emplace(name, std::move(narrowed));
    }
  if (layer.credentials.empty())
    throw std::runtime_error("no github credential is bound to " + origin.host +
                             ", the host of the workspace's origin");
  return layer;
}

}  // namespace broker::sandbox
