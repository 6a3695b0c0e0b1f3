#include "sandbox/file_masks.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/policy.hpp"
#include "tests/unit/temp_dir.hpp"

using broker::config::parse_policy;
using broker::sandbox::broker_state_masks;

namespace {

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

TEST_CASE("broker_state_masks: the config dir, the log dir, the policy and file: sources",
          "[wrap][masks]") {
  const auto layer = parse_policy(R"({ "version": 1, "credentials": {
      "a": { "type": "bearer", "source": "file:~/.acme/token", "env": ["A"], "hosts": ["a.test"] },
      "b": { "type": "bearer", "source": "file:/etc/b-token", "env": ["B"], "hosts": ["b.test"] },
      "aws": { "type": "aws-sigv4", "source": "file:~/.aws/credentials#work",
               "hosts": ["*.amazonaws.com"] },
      "c": { "type": "bearer", "source": "cmd:cat /etc/c", "env": ["C"], "hosts": ["c.test"] },
      "d": { "type": "bearer", "env": ["D"], "hosts": ["d.test"] } } })",
                                  "/srv/team/policy.json");
  std::vector<std::string> unhidden;
  const auto masks = broker_state_masks({layer}, "~/logs/", "/home/u", "/work", &unhidden);
  CHECK(has(masks, "/home/u/.config/broker"));
  CHECK(has(masks, "/home/u/logs"));
  CHECK(has(masks, "/srv/team/policy.json"));
  CHECK(has(masks, "/home/u/.acme/token"));
  CHECK(has(masks, "/etc/b-token"));
  CHECK(has(masks, "/home/u/.aws/credentials"));  // the profile is no part of the path
  CHECK(masks.size() == 6);                       // cmd: and env: sources read no file here
  CHECK(unhidden.empty());
}

TEST_CASE("broker_state_masks: a path holding the working directory is named, not hidden",
          "[wrap][masks]") {
  std::vector<std::string> unhidden;
  const auto masks = broker_state_masks({}, "/work/logs", "/home/u", "/work/logs/x", &unhidden);
  CHECK_FALSE(has(masks, "/work/logs"));
  CHECK(unhidden == std::vector<std::string>{"/work/logs"});
  CHECK(has(masks, "/home/u/.config/broker"));
}
