// A request against a credential's scope (brokers/scope.hpp): each key present must let it
// through; the first that does not is the refusal's key.
#include "brokers/scope.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "brokers/github_scope.hpp"
#include "brokers/graphql.hpp"
#include "config/path_pattern.hpp"

namespace broker::brokers {
namespace {

// The forms servers may read the path in (as policy rules are matched): ";parameters" kept and
// stripped. Empty when the target does not normalize.
std::vector<std::string> path_forms(std::string_view target) {
  std::vector<std::string> forms;
  if (auto kept = config::normalize_path(target)) {
    auto stripped = config::normalize_path(target, config::path_params::strip);
    forms.push_back(std::move(*kept));
    if (stripped && *stripped != forms.front()) forms.push_back(std::move(*stripped));
  }
  return forms;
}

bool rule_matches(const config::scope_rule& r, std::string_view method,
                  const std::vector<std::string>& forms) {
  if (!r.methods.empty() &&
      std::find(r.methods.begin(), r.methods.end(), method) == r.methods.end())
    return false;
  if (r.paths.empty()) return true;
  return std::all_of(forms.begin(), forms.end(), [&](const std::string& form) {
    return std::any_of(r.paths.begin(), r.paths.end(),
                       [&](const config::path_pattern& p) { return p.matches(form); });
  });
}

bool repo_listed(const std::vector<config::repo_pattern>& repos, const github_target& t) {
  return std::any_of(repos.begin(), repos.end(), [&](const config::repo_pattern& p) {
    return p.owner == t.owner && (p.repo == "*" || p.repo == t.repo);
  });
}

std::string listed(const std::vector<config::repo_pattern>& repos) {
  std::string out;
  for (const auto& r : repos) out += (out.empty() ? "" : ", ") + r.text();
  return out;
}

// "repos" and "graphql" for one form of the path.
std::optional<scope_verdict> judge_github(const config::credential_scope& scope,
                                          std::string_view host, std::string_view method,
                                          std::string_view path) {
  const github_target t = github_target_of(host, method, path);
  using kind = github_target::kind;
  if (t.what == kind::graphql && scope.graphql_read) {
    if (method != "POST")
      return scope_refusal(
          "graphql", "only a POST of a JSON GraphQL request is judged, not " + std::string(method));
    return scope_verdict{{}, {}, true};
  }
  if (!scope.repos) return std::nullopt;
  switch (t.what) {
    case kind::repository:
      if (repo_listed(*scope.repos, t)) return std::nullopt;
      return scope_refusal("repos", "repository " + t.owner + "/" + t.repo + " is not among " +
                                        listed(*scope.repos));
    case kind::account:
      return std::nullopt;
    case kind::graphql:
      return scope_refusal("repos",
                           "GraphQL can name any repository: the scope lets GraphQL through only "
                           "with \"graphql\": \"read\"");
    case kind::other:
      break;
  }
  return scope_refusal("repos", std::string(method) + " " + std::string(path) + " on " +
                                    std::string(host) + " is not a request about " +
                                    listed(*scope.repos));
}

}  // namespace

scope_verdict judge_scope(const config::credential_scope& scope, std::string_view type,
                          std::string_view host, std::string_view method, std::string_view target) {
  (void)type;  // the keys a type may carry were checked when the policy was read
  const bool reads_paths = scope.allow || scope.repos || scope.graphql_read;
  if (!reads_paths) return {};
  const std::string_view first_key = scope.allow ? "allow" : scope.repos ? "repos" : "graphql";
  if (auto why = config::ambiguous_path(target)) return scope_refusal(std::string(first_key), *why);
  const std::vector<std::string> forms = path_forms(target);
  if (forms.empty())
    return scope_refusal(std::string(first_key),
                         "the request target is not a path the scope can judge");

  if (scope.allow &&
      !std::any_of(scope.allow->begin(), scope.allow->end(),
                   [&](const config::scope_rule& r) { return rule_matches(r, method, forms); }))
    return scope_refusal("allow", std::string(method) + " " + forms.front() +
                                      " matches no entry of the scope's \"allow\"");

  scope_verdict inside;
  if (scope.repos || scope.graphql_read) {
    for (const std::string& form : forms) {
      auto v = judge_github(scope, host, method, form);
      if (!v) continue;
      if (v->refused()) return *v;
      inside.graphql_body = true;
    }
  }
  return inside;
}

scope_verdict judge_graphql_scope(std::string_view body) {
  std::string why = graphql_body_not_read_only(body);
  if (why.empty()) return {};
  return scope_refusal("graphql", "only GraphQL queries may use this credential: " + why);
}

}  // namespace broker::brokers
