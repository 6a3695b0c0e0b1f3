#include "brokers/credential_set.hpp"

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string>

#include "brokers/dummy_key.hpp"
#include "brokers/secret_source.hpp"
#include "tests/unit/temp_dir.hpp"

namespace base = broker::base;

using broker::brokers::credential_set;
using broker::brokers::request_broker;
using broker::brokers::source_error;
using broker::config::parse_policy;
using broker::test::temp_dir;

namespace {

// Fake tokens, set in this process's environment for the test's duration.
const std::string github_real = "ghp_REALreal9876543210realREALreal98765";
const std::string acme_real = "acme-REALreal9876543210";

struct env_var {
  std::string name;
  env_var(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~env_var() { ::unsetenv(name.c_str()); }
};

const request_broker* find(const credential_set& set, std::string_view name) {
  for (std::size_t i = 0; i < set.size(); ++i)
    if (set[i].name() == name) return &set[i];
  return nullptr;
}

std::string_view real_of(const request_broker& b) {
  return b.values().reals.at(0).find;
}
std::string dummy_of(const request_broker& b) {
  return std::string(b.values().dummies.at(0));
}

template <class List, class Item>
bool contains(const List& list, const Item& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string github_policy(const std::string& hosts, const std::string& type = "github") {
  return R"({ "version": 1, "credentials": { "github": { "type": ")" + type +
         R"(", "env": ["BROKER_TEST_GH_TOKEN"], "hosts": )" + hosts + " } } }";
}

}  // namespace

TEST_CASE("load reads env and file sources and skips what it cannot broker",
          "[brokers][credential_set]") {
  temp_dir tmp;
  const auto token_file = tmp.path / "acme-token";
  std::ofstream(token_file) << acme_real << "\n";
  env_var gh("BROKER_TEST_GH_TOKEN", github_real);
  ::unsetenv("BROKER_TEST_MISSING");
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");

  const std::string text = R"({
    "version": 1,
    "credentials": {
      "github": { "type": "github", "env": ["BROKER_TEST_GH_TOKEN", "BROKER_TEST_GH2"],
                  "hosts": ["github.com", "api.github.com"] },
      "acme": { "type": "bearer", "source": "file:)" +
                           token_file.string() + R"(",
                "env": ["BROKER_TEST_ACME"], "hosts": ["api.acme.dev"] },
      "aws": { "type": "aws-sigv4", "hosts": ["*.amazonaws.com"] },
      "absent": { "type": "bearer", "env": ["BROKER_TEST_MISSING"], "hosts": ["x.example"] }
    }
  })";
  std::vector<std::string> skipped;
  credential_set set = credential_set::load({parse_policy(text, "p.json")}, &skipped);

  REQUIRE(set.size() == 2);
  const request_broker* github = find(set, "github");
  const request_broker* acme = find(set, "acme");
  REQUIRE(github);
  REQUIRE(acme);
  CHECK(real_of(*github) == github_real);
  CHECK(real_of(*acme) == acme_real);
  const std::string github_dummy = dummy_of(*github), acme_dummy = dummy_of(*acme);
  CHECK(github_dummy.size() == github_real.size());
  CHECK(github_dummy.starts_with("ghp_"));
  CHECK(github_dummy != github_real);
  CHECK(acme_dummy != acme_real);

  CHECK(skipped.size() == 2);
  CHECK(contains(skipped, std::string("aws: no value in env:AWS_ACCESS_KEY_ID")));
  CHECK(contains(skipped, std::string("absent: no value in env:BROKER_TEST_MISSING")));

  auto env = set.dummy_environment();
  CHECK(env.size() == 3);
  CHECK(contains(env, std::pair<std::string, std::string>("BROKER_TEST_GH_TOKEN", github_dummy)));
  CHECK(contains(env, std::pair<std::string, std::string>("BROKER_TEST_GH2", github_dummy)));
  CHECK(contains(env, std::pair<std::string, std::string>("BROKER_TEST_ACME", acme_dummy)));

  // Responses: each real value becomes its dummy.
  const auto& patterns = set.response_patterns();
  REQUIRE(patterns.size() == 2);
  for (const auto& p : patterns) {
    const request_broker* c = p.find == github_real ? github : acme;
    CHECK(p.find == real_of(*c));
    CHECK(p.replacement == dummy_of(*c));
  }
}

