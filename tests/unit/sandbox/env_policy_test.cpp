#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "config/policy.hpp"
#include "sandbox/env_policy.hpp"

using broker::sandbox::brokered_var;
using broker::sandbox::describe;
using broker::sandbox::env_plan;
using broker::sandbox::env_rules;
using broker::sandbox::looks_secret;
using broker::sandbox::merge_env_rules;
using broker::sandbox::plan_child_environment;
using broker::session::variable;

namespace {

// Token-shaped test values are assembled at run time so that no literal in the repository looks
// like a leaked credential to a secret scanner.
std::string fake(const std::string& prefix, std::size_t body, const std::string& alphabet = "aB3") {
  std::string out = prefix;
  for (std::size_t i = 0; i < body; ++i) out += alphabet[i % alphabet.size()];
  return out;
}

std::optional<std::string> value_of(const env_plan& plan, const std::string& name) {
  for (const auto& [n, v] : plan.env)
    if (n == name) return v;
  return std::nullopt;
}

const std::vector<variable> session_vars = {{"HTTPS_PROXY", "http://127.0.0.1:9"},
                                            {"https_proxy", "http://127.0.0.1:9"},
                                            {"NO_PROXY", ""},
                                            {"SSL_CERT_FILE", "/run/broker/bundle.pem"},
                                            {"npm_config_cafile", "/run/broker/bundle.pem"}};

}  // namespace

TEST_CASE("secret-looking names", "[wrap][env_policy]") {
  for (const char* name : {"MY_API_KEY",
                           "GITHUB_TOKEN",
                           "DB_PASSWORD",
                           "NPM_TOKEN",
                           "AWS_SECRET_ACCESS_KEY",
                           "PRIVATE_KEY",
                           "GOOGLE_APPLICATION_CREDENTIALS",
                           "CREDENTIALS_FILE",
                           "CLIENT_SECRET",
                           "MYSQL_PASSWD",
                           "OPENAI_APIKEY",
                           "GITHUBTOKEN",
                           "S3_ACCESSKEY",
                           "GPG_PASSPHRASE",
                           "STRIPE_KEY",
                           "GH_PAT",
                           "NPM_CONFIG__AUTH",
                           "BASIC_AUTH",
                           "github_token",
                           "Db_Password"}) {
    INFO(name);
    CHECK(looks_secret(name, "x"));
  }
}

TEST_CASE("known cloud, registry and agent variables", "[wrap][env_policy]") {
  for (const char* name : {"AWS_ACCESS_KEY_ID",
                           "AWS_SESSION_TOKEN",
                           "AWS_SHARED_CREDENTIALS_FILE",
                           "AWS_CONFIG_FILE",
                           "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
                           "AZURE_CLIENT_SECRET",
                           "AZURE_CLIENT_CERTIFICATE_PATH",
                           "ARM_CLIENT_SECRET",
                           "DOCKER_AUTH_CONFIG",
                           "KUBECONFIG",
                           "VAULT_TOKEN",
                           "HF_TOKEN",
                           "NETRC",
                           "GIT_ASKPASS",
                           "SSH_ASKPASS",
                           "GH_ENTERPRISE_TOKEN",
                           "SSH_AUTH_SOCK",
                           "MYSQL_PWD",
                           "OP_SESSION_my_team",
                           "kubeconfig"}) {
    INFO(name);
    CHECK(looks_secret(name, "/some/path"));
  }
}

TEST_CASE("harmless names are not secret-looking", "[wrap][env_policy]") {
  for (const char* name :
       {"PATH", "HOME", "TERM", "LANG", "SHELL", "USER", "PWD", "OLDPWD", "EDITOR",
        "TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT", "XKB_DEFAULT_LAYOUT", "AWS_PROFILE",
        "AWS_REGION", "LD_PRELOAD", "LD_LIBRARY_PATH", "AUTHOR", "GIT_AUTHOR_NAME", "MONKEY"}) {
    INFO(name);
    CHECK_FALSE(looks_secret(name, "/usr/bin:/bin"));
  }
}

