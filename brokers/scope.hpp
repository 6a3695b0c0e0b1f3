// A request judged against a credential's "scope" (config/credential_scope.hpp, docs/policy.md
// "Least privilege"): the generic "allow" rules here, and the keys of the families that know
// their APIs: GitHub's "repos" and "graphql" (brokers/github_scope.hpp). AWS's "s3" and
// "actions" are judged on the verified signed request (brokers/aws_scope.hpp).
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "config/credential_scope.hpp"

namespace broker::brokers {

struct scope_verdict {
  std::string key;  // the scope key that refuses ("allow", "repos", "graphql"...); "" = inside
  std::string why;  // a sentence for the refusal; never a value
  // Inside by its head, but the body decides (a GraphQL request under "graphql": "read").
  bool graphql_body = false;

  bool refused() const { return !key.empty(); }
};

inline scope_verdict scope_refusal(std::string key, std::string why) {
  return {std::move(key), std::move(why), false};
}

// The head of a request on a bound host: its method and its target as sent (origin form). A
// target whose path servers may read differently (config::ambiguous_path) or that does not
// normalize is outside every scope that names paths or repositories.
scope_verdict judge_scope(const config::credential_scope& scope, std::string_view type,
                          std::string_view host, std::string_view method, std::string_view target);

// The body of a request judge_scope() sent to its body: "graphql": "read".
scope_verdict judge_graphql_scope(std::string_view body);

}  // namespace broker::brokers