TEST_CASE("load: bindings, and a second layer narrows them", "[brokers][credential_set]") {
  env_var gh("BROKER_TEST_GH_TOKEN", github_real);
  auto one = parse_policy(github_policy(R"(["github.com", "api.github.com", "*.example.com"])"),
                          "team.json");
  auto two = parse_policy(github_policy(R"(["api.github.com", "a.example.com"])"), "user.json");

  credential_set wide = credential_set::load({one});
  REQUIRE(wide.size() == 1);
  CHECK(wide[0].bound("github.com"));
  CHECK(wide[0].bound("api.github.com"));
  CHECK(wide[0].bound("a.example.com"));
  CHECK_FALSE(wide[0].bound("example.com"));
  CHECK_FALSE(wide[0].bound("gist.github.com"));

  credential_set narrow = credential_set::load({one, two});
  REQUIRE(narrow.size() == 1);
  CHECK(narrow[0].bound("api.github.com"));
  CHECK(narrow[0].bound("a.example.com"));
  CHECK_FALSE(narrow[0].bound("github.com"));
  CHECK_FALSE(narrow[0].bound("b.example.com"));

  // A layer that does not name the credential does not narrow it.
  auto unrelated = parse_policy(R"({ "version": 1, "allow": [ { "host": "x.example" } ] })", "x");
  credential_set same = credential_set::load({one, unrelated});
  REQUIRE(same.size() == 1);
  CHECK(same[0].bound("github.com"));
}

TEST_CASE("load: the same name with another type in a later layer is an error",
          "[brokers][credential_set]") {
  env_var gh("BROKER_TEST_GH_TOKEN", github_real);
  auto one = parse_policy(github_policy(R"(["api.github.com"])"), "team.json");
  auto two = parse_policy(github_policy(R"(["api.github.com"])", "bearer"), "user.json");
  CHECK_THROWS_AS(credential_set::load({one, two}), std::invalid_argument);
}

TEST_CASE("load: a failing source throws, a too-short value is skipped",
          "[brokers][credential_set]") {
  auto failing = parse_policy(R"({ "version": 1, "credentials": { "c": { "type": "bearer",
      "source": "cmd:exit 4", "env": ["C_TOKEN"], "hosts": ["api.c.dev"] } } })",
                              "p.json");
  CHECK_THROWS_AS(credential_set::load({failing}), source_error);

  env_var gh("BROKER_TEST_GH_TOKEN", "abc");
  std::vector<std::string> skipped;
  auto set =
      credential_set::load({parse_policy(github_policy(R"(["api.github.com"])"), "p")}, &skipped);
  CHECK(set.empty());
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].starts_with("github: "));
  CHECK(skipped[0].find("abc") == std::string::npos);
}

TEST_CASE("a credential set keeps its patterns valid when moved", "[brokers][credential_set]") {
  env_var gh("BROKER_TEST_GH_TOKEN", github_real);
  credential_set a =
      credential_set::load({parse_policy(github_policy(R"(["api.github.com"])"), "p")});
  const std::string dummy = dummy_of(a[0]);
  credential_set b = std::move(a);
  REQUIRE(b.size() == 1);
  CHECK(b.response_patterns()[0].find == github_real);
  CHECK(b.response_patterns()[0].replacement == dummy);
}

TEST_CASE("load: an aws-sigv4 credential becomes its key id, secret and session token",
          "[brokers][credential_set]") {
  const std::string key_id = "AKIAREALREAL12345678";
  const std::string secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiREALREALKEY0";
  const std::string token = "IQoJb3JpZ2luX2VjEREALREALsessiontoken0123456789==";
  env_var k("BROKER_TEST_AKID", key_id);
  env_var s("BROKER_TEST_SECRET", secret_key);
  env_var t("BROKER_TEST_TOKEN", token);
  const std::string text = R"({ "version": 1, "credentials": { "aws": { "type": "aws-sigv4",
      "env": ["BROKER_TEST_AKID", "BROKER_TEST_SECRET", "BROKER_TEST_TOKEN"],
      "hosts": ["*.amazonaws.com"] } } })";
  credential_set set = credential_set::load({parse_policy(text, "p.json")});
  REQUIRE(set.size() == 1);
  CHECK(set.names() == std::vector<std::string>{"aws"});

  // Each part has its own dummy, shaped like its real value, in its own variable.
  auto env = set.dummy_environment();
  REQUIRE(env.size() == 3);
  const std::vector<std::pair<std::string, const std::string*>> parts{
      {"BROKER_TEST_AKID", &key_id},
      {"BROKER_TEST_SECRET", &secret_key},
      {"BROKER_TEST_TOKEN", &token}};
  for (const auto& [name, real] : parts) {
    auto it = std::find_if(env.begin(), env.end(), [&](const auto& e) { return e.first == name; });
    REQUIRE(it != env.end());
    CHECK(it->second.size() == real->size());
    CHECK(it->second != *real);
  }
  CHECK(std::find_if(env.begin(), env.end(), [](const auto& e) {
          return e.first == "BROKER_TEST_AKID" && e.second.starts_with("AKIA");
        }) != env.end());

  // Every real part is scrubbed from responses back to its dummy.
  const auto patterns = set.response_patterns();
  for (const auto& [name, real] : parts)
    CHECK(std::find_if(patterns.begin(), patterns.end(),
                       [&](const auto& p) { return p.find == *real; }) != patterns.end());
}