TEST_CASE("values with known secret prefixes", "[wrap][env_policy]") {
  const std::vector<std::string> secrets = {
      fake("ghp_", 36),
      fake("gho_", 36),
      fake("ghu_", 36),
      fake("ghs_", 36),
      fake("ghr_", 36),
      fake("github_pat_", 82),
      fake("sk-", 48),
      fake("sk-proj-", 40),
      fake("sk-ant-api03-", 40),
      fake("xoxb-", 30),
      fake("xoxp-", 30),
      fake("xoxe.xoxp-", 30),
      fake("AKIA", 16, "Q7"),
      fake("ASIA", 16, "Z2"),
      fake("glpat-", 20),
      fake("npm_", 36),
      fake("pypi-", 60),
      fake("hf_", 34),
      fake("AIza", 35),
      fake("ya29.", 60),
      fake("eyJ", 20) + "." + fake("eyJ", 30) + "." + fake("", 20),
      "-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n-----END RSA PRIVATE KEY-----\n",
      "-----BEGIN OPENSSH PRIVATE KEY-----",
      "postgres://app:" + fake("", 12) + "@db.internal:5432/app",
      "token " + fake("ghp_", 36),         // at a word start after a space
      "Authorization=" + fake("sk-", 48),  // ... after '='
      "a," + fake("glpat-", 20) + ",b",    // ... inside a list
  };
  for (const auto& value : secrets) {
    INFO(value);
    CHECK(looks_secret("SOME_HARMLESS_NAME", value));
    CHECK(looks_secret("PATH", value));  // a harmless name does not save a secret value
  }
}

TEST_CASE("look-alike values are not secrets", "[wrap][env_policy]") {
  for (const std::string& value : {
           std::string("sk-learn"),
           std::string("task-runner-") + fake("", 40),  // "sk-" not at a word start
           "x" + fake("ghp_", 36),                      // glued to a word
           fake("ghp_", 10),                            // too short for a token
           std::string("/home/u/.cache/hf_cache_directory_for_models"),
           std::string("npm_config_cache_dir"),
           fake("AKIA", 10, "Q7"),
           std::string("-----BEGIN CERTIFICATE-----"),
           std::string("-----BEGIN PUBLIC KEY-----"),
           std::string("ssh://git@github.com:22/o/r.git"),
           std::string("http://[::1]:8080/path"),
           std::string("https://user@example.com/"),
           std::string("/usr/local/bin:/usr/bin:/bin"),
           std::string("xterm-256color"),
       }) {
    INFO(value);
    CHECK_FALSE(looks_secret("SOME_HARMLESS_NAME", value));
  }
}

TEST_CASE("plan removes secrets and keeps the rest in parent order", "[wrap][env_policy]") {
  const std::vector<variable> parent = {
      {"PATH", "/usr/bin:/bin"},
      {"AWS_SECRET_ACCESS_KEY", "real-aws-secret"},
      {"HOME", "/home/u"},
      {"NOTES", fake("ghp_", 36)},
      {"SSH_AUTH_SOCK", "/tmp/agent.1"},
      {"LD_PRELOAD", "/lib/libfoo.so"},
      {"LD_LIBRARY_PATH", "/opt/lib"},
      {"PATH", "/evil"},  // a duplicate: the first one wins
  };
  auto plan = plan_child_environment(parent, {}, {}, {});
  CHECK(plan.env == std::vector<variable>{{"PATH", "/usr/bin:/bin"},
                                          {"HOME", "/home/u"},
                                          {"LD_PRELOAD", "/lib/libfoo.so"},
                                          {"LD_LIBRARY_PATH", "/opt/lib"}});
  CHECK(plan.removed ==
        std::vector<std::string>{"AWS_SECRET_ACCESS_KEY", "NOTES", "SSH_AUTH_SOCK"});
  CHECK(plan.brokered.empty());
}

