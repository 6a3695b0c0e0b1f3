#include "wrap/git_scan.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/unit/temp_dir.hpp"

using broker::wrap::git_config_runs_commands;
using broker::wrap::git_leftovers;
namespace fs = std::filesystem;

TEST_CASE("git_config_runs_commands: the keys that run something", "[wrap][git]") {
  CHECK_FALSE(
      git_config_runs_commands("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
                               "[remote \"origin\"]\n\turl = ../o.git\n"
                               "[alias]\n\tst = status\n"));
  CHECK(git_config_runs_commands("[core]\n\tfsmonitor = touch x\n"));
  CHECK(git_config_runs_commands("[Core]\n\tHooksPath = /tmp/h\n"));
  CHECK(git_config_runs_commands("[core] sshCommand = ssh -oProxyCommand=x\n"));
  CHECK(git_config_runs_commands("[filter \"lfs\"]\n\tclean = x\n"));
  CHECK(git_config_runs_commands("[diff \"pdf\"]\n\ttextconv = x\n"));
  CHECK(git_config_runs_commands("[alias]\n\tco = !sh -c x\n"));
  CHECK(git_config_runs_commands("[include]\n\tpath = /tmp/evil\n"));
  CHECK_FALSE(git_config_runs_commands("# [core] fsmonitor = x\n"));
}

TEST_CASE("git_leftovers: hooks and config commands left after a time", "[wrap][git]") {
  broker::test::temp_dir t;
  const fs::path git = t.path / "vendor" / "dep" / ".git";
  fs::create_directories(git / "hooks");
  { std::ofstream(git / "hooks" / "pre-commit.sample") << "#!/bin/sh\n"; }
  { std::ofstream(git / "config") << "[core]\n\tbare = false\n"; }
  timespec since{};
  ::clock_gettime(CLOCK_REALTIME, &since);
  since.tv_sec -= 10;  // everything above counts as left by the session
  bool complete = false;
  CHECK(git_leftovers(t.path.string(), since, {}, complete).empty());  // samples, plain config
  CHECK(complete);
  { std::ofstream(git / "hooks" / "post-checkout") << "#!/bin/sh\n"; }
  { std::ofstream(git / "config", std::ios::app) << "[core]\n\tfsmonitor = x\n"; }
  const auto found = git_leftovers(t.path.string(), since, {}, complete);
  REQUIRE(found.size() == 2);
  CHECK(found[0].path == (git / "hooks" / "post-checkout").string());
  CHECK(found[1].reason == "git configuration");
  since.tv_sec += 3600;  // all of it older than that: nothing the session left
  CHECK(git_leftovers(t.path.string(), since, {}, complete).empty());
}
