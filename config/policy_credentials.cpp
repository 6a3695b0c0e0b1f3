// "credentials": named secrets, the hosts they are bound to, and where the real value lives.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "config/credential_types.hpp"
#include "config/policy_sections.hpp"
#include "config/units.hpp"

namespace broker::config {
namespace {

bool is_env_name(std::string_view name) {  // POSIX portable: [A-Za-z_][A-Za-z0-9_]*
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool is_credential_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

bool is_header_name(std::string_view name) {  // RFC 9110 token
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

std::string known_types() {
  std::string list;
  for (std::string_view t : credential_types) list += (list.empty() ? "" : ", ") + std::string(t);
  return list;
}

std::vector<host_pattern> parse_hosts(const json_node& node, const std::vector<rule>& allow) {
  std::vector<host_pattern> hosts;
  for (auto& [text, item] : node.string_elements()) {
    auto pattern = host_pattern::parse(text);
    if (!pattern) item.fail("invalid host pattern \"" + text + "\"");
    // docs/architecture.md: a tunnelled host is never intercepted, so a credential bound to it
    // could never be swapped - the child would be sent there with a dummy it cannot use, or worse,
    // someone would "fix" that by handing it the real key. An ssh rule's tunnel is SSH's own: the
    // host's HTTPS credential has nothing to be swapped in it, and is swapped on 443 as before.
    for (const rule& r : allow) {
      if (r.tunnel && !r.ssh && r.host && patterns_overlap(*pattern, *r.host))
        item.fail("\"" + pattern->text() + "\" overlaps " + r.name + " (line " +
                  std::to_string(r.line) + "), which tunnels \"" + r.host->text() +
                  "\"; a credential cannot be bound to a tunnelled host");
    }
    hosts.push_back(std::move(*pattern));
  }
  return hosts;
}

std::string parse_source(const json_node& node) {
  std::string source = node.as_string();
  for (std::string_view scheme : {"env:", "file:", "cmd:"}) {
    if (source.rfind(scheme, 0) != 0) continue;
    std::string_view rest = std::string_view(source).substr(scheme.size());
    if (rest.empty()) node.fail("\"" + std::string(scheme) + "\" needs a value after the colon");
    if (scheme == "env:" && !is_env_name(rest))
      node.fail("\"" + std::string(rest) + "\" is not an environment variable name");
    return source;
  }
  node.fail("expected \"env:NAME\", \"file:PATH\" or \"cmd:COMMAND\"");
}

// A list of non-empty names that only `family` reads ("regions" of aws-sigv4, ...).
std::vector<std::string> parse_names(const json_node& node, const char* key, std::string_view type,
                                     std::string_view family) {
  std::vector<std::string> names;
  auto list = node.find(key);
  if (!list) return names;
  if (type != family)
    list->fail("\"" + std::string(key) + "\" applies only to type \"" + std::string(family) + "\"");
  for (auto& [text, item] : list->string_elements()) {
    if (text.empty()) item.fail("empty name");
    names.push_back(text);
  }
  return names;
}

// A dotted member path in a login file ("tokens.access_token"): non-empty names.
std::string parse_member_path(const json_node& node) {
  std::string path = node.as_string();
  if (path.empty() || path.front() == '.' || path.back() == '.' ||
      path.find("..") != std::string::npos)
    node.fail("expected a member path such as \"tokens.access_token\"");
  return path;
}

// "refresh": the token endpoint, the refresh token's member, and what a token response renews.
login_file_spec::refresh_spec parse_refresh(const json_node& node) {
  node.expect_object("expected an object with \"url\", \"token\" and \"response\"");
  node.reject_unknown_keys({"url", "token", "response", "expires_at_ms"});
  login_file_spec::refresh_spec r;
  auto url = node.find("url");
  if (!url) node.fail("missing \"url\" (the token endpoint)");
  r.url = url->as_string();
  const std::string_view rest =
      std::string_view(r.url).substr(std::min<std::size_t>(8, r.url.size()));
  if (!r.url.starts_with("https://") || rest.empty() || rest.front() == '/' ||
      rest.find('/') == std::string_view::npos)
    url->fail("expected \"https://HOST/PATH\"");
  auto token = node.find("token");
  if (!token) node.fail("missing \"token\" (the refresh token's member in the file)");
  r.token = parse_member_path(*token);
  auto response = node.find("response");
  if (!response) node.fail("missing \"response\" (token response members → file members)");
  for (auto& [member, path] : response->members("expected an object of member paths"))
    r.response.emplace_back(member, parse_member_path(path));
  if (auto expiry = node.find("expires_at_ms")) r.expires_at_ms = parse_member_path(*expiry);
  return r;
}

// "file", "fields" and "refresh": a login file as the credential's source (docs/agents.md).
login_file_spec parse_login_file(const json_node& node, const json_node& file,
                                 std::string_view type) {
  if (type != "github" && type != "bearer" && type != "header")
    file.fail("a login file applies only to types github, bearer and header");
  if (node.find("source")) file.fail("\"file\" and \"source\" are exclusive");
  login_file_spec f;
  f.path = file.as_string();
  if (f.path.empty() || (f.path.front() != '/' && !f.path.starts_with("~/")))
    file.fail("expected an absolute path or one under ~/");
  auto fields = node.find("fields");
  if (!fields) node.fail("a login file needs \"fields\" (the members holding its values)");
  for (auto& [text, item] : fields->string_elements()) f.fields.push_back(parse_member_path(item));
  if (auto refresh = node.find("refresh")) f.refresh = parse_refresh(*refresh);
  return f;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An id that GitHub may write as a number or a string of digits.
std::string parse_id(const json_node& node) {
  const auto& v = node.value();
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  std::string text = node.as_string();
  if (!all_digits(text)) node.fail("expected a number");
  return text;
}

// "app_id", "installation_id", "private_key", "repositories", "permissions", "api_url".
github_app_spec parse_github_app(const json_node& node) {
  github_app_spec app;
  auto required = [&](const char* key, const char* what) {
    auto n = node.find(key);
    if (!n) node.fail("type \"github-app\" needs \"" + std::string(key) + "\" (" + what + ")");
    return *n;
  };
  if (node.find("source") || node.find("file"))
    node.fail("a github-app's source is its \"private_key\" (no \"source\" or \"file\")");
  const json_node app_id = required("app_id", "the App's id or client id");
  if (app_id.value().is_number_unsigned()) {
    app.app_id = parse_id(app_id);
  } else {
    app.app_id = app_id.as_string();
    if (app.app_id.empty() || !std::all_of(app.app_id.begin(), app.app_id.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.';
        }))
      app_id.fail("expected the App's id (digits) or client id (\"Iv1.…\")");
  }
  app.installation_id = parse_id(required("installation_id", "the installation's id"));
  app.private_key = parse_source(required("private_key", "where the App's PEM key is"));
  app.repositories = parse_names(node, "repositories", "github-app", "github-app");
  for (const std::string& r : app.repositories)
    if (r.find('/') != std::string::npos)
      node.find("repositories")->fail("\"" + r + "\": repository names, without the owner");
  if (auto permissions = node.find("permissions")) {
    for (auto& [name, level] : permissions->members("expected an object of permission levels")) {
      std::string l = level.as_string();
      if (l != "read" && l != "write" && l != "admin")
        level.fail("expected \"read\", \"write\" or \"admin\"");
      app.permissions.emplace_back(name, std::move(l));
    }
  }
  if (auto api = node.find("api_url")) {
    app.api_url = api->as_string();
    while (app.api_url.ends_with('/')) app.api_url.pop_back();
    if (!app.api_url.starts_with("https://") || app.api_url.size() <= 8)
      api->fail("expected \"https://HOST[/PATH]\" (GitHub Enterprise Server: .../api/v3)");
  }
  return app;
}

// "access_boundary": Credential Access Boundary rules, each {"availableResource",
// "availablePermissions", optionally "availabilityCondition"}.
std::string parse_access_boundary(const json_node& node) {
  auto rules = node.elements("expected an array of access boundary rules");
  if (rules.empty() || rules.size() > 10)
    node.fail("expected 1 to 10 rules (a Credential Access Boundary's limit)");
  nlohmann::json out = nlohmann::json::array();
  for (const json_node& rule : rules) {
    rule.expect_object("expected {\"availableResource\", \"availablePermissions\"}");
    rule.reject_unknown_keys(
        {"availableResource", "availablePermissions", "availabilityCondition"});
    auto resource = rule.find("availableResource");
    if (!resource)
      rule.fail(
          "missing \"availableResource\" (\"//storage.googleapis.com/projects/_/buckets/B\")");
    const std::string r = resource->as_string();
    if (!r.starts_with("//")) resource->fail("expected a full resource name, \"//SERVICE/...\"");
    auto permissions = rule.find("availablePermissions");
    if (!permissions)
      rule.fail("missing \"availablePermissions\" (\"inRole:roles/storage.objectViewer\")");
    nlohmann::json names = nlohmann::json::array();
    for (auto& [text, item] : permissions->string_elements()) {
      if (!text.starts_with("inRole:")) item.fail("expected \"inRole:ROLE\"");
      names.push_back(text);
    }
    nlohmann::json entry = {{"availableResource", r}, {"availablePermissions", names}};
    if (auto condition = rule.find("availabilityCondition")) {
      condition->expect_object("expected {\"expression\", \"title\", \"description\"}");
      entry["availabilityCondition"] = condition->value();
    }
    out.push_back(std::move(entry));
  }
  return nlohmann::json{{"accessBoundary", {{"accessBoundaryRules", out}}}}.dump();
}

// "assume_role": {"arn", "policy", "duration"}.
assume_role_spec parse_assume_role(const json_node& node) {
  node.expect_object("expected an object with \"arn\", \"policy\" and \"duration\"");
  node.reject_unknown_keys({"arn", "policy", "duration"});
  assume_role_spec r;
  auto arn = node.find("arn");
  if (!arn) node.fail("missing \"arn\" (the role to assume)");
  r.arn = arn->as_string();
  if (!r.arn.starts_with("arn:aws") || r.arn.find(":role/") == std::string::npos)
    arn->fail("expected a role ARN, \"arn:aws:iam::ACCOUNT:role/NAME\"");
  if (auto policy = node.find("policy")) {
    // An object (written inline), or the same as a string of JSON.
    const nlohmann::json& v = policy->value();
    nlohmann::json doc = v;
    if (v.is_string()) doc = nlohmann::json::parse(v.get<std::string>(), nullptr, false);
    if (!doc.is_object()) policy->fail("expected an IAM policy document (a JSON object)");
    r.policy = doc.dump();
    if (r.policy.size() > 2048)
      policy->fail("a session policy is at most 2048 characters (AWS's limit), this one is " +
                   std::to_string(r.policy.size()));
  }
  if (auto duration = node.find("duration")) {
    auto d = parse_duration(duration->as_string());
    if (!d || *d < std::chrono::seconds(900) || *d > std::chrono::hours(12))
      duration->fail("expected a duration from \"15m\" to \"12h\" (AssumeRole's range)");
    r.duration = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  return r;
}

// "mcp_tools": the tool names (globs) a value credential is swapped for; an empty list would
// never swap it, and is refused as a mistake.
std::vector<std::string> parse_mcp_tools(const json_node& node, const credential_spec& c) {
  if (c.type != "github" && c.type != "bearer" && c.type != "header" && c.type != "basic")
    node.fail("\"mcp_tools\" applies to types github, bearer, header and basic");
  if (c.login_file) node.fail("\"mcp_tools\" does not apply with \"file\"");
  auto globs = parse_mcp_globs(node, "tool name");
  if (globs.empty()) node.fail("expected at least one tool name or glob");
  return globs;
}

credential_spec parse_credential(const std::string& name, const json_node& node,
                                 const std::vector<rule>& allow) {
  if (!is_credential_name(name))
    node.fail("credential names use letters, digits, '-', '_' and '.'");
  node.expect_object("expected a credential object");
  node.reject_unknown_keys({"type",
                            "hosts",
                            "env",
                            "source",
                            "header",
                            "prefix",
                            "query",
                            "allow_plaintext",
                            "regions",
                            "services",
                            "scopes",
                            "file",
                            "fields",
                            "refresh",
                            "also_bearer",
                            "programs",
                            "scope",
                            "app_id",
                            "installation_id",
                            "private_key",
                            "repositories",
                            "permissions",
                            "api_url",
                            "assume_role",
                            "access_boundary",
                            "mcp_tools"});

  credential_spec c;
  c.name = name;
  c.line = node.line();

  auto type = node.find("type");
  if (!type) node.fail("missing \"type\" (one of: " + known_types() + ")");
  c.type = type->as_string();
  if (!is_credential_type(c.type))
    type->fail("unknown credential type \"" + c.type + "\" (one of: " + known_types() + ")");

  auto hosts = node.find("hosts");
  if (!hosts) node.fail("missing \"hosts\" (the hosts this credential may be sent to)");
  c.hosts = parse_hosts(*hosts, allow);
  if (auto programs = node.find("programs")) parse_programs(*programs, c.programs, c.program_lines);

  if (auto env = node.find("env")) {
    for (auto& [text, item] : env->string_elements()) {
      if (!is_env_name(text)) item.fail("\"" + text + "\" is not an environment variable name");
      c.env.push_back(text);
    }
  } else {
    c.env = default_credential_env(c.type);
  }

  if (c.type == "github-app") {
    c.github_app = parse_github_app(node);
  } else {
    for (const char* key :
         {"app_id", "installation_id", "private_key", "repositories", "permissions", "api_url"})
      if (auto n = node.find(key))
        n->fail("\"" + std::string(key) + "\" applies only to type \"github-app\"");
  }

  if (auto file = node.find("file")) {
    c.login_file = parse_login_file(node, *file, c.type);
  } else {
    for (const char* key : {"fields", "refresh"})
      if (auto n = node.find(key))
        n->fail("\"" + std::string(key) + "\" applies only with \"file\"");
  }
  if (c.login_file)
    c.source = "file:" + c.login_file->path;
  else if (c.github_app)
    c.source = c.github_app->private_key;
  else if (auto source = node.find("source"))
    c.source = parse_source(*source);
  else
    c.source = default_credential_source(c.type, c.env);
  if (c.source.empty()) node.fail("needs \"source\" or \"env\" (where the real secret comes from)");
  if (c.type == "aws-sigv4" && (c.env.size() < 2 || c.env.size() > 3))
    node.fail(
        "aws-sigv4 \"env\" names the key id, the secret key and optionally the session "
        "token variables (2 or 3 names)");

  auto header = node.find("header");
  auto prefix = node.find("prefix");
  auto also_bearer = node.find("also_bearer");
  if (c.type == "header") {
    if (!header) node.fail("type \"header\" needs \"header\" (the header name)");
  } else {
    // Only the "header" family reads these; elsewhere they would be silently ignored.
    if (header) header->fail("\"header\" applies only to type \"header\"");
    if (prefix) prefix->fail("\"prefix\" applies only to type \"header\"");
    if (also_bearer) also_bearer->fail("\"also_bearer\" applies only to type \"header\"");
  }
  if (also_bearer) c.also_bearer = also_bearer->as_bool();
  if (header) {
    c.header = header->as_string();
    if (!is_header_name(c.header)) header->fail("\"" + c.header + "\" is not a header name");
    for (char& ch : c.header)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch + 32);
  }
  if (prefix) c.prefix = prefix->as_string();

  if (auto query = node.find("query")) {
    for (auto& [text, item] : query->string_elements()) {
      if (text.empty()) item.fail("empty query parameter name");
      c.query.push_back(text);
    }
  }
  if (auto plaintext = node.find("allow_plaintext")) c.allow_plaintext = plaintext->as_bool();
  c.regions = parse_names(node, "regions", c.type, "aws-sigv4");
  c.services = parse_names(node, "services", c.type, "aws-sigv4");
  c.scopes = parse_names(node, "scopes", c.type, "gcp");
  if (auto boundary = node.find("access_boundary")) {
    if (c.type != "gcp") boundary->fail("\"access_boundary\" applies only to type \"gcp\"");
    c.access_boundary = parse_access_boundary(*boundary);
  }
  if (auto role = node.find("assume_role")) {
    if (c.type != "aws-sigv4") role->fail("\"assume_role\" applies only to type \"aws-sigv4\"");
    c.assume_role = parse_assume_role(*role);
  }
  if (auto scope = node.find("scope")) c.scope = parse_scope(*scope, c.type);
  if (auto tools = node.find("mcp_tools")) c.mcp_tools = parse_mcp_tools(*tools, c);
  return c;
}

}  // namespace

bool patterns_overlap(const host_pattern& a, const host_pattern& b) {
  const std::string& x = a.text();
  const std::string& y = b.text();
  if (x == "*" || y == "*") return true;
  bool x_wild = x.front() == '*';
  bool y_wild = y.front() == '*';
  if (!x_wild && !y_wild) return x == y;
  if (x_wild && !y_wild) return a.matches(y);
  if (!x_wild && y_wild) return b.matches(x);
  // Two wildcards share hosts exactly when one suffix contains the other.
  std::string_view xs = std::string_view(x).substr(1), ys = std::string_view(y).substr(1);
  return xs.ends_with(ys) || ys.ends_with(xs);
}

std::map<std::string, credential_spec> parse_credentials(const json_node& section,
                                                         const std::vector<rule>& allow) {
  std::map<std::string, credential_spec> out;
  for (auto& [name, node] : section.members("expected an object of named credentials"))
    out.emplace(name, parse_credential(name, node, allow));
  return out;
}

}  // namespace broker::config