TEST_CASE("brokered names get their dummies", "[wrap][env_policy]") {
  const std::string dummy = fake("ghp_", 36, "Zz9");
  const std::vector<variable> parent = {{"GITHUB_TOKEN", "real-gh-token"}, {"HOME", "/home/u"}};
  const std::vector<brokered_var> dummies = {{"GITHUB_TOKEN", dummy, "github"},
                                             {"GH_TOKEN", dummy, "github"},
                                             {"GITHUB_TOKEN", "second", "other"}};  // first wins
  env_rules rules;
  rules.strip = {"GITHUB_TOKEN"};  // a brokered name is always its dummy
  auto plan = plan_child_environment(parent, dummies, {}, rules);
  CHECK(value_of(plan, "GITHUB_TOKEN") == dummy);
  CHECK(value_of(plan, "GH_TOKEN") == dummy);  // set even where the parent had none
  CHECK(plan.env.size() == 3);
  CHECK(plan.removed.empty());  // replaced, not removed
  REQUIRE(plan.brokered.size() == 2);
  CHECK(plan.brokered[0].name == "GITHUB_TOKEN");
  CHECK(plan.brokered[0].credential == "github");
  CHECK(plan.brokered[1].name == "GH_TOKEN");
}

TEST_CASE("session variables override everything", "[wrap][env_policy]") {
  const std::vector<variable> parent = {
      {"HTTPS_PROXY", "http://corp:3128"},
      {"Https_Proxy", "http://corp:3128"},
      {"NO_PROXY", "*"},
      {"SSL_CERT_FILE", "/etc/corp.pem"},
      {"NPM_CONFIG_CAFILE", "/etc/x.pem"},
      {"FTP_PROXY", "http://corp:21"},
      {"npm_config_noproxy", "*"},
      {"GIT_SSL_CAINFO", "/etc/git.pem"},
      {"TERM", "xterm"},
  };
  const std::vector<brokered_var> dummies = {{"HTTPS_PROXY", "nope", "weird"}};
  env_rules rules;
  rules.pass = {"FTP_PROXY", "HTTPS_PROXY"};  // pass cannot keep a proxy setting
  auto plan = plan_child_environment(parent, dummies, session_vars, rules);

  CHECK(value_of(plan, "HTTPS_PROXY") == "http://127.0.0.1:9");
  CHECK(value_of(plan, "https_proxy") == "http://127.0.0.1:9");
  CHECK(value_of(plan, "NO_PROXY") == "");
  CHECK(value_of(plan, "SSL_CERT_FILE") == "/run/broker/bundle.pem");
  CHECK(value_of(plan, "npm_config_cafile") == "/run/broker/bundle.pem");
  CHECK_FALSE(value_of(plan, "Https_Proxy"));
  CHECK_FALSE(value_of(plan, "NPM_CONFIG_CAFILE"));
  CHECK_FALSE(value_of(plan, "FTP_PROXY"));
  CHECK_FALSE(value_of(plan, "npm_config_noproxy"));
  CHECK(value_of(plan, "GIT_SSL_CAINFO") == "/etc/git.pem");  // not one the session sets
  CHECK(value_of(plan, "TERM") == "xterm");
  CHECK(plan.brokered.empty());  // the session's HTTPS_PROXY beats a dummy of that name
  CHECK(plan.removed == std::vector<std::string>{"FTP_PROXY", "npm_config_noproxy"});
  // Order: kept parent variables, then session variables as given.
  REQUIRE(plan.env.size() == 2 + session_vars.size());
  CHECK(plan.env[0].first == "GIT_SSL_CAINFO");
  CHECK(plan.env[2] == session_vars[0]);
  CHECK(plan.env.back() == session_vars.back());
}

