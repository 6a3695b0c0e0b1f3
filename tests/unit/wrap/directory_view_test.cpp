#include "wrap/directory_view.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/temp_dir.hpp"

using broker::wrap::copy_back;
using broker::wrap::copy_budget;
using broker::wrap::fill_view_copies;
using broker::wrap::make_directory_view;
using broker::wrap::view_plan;

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// A real directory as an agent's looks: its login file, a settings file, a subdirectory with a
// file in it, and a link.
fs::path real_directory(const fs::path& root) {
  const fs::path real = root / "real";
  fs::create_directories(real / "sessions");
  write(real / "auth.json", R"({"key": "real"})");
  write(real / "config.toml", "model = \"o3\"\n");
  write(real / "sessions" / "one.jsonl", "{}\n");
  fs::create_symlink("config.toml", real / "current");
  return real;
}

view_plan plan_for(const fs::path& real, const fs::path& root) {
  view_plan plan;
  plan.target = real.string();
  plan.view = (root / "view").string();
  plan.login_name = "auth.json";
  plan.login_copy = R"({"key": "dummy"})";
  return plan;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("make_directory_view: notes the real directory and copies nothing but the login file",
          "[wrap][view]") {
  broker::test::temp_dir t;
  const fs::path real = real_directory(t.path);
  auto budget = copy_budget::starting_now();
  const auto v = make_directory_view(plan_for(real, t.path), budget);
  // The overlay's two directories; the view holds the login file's dummy copy alone.
  CHECK(fs::is_directory(v.work));
  std::vector<std::string> in_view;
  for (const auto& e : fs::directory_iterator(v.view)) in_view.push_back(e.path().filename());
  CHECK(in_view == std::vector<std::string>{"auth.json"});
  CHECK(read_all(fs::path(v.view) / "auth.json") == R"({"key": "dummy"})");
  CHECK(read_all(real / "auth.json") == R"({"key": "real"})");
  // What the real directory held, to measure "changed" against: never the login file.
  REQUIRE(v.files.size() == 1);
  CHECK(v.files[0].name == "config.toml");
  CHECK(v.files[0].size == 13);
  REQUIRE(v.files[0].base);
  CHECK(*v.files[0].base == "model = \"o3\"\n");
  CHECK(v.subdirs == std::vector<std::string>{"sessions"});
  CHECK(v.links == std::vector<std::string>{"current"});
}

TEST_CASE("fill_view_copies: without an overlay the view shows copies, and only changes go back",
          "[wrap][view]") {
  broker::test::temp_dir t;
  const fs::path real = real_directory(t.path);
  auto budget = copy_budget::starting_now();
  const auto v = make_directory_view(plan_for(real, t.path), budget);
  REQUIRE(fill_view_copies(v, v.target, v.view).empty());
  const fs::path view(v.view);
  // The real file's bytes and modification time, so that an untouched copy matches it.
  CHECK(read_all(view / "config.toml") == "model = \"o3\"\n");
  CHECK(fs::last_write_time(view / "config.toml") == fs::last_write_time(real / "config.toml"));
  CHECK(fs::read_symlink(view / "current") == "config.toml");
  CHECK(fs::is_directory(view / "sessions"));  // a place to bind the real one on
  CHECK(fs::is_empty(view / "sessions"));
  CHECK(read_all(view / "auth.json") == R"({"key": "dummy"})");  // the broker's, not replaced

  // The command writes a new file and changes the login file; the settings file it leaves.
  write(view / "history.jsonl", "{\"n\": 1}\n");
  write(view / "auth.json", R"({"key": "rotated-dummy"})");
  auto back_budget = copy_budget::starting_now();
  const auto r = copy_back(v, (t.path / "kept").string(), back_budget);
  CHECK(contains(r.copied, "history.jsonl"));
  CHECK_FALSE(contains(r.copied, "config.toml"));
  CHECK_FALSE(contains(r.copied, "auth.json"));
  CHECK(r.kept.empty());
  CHECK(read_all(real / "history.jsonl") == "{\"n\": 1}\n");
  CHECK(read_all(real / "auth.json") == R"({"key": "real"})");
}

TEST_CASE("copy_back: a name the command removed (an overlay whiteout) stays on the host",
          "[wrap][view]") {
  broker::test::temp_dir t;
  const fs::path real = real_directory(t.path);
  auto budget = copy_budget::starting_now();
  const auto v = make_directory_view(plan_for(real, t.path), budget);
  const fs::path whiteout = fs::path(v.view) / "config.toml";
  // What overlayfs leaves for a removed name; any user may make one (Linux 5.8).
  REQUIRE(::mknod(whiteout.c_str(), S_IFCHR | 0600, makedev(0, 0)) == 0);
  write(fs::path(v.view) / "notes.txt", "kept\n");
  auto back_budget = copy_budget::starting_now();
  const auto r = copy_back(v, (t.path / "kept").string(), back_budget);
  CHECK(r.kept.empty());
  CHECK(contains(r.copied, "notes.txt"));
  CHECK(read_all(real / "config.toml") == "model = \"o3\"\n");
}
