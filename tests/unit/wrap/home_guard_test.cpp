#include "wrap/home_guard.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/temp_dir.hpp"

using broker::wrap::home_guard;
using broker::wrap::persistence_paths;
namespace fs = std::filesystem;

TEST_CASE("home_guard: protected paths and what lies within them are kept out", "[wrap][guard]") {
  broker::test::temp_dir t;
  const std::string home = (t.path / "home").string();
  fs::create_directories(home);
  const home_guard g(persistence_paths({}, home), home, "/usr/bin:/bin");
  CHECK(g.kept_reason(home + "/.bash_profile", false) == "a shell startup file");
  CHECK(g.kept_reason(home + "/.config/git/hooks/x", false) == "git configuration");
  CHECK(g.kept_reason(home + "/.gradle/init.d/a.gradle", false) ==
        "a package manager's init scripts");
  CHECK(g.kept_reason(home + "/.config/gitx", false).empty());  // a sibling, not within
  CHECK(g.kept_reason(home + "/notes.txt", true).empty());
}

TEST_CASE("home_guard: a new executable on the user's PATH that shadows another", "[wrap][guard]") {
  broker::test::temp_dir t;
  const std::string home = (t.path / "home").string();
  fs::create_directories(home + "/.local/bin");
  fs::create_directories(t.path / "sys");
  { std::ofstream(t.path / "sys" / "tool") << "#!/bin/sh\n"; }
  ::chmod((t.path / "sys" / "tool").c_str(), 0755);
  const home_guard g({}, home, home + "/.local/bin:" + (t.path / "sys").string());
  CHECK(g.is_path_directory(home + "/.local/bin"));
  CHECK(g.is_path_directory(home + "/bin"));  // watched even when not on PATH yet
  CHECK(g.kept_reason(home + "/.local/bin/tool", true) ==
        "shadows " + (t.path / "sys" / "tool").string());
  CHECK(g.kept_reason(home + "/.local/bin/tool", false).empty());  // not executable
  CHECK(g.kept_reason(home + "/.local/bin/mine", true).empty());
}

TEST_CASE("home_guard: views where a protected path does not exist yet", "[wrap][guard]") {
  broker::test::temp_dir t;
  const std::string home = (t.path / "home").string();
  fs::create_directories(home + "/.config/git");
  fs::create_directories(home + "/.ssh");
  fs::create_directories(home + "/.local/bin");
  const home_guard g(persistence_paths({}, home), home, "");
  std::vector<std::string> warnings;
  const auto dirs = g.view_directories((t.path / "work").string(), warnings);
  // The home (for its startup files), then .config (pip, fish...), .ssh (config), .local/bin.
  REQUIRE(dirs.size() == 4);
  CHECK(dirs[0] == home);
  CHECK(std::find(dirs.begin(), dirs.end(), home + "/.ssh") != dirs.end());
  CHECK(std::find(dirs.begin(), dirs.end(), home + "/.config") != dirs.end());
  CHECK(std::find(dirs.begin(), dirs.end(), home + "/.local/bin") != dirs.end());
  CHECK(warnings.empty());
  // Run from the home itself: not a view, and said so.
  const auto from_home = g.view_directories(home, warnings);
  CHECK(std::find(from_home.begin(), from_home.end(), home) == from_home.end());
  CHECK(warnings.size() == 1);
}

TEST_CASE("home_guard: an agent's own programs are discarded, its stored key kept for broker",
          "[wrap][guard]") {
  broker::test::temp_dir t;
  const std::string home = (t.path / "home").string();
  fs::create_directories(home);
  const home_guard g(persistence_paths({}, home), home, "");
  // Codex's daemon: kept out and removed, not set aside.
  const std::string daemon = home + "/.codex/packages/app-server-daemon/current/bin/codex";
  CHECK_FALSE(g.kept_reason(daemon, true).empty());
  CHECK(g.discarded(daemon));
  CHECK(g.discarded(home + "/.codex/app-server-daemon/daemon.pid"));
  CHECK_FALSE(g.discarded(home + "/.bashrc"));
  CHECK_FALSE(g.discarded(home + "/.codex/config.toml"));
  // The agents' key stores: kept out, to broker's own place for them.
  for (const char* store : {"/.codex/auth.json", "/.gemini/gemini-credentials.json"}) {
    CAPTURE(store);
    CHECK(g.kept_reason(home + store, false).find("stored key") != std::string::npos);
    CHECK(g.agent_store(home + store) == home + "/.config/broker/agent-files" + store);
    CHECK_FALSE(g.discarded(home + store));
  }
  CHECK(g.agent_store(home + "/.codex/config.toml").empty());
  CHECK(g.agent_stores().size() == 2);
}
