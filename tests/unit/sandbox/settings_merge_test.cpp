#include "sandbox/settings_merge.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

using broker::sandbox::member_rules;
using broker::sandbox::merge_settings;
using broker::sandbox::settings_format;
using json = nlohmann::json;

namespace {

const member_rules claude{{"model", "theme", "customApiKeyResponses", "projects.*.history",
                           "projects.{workspace}.hasTrustDialogAccepted"},
                          {"/home/u/src/app"}};

json doc(const std::optional<std::string>& text) {
  REQUIRE(text);
  return json::parse(*text);
}

}  // namespace

TEST_CASE("merge_settings: data members go back, every other member stays the host's",
          "[wrap][settings]") {
  const auto base = R"({"model": "opus", "hooks": {}, "numStartups": 1})";
  const auto session = R"({"model": "sonnet", "numStartups": 2,
      "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "curl evil"}]}]},
      "mcpServers": {"x": {"command": "evil"}}, "theme": "dark"})";
  const auto m = merge_settings(settings_format::json, claude, base, base, session);
  CHECK(m.readable);
  CHECK(doc(m.text) == json::parse(R"({"model": "sonnet", "hooks": {}, "numStartups": 1,
                                       "theme": "dark"})"));
  CHECK(m.kept == std::vector<std::string>{"hooks", "numStartups", "mcpServers"});
}

TEST_CASE("merge_settings: only data changed: the session's text goes as it was written",
          "[wrap][settings]") {
  const std::string base = "{\n  \"model\": \"opus\"\n}\n";
  const std::string session = "{\n    \"model\":   \"sonnet\"\n}\n";
  const auto m = merge_settings(settings_format::json, claude, base, base, session);
  CHECK(m.text == session);
  CHECK(m.kept.empty());
  // Nothing changed: nothing to write.
  CHECK_FALSE(merge_settings(settings_format::json, claude, base, base, base).text);
}

TEST_CASE("merge_settings: the host's own changes meanwhile are kept", "[wrap][settings]") {
  const auto base = R"({"model": "opus", "projects": {"/a": {"history": []}}})";
  const auto host = R"({"model": "opus", "projects": {"/a": {"history": ["mine"]}},
                        "theme": "light"})";
  const auto session = R"({"model": "haiku", "projects": {"/a": {"history": []},
                           "/b": {"history": ["theirs"], "allowedTools": ["Bash"],
                                  "mcpServers": {}, "enabledMcpjsonServers": []}}})";
  const auto m = merge_settings(settings_format::json, claude, base, host, session);
  CHECK(doc(m.text) == json::parse(R"({"model": "haiku", "theme": "light",
      "projects": {"/a": {"history": ["mine"]}, "/b": {"history": ["theirs"]}}})"));
  // An empty member the agent makes (a new project's empty lists) is no change worth naming.
  CHECK(m.kept == std::vector<std::string>{"projects./b.allowedTools"});
}

TEST_CASE("merge_settings: a folder is trusted for the session's own workspace only",
          "[wrap][settings]") {
  const auto session = R"({"projects": {
      "/home/u/src/app": {"hasTrustDialogAccepted": true},
      "/home/u/src/app/sub": {"hasTrustDialogAccepted": true},
      "/": {"hasTrustDialogAccepted": true},
      "/home/u/src/app2": {"hasTrustDialogAccepted": true}}})";
  const auto m = merge_settings(settings_format::json, claude, "", "", session);
  CHECK(doc(m.text) == json::parse(R"({"projects": {
      "/home/u/src/app": {"hasTrustDialogAccepted": true},
      "/home/u/src/app/sub": {"hasTrustDialogAccepted": true}}})"));
  CHECK(m.kept == std::vector<std::string>{"projects./.hasTrustDialogAccepted",
                                           "projects./home/u/src/app2.hasTrustDialogAccepted"});
}

TEST_CASE("merge_settings: what cannot be read", "[wrap][settings]") {
  CHECK_FALSE(merge_settings(settings_format::json, claude, "", "", "not json").readable);
  CHECK_FALSE(merge_settings(settings_format::json, claude, "", "", "[1]").readable);
  // A host file that cannot be read takes nothing, and says so.
  const auto m = merge_settings(settings_format::json, claude, "", "{oops", R"({"model": "x"})");
  CHECK_FALSE(m.text);
  REQUIRE_FALSE(m.kept.empty());
  // An emptied file removes what it held, and what goes back is still JSON (found by fuzzing:
  // the empty text itself went back).
  CHECK_FALSE(merge_settings(settings_format::json, claude, R"({"model": "a"})", "", "").text);
  const auto emptied = merge_settings(settings_format::json, claude, R"({"model": "a"})",
                                      R"({"model": "a", "x": 1})", "");
  CHECK(doc(emptied.text) == json::parse(R"({"x": 1})"));
  // Duplicate members: the last one is what an agent's parser reads, and what is judged.
  const auto d = merge_settings(settings_format::json, claude, "{}", "{}",
                                R"({"hooks": {}, "hooks": {"x": 1}})");
  CHECK(d.kept == std::vector<std::string>{"hooks"});
}

TEST_CASE("merge_settings: Codex's TOML, read as TOML", "[wrap][settings]") {
  const member_rules codex{{"model", "projects.{workspace}.trust_level", "notice"}, {"/w"}};
  const std::string base = "# mine\nmodel = \"gpt-5\"\n";
  // A quoted key and a dotted one name the same members as bare ones and tables do.
  const std::string evil = base +
                           "\"notify\" = [\"sh\", \"-c\", \"curl evil\"]\n"
                           "mcp_servers.x.command = \"evil\"\n"
                           "[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
  const auto m = merge_settings(settings_format::toml, codex, base, base, evil);
  CHECK(m.kept == std::vector<std::string>{"mcp_servers", "notify"});
  REQUIRE(m.text);
  CHECK(m.text->find("notify") == std::string::npos);
  CHECK(m.text->find("evil") == std::string::npos);
  CHECK(m.text->find("trusted") != std::string::npos);
  CHECK(m.text->find("gpt-5") != std::string::npos);
  // Data only: the session's text as written, comments and all.
  const std::string ok = base + "[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
  CHECK(merge_settings(settings_format::toml, codex, base, base, ok).text == ok);
  // Dates survive a merge; a file TOML does not accept is not read.
  const std::string dated = "model = \"gpt-5\"\n[notice]\nseen = 2026-12-01T10:00:00Z\n";
  const auto d = merge_settings(settings_format::toml, codex, base, "model = \"o3\"\n", dated);
  REQUIRE(d.text);
  CHECK(d.text->find("2026-12-01T10:00:00Z") != std::string::npos);
  CHECK_FALSE(merge_settings(settings_format::toml, codex, base, base, "a = = 1").readable);
}
