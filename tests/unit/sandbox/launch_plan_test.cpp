#include "sandbox/launch_plan.hpp"

#include <catch2/catch.hpp>

#include <string>

using broker::sandbox::decode_launch_plan;
using broker::sandbox::encode_launch_plan;
using broker::sandbox::isolation;
using broker::sandbox::launch_error;
using broker::sandbox::launch_options;
using broker::sandbox::view_step;

namespace {

launch_options full_options() {
  launch_options o;
  o.argv = {"codex", "exec", "say \"hi\"\n", ""};
  o.envp = {"HOME=/home/u", "PATH=/usr/bin:/bin", std::string("ODD=a\0b", 7)};
  o.mode = isolation::netns;
  o.proxy_port = 3128;
  o.private_view = {{view_step::empty, "/tmp", 01777},
                    {view_step::bind, "/tmp/work", 0},
                    {view_step::layer, "/home/u", 0},
                    {view_step::through, "/home/u/src/p", 0}};
  o.seeds = {{"/run/s/gh-hosts.yml", "/home/u/.config/gh/hosts.yml", true},
             {"", "/home/u/.aws", false}};
  o.layer_bytes = 4ull << 30;
  o.masks = {"/home/u/.aws/credentials"};
  o.read_only = {"/home/u/.bashrc", "/home/u/.profile"};
  o.scratch = {"/home/u/.cache/x"};
  o.capture = true;
  o.capture_port = 3129;
  o.etc_files = {{"/run/s/resolv.conf", "/etc/resolv.conf"}};
  o.grace = std::chrono::milliseconds(1500);
  return o;
}

}  // namespace

TEST_CASE("launch plan: what init needs arrives as the broker prepared it", "[wrap][plan]") {
  const launch_options sent = full_options();
  const launch_options got = decode_launch_plan(encode_launch_plan(sent));
  CHECK(got.argv == sent.argv);
  CHECK(got.envp == sent.envp);
  CHECK(got.envp[2].size() == 7);  // bytes, not C strings
  CHECK(got.mode == isolation::netns);
  CHECK(got.proxy_port == 3128);
  REQUIRE(got.private_view.size() == 4);
  CHECK(got.private_view[0].what == view_step::empty);
  CHECK(got.private_view[0].mode == 01777);
  CHECK(got.private_view[1].what == view_step::bind);
  CHECK(got.private_view[1].path == "/tmp/work");
  CHECK(got.private_view[2].what == view_step::layer);
  CHECK(got.private_view[3].what == view_step::through);
  CHECK(got.private_view[3].path == "/home/u/src/p");
  REQUIRE(got.seeds.size() == 2);
  CHECK(got.seeds[0].source == "/run/s/gh-hosts.yml");
  CHECK(got.seeds[0].target == "/home/u/.config/gh/hosts.yml");
  CHECK(got.seeds[0].bind_otherwise);
  CHECK(got.seeds[1].source.empty());
  CHECK_FALSE(got.seeds[1].bind_otherwise);
  CHECK(got.layer_bytes == 4ull << 30);
  CHECK(got.masks == sent.masks);
  CHECK(got.read_only == sent.read_only);
  CHECK(got.scratch == sent.scratch);
  CHECK(got.capture);
  CHECK(got.capture_port == 3129);
  CHECK(got.etc_files == sent.etc_files);
  CHECK(got.grace == std::chrono::milliseconds(1500));
}

TEST_CASE("launch plan: bytes that are not a whole plan are refused, never read past",
          "[wrap][plan]") {
  const std::string plan = encode_launch_plan(full_options());
  // Every cut of it, and one byte more.
  for (std::size_t size = 0; size < plan.size(); ++size)
    CHECK_THROWS_AS(decode_launch_plan(std::string_view(plan).substr(0, size)), launch_error);
  CHECK_THROWS_AS(decode_launch_plan(plan + "x"), launch_error);
  // A list claiming more entries than there are bytes.
  std::string huge = plan;
  const std::uint64_t many = ~std::uint64_t{0};
  huge.replace(8, 8, reinterpret_cast<const char*>(&many), 8);  // argv's count
  CHECK_THROWS_AS(decode_launch_plan(huge), launch_error);
  // A step of a kind init does not know.
  launch_options odd;
  odd.private_view = {{view_step::through, "/w", 0}};
  std::string unknown = encode_launch_plan(odd);
  const std::size_t at = unknown.find('/') - 16;  // the step's kind, before the path's length
  unknown[at] = 9;
  CHECK_THROWS_AS(decode_launch_plan(unknown), launch_error);
}