TEST_CASE("load: an aws-sigv4 credential without a session token leaves its variable unset",
          "[brokers][credential_set]") {
  env_var k("BROKER_TEST_AKID", "AKIAREALREAL12345678");
  env_var s("BROKER_TEST_SECRET", "wJalrXUtnFEMI/K7MDENG+bPxRfiREALREALKEY0");
  ::unsetenv("BROKER_TEST_TOKEN");
  const std::string text = R"({ "version": 1, "credentials": { "aws": { "type": "aws-sigv4",
      "env": ["BROKER_TEST_AKID", "BROKER_TEST_SECRET", "BROKER_TEST_TOKEN"],
      "hosts": ["*.amazonaws.com"] } } })";
  credential_set set = credential_set::load({parse_policy(text, "p.json")});
  CHECK(set.size() == 1);
  CHECK(set[0].values().reals.size() == 2);
  auto env = set.dummy_environment();
  CHECK(env.size() == 2);
  CHECK(std::none_of(env.begin(), env.end(),
                     [](const auto& e) { return e.first == "BROKER_TEST_TOKEN"; }));
}

TEST_CASE(
    "load with the user's stable dummies: the same dummies in every session, new ones for "
    "a rotated value",
    "[brokers][credential_set][dummy_key]") {
  const std::string text = R"({ "version": 1, "credentials": {
      "github": { "type": "github", "env": ["BROKER_TEST_GH_TOKEN"], "hosts": ["api.github.com"] },
      "aws": { "type": "aws-sigv4", "env": ["BROKER_TEST_AKID", "BROKER_TEST_SECRET"],
               "hosts": ["*.amazonaws.com"] } } })";
  const auto stable = std::make_shared<const broker::brokers::stable_dummies>(
      broker::base::secret(std::string(32, 'u')));
  const auto other_user = std::make_shared<const broker::brokers::stable_dummies>(
      broker::base::secret(std::string(32, 'o')));
  const auto session = [&](const std::string& github, const auto& key) {
    // (Each load wipes nothing here: env sources are forgotten by the CLI, not by load.)
    env_var gh("BROKER_TEST_GH_TOKEN", github);
    env_var k("BROKER_TEST_AKID", "AKIAREALREAL12345678");
    env_var s("BROKER_TEST_SECRET", "wJalrXUtnFEMI/K7MDENG+bPxRfiREALREALKEY0");
    return credential_set::load({parse_policy(text, "p.json")}, nullptr, {}, false, key)
        .dummy_environment();
  };
  const auto first = session(github_real, stable);
  REQUIRE(first.size() == 3);
  CHECK(session(github_real, stable) == first);
  // Random without the key: a new dummy every time.
  const auto random = [&] {
    env_var gh("BROKER_TEST_GH_TOKEN", github_real);
    return credential_set::load({parse_policy(github_policy(R"(["api.github.com"])"), "p")})
        .dummy_environment();
  };
  CHECK(random() != random());
  // A rotated GitHub token: its dummy changes, AWS's do not.
  std::string rotated = github_real;
  rotated[10] = rotated[10] == 'x' ? 'y' : 'x';
  const auto after = session(rotated, stable);
  for (std::size_t i = 0; i < first.size(); ++i) {
    CAPTURE(first[i].first);
    CHECK((first[i].second == after[i].second) == (first[i].first != "BROKER_TEST_GH_TOKEN"));
  }
  // Another user's key: other dummies for the same values.
  const auto theirs = session(github_real, other_user);
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(first[i].second != theirs[i].second);
}
