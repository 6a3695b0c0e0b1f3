#include "sandbox/layer_plan.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/temp_dir.hpp"

using broker::sandbox::home_rule_inputs;
using broker::sandbox::home_rules;
using broker::sandbox::layer_inputs;
using broker::sandbox::plan_layers;
using broker::sandbox::view_step;

namespace {

namespace fs = std::filesystem;

std::vector<std::string> shown(const std::vector<view_step>& steps, const std::string& t) {
  const char* kind[] = {"empty ", "bind ", "layer ", "through "};
  std::vector<std::string> out;
  for (const auto& s : steps)
    out.push_back(kind[s.what] + (s.path.starts_with(t) ? "T" + s.path.substr(t.size()) : s.path));
  return out;
}

}  // namespace

TEST_CASE("plan_layers: the home a layer, the workspace and the agents' data bound through",
          "[wrap][layers]") {
  broker::test::temp_dir t;
  const std::string d = fs::canonical(t.path).string();
  for (const char* sub : {"home/src/app", "home/.claude/projects", "home/.codex", "state"})
    fs::create_directories(t.path / sub);
  fs::create_directories(t.path / "home/.config/broker/agent-files/.codex");
  std::ofstream(t.path / "home/.config/broker/agent-files/.codex/auth.json") << "{}";
  home_rule_inputs ri;
  ri.home = d + "/home";
  const home_rules rules(ri);
  layer_inputs in;
  in.home = d + "/home";
  in.cwd = d + "/home/src/app";
  in.env = {{"XDG_STATE_HOME", d + "/state"}};
  in.rules = &rules;
  in.masks = {d + "/home/.aws", d + "/home/.docker/config.json", d + "/home/.codex/token"};
  in.login_copies = {{d + "/session/login-gh.json", d + "/home/.config/gh/hosts.yml"}};
  in.mountinfo = "1 0 8:1 / / rw - ext4 /dev/sda rw\n";
  const auto plan = plan_layers(in);
  CHECK(shown(plan.steps, d) ==
        std::vector<std::string>{"layer T/home", "through T/home/.claude/projects",
                                 "through T/home/src/app", "layer T/state"});
  CHECK(plan.layers == std::vector<std::string>{d + "/home", d + "/state"});
  CHECK(plan.workspaces == std::vector<std::string>{d + "/home/src/app"});
  std::vector<std::string> seeds;
  for (const auto& s : plan.seeds)
    seeds.push_back(s.target + (s.source.empty() ? " (missing)" : ""));
  CHECK(seeds == std::vector<std::string>{d + "/home/.config/gh/hosts.yml",
                                          d + "/home/.codex/auth.json", d + "/home/.aws (missing)",
                                          d + "/home/.docker (missing)",
                                          d + "/home/.codex/token (missing)"});
  CHECK(plan.warnings.empty());
}

TEST_CASE("plan_layers: the home is never a workspace; a root command's system is layered",
          "[wrap][layers]") {
  broker::test::temp_dir t;
  const std::string d = fs::canonical(t.path).string();
  fs::create_directories(t.path / "home/data");
  layer_inputs in;
  in.home = d + "/home";
  in.cwd = d + "/home";
  in.root = true;
  // A host mount inside the home: shown again, read-only, over the layer.
  in.mountinfo =
      "1 0 8:1 / / rw - ext4 /dev/sda rw\n2 1 8:2 / " + d + "/home/data rw - ext4 x rw\n";
  const auto plan = plan_layers(in);
  CHECK(plan.workspaces.empty());
  REQUIRE(plan.warnings.size() == 1);
  CHECK(plan.warnings[0].find("is your home") != std::string::npos);
  const auto steps = shown(plan.steps, d);
  for (const char* want :
       {"layer T/home", "bind T/home/data", "layer /etc", "layer /usr", "layer /var"})
    CHECK(std::find(steps.begin(), steps.end(), want) != steps.end());
}
