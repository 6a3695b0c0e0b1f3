#include "sandbox/home_rules.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "config/policy.hpp"
#include "tests/unit/temp_dir.hpp"

using broker::config::parse_policy;
using broker::sandbox::home_rule;
using broker::sandbox::home_rule_inputs;
using broker::sandbox::home_rules;

namespace {

home_rule::kind kind_of(const home_rules& rules, const std::string& path) {
  const home_rule* r = rules.find(path);
  REQUIRE(r != nullptr);
  return r->what;
}

}  // namespace

TEST_CASE("home_rules: the agents' data goes through, their instructions and commands do not",
          "[wrap][home]") {
  home_rule_inputs in;
  in.home = "/home/u";
  const home_rules rules(in);
  CHECK(kind_of(rules, "/home/u/.claude/projects/-w/1.jsonl") == home_rule::through);
  CHECK(kind_of(rules, "/home/u/.codex/sessions/2026/12/x.jsonl") == home_rule::through);
  CHECK(kind_of(rules, "/home/u/.codex/history.jsonl") == home_rule::through);
  CHECK(kind_of(rules, "/home/u/.gemini/tmp/abc/chats/c.json") == home_rule::through);
  CHECK(kind_of(rules, "/home/u/.claude.json") == home_rule::settings);
  CHECK(kind_of(rules, "/home/u/.codex/config.toml") == home_rule::settings);
  CHECK(kind_of(rules, "/home/u/.codex/auth.json") == home_rule::key_store);
  CHECK(kind_of(rules, "/home/u/.cache/pip/wheels/x.whl") == home_rule::dropped);
  CHECK(kind_of(rules, "/home/u/.codex/packages/app-server-daemon/current") == home_rule::dropped);
  CHECK(kind_of(rules, "/home/u/.npm/_cacache/content-v2/sha512/ab") == home_rule::through);
  CHECK(kind_of(rules, "/home/u/.npm/_npx/1/node_modules/x") == home_rule::dropped);
  CHECK(kind_of(rules, "/home/u/go/pkg/mod/cache/download/x.zip") == home_rule::through);
  // Named by no rule: kept out.
  for (const char* path :
       {"/home/u/.claude/CLAUDE.md", "/home/u/.codex/AGENTS.md", "/home/u/.gemini/GEMINI.md",
        "/home/u/.claude/plugins/x/hooks/hooks.json", "/home/u/.gemini/extensions/x",
        "/home/u/.bashrc", "/home/u/.local/bin/tool", "/home/u/.claude", "/home/u/.vimrc"})
    CHECK(rules.find(path) == nullptr);
  CHECK(rules.any_below("/home/u/.claude"));
  CHECK_FALSE(rules.any_below("/home/u/.vim"));
}

TEST_CASE("home_rules: CODEX_HOME, XDG_CACHE_HOME, GOMODCACHE and files.writable", "[wrap][home]") {
  home_rule_inputs in;
  in.home = "/home/u";
  in.env = {{"CODEX_HOME", "/data/codex"},
            {"XDG_CACHE_HOME", "/data/cache"},
            {"GOMODCACHE", "/data/gomod"}};
  in.layers = {parse_policy(R"({"files": {"writable": ["~/.m2", "/usr/local"]}})", "a.json"),
               parse_policy(R"({"files": {"writable": ["~/.m2"]}})", "b.json")};
  in.root = true;
  const home_rules rules(in);
  CHECK(kind_of(rules, "/data/codex/sessions/x") == home_rule::through);
  CHECK(kind_of(rules, "/data/codex/config.toml") == home_rule::settings);
  CHECK(rules.find("/home/u/.codex/sessions/x") == nullptr);
  CHECK(kind_of(rules, "/data/cache/x") == home_rule::dropped);
  CHECK(kind_of(rules, "/data/gomod/x") == home_rule::through);
  CHECK(rules.find("/data/gomod/x")->cache);
  CHECK(kind_of(rules, "/home/u/.m2/repository/x") == home_rule::through);  // both layers agree
  CHECK(rules.find("/usr/local/bin/x") == nullptr);                         // only one does
  CHECK(kind_of(rules, "/var/cache/apt/archives/x.deb") == home_rule::dropped);  // root
}

TEST_CASE("home_rules: the Codex daemon's existing directories are shown empty", "[wrap][home]") {
  broker::test::temp_dir t;
  std::filesystem::create_directories(t.path / ".codex/packages/app-server-daemon");
  std::filesystem::create_directories(t.path / ".codex/app-server-control");
  home_rule_inputs in;
  in.home = t.path.string();
  CHECK(home_rules(in).scratch_directories() ==
        std::vector<std::string>{in.home + "/.codex/packages",
                                 in.home + "/.codex/app-server-control"});
  CHECK(broker::sandbox::writable_paths({}, in.home).empty());
  CHECK(broker::sandbox::readonly_paths(
            {parse_policy(R"({"files": {"readonly": ["~/vendor"]}})", "r.json")}, "/h") ==
        std::vector<std::string>{"/h/vendor"});
}
