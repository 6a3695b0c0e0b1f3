#include "sandbox/git_config.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/file_text.hpp"
#include "tests/unit/temp_dir.hpp"

using broker::sandbox::git_data_entry;
using broker::sandbox::git_entry;
using broker::sandbox::read_git_config;

namespace {

namespace fs = std::filesystem;
using broker::test::read_all;

bool has_key(const std::vector<git_entry>& entries, const std::string& key) {
  return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.key == key; });
}

}  // namespace

TEST_CASE("read_git_config: what git reads, tricks and all", "[wrap][git]") {
  broker::test::temp_dir t;
  const auto file = t.path / "config";
  // A continuation line into a fake section, a quoted section, a value-less key: a line parser
  // would see no fsmonitor here; git does.
  broker::test::write_file(file,
                           "[core]\n\trepositoryformatversion = 0\n\tbare\n"
                           "[remote \"origin\"]\n\turl = https://example.com/a.git\n"
                           "[x]\n\ty = a\\\n[core] fsmonitor = curl evil\n"
                           "[CORE]\n\tHooksPath = /tmp/h\n");
  const auto entries = read_git_config(file.string());
  REQUIRE(entries);
  CHECK(has_key(*entries, "core.hookspath"));
  CHECK(has_key(*entries, "remote.origin.url"));
  const auto bare = std::find_if(entries->begin(), entries->end(),
                                 [](const auto& e) { return e.key == "core.bare"; });
  REQUIRE(bare != entries->end());
  CHECK_FALSE(bare->value);
  // Not a configuration git accepts.
  broker::test::write_file(file, "[core\n");
  CHECK_FALSE(read_git_config(file.string()));
  CHECK_FALSE(read_git_config((t.path / "missing").string()));
}

TEST_CASE("git_data_entry: where history comes from and goes is data; commands are not",
          "[wrap][git]") {
  const std::vector<std::string> workspaces{"/w"};
  for (const char* key :
       {"core.repositoryformatversion", "core.bare", "remote.origin.url", "remote.up.stream.fetch",
        "branch.Main.merge", "user.email", "submodule.lib.url", "extensions.objectformat"})
    CHECK(git_data_entry({key, "x"}, "/w/.git", workspaces));
  for (const char* key :
       {"core.fsmonitor", "core.hookspath", "core.sshcommand", "core.pager", "core.editor",
        "alias.st", "filter.lfs.process", "diff.x.textconv", "credential.helper", "include.path",
        "includeif.gitdir:/x.path", "url.https://evil/.insteadof", "http.proxy",
        "submodule.lib.update", "remote.origin.uploadpack", "pager.log", "diff.external",
        "remote.url", "core"})
    CHECK_FALSE(git_data_entry({key, "x"}, "/w/.git", workspaces));
  // A submodule's worktree in the workspace; anything else is not.
  CHECK(git_data_entry({"core.worktree", "../../../lib"}, "/w/.git/modules/lib", workspaces));
  CHECK_FALSE(git_data_entry({"core.worktree", "/home/u"}, "/w/.git", workspaces));
  CHECK_FALSE(git_data_entry({"core.worktree", std::nullopt}, "/w/.git", workspaces));
}

TEST_CASE("write_git_config and git_tracked", "[wrap][git]") {
  broker::test::temp_dir t;
  const auto file = t.path / "new-config";
  const std::vector<git_entry> entries{{"core.bare", "false"},
                                       {"remote.origin.url", "https://x/y z.git"},
                                       {"branch.main.merge", "refs/heads/main"}};
  REQUIRE(broker::sandbox::write_git_config(file.string(), entries));
  CHECK(read_git_config(file.string()) == entries);
  CHECK_FALSE(broker::sandbox::write_git_config(file.string(), entries));  // never over a file

  const std::string repo = (t.path / "repo").string();
  REQUIRE(std::system(("git init -q " + repo + " && cd " + repo +
                       " && echo a > tracked && git add tracked && echo b > other")
                          .c_str()) == 0);
  // The repository's own fsmonitor never runs while the broker asks.
  broker::test::write_file(
      fs::path(repo) / ".git/config",
      "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch " + t.path.string() + "/ran\n");
  CHECK(broker::sandbox::git_tracked(repo, {"tracked", "other", "missing"}) ==
        std::vector<std::string>{"tracked"});
  CHECK_FALSE(fs::exists(t.path / "ran"));
}
