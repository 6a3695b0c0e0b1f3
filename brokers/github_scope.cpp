// GitHub's URL spaces, as far as a scope's "repos" needs them (brokers/github_scope.hpp).
#include "brokers/github_scope.hpp"

#include <array>
#include <vector>

#include "base/text.hpp"

namespace broker::brokers {
namespace {

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    if (path.front() == '/') path.remove_prefix(1);
    const auto slash = path.find('/');
    out.push_back(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  return out;
}

github_target repository(std::string_view owner, std::string_view repo) {
  github_target t;
  t.what = github_target::kind::repository;
  t.owner = base::lower(owner);
  t.repo = base::lower(repo);
  return t;
}

github_target of_kind(github_target::kind k) {
  github_target t;
  t.what = k;
  return t;
}

// REST: /repos/OWNER/REPO[/...], the GraphQL endpoint, and reads of the account itself.
github_target rest(std::string_view method, std::string_view path) {
  if (path == "/graphql") return of_kind(github_target::kind::graphql);
  const auto segs = segments(path);
  if (segs.size() >= 3 && segs[0] == "repos" && !segs[1].empty() && !segs[2].empty())
    return repository(segs[1], segs[2]);
  static constexpr std::array<std::string_view, 8> account{
      "/", "/user", "/rate_limit", "/meta", "/zen", "/octocat", "/versions", "/emojis"};
  const bool read = method == "GET" || method == "HEAD";
  for (std::string_view a : account)
    if (read && (path == a || (a == "/" && path.empty())))
      return of_kind(github_target::kind::account);
  return of_kind(github_target::kind::other);
}

// Git smart HTTP and content: /OWNER/REPO[.git][/...].
github_target by_path(std::string_view path) {
  const auto segs = segments(path);
  if (segs.size() < 2 || segs[0].empty() || segs[1].empty())
    return of_kind(github_target::kind::other);
  std::string_view repo = segs[1];
  if (repo.size() > 4 && base::lower(repo.substr(repo.size() - 4)) == ".git") repo.remove_suffix(4);
  return repository(segs[0], repo);
}

}  // namespace

github_target github_target_of(std::string_view host, std::string_view method,
                               std::string_view path) {
  if (host == "api.github.com" || host == "uploads.github.com") return rest(method, path);
  if (host == "github.com" || host == "www.github.com" || host == "raw.githubusercontent.com" ||
      host == "codeload.github.com")
    return by_path(path);
  // A GitHub Enterprise Server: the API under /api/v3, uploads under /api/uploads, GraphQL at
  // /api/graphql; git and content at the root.
  for (std::string_view root : {std::string_view("/api/v3"), std::string_view("/api/uploads")})
    if (path == root || (path.starts_with(root) && path[root.size()] == '/'))
      return rest(method, path.substr(root.size()));
  if (path == "/api/graphql") return of_kind(github_target::kind::graphql);
  if (path.starts_with("/api/")) return of_kind(github_target::kind::other);
  return by_path(path);
}

}  // namespace broker::brokers
