#include "wrap/sandbox_mounts.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using broker::wrap::launch_options;
using broker::wrap::pinned_directories;

TEST_CASE("pinned_directories: every directory above a protected path, outermost first",
          "[wrap][mounts]") {
  launch_options o;
  o.overlays.push_back({"/s/login.json", "/home/u/.claude/.credentials.json"});
  o.masks = {"/home/u/.config/broker", "/home/u/.ssh/id_ed25519", "/etc/team-token"};
  o.read_only = {"/home/u/.ssh/config", "/home/u/.config/git", "/home/u/.local/bin/"};
  const auto pinned = pinned_directories(o);
  CHECK(pinned == std::vector<std::string>{"/home", "/etc", "/home/u", "/home/u/.claude",
                                           "/home/u/.config", "/home/u/.ssh", "/home/u/.local"});
}

TEST_CASE("pinned_directories: a directory view's target, not the view", "[wrap][mounts]") {
  launch_options o;
  broker::wrap::directory_view v;
  v.view = "/run/broker/s/view-codex";
  v.target = "/root/.codex";
  o.views.push_back(v);
  CHECK(pinned_directories(o) == std::vector<std::string>{"/root"});
  CHECK(pinned_directories(launch_options{}).empty());
}