TEST_CASE("strip removes harmless names, pass keeps secret-looking ones", "[wrap][env_policy]") {
  const std::vector<variable> parent = {{"EDITOR", "vim"},
                                        {"PUBLIC_TOKEN_NAME", "not-secret"},
                                        {"SENTRY_DSN_TOKEN", fake("ghp_", 36)},
                                        {"BOTH", "x"},
                                        {"OTHER_TOKEN", "y"}};
  env_rules rules;
  rules.strip = {"EDITOR", "BOTH"};
  rules.pass = {"PUBLIC_TOKEN_NAME", "SENTRY_DSN_TOKEN", "BOTH"};
  auto plan = plan_child_environment(parent, {}, {}, rules);
  CHECK(value_of(plan, "PUBLIC_TOKEN_NAME") == "not-secret");
  CHECK(value_of(plan, "SENTRY_DSN_TOKEN") == fake("ghp_", 36));  // pass beats a value prefix
  CHECK(plan.removed == std::vector<std::string>{"EDITOR", "BOTH", "OTHER_TOKEN"});  // strip wins
}

TEST_CASE("describe names what was brokered and removed, never values", "[wrap][env_policy]") {
  const std::string real_aws = fake("", 40, "wJ7q");
  const std::string real_gh = fake("ghp_", 36, "Rr7");
  const std::string dummy_gh = fake("ghp_", 36, "Dd1");
  const std::string dummy_oa = fake("sk-", 48, "Oo5");
  const std::vector<variable> parent = {{"GITHUB_TOKEN", real_gh},
                                        {"AWS_SECRET_ACCESS_KEY", real_aws},
                                        {"SSH_AUTH_SOCK", "/tmp/ssh-agent.sock"},
                                        {"HOME", "/home/u"}};
  const std::vector<brokered_var> dummies = {{"GITHUB_TOKEN", dummy_gh, "github"},
                                             {"OPENAI_API_KEY", dummy_oa, "openai"}};
  auto plan = plan_child_environment(parent, dummies, session_vars, {});
  auto line = describe("s-1a2b", plan, "netns");
  CHECK(line ==
        "broker: session s-1a2b: brokered GITHUB_TOKEN (github), OPENAI_API_KEY (openai); "
        "removed AWS_SECRET_ACCESS_KEY, SSH_AUTH_SOCK; isolation: netns");
  for (const auto& value : {real_aws, real_gh, dummy_gh, dummy_oa,
                            std::string("/tmp/ssh-agent.sock"), std::string("127.0.0.1")}) {
    INFO(value);
    CHECK(line.find(value) == std::string::npos);
  }
  CHECK(line.find('\n') == std::string::npos);

  env_plan empty;
  CHECK(describe("s-0", empty, "env") ==
        "broker: session s-0: brokered none; removed none; isolation: env");
  empty.removed = {"EVIL\nNAME"};  // stays one line
  CHECK(describe("s-0", empty, "env").find('\n') == std::string::npos);
}

TEST_CASE("env rules merge so that layers only narrow", "[wrap][env_policy]") {
  broker::config::policy team, user, quiet;
  team.env.pass = {"A_TOKEN", "B_TOKEN", "C_TOKEN"};
  team.env.strip = {"X", "Y"};
  user.env.pass = {"C_TOKEN", "B_TOKEN", "D_TOKEN"};
  user.env.strip = {"Y", "Z"};
  // quiet has no env section: it expresses no opinion on pass.

  auto rules = merge_env_rules({team, quiet, user});
  CHECK(rules.pass == std::vector<std::string>{"B_TOKEN", "C_TOKEN"});
  CHECK(rules.strip == std::vector<std::string>{"X", "Y", "Z"});

  CHECK(merge_env_rules({quiet}).pass.empty());
  CHECK(merge_env_rules({}).strip.empty());
  CHECK(merge_env_rules({team}).pass.size() == 3);

  broker::config::policy disjoint;
  disjoint.env.pass = {"E_TOKEN"};
  CHECK(merge_env_rules({team, disjoint}).pass.empty());
}
