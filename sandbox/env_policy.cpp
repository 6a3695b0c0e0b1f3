#include "sandbox/env_policy.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <iterator>
#include <set>

#include "sandbox/path_lists.hpp"

namespace broker::sandbox {

namespace {

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_upper_alnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_word(char c) {
  return is_alnum(c) || c == '_';
}
bool is_token(char c) {
  return is_word(c) || c == '-';
}
bool is_dotted_token(char c) {
  return is_token(c) || c == '.';
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// ---- names ----

constexpr std::string_view secret_fragments[] = {
    "TOKEN",   "SECRET",      "PASSWORD",   "PASSWD",     "PASSPHRASE", "APIKEY",
    "API_KEY", "PRIVATE_KEY", "PRIVATEKEY", "CREDENTIAL", "ACCESS_KEY", "ACCESSKEY"};

// Whole '_'-separated words that mark a secret but are too short to match anywhere.
constexpr std::string_view secret_words[] = {"KEY", "AUTH", "PAT"};

// Contain a fragment above, but are known to hold no secret.
constexpr std::string_view harmless_names[] = {"TOKENIZERS_PARALLELISM"};

// Hold a secret, or point at a file/socket/helper that yields one, without saying so in the name.
constexpr std::string_view secret_names[] = {
    // clang-format off
    "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GHA_CREDS_PATH",
    "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", "CLOUDSDK_CONFIG", "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_CONFIG_DIR",
    "ARM_CLIENT_SECRET", "ARM_CLIENT_CERTIFICATE_PATH", "DOCKER_AUTH_CONFIG", "DOCKER_CONFIG",
    "REGISTRY_AUTH_FILE", "KUBECONFIG", "VAULT_TOKEN", "HF_TOKEN", "NETRC", "GIT_ASKPASS",
    "SSH_ASKPASS", "SUDO_ASKPASS", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "GH_ENTERPRISE_TOKEN",
    "KRB5CCNAME", "BW_SESSION", "MYSQL_PWD", "PGPASSFILE", "NPM_CONFIG_USERCONFIG",
    // clang-format on
};
constexpr std::string_view secret_name_prefixes[] = {"OP_SESSION_"};  // 1Password CLI

template <class List>
bool in_list(const List& list, std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

bool has_secret_word(std::string_view name) {
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = std::min(name.find('_', start), name.size());
    if (in_list(secret_words, name.substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

bool secret_name(std::string_view raw) {
  const std::string name = upper(raw);
  if (in_list(secret_names, name)) return true;
  for (auto prefix : secret_name_prefixes)
    if (name.starts_with(prefix)) return true;
  if (in_list(harmless_names, name)) return false;
  for (auto fragment : secret_fragments)
    if (contains(name, fragment)) return true;
  return has_secret_word(name);
}

// ---- values ----

struct token_prefix {
  std::string_view prefix;
  bool (*body_char)(char);
  std::size_t min_body;  // shorter runs are words that happen to start alike ("sk-learn")
};

// Minimums sit below each issuer's real length so that a truncated copy still counts.
constexpr std::array<token_prefix, 20> token_prefixes = {{
    {"ghp_", is_alnum, 30},       {"gho_", is_alnum, 30},         {"ghu_", is_alnum, 30},
    {"ghs_", is_alnum, 30},       {"ghr_", is_alnum, 30},         {"github_pat_", is_word, 30},
    {"sk-", is_token, 20},        {"xoxa-", is_token, 10},        {"xoxb-", is_token, 10},
    {"xoxp-", is_token, 10},      {"xoxr-", is_token, 10},        {"xoxe-", is_token, 10},
    {"AKIA", is_upper_alnum, 16}, {"ASIA", is_upper_alnum, 16},   {"glpat-", is_token, 20},
    {"npm_", is_alnum, 36},       {"pypi-", is_token, 32},        {"hf_", is_alnum, 30},
    {"AIza", is_token, 35},       {"ya29.", is_dotted_token, 20},
}};

std::size_t run_length(std::string_view text, std::size_t from, bool (*body_char)(char)) {
  std::size_t end = from;
  while (end < text.size() && body_char(text[end])) ++end;
  return end - from;
}

bool token_at(std::string_view value, std::size_t at, const token_prefix& p) {
  if (value.substr(at, p.prefix.size()) != p.prefix) return false;
  return run_length(value, at + p.prefix.size(), p.body_char) >= p.min_body;
}

// header.payload of a JWT: both parts are base64url JSON objects, so both start "eyJ".
bool jwt_at(std::string_view value, std::size_t at) {
  if (value.substr(at, 3) != "eyJ") return false;
  std::size_t header = run_length(value, at, is_token);
  std::size_t dot = at + header;
  return header >= 10 && dot < value.size() && value[dot] == '.' &&
         value.substr(dot + 1, 3) == "eyJ";
}

bool pem_private_key(std::string_view value) {
  for (std::size_t at = value.find("-----BEGIN "); at != std::string_view::npos;
       at = value.find("-----BEGIN ", at + 1)) {
    std::size_t label = at + 11;
    std::string_view rest = value.substr(label, value.find("-----", label) - label);
    if (contains(rest, "PRIVATE KEY")) return true;
  }
  return false;
}

// "scheme://user:password@host": a non-empty password in the authority's userinfo.
bool url_with_password(std::string_view value) {
  for (std::size_t at = value.find("://"); at != std::string_view::npos;
       at = value.find("://", at + 1)) {
    std::size_t start = at + 3;
    std::size_t end = value.find_first_of("/?# \t\r\n", start);
    std::string_view authority = value.substr(start, end == value.npos ? value.npos : end - start);
    std::size_t userinfo_end = authority.rfind('@');
    if (userinfo_end == authority.npos) continue;
    std::size_t colon = authority.substr(0, userinfo_end).find(':');
    if (colon != authority.npos && colon + 1 < userinfo_end) return true;
  }
  return false;
}

bool secret_value(std::string_view value) {
  for (std::size_t at = 0; at < value.size(); ++at) {
    if (at > 0 && is_alnum(value[at - 1])) continue;  // only at a word start
    for (const auto& p : token_prefixes)
      if (token_at(value, at, p)) return true;
    if (jwt_at(value, at)) return true;
  }
  return pem_private_key(value) || url_with_password(value);
}

// ---- planning ----

bool is_proxy_setting(std::string_view name) {
  const std::string u = upper(name);
  return u.ends_with("_PROXY") || u.ends_with("NOPROXY");
}

bool has(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

}  // namespace

bool looks_secret(std::string_view name, std::string_view value) {
  return secret_name(name) || secret_value(value);
}

env_rules merge_env_rules(const std::vector<config::policy>& layers) {
  env_rules rules;
  bool first_pass = true;
  for (const auto& layer : layers) {
    for (const auto& name : layer.env.strip) add_unique(rules.strip, name);
    if (layer.env.pass.empty()) continue;
    if (first_pass) {
      for (const auto& name : layer.env.pass) add_unique(rules.pass, name);
      first_pass = false;
    } else {
      std::erase_if(rules.pass,
                    [&](const std::string& name) { return !has(layer.env.pass, name); });
    }
  }
  return rules;
}

env_plan plan_child_environment(const std::vector<variable>& parent,
                                const std::vector<brokered_var>& dummies,
                                const std::vector<variable>& session_vars, const env_rules& rules) {
  env_plan plan;
  // The session sets several spellings of one variable (HTTPS_PROXY, https_proxy): each is kept,
  // and each replaces a parent variable of any spelling.
  std::set<std::string> session_exact, session_names;  // session_names upper-cased
  std::vector<variable> session;
  for (const auto& var : session_vars) {
    if (!session_exact.insert(var.first).second) continue;
    session_names.insert(upper(var.first));
    session.push_back(var);
  }

  std::set<std::string> dummy_names;
  std::vector<variable> dummy_env;
  for (const auto& d : dummies) {
    if (session_names.contains(upper(d.name)) || !dummy_names.insert(d.name).second) continue;
    dummy_env.emplace_back(d.name, d.value);
    plan.brokered.push_back({d.name, d.credential});
  }

  std::set<std::string> seen;
  for (const auto& [name, value] : parent) {
    if (!seen.insert(name).second) continue;
    if (session_names.contains(upper(name)) || dummy_names.contains(name)) continue;
    bool keep = !is_proxy_setting(name) && !has(rules.strip, name) &&
                (has(rules.pass, name) || !looks_secret(name, value));
    if (keep)
      plan.env.emplace_back(name, value);
    else
      plan.removed.push_back(name);
  }
  plan.env.insert(plan.env.end(), dummy_env.begin(), dummy_env.end());
  plan.env.insert(plan.env.end(), session.begin(), session.end());
  return plan;
}

std::string describe(const std::string& session, const env_plan& plan, const std::string& isolation,
                     const std::vector<std::pair<std::string, std::string>>& files) {
  std::string line = "broker: session " + printable(session) + ": brokered ";
  if (plan.brokered.empty() && files.empty()) line += "none";
  for (std::size_t i = 0; i < plan.brokered.size(); ++i) {
    if (i > 0) line += ", ";
    line += printable(plan.brokered[i].name) + " (" + printable(plan.brokered[i].credential) + ")";
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (i > 0 || !plan.brokered.empty()) line += ", ";
    line += printable(files[i].first) + " (" + printable(files[i].second) + ")";
  }
  line += "; removed ";
  if (plan.removed.empty()) line += "none";
  for (std::size_t i = 0; i < plan.removed.size(); ++i) {
    if (i > 0) line += ", ";
    line += printable(plan.removed[i]);
  }
  return line + "; isolation: " + printable(isolation);
}

}  // namespace broker::sandbox
