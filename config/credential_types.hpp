// The credential families a policy may name (docs/policy.md-5). This is the one list: the policy
// parser accepts exactly these, and brokers/ implements one family per name.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace broker::config {

inline constexpr std::array<std::string_view, 8> credential_types{
    "github", "bearer", "header", "basic", "aws-sigv4", "gcp", "azure", "github-app"};

inline bool is_credential_type(std::string_view type) {
  return std::find(credential_types.begin(), credential_types.end(), type) !=
         credential_types.end();
}

// Variables a family reads when its credential names none. The cloud families have well-known
// ones (docs/policy.md's example binds aws-sigv4 without "env"); every other family must say.
// aws-sigv4: key id, secret, session token. gcp: the key file's path (the child's names a
// session file). azure: the variable the child finds its (dummy) access token in.
inline std::vector<std::string> default_credential_env(std::string_view type) {
  if (type == "aws-sigv4")
    return {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"};
  if (type == "gcp") return {"GOOGLE_APPLICATION_CREDENTIALS"};
  if (type == "azure") return {"AZURE_ACCESS_TOKEN"};
  if (type == "github-app") return {"GITHUB_TOKEN", "GH_TOKEN"};
  return {};
}

// Where a credential without "source" gets its real value: the Azure CLI for azure, else the
// first of its variables in the broker's own environment. (github-app has "private_key".)
inline std::string default_credential_source(std::string_view type,
                                             const std::vector<std::string>& env) {
  if (type == "azure") return "cmd:az account get-access-token --output json";
  return env.empty() ? std::string() : "env:" + env.front();
}

}  // namespace broker::config
