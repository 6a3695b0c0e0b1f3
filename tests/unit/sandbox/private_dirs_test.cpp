#include "sandbox/private_dirs.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/temp_dir.hpp"

using broker::sandbox::find_command;
using broker::sandbox::private_view;
using broker::sandbox::view_step;

namespace {

namespace fs = std::filesystem;

// "empty PATH" / "bind PATH" per step, the temp dir written as "T", for readable expectations.
std::vector<std::string> shown(const std::vector<view_step>& steps, const fs::path& root) {
  std::vector<std::string> out;
  const std::string t = fs::canonical(root).string();
  for (const auto& s : steps) {
    std::string p = s.path.starts_with(t) ? "T" + s.path.substr(t.size()) : s.path;
    const char* kind[] = {"empty ", "bind ", "layer ", "through "};
    out.push_back(kind[s.what] + p);
  }
  return out;
}

view_step empty(const fs::path& p, unsigned mode = 01777) {
  return {view_step::empty, p.string(), mode};
}

}  // namespace

TEST_CASE("private_view: directories emptied, kept paths under them bound back, parents first",
          "[wrap][private]") {
  broker::test::temp_dir t;
  const auto& d = t.path;
  for (const char* sub : {"tmp/work/run/broker/s1", "run/user/7", "home", "elsewhere"})
    fs::create_directories(d / sub);
  std::ofstream(d / "tmp/work/run/broker/s1/ca-bundle.pem") << "x";
  fs::create_directory_symlink(d / "run", d / "var-run");

  const auto steps = private_view(
      {empty(d / "tmp"), empty(d / "run", 0755), empty(d / "var-run", 0755),
       empty(d / "tmp/work/run", 0700), empty(d / "missing")},
      {(d / "tmp/work").string(), (d / "tmp/work/sub/../run/broker/s1/ca-bundle.pem").string(),
       (d / "tmp/work/run/broker").string() + "/../broker/s1/ca-bundle.pem",
       (d / "elsewhere").string(), (d / "tmp/work/run/broker/s1").string(), (d / "home").string(),
       (d / "no-such").string(), ""});
  // /var-run is /run; the missing directory and the path under no private one need no step;
  // the working directory is bound back, its runtime dir emptied again, and of that only the
  // kept session directory comes back (the bundle is visible through it: no step of its own).
  CHECK(shown(steps, d) == std::vector<std::string>{"empty T/run", "empty T/tmp", "bind T/tmp/work",
                                                    "empty T/tmp/work/run",
                                                    "bind T/tmp/work/run/broker/s1"});
  CHECK(steps[0].mode == 0755);
  CHECK(steps[3].mode == 0700);
}

TEST_CASE("private_view: a kept path that is a private directory itself stays the host's",
          "[wrap][private]") {
  // Bound back over its own tmpfs, the bind would carry that tmpfs along (it is mounted on the
  // very directory bound): the directory is left alone instead, a deeper private one still made.
  broker::test::temp_dir t;
  fs::create_directories(t.path / "tmp" / "run");
  const auto steps = private_view({empty(t.path / "tmp"), empty(t.path / "tmp" / "run")},
                                  {(t.path / "tmp").string()});
  CHECK(shown(steps, t.path) == std::vector<std::string>{"empty T/tmp/run"});
}

TEST_CASE("private_view: a kept link is kept at its target", "[wrap][private]") {
  broker::test::temp_dir t;
  fs::create_directories(t.path / "tmp/real");
  fs::create_directory_symlink(t.path / "tmp/real", t.path / "tmp/link");
  const auto steps = private_view({empty(t.path / "tmp")}, {(t.path / "tmp/link").string()});
  CHECK(shown(steps, t.path) == std::vector<std::string>{"empty T/tmp", "bind T/tmp/real"});
}

TEST_CASE("private_view: a home layered, a workspace bound through it, parents first",
          "[wrap][private]") {
  broker::test::temp_dir t;
  for (const char* sub : {"tmp/x/home/src/p", "tmp/x/home/.claude/projects", "home/u/w", "opt"})
    fs::create_directories(t.path / sub);
  const auto d = [&](const char* sub) { return (t.path / sub).string(); };
  // The home in /tmp with the working directory above it: /tmp private, the working directory
  // bound through, the home layered over it, a workspace in the home bound through again, the
  // agent's data too; a kept path in the layer is bound (read-only) over it, a nested layer or
  // through place needs no step of its own.
  auto steps = private_view(
      {empty(t.path / "tmp")}, {d("tmp/x/home/src/p"), d("home/u")},
      {d("tmp/x/home"), d("tmp/x/home/.claude")},
      {d("tmp/x"), d("tmp/x/home/src/p"), d("tmp/x/home/.claude/projects"), d("tmp/x/home/src/p")});
  CHECK(shown(steps, t.path) == std::vector<std::string>{"empty T/tmp", "through T/tmp/x",
                                                         "layer T/tmp/x/home",
                                                         "through T/tmp/x/home/.claude/projects",
                                                         "through T/tmp/x/home/src/p"});
  // A layer outside any private directory; a workspace inside it.
  steps = private_view({}, {}, {d("home/u")}, {d("home/u/w"), d("opt")});
  CHECK(shown(steps, t.path) ==
        std::vector<std::string>{"layer T/home/u", "through T/home/u/w", "through T/opt"});
}

TEST_CASE("find_command: as execvpe finds it", "[wrap][private]") {
  broker::test::temp_dir t;
  fs::create_directories(t.path / "a");
  fs::create_directories(t.path / "b/tool");  // a directory is no command
  for (const char* f : {"a/tool", "a/plain", "b/other"}) std::ofstream(t.path / f) << "#!/bin/sh\n";
  ::chmod((t.path / "a/tool").c_str(), 0755);
  ::chmod((t.path / "b/other").c_str(), 0755);
  const std::string path = (t.path / "b").string() + "::" + (t.path / "a").string();
  CHECK(find_command("tool", path, "/") == (t.path / "a/tool").string());
  CHECK(find_command("other", path, "/") == (t.path / "b/other").string());
  CHECK(find_command("plain", path, "/").empty());  // not executable
  CHECK(find_command("tool", "a", t.path.string()) == (t.path / "a/tool").string());
  CHECK(find_command("./x/../a/tool", "", t.path.string()) == (t.path / "a/tool").string());
  CHECK(find_command("/bin/sh", path, "/") == "/bin/sh");
  CHECK(find_command("", path, "/").empty());
}
