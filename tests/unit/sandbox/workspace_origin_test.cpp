#include "sandbox/workspace_origin.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/temp_dir.hpp"

using broker::sandbox::parse_github_remote;
using broker::sandbox::scope_to_origin_layer;
using broker::sandbox::workspace_origin;
namespace fs = std::filesystem;

namespace {

std::string named(const char* url) {
  auto r = parse_github_remote(url);
  return r ? r->host + " " + r->repo.text() : "-";
}

// A repository as git leaves it, with this config.
void repository(const fs::path& dir, const std::string& config) {
  fs::create_directories(dir / ".git" / "objects");
  fs::create_directories(dir / ".git" / "refs" / "heads");
  std::ofstream(dir / ".git" / "HEAD") << "ref: refs/heads/main\n";
  std::ofstream(dir / ".git" / "config")
      << "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
      << config;
}

}  // namespace

TEST_CASE("scope-to-workspace: remote URL forms", "[wrap][scope]") {
  CHECK(named("https://github.com/Org/Web.git") == "github.com org/web");
  CHECK(named("https://github.com/org/web") == "github.com org/web");
  CHECK(named("https://user:x@GitHub.com:443/org/web.git/") == "github.com org/web");
  CHECK(named("git@github.com:org/web.git") == "github.com org/web");
  CHECK(named("github.com:org/web") == "github.com org/web");
  CHECK(named("ssh://git@github.com:22/org/web.git") == "github.com org/web");
  CHECK(named("git://github.com/org/my.repo_1") == "github.com org/my.repo_1");
  CHECK(named("https://ghe.acme.dev/team/api.git") == "ghe.acme.dev team/api");
  CHECK(named("/srv/git/web.git") == "-");
  CHECK(named("file:///srv/org/web.git") == "-");
  CHECK(named("https://github.com/org") == "-");
  CHECK(named("https://github.com/org/web/extra") == "-");
  CHECK(named("https://github.com/org/../web") == "-");
  CHECK(named("./org/web") == "-");
}

TEST_CASE("a remote URL says whether git reaches it over SSH on port 22", "[wrap][scope][ssh]") {
  const auto ssh = [](const char* url) {
    auto r = parse_github_remote(url);
    return r && r->ssh;
  };
  CHECK(ssh("git@github.com:org/web.git"));
  CHECK(ssh("ssh://git@gitlab.com/org/web.git"));
  CHECK(ssh("ssh://git@github.com:22/org/web.git"));
  CHECK(ssh("git+ssh://git@bitbucket.org/org/web"));
  CHECK_FALSE(ssh("ssh://git@github.com:2222/org/web.git"));
  CHECK_FALSE(ssh("https://github.com/org/web.git"));
  CHECK_FALSE(ssh("git://github.com/org/web.git"));
  CHECK(named("git@github.com:/srv/web.git") == "github.com srv/web");
}

TEST_CASE("scope-to-workspace: the origin is read from the repository", "[wrap][scope]") {
  broker::test::temp_dir t;
  repository(t.path / "w",
             "[remote \"origin\"]\n\turl = git@github.com:Org/Web.git\n"
             "\tfetch = +refs/heads/*:refs/remotes/origin/*\n");
  fs::create_directories(t.path / "w" / "src" / "deep");
  auto origin = workspace_origin(t.path / "w" / "src" / "deep");  // found upward
  CHECK(origin.host == "github.com");
  CHECK(origin.repo.text() == "org/web");

  // url.*.insteadOf is applied, as git applies it.
  repository(t.path / "i",
             "[url \"https://github.com/\"]\n\tinsteadOf = gh:\n"
             "[remote \"origin\"]\n\turl = gh:org/api\n");
  CHECK(workspace_origin(t.path / "i").repo.text() == "org/api");

  // A push URL to another repository would push outside the scope.
  repository(t.path / "p",
             "[remote \"origin\"]\n\turl = https://github.com/org/web\n"
             "\tpushurl = https://github.com/org/other\n");
  CHECK_THROWS_WITH(workspace_origin(t.path / "p"), Catch::Contains("another repository"));

  repository(t.path / "n", "");
  CHECK_THROWS_WITH(workspace_origin(t.path / "n"), Catch::Contains("no remote \"origin\""));
  fs::create_directories(t.path / "plain");
  CHECK_THROWS_WITH(workspace_origin(t.path / "plain"), Catch::Contains("not in a git repository"));
}

TEST_CASE("scope-to-workspace: the layer narrows every github credential bound to the host",
          "[wrap][scope]") {
  std::vector<broker::config::policy> layers;
  layers.push_back(
      broker::config::parse_policy(broker::config::default_policy_text(), "<default>"));
  auto origin = parse_github_remote("https://github.com/org/web.git");
  REQUIRE(origin);
  auto layer = scope_to_origin_layer(layers, *origin);
  CHECK(layer.source == "<scope-to-workspace>");
  CHECK_FALSE(layer.has_egress_rules());
  REQUIRE(layer.credentials.contains("github"));
  REQUIRE(layer.credentials.contains("gh_login"));
  const auto& scope = *layer.credentials.at("github").scope;
  CHECK(scope.repos->at(0).text() == "org/web");
  CHECK(scope.graphql_read);
  CHECK_FALSE(layer.credentials.contains("openai"));

  auto elsewhere = parse_github_remote("https://git.example.org/org/web.git");
  CHECK_THROWS_WITH(scope_to_origin_layer(layers, *elsewhere),
                    Catch::Contains("no github credential is bound to git.example.org"));
}
