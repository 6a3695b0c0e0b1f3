// A credential's "scope" (docs/policy.md, "Least privilege"): each key checked for the families
// that read it, so that no key is silently ignored.
#include <algorithm>

#include "config/policy_sections.hpp"

namespace broker::config {
namespace {

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

std::string lower(std::string text) {
  for (char& c : text)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return text;
}

// GitHub's own rules: an owner is letters, digits and single '-' not at either end (at most 39);
// a repository is letters, digits, '-', '_' and '.', never "." or "..".
bool is_github_owner(std::string_view o) {
  if (o.empty() || o.size() > 39 || o.front() == '-' || o.back() == '-') return false;
  return std::all_of(o.begin(), o.end(), [](char c) { return is_lower_alnum(c) || c == '-'; });
}

bool is_github_repo(std::string_view r) {
  if (r.empty() || r.size() > 100 || r == "." || r == "..") return false;
  return std::all_of(r.begin(), r.end(),
                     [](char c) { return is_lower_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::vector<scope_rule> parse_scope_allow(const json_node& node) {
  std::vector<scope_rule> rules;
  auto items = node.elements("expected an array of {\"methods\", \"paths\"} objects");
  if (items.empty())
    node.fail("an empty \"allow\" would refuse every request; name what the credential may do");
  for (const json_node& item : items) {
    item.expect_object("expected an object with \"methods\" and/or \"paths\"");
    item.reject_unknown_keys({"methods", "paths"});
    scope_rule r;
    r.line = item.line();
    if (auto methods = item.find("methods")) r.methods = parse_methods(*methods);
    if (auto paths = item.find("paths")) r.paths = parse_path_patterns(*paths);
    if (r.methods.empty() && r.paths.empty())
      item.fail("needs \"methods\" or \"paths\" (an entry with neither would allow everything)");
    rules.push_back(std::move(r));
  }
  return rules;
}

std::vector<repo_pattern> parse_repos(const json_node& node) {
  std::vector<repo_pattern> repos;
  for (auto& [text, item] : node.string_elements()) {
    const std::string name = lower(text);
    const auto slash = name.find('/');
    repo_pattern p;
    if (slash != std::string::npos) {
      p.owner = name.substr(0, slash);
      p.repo = name.substr(slash + 1);
    }
    if (slash == std::string::npos || !is_github_owner(p.owner) ||
        (p.repo != "*" && !is_github_repo(p.repo)))
      item.fail(
          "expected \"OWNER/REPO\" or \"OWNER/*\" (GitHub names: letters, digits, '-'; "
          "a repository also '_' and '.')");
    repos.push_back(std::move(p));
  }
  return repos;
}

bool is_bucket_name(std::string_view b) {  // S3's rules for new buckets, and legacy upper-case
  return b.size() >= 3 && b.size() <= 255 && std::all_of(b.begin(), b.end(), [](char c) {
           return is_lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' || c == '_';
         });
}

std::vector<s3_grant> parse_s3(const json_node& node) {
  std::vector<s3_grant> grants;
  auto items = node.elements("expected an array of {\"bucket\", \"prefix\"} objects");
  if (items.empty()) node.fail("an empty \"s3\" would refuse every S3 request");
  for (const json_node& item : items) {
    item.expect_object("expected an object with \"bucket\" and optionally \"prefix\"");
    item.reject_unknown_keys({"bucket", "prefix"});
    auto bucket = item.find("bucket");
    if (!bucket) item.fail("missing \"bucket\"");
    s3_grant g;
    g.bucket = bucket->as_string();
    if (!is_bucket_name(g.bucket)) bucket->fail("\"" + g.bucket + "\" is not an S3 bucket name");
    if (auto prefix = item.find("prefix")) g.prefix = prefix->as_string();
    grants.push_back(std::move(g));
  }
  return grants;
}

std::vector<std::string> parse_actions(const json_node& node) {
  std::vector<std::string> actions;
  for (auto& [text, item] : node.string_elements()) {
    const auto colon = text.find(':');
    const std::string_view service = std::string_view(text).substr(0, std::min(colon, text.size()));
    const std::string_view action =
        colon == std::string::npos ? std::string_view() : std::string_view(text).substr(colon + 1);
    const bool ok_service =
        !service.empty() && std::all_of(service.begin(), service.end(),
                                        [](char c) { return is_lower_alnum(c) || c == '-'; });
    const bool ok_action = !action.empty() && std::all_of(action.begin(), action.end(), [](char c) {
      return is_lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '*';
    });
    const auto star = action.find('*');
    if (!ok_service || !ok_action || (star != std::string_view::npos && star + 1 != action.size()))
      item.fail("expected \"service:Action\" as IAM spells it (\"s3:GetObject\", \"s3:Get*\")");
    actions.push_back(lower(text));
  }
  return actions;
}

// `key` of `node` is read only by the families in `families`.
void only_for(const json_node& node, std::string_view key, std::string_view type,
              std::initializer_list<std::string_view> families) {
  if (std::find(families.begin(), families.end(), type) != families.end()) return;
  std::string names;
  for (std::string_view f : families) names += (names.empty() ? "" : ", ") + std::string(f);
  node.fail("scope \"" + std::string(key) + "\" applies only to type " + names);
}

}  // namespace

credential_scope parse_scope(const json_node& node, std::string_view type) {
  node.expect_object(
      "expected an object with \"allow\", \"repos\", \"graphql\", \"s3\" or "
      "\"actions\"");
  node.reject_unknown_keys({"allow", "repos", "graphql", "s3", "actions"});
  credential_scope s;
  s.line = node.line();
  if (auto allow = node.find("allow")) s.allow = parse_scope_allow(*allow);
  if (auto repos = node.find("repos")) {
    only_for(*repos, "repos", type, {"github", "github-app"});
    s.repos = parse_repos(*repos);
  }
  if (auto graphql = node.find("graphql")) {
    only_for(*graphql, "graphql", type, {"github", "github-app"});
    if (graphql->as_string() != "read")
      graphql->fail(
          "expected \"read\" (only GraphQL queries; mutations and subscriptions are "
          "refused)");
    s.graphql_read = true;
  }
  if (auto s3 = node.find("s3")) {
    only_for(*s3, "s3", type, {"aws-sigv4"});
    s.s3 = parse_s3(*s3);
  }
  if (auto actions = node.find("actions")) {
    only_for(*actions, "actions", type, {"aws-sigv4"});
    s.actions = parse_actions(*actions);
  }
  if (!s.allow && !s.repos && !s.graphql_read && !s.s3 && !s.actions)
    node.fail(
        "an empty scope narrows nothing; name \"allow\", \"repos\", \"graphql\", \"s3\" or "
        "\"actions\"");
  return s;
}

}  // namespace broker::config
