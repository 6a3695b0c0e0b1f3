// Which GitHub repository a request touches, from its host and path (docs/policy.md, "Least
// privilege"): REST (api.github.com, uploads.github.com, and /api/v3 and /api/uploads on a
// GitHub Enterprise Server), git smart HTTP (github.com/OWNER/REPO.git/...), and content
// (raw.githubusercontent.com, codeload.github.com).
#pragma once

#include <string>
#include <string_view>

namespace broker::brokers {

struct github_target {
  enum class kind {
    repository,  // owner/repo (lower-case, without ".git")
    graphql,     // the GraphQL endpoint
    account,     // a read of the account itself: "/", /user, /rate_limit, /meta, /zen...
    other,       // anything else: another org, search, gists, /repositories/ID...
  };
  kind what = kind::other;
  std::string owner, repo;
};

// `path` is normalized (config::normalize_path); `method` as sent.
github_target github_target_of(std::string_view host, std::string_view method,
                               std::string_view path);

}  // namespace broker::brokers
