// "ssh": true rules and the "ssh" section as the policy reads them, and which hosts the policy set
// lets a wrap session's agent sign for; errors name the file, line and key.
#include <catch2/catch.hpp>

#include <string>

#include "config/policy.hpp"
#include "config/policy_set.hpp"
#include "tests/unit/config/policy_test_support.hpp"

using broker::config::parse_policy;
using broker::config::policy_set;
using broker::config::test::error_of;

namespace {

const std::string key_line =
    "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKy1VruJmNg1uNSzYj0TX/8ZBmMt2qkjX8C6hSAwMY7C";

broker::config::destination at(const std::string& host, std::uint16_t port) {
  return {host, std::nullopt, port};
}

}  // namespace

TEST_CASE("ssh rule: a tunnel to port 22 unless it names ports", "[config][policy][ssh]") {
  const auto p = parse_policy(R"({"allow": [
    {"host": "github.com", "ssh": true},
    {"host": "gitlab.example.com", "ports": [2222], "ssh": true},
    {"host": "api.github.com"}]})",
                              "p.json");
  REQUIRE(p.allow.size() == 3);
  CHECK(p.allow[0].ssh);
  CHECK(p.allow[0].tunnel);
  CHECK(p.allow[0].ports == std::vector<std::uint16_t>{22});
  CHECK(p.allow[1].ports == std::vector<std::uint16_t>{2222});
  CHECK_FALSE(p.allow[2].ssh);

  const policy_set set({p});
  const auto v = set.check_connect(at("github.com", 22));
  CHECK(v.allowed);
  CHECK(v.tunnel);
  CHECK(v.ssh);
  CHECK_FALSE(set.check_connect(at("github.com", 443)).allowed);
  const auto web = set.check_connect(at("api.github.com", 443));
  CHECK(web.allowed);
  CHECK_FALSE(web.ssh);
  // Other hosts on port 22 are refused.
  CHECK_FALSE(set.check_connect(at("evil.example", 22)).allowed);

  const auto hosts = set.ssh_destinations();
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[0].host == "github.com");
  CHECK(hosts[0].port == 22);
  CHECK(hosts[1].host == "gitlab.example.com");
  CHECK(hosts[1].port == 2222);
}

TEST_CASE("ssh rule: every enforcing layer decides where keys are used", "[config][policy][ssh]") {
  const auto mine = parse_policy(
      R"({"allow": [{"host": "github.com", "ssh": true}, {"host": "git.corp", "ssh": true}]})",
      "mine.json");
  const auto team = parse_policy(
      R"({"allow": [{"host": "github.com", "ssh": true}, {"host": "*", "ports": [443]}]})",
      "team.json");
  const policy_set set({team, mine});
  const auto hosts = set.ssh_destinations();
  REQUIRE(hosts.size() == 1);
  CHECK(hosts[0].host == "github.com");
  CHECK_FALSE(set.check_connect(at("git.corp", 22)).allowed);
}

TEST_CASE("ssh rule: what it cannot be", "[config][policy][ssh]") {
  auto e = error_of(R"({"allow": [{"host": "*.github.com", "ssh": true}]})");
  CHECK(e.key == "allow[0].ssh");
  CHECK(e.message.find("names one host") != std::string::npos);
  e = error_of(R"({"allow": [{"cidr": "10.0.0.0/8", "ssh": true}]})");
  CHECK(e.key == "allow[0].ssh");
  e = error_of(R"({"allow": [{"host": "github.com", "tunnel": false, "ssh": true}]})");
  CHECK(e.key == "allow[0].tunnel");
  e = error_of(R"({"allow": [{"host": "github.com", "paths": ["/x"], "ssh": true}]})");
  CHECK(e.key == "allow[0].ssh");
  e = error_of(R"({"deny": [{"host": "github.com", "ssh": true}]})");
  CHECK(e.key == "deny[0].ssh");
  e = error_of(R"({"allow": [{"host": "github.com", "ssh": "yes"}]})");
  CHECK(e.thrown);
}

TEST_CASE("ssh section: keys and host keys", "[config][policy][ssh]") {
  const auto p = parse_policy(R"({"ssh": {"keys": ["~/.ssh/id_ed25519_work", "/keys/deploy"],
    "host_keys": [")" + key_line + R"( the comment"]}})",
                              "p.json");
  CHECK(p.ssh.keys == std::vector<std::string>{"~/.ssh/id_ed25519_work", "/keys/deploy"});
  REQUIRE(p.ssh.host_keys.size() == 1);

  auto e = error_of(R"({"ssh": {"keys": ["id_rsa"]}})");
  CHECK(e.key == "ssh.keys[0]");
  CHECK(e.line == 1);
  e = error_of("{\"ssh\": {\n\"host_keys\": [\"github.com ssh-ed25519\"]}}");
  CHECK(e.key == "ssh.host_keys[0]");
  CHECK(e.line == 2);
  // The blob's own type must be the one named.
  e = error_of(
      R"({"ssh": {"host_keys": ["github.com ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIKy1VruJmNg1uNSzYj0TX/8ZBmMt2qkjX8C6hSAwMY7C"]}})");
  CHECK(e.message.find("not base64 of a \"ssh-rsa\" key") != std::string::npos);
  e = error_of(R"({"ssh": {"host_keys": ["@revoked github.com ssh-ed25519 AAAA"]}})");
  CHECK(e.thrown);
  e = error_of(R"({"ssh": {"agent": true}})");
  CHECK(e.key == "ssh.agent");
}

TEST_CASE("ssh rule: beside a credential bound to the same host's HTTPS", "[config][policy][ssh]") {
  const auto p =
      parse_policy(R"({"allow": [{"host": "github.com"}, {"host": "github.com", "ssh": true}],
    "credentials": {"gh": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": ["github.com"]}}})",
                   "p.json");
  const policy_set set({p});
  CHECK(set.check_connect(at("github.com", 22)).ssh);
  const auto https = set.check_connect(at("github.com", 443));
  CHECK(https.allowed);
  CHECK_FALSE(https.tunnel);  // intercepted, the credential swapped there
  // A plain tunnel rule still cannot meet a credential.
  CHECK(error_of(R"({"allow": [{"host": "github.com", "ports": [22], "tunnel": true}],
    "credentials": {"gh": {"type": "github", "env": ["T"], "hosts": ["github.com"]}}})")
            .thrown);
}
