// A credential's "scope" (docs/policy.md, "Least privilege"): where on its bound hosts its dummy
// may be swapped. Each key present narrows; a request must be inside every one. The brokers
// judge requests against it (brokers/scope.hpp); this is only what the policy says.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/path_pattern.hpp"

namespace broker::config {

// One "allow" entry: a request matches when its method is one of `methods` (empty = any) and
// its path matches one of `paths` (empty = any). At least one of the two is given.
struct scope_rule {
  std::vector<std::string> methods;  // upper-case
  std::vector<path_pattern> paths;
  int line = 0;
};

// "org/web" or "org/*" (github): compared case-insensitively, as GitHub names are.
struct repo_pattern {
  std::string owner;  // lower-case, never "*"
  std::string repo;   // lower-case, or "*" for every repository of the owner
  std::string text() const { return owner + "/" + repo; }
};

// One "s3" entry (aws-sigv4): objects of `bucket` whose key starts with `prefix` ("" = all).
struct s3_grant {
  std::string bucket;
  std::string prefix;
};

struct credential_scope {
  int line = 0;
  std::optional<std::vector<scope_rule>> allow;    // any family
  std::optional<std::vector<repo_pattern>> repos;  // github
  bool graphql_read = false;                       // github: "graphql": "read"
  std::optional<std::vector<s3_grant>> s3;         // aws-sigv4
  // aws-sigv4: "service:Action" names (IAM's spelling, compared case-insensitively); a trailing
  // '*' matches any run ("s3:Get*").
  std::optional<std::vector<std::string>> actions;
};

}  // namespace broker::config
