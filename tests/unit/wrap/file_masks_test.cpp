#include "wrap/file_masks.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/policy.hpp"
#include "tests/unit/temp_dir.hpp"

using broker::config::parse_policy;
using broker::wrap::broker_state_masks;
using broker::wrap::read_only_files;

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

TEST_CASE("read_only_files: the startup files and files.readonly of every layer, if they exist",
          "[wrap][masks]") {
  broker::test::temp_dir t;
  const std::string home = t.path.string();
  for (const char* f : {".bashrc", ".gitconfig", "notes/todo.txt", "tools/run.sh"}) {
    std::filesystem::create_directories((t.path / f).parent_path());
    std::ofstream(t.path / f) << "x";
  }
  const auto a =
      parse_policy(R"({ "files": { "readonly": ["~/notes/todo.txt", "~/missing"] } })", "a.json");
  const auto b =
      parse_policy(R"({ "files": { "readonly": [")" + home + R"(/tools"] } })", "b.json");
  const auto out = read_only_files({a, b}, home);
  CHECK(out == std::vector<std::string>{home + "/.bashrc", home + "/.gitconfig",
                                        home + "/notes/todo.txt", home + "/tools"});
  CHECK(read_only_files({}, "").empty());
}

TEST_CASE(
    "persistence_paths: the floor, files.readonly added, files.writable opened where every "
    "layer agrees",
    "[wrap][masks]") {
  const auto a = parse_policy(R"({ "version": 1, "files": { "writable": ["~/.gemrc", "~/.npmrc"],
      "readonly": ["~/.local/bin"] } })",
                              "a.json");
  const auto b =
      parse_policy(R"({ "version": 1, "files": { "writable": ["~/.npmrc"] } })", "b.json");
  const auto paths = [](const std::vector<broker::config::policy>& layers) {
    std::vector<std::string> out;
    for (const auto& p : broker::wrap::persistence_paths(layers, "/home/u")) out.push_back(p.path);
    return out;
  };
  const auto both = paths({a, b});
  CHECK(has(both, "/home/u/.bashrc"));
  CHECK(has(both, "/home/u/.gemrc"));        // b does not open it
  CHECK_FALSE(has(both, "/home/u/.npmrc"));  // both do
  CHECK(has(both, "/home/u/.local/bin"));
  CHECK_FALSE(has(paths({a}), "/home/u/.gemrc"));
  const auto c = parse_policy(R"({ "version": 1, "files": { "writable": ["~/.bashrc"],
      "readonly": ["~/.bashrc"] } })",
                              "c.json");
  CHECK(has(paths({c}), "/home/u/.bashrc"));  // a layer's readonly is never opened
}

TEST_CASE("scratch_directories: an agent's own programs that exist, never read-only ones",
          "[wrap][masks]") {
  broker::test::temp_dir t;
  const std::string home = t.path.string();
  std::filesystem::create_directories(t.path / ".codex/packages/app-server-daemon");
  std::filesystem::create_directories(t.path / ".codex/app-server-daemon");
  std::ofstream(t.path / ".bashrc") << "x";
  const auto scratch = broker::wrap::scratch_directories({}, home);
  CHECK(scratch ==
        std::vector<std::string>{home + "/.codex/packages", home + "/.codex/app-server-daemon"});
  // Shown empty inside, so never read-only as well.
  const auto read_only = read_only_files({}, home);
  CHECK(read_only == std::vector<std::string>{home + "/.bashrc"});
  // files.writable opens them like any protected path.
  const auto open = parse_policy(R"({ "files": { "writable": ["~/.codex/packages"] } })", "o");
  CHECK(broker::wrap::scratch_directories({open}, home) ==
        std::vector<std::string>{home + "/.codex/app-server-daemon"});
}
