#include "sandbox/git_dirs.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/temp_dir.hpp"

using broker::sandbox::protected_git_paths;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A git directory as `git init` leaves it (what protected_git_paths looks at).
void git_dir(const fs::path& d, bool with_hooks = true) {
  fs::create_directories(d / "objects");
  fs::create_directories(d / "refs");
  if (with_hooks) fs::create_directories(d / "hooks");
  write(d / "HEAD", "ref: refs/heads/main\n");
  write(d / "config", "[core]\n");
}

bool has(const std::vector<std::string>& list, const fs::path& p) {
  return std::find(list.begin(), list.end(), p.string()) != list.end();
}

}  // namespace

TEST_CASE("protected_git_paths: the repository above the working directory", "[wrap][git]") {
  broker::test::temp_dir t;
  const fs::path repo = t.path / "repo";
  git_dir(repo / ".git", false);
  fs::create_directories(repo / "src" / "deep");
  const auto paths = protected_git_paths((repo / "src" / "deep").string());
  CHECK(paths.size() == 3);
  CHECK(has(paths, repo / ".git" / "hooks"));  // made, as git init would
  CHECK(fs::is_directory(repo / ".git" / "hooks"));
  CHECK(has(paths, repo / ".git" / "info"));
  CHECK(has(paths, repo / ".git" / "config"));
  CHECK(protected_git_paths(t.path.string()).empty());  // no repository above
}

TEST_CASE("protected_git_paths: submodules' git directories, nested", "[wrap][git]") {
  broker::test::temp_dir t;
  const fs::path git = t.path / "repo" / ".git";
  git_dir(git);
  git_dir(git / "modules" / "libs" / "a");
  git_dir(git / "modules" / "libs" / "a" / "modules" / "b");
  const auto paths = protected_git_paths((t.path / "repo").string());
  CHECK(has(paths, git / "modules" / "libs" / "a" / "hooks"));
  CHECK(has(paths, git / "modules" / "libs" / "a" / "config"));
  CHECK(has(paths, git / "modules" / "libs" / "a" / "modules" / "b" / "config"));
  CHECK_FALSE(has(paths, git / "modules" / "libs" / "hooks"));
}

TEST_CASE("protected_git_paths: a linked worktree's gitfile and its common directory",
          "[wrap][git]") {
  broker::test::temp_dir t;
  const fs::path common = t.path / "main" / ".git";
  git_dir(common);
  const fs::path per_worktree = common / "worktrees" / "feature";
  write(per_worktree / "commondir", "../..\n");
  write(per_worktree / "config.worktree", "[core]\n");
  write(t.path / "feature" / ".git", "gitdir: " + per_worktree.string() + "\n");
  const auto paths = protected_git_paths((t.path / "feature").string());
  CHECK(has(paths, t.path / "feature" / ".git"));
  CHECK(has(paths, per_worktree / "config.worktree"));
  CHECK(has(paths, common / "hooks"));
  CHECK(has(paths, common / "config"));
}
