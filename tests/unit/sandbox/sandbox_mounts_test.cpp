#include "sandbox/sandbox_mounts.hpp"
#include "sandbox/sandbox_layers.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using broker::sandbox::launch_options;
using broker::sandbox::pinned_directories;

TEST_CASE("pinned_directories: every directory above a protected path, outermost first",
          "[wrap][mounts]") {
  launch_options o;
  o.seeds.push_back({"/s/login.json", "/home/u/.claude/.credentials.json", true});
  o.seeds.push_back({"", "/home/u/.gone/x", false});  // in a layer only: no bind to pin
  o.masks = {"/home/u/.config/broker", "/home/u/.ssh/id_ed25519", "/etc/team-token"};
  o.read_only = {"/home/u/.ssh/config", "/home/u/.config/git", "/home/u/.local/bin/"};
  const auto pinned = pinned_directories(o);
  CHECK(pinned == std::vector<std::string>{"/home", "/etc", "/home/u", "/home/u/.claude",
                                           "/home/u/.config", "/home/u/.ssh", "/home/u/.local"});
}

TEST_CASE("parse_mountinfo: mount points unescaped, read-only ones known", "[wrap][mounts]") {
  const auto mounts = broker::sandbox::parse_mountinfo(
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "30 22 0:5 / /mnt/my\\040disk ro,nosuid - vfat /dev/sdb1 ro\n"
      "31 22 0:6 / /srv rw - tmpfs tmpfs rw\n"
      "cut short\n");
  REQUIRE(mounts.size() == 3);
  CHECK(mounts[0].path == "/");
  CHECK_FALSE(mounts[0].read_only);
  CHECK(mounts[1].path == "/mnt/my disk");
  CHECK(mounts[1].read_only);
  CHECK(mounts[2].path == "/srv");
  CHECK(pinned_directories(launch_options{}).empty());
}
