// `wrap --scope-to-workspace` (docs/policy.md, "Least privilege"): the GitHub repository the
// workspace's `origin` remote names, and the layer that scopes every github credential to it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/policy.hpp"

namespace broker::sandbox {

struct github_remote {
  std::string host;  // lower-case
  config::repo_pattern repo;
  bool ssh = false;  // ssh://, git+ssh:// or scp-like, on port 22
};

// A remote URL's host and OWNER/REPO: https://HOST/OWNER/REPO[.git], ssh://[USER@]HOST[:PORT]/
// OWNER/REPO[.git], git://..., and scp-like [USER@]HOST:OWNER/REPO[.git]. nullopt for any other
// shape (a path, a file:// URL, more or fewer path segments).
std::optional<github_remote> parse_github_remote(std::string_view url);

// The `origin` of the git repository holding `dir` (found upward as git does), read with libgit2
// (url.*.insteadOf applied; nothing in the repository runs). Throws std::runtime_error saying
// why there is none.
github_remote workspace_origin(const std::filesystem::path& dir);

// A layer that narrows every github credential of `layers` bound to the remote's host to its
// repository, with GraphQL as queries only; source "<scope-to-workspace>". Throws
// std::runtime_error when no github credential is bound to that host.
config::policy scope_to_origin_layer(const std::vector<config::policy>& layers,
                                     const github_remote& origin);

}  // namespace broker::sandbox
