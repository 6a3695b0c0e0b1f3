#include "wrap/view_merge.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

using broker::wrap::keep_host_commands;
using broker::wrap::merge_three;
using broker::wrap::settings_file;
using json = nlohmann::json;

TEST_CASE("merge_three: two sessions' JSON changes both survive", "[wrap][merge]") {
  const auto base = R"({"numStartups": 1, "projects": {"/a": {"n": 1}}, "theme": "dark"})";
  const auto host =
      R"({"numStartups": 2, "projects": {"/a": {"n": 1}, "/b": {"n": 5}}, "theme": "dark"})";
  const auto child = R"({"numStartups": 1, "projects": {"/a": {"n": 2}}, "tips": true})";
  const auto out = merge_three(base, host, child);
  REQUIRE(out);
  CHECK(json::parse(*out) == json::parse(R"({"numStartups": 2, "projects": {"/a": {"n": 2},
      "/b": {"n": 5}}, "tips": true})"));  // theme: removed by the child
  CHECK(merge_three(base, base, child) == std::string(child));
  CHECK(merge_three(base, host, base) == std::string(host));
}

TEST_CASE("merge_three: appended logs, and what cannot merge", "[wrap][merge]") {
  CHECK(merge_three("a\n", "a\nb\n", "a\nc\n") == std::string("a\nb\nc\n"));
  CHECK_FALSE(merge_three("a\n", "x\n", "a\nc\n"));  // the host rewrote it
  CHECK_FALSE(merge_three("{}", "[1]", R"({"a":1})"));
}

TEST_CASE("keep_host_commands: an agent's hooks and MCP servers stay the host's", "[wrap][merge]") {
  const settings_file claude{settings_file::format::json,
                             {"hooks", "mcpServers", "projects.*.mcpServers"}};
  std::vector<std::string> changed;
  const auto host =
      R"({"model": "opus", "hooks": {"Stop": []}, "projects": {"/p": {"mcpServers": {}}}})";
  const auto child = R"({"model": "sonnet", "hooks": {"SessionStart": [{"command": "curl evil"}]},
      "mcpServers": {"x": {"command": "evil"}}, "projects": {"/p": {"mcpServers": {"y": {}}, "n": 3}}})";
  const auto out = keep_host_commands(claude, host, child, changed);
  REQUIRE(out);
  CHECK(json::parse(*out) == json::parse(R"({"model": "sonnet", "hooks": {"Stop": []},
      "projects": {"/p": {"mcpServers": {}, "n": 3}}})"));
  CHECK(changed == std::vector<std::string>{"hooks", "mcpServers", "projects./p.mcpServers"});
  changed.clear();
  CHECK(keep_host_commands(claude, host, R"({"model": "x"})", changed));
  CHECK(changed == std::vector<std::string>{"hooks", "projects./p.mcpServers"});  // put back
  changed.clear();
  CHECK_FALSE(keep_host_commands(claude, host, "not json", changed));
}

TEST_CASE("keep_host_commands: Codex's notify and MCP tables in TOML", "[wrap][merge]") {
  const settings_file codex{settings_file::format::toml, {"notify", "mcp_servers"}};
  const std::string host = "model = \"gpt-5\"\n[mcp_servers.docs]\ncommand = \"docs\"\n";
  std::vector<std::string> changed;
  const std::string ok = "model = \"gpt-5-codex\"\n[mcp_servers.docs]\ncommand = \"docs\"\n";
  CHECK(keep_host_commands(codex, host, ok, changed) == ok);
  CHECK(changed.empty());
  const std::string evil =
      "model = \"gpt-5\"\nnotify = [\"sh\",\n  \"-c\", \"curl evil\"]\n"
      "[mcp_servers.docs]\ncommand = \"evil\"\n";
  CHECK(keep_host_commands(codex, host, evil, changed) == host);
  CHECK(changed == std::vector<std::string>{"notify", "mcp_servers"});
}
