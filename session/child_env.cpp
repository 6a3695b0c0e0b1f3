#include "session/child_env.hpp"

namespace broker::session {

std::vector<variable> child_environment(const std::string& proxy_url,
                                        const std::string& trust_bundle,
                                        const std::vector<variable>& dummies) {
  std::vector<variable> out;
  // curl, git, python, node, npm and pip between them read all of these spellings.
  for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                           "all_proxy", "npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY"})
    out.emplace_back(name, proxy_url);
  out.emplace_back("NO_PROXY", "");
  out.emplace_back("no_proxy", "");
  out.emplace_back("NODE_USE_ENV_PROXY", "1");
  if (!trust_bundle.empty()) {
    for (const char* name :
         {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
          "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE", "PIP_CERT", "CARGO_HTTP_CAINFO", "DENO_CERT",
          "npm_config_cafile", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE"})
      out.emplace_back(name, trust_bundle);
  }
  out.insert(out.end(), dummies.begin(), dummies.end());
  return out;
}

std::string render_env_lines(const std::vector<variable>& vars) {
  std::string out;
  for (const auto& [name, value] : vars) out.append(name).append("=").append(value).append("\n");
  return out;
}

}  // namespace broker::session
