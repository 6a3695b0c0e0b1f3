#include "sandbox/saved_files.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/file_text.hpp"
#include "tests/unit/temp_dir.hpp"

using broker::sandbox::changes_back;
using broker::sandbox::restorer;
using broker::sandbox::save_tree;
using broker::sandbox::saved_tree;

namespace {

namespace fs = std::filesystem;
using broker::test::read_all;

}  // namespace

TEST_CASE("saved_files: a tree back as it was, the session's changes set aside", "[wrap][saved]") {
  broker::test::temp_dir t;
  const fs::path d = t.path / "d", kept = t.path / "kept";
  broker::test::write_file(d / "a", "a\n");
  broker::test::write_file(d / "sub/b", "b\n");
  ::chmod((d / "a").c_str(), 0640);
  fs::create_symlink("a", d / "link");
  saved_tree before;
  std::size_t budget = 1 << 20;
  REQUIRE(save_tree(d.string(), before, 1 << 20, budget));
  CHECK(before.entries.size() == 4);  // a, link, sub, sub/b
  // The session: one file changed, one removed with its directory, one made, a mode changed.
  broker::test::write_file(d / "a", "changed\n");
  fs::remove_all(d / "sub");
  broker::test::write_file(d / "new/x", "x\n");
  ::chmod(d.c_str(), 0700);
  const auto changes = changes_back(d.string(), before, 1 << 20);
  std::vector<broker::sandbox::kept_out> out;
  std::vector<std::string> warnings;
  restorer(kept.string(), out, warnings).keep_out(changes, "test");
  CHECK(warnings.empty());
  CHECK(read_all(d / "a") == "a\n");
  CHECK((fs::status(d / "a").permissions() & fs::perms::all) == static_cast<fs::perms>(0640));
  CHECK(read_all(d / "sub/b") == "b\n");
  CHECK(fs::read_symlink(d / "link") == "a");
  CHECK_FALSE(fs::exists(d / "new"));
  CHECK(read_all(kept / (d / "new/x").relative_path()) == "x\n");
  CHECK(read_all(kept / (d / "a").relative_path()) == "changed\n");
  // Each named once: the changed file, the new directory, the removed one (sub/b comes back
  // with it); the directory's own mode is put back quietly.
  std::vector<std::string> named;
  for (const auto& k : out) named.push_back(fs::path(k.path).filename().string());
  std::sort(named.begin(), named.end());
  CHECK(named == std::vector<std::string>{"a", "new", "sub"});
  saved_tree after;
  budget = 1 << 20;
  REQUIRE(save_tree(d.string(), after, 1 << 20, budget));
  CHECK(changes_back(d.string(), before, 1 << 20).empty());
}
