#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/approved_file.hpp"

namespace fs = std::filesystem;
using broker::config::append_approved;
using broker::config::load_approved;

namespace {

fs::path scratch_dir() {
  auto dir = fs::temp_directory_path() / ("approved-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("approved.json: written by approve --always, read by the next session", "[config][ask]") {
  const auto dir = scratch_dir();
  const auto file = dir / "broker" / "approved.json";
  CHECK_FALSE(load_approved(file));  // none yet: nothing to add
  append_approved(file, {"docs.test", 443, ""});
  append_approved(file, {"docs.test", 443, ""});  // the same rule once
  append_approved(file, {"api.test", 8443, "/v1"});
  auto p = load_approved(file);
  REQUIRE(p);
  REQUIRE(p->allow.size() == 2);
  CHECK(p->allow[0].host->text() == "docs.test");
  CHECK(p->allow[0].ports == std::vector<std::uint16_t>{443});
  CHECK(p->allow[1].paths.size() == 2);
  CHECK(p->allow[1].paths[0].text() == "/v1");
  CHECK(p->allow[1].paths[1].text() == "/v1/*");
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(file.parent_path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);

  // Edited by hand (comments allowed), it keeps what the user wrote and gains the new rule.
  std::ofstream(file) << "{\n  // mine\n  \"allow\": [{\"host\": \"*.docs.test\"}]\n}\n";
  append_approved(file, {"pypi.test", 443, ""});
  p = load_approved(file);
  REQUIRE(p->allow.size() == 2);
  CHECK(p->allow[0].host->text() == "*.docs.test");

  // More than allow rules is refused, naming the file.
  std::ofstream(file) << "{\"deny\": [{\"host\": \"a.test\"}]}";
  CHECK_THROWS_WITH(load_approved(file),
                    Catch::Contains(file.string()) && Catch::Contains("\"allow\" rules only"));
  std::ofstream(file) << "{\"allow\": [{\"host\": 7}]}";
  CHECK_THROWS_WITH(load_approved(file), Catch::Contains("allow[0].host"));
  fs::remove_all(dir);
}

TEST_CASE("an approval's rule: a host name and a path prefix, nothing a policy cannot hold",
          "[config][ask]") {
  using broker::config::make_approval_rule;
  auto r = make_approval_rule({"Docs.Test", 443, "/guide/"}, "approved[0]");
  CHECK(r.host->text() == "docs.test");
  CHECK(r.paths.size() == 1);
  CHECK(r.approved);
  CHECK_THROWS_AS(make_approval_rule({"a b", 443, ""}, "x"), std::invalid_argument);
  CHECK_THROWS_AS(make_approval_rule({"a.test", 443, "guide"}, "x"), std::invalid_argument);
  CHECK_THROWS_AS(make_approval_rule({"a.test", 443, "/g*"}, "x"), std::invalid_argument);
}
