#include "sandbox/program_check.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/policy.hpp"

using broker::config::parse_policy;
using broker::sandbox::home_rule_inputs;
using broker::sandbox::program_problem;
using broker::sandbox::program_problems;
using broker::sandbox::session_write_places;

namespace {

// The refused entries of one layer (named "p.json") with "programs" `list` on an allow rule, for
// a session of `in` with `workspaces`.
std::vector<program_problem> refused(const std::string& list, home_rule_inputs in,
                                     const std::vector<std::string>& workspaces = {}) {
  in.layers = {parse_policy(R"({"allow": [{"host": "a.test"},
  {"host": "b.test", "programs": )" +
                                list + R"(}]})",
                            "p.json")};
  return program_problems(in.layers, session_write_places(in, workspaces));
}

home_rule_inputs user_session() {
  home_rule_inputs in;
  in.home = "/home/u";
  in.env = {{"XDG_RUNTIME_DIR", "/run/user/1000"}, {"XDG_DATA_HOME", "/data/u"}};
  return in;
}

}  // namespace

TEST_CASE("programs: a glob that could match a file the session can write is refused, named",
          "[wrap][programs]") {
  const auto in = user_session();
  // Anywhere: a leading "*", or a directory holding a private one.
  auto r = refused(R"(["/usr/bin/git", "*/gh"])", in);
  REQUIRE(r.size() == 1);
  CHECK(r[0].text() ==
        "p.json:2: allow[1].programs[1]: \"*/gh\" could match a file the session can write: a "
        "glob starting with \"*\" matches a file in any directory, the session's own /tmp among "
        "them; name the program by its absolute path");
  CHECK(refused(R"(["/*"])", in).size() == 1);
  CHECK(refused(R"(["/var/*/bin/x"])", in)[0].message.find("it reaches into /var/tmp") !=
        std::string::npos);
  // In the session's own directories, its layers and where its writes go through.
  for (const char* glob : {"/tmp/x/*", "/dev/shm/g?", "/run/user/1000/bin/*", "/home/u/bin/*",
                           "/home/u/.claude/projects/*", "/data/u/bin/[ab]"}) {
    INFO(glob);
    const auto found = refused(std::string("[\"") + glob + "\"]", in);
    REQUIRE(found.size() == 1);
    CHECK(found[0].key == "allow[1].programs[0]");
    CHECK(found[0].message.find("could match a file the session can write: it lies in ") !=
          std::string::npos);
  }
  CHECK(refused(R"(["/home/u/bin/*"])", in)[0].message.find(
            "/home/u (the home, a copy-on-write layer the session writes in)") !=
        std::string::npos);
  // The host's read-only directories are fine for a user's session...
  CHECK(
      refused(R"(["/usr/bin/*", "/usr/lib/git-core/git-remote-http*", "/opt/x/b?n"])", in).empty());
  // ...but a root command's /usr is a copy-on-write layer of its own.
  auto root = in;
  root.root = true;
  const auto as_root = refused(R"(["/usr/bin/git", "/usr/lib/git-core/git-remote-http*"])", root);
  REQUIRE(as_root.size() == 1);
  CHECK(as_root[0].message.find("it lies in /usr (a copy-on-write layer") != std::string::npos);
  // A workspace, when wrap knows it; files.writable.
  CHECK(refused(R"(["/srv/work/bin/*"])", in, {"/srv/work"}).size() == 1);
  CHECK(refused(R"(["/srv/work/bin/*"])", in).empty());
  home_rule_inputs with_files = in;
  with_files.layers = {parse_policy(R"({"files": {"writable": ["/opt/tools"]}})", "w.json")};
  const auto places = session_write_places(with_files, {});
  const auto layers = std::vector{parse_policy(R"({"credentials": {"gh": {"type": "github",
    "env": ["GH_TOKEN"], "hosts": ["a.test"], "programs": ["/opt/*"]}}})",
                                               "c.json")};
  const auto both = program_problems(layers, places);
  REQUIRE(both.size() == 1);
  CHECK(
      both[0].text().starts_with("c.json:2: credentials.gh.programs[0]: \"/opt/*\" could match "
                                 "a file the session can write: it reaches into /opt/tools "
                                 "(files.writable, written through to the host)"));
}

TEST_CASE("programs: a path is refused only where the session's writes go through",
          "[wrap][programs]") {
  const auto in = user_session();
  // In a layer or a private directory the session is shown the host's file, read-only.
  CHECK(refused(R"(["/home/u/.local/bin/claude", "/tmp/tools/gh", "/usr/bin/git"])", in).empty());
  const auto r = refused(R"(["/srv/work/bin/tool", "/home/u/.claude/projects/x"])", in,
                         {"/srv/work", "/home/u"});
  REQUIRE(r.size() == 2);
  CHECK(r[0].message ==
        "\"/srv/work/bin/tool\" names a file the session can change: it lies in /srv/work (a "
        "workspace, written through to the host); there it could be any program by the time it "
        "runs");
  CHECK(r[1].message.find("(an agent's data, written through to the host)") != std::string::npos);
}
