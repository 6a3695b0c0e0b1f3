#include "config/program_identity.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/unit/config/program_files.hpp"

using broker::config::client_identity;
using broker::config::file_id;
using broker::config::program_matches;
using broker::config::protected_file;
using broker::config::session_writes;
using broker::test::program_files;

namespace {

file_id id_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

}  // namespace

TEST_CASE("a protected file is the regular file a path names, through links nobody can repoint",
          "[config][programs]") {
  program_files files;
  const auto git = files.add("usr/bin/git");
  files.link("usr/bin/git-link", "git");     // relative
  files.link("bin", files.path("usr/bin"));  // a directory link, absolute
  files.link("usr/lib/up", "../bin/git");
  const auto nothing = session_writes::through({});
  CHECK(protected_file(git, *nothing) == id_of(git));
  CHECK(protected_file(files.path("usr/bin/git-link"), *nothing) == id_of(git));
  CHECK(protected_file(files.path("bin/git-link"), *nothing) == id_of(git));
  CHECK(protected_file(files.path("usr/lib/up"), *nothing) == id_of(git));
  CHECK(protected_file(files.path("usr/lib/../bin/./git"), *nothing) == id_of(git));
  // Not a regular file, not there, not absolute, a loop.
  CHECK_FALSE(protected_file(files.path("usr/bin"), *nothing));
  CHECK_FALSE(protected_file(files.path("usr/bin/gh"), *nothing));
  CHECK_FALSE(protected_file("usr/bin/git", *nothing));
  files.link("loop", "loop");
  CHECK_FALSE(protected_file(files.path("loop"), *nothing));

  // The file where the session writes, or any link on the way there: the session's to choose.
  CHECK_FALSE(protected_file(git, *session_writes::through({files.path("usr")})));
  CHECK_FALSE(
      protected_file(files.path("bin/git-link"), *session_writes::through({files.path("bin")})));
  CHECK_FALSE(
      protected_file(files.path("usr/lib/up"), *session_writes::through({files.path("usr/lib")})));
  CHECK(protected_file(git, *session_writes::through({files.path("usr/bi"), files.path("b")})) ==
        id_of(git));
}

TEST_CASE("without a sandbox, what the user can write is the session's", "[config][programs]") {
  program_files files;
  const auto mine = files.add("bin/tool");
  const auto user = session_writes::user();
  CHECK(user->can_change(mine));  // this user made it
  CHECK_FALSE(protected_file(mine, *user));
  // A system file: root could change it (unless read-only), another user could not.
  if (::access("/usr/bin/env", X_OK) == 0) {
    CHECK(user->can_change("/usr/bin/env") == (::geteuid() == 0));
  }
}

TEST_CASE("every holder must run the very file a listed path names", "[config][programs]") {
  program_files files;
  const auto git = files.add("usr/bin/git");
  const auto gh = files.add("usr/bin/gh");
  const auto curl = files.add("usr/bin/curl");
  const auto link = files.link("usr/local/bin/git", git);
  const auto copy = files.add("tmp/x/gh");
  const auto python = files.add("usr/bin/python3");
  const std::vector<std::string> entries{git, files.path("usr/bin/g?")};

  CHECK(program_matches(entries, program_files::held_by({git}).get()));
  CHECK(program_matches(entries, program_files::held_by({gh, git}).get()));
  // A listed path through a link names the file it leads to.
  CHECK(program_matches({link}, program_files::held_by({git}).get()));
  // One holder not listed spoils it, whichever comes first: python that inherited git's socket.
  CHECK_FALSE(program_matches(entries, program_files::held_by({git, python}).get()));
  CHECK_FALSE(program_matches(entries, program_files::held_by({python, git}).get()));
  CHECK_FALSE(program_matches(entries, program_files::held_by({curl}).get()));
  // A copy: its own path, another file.
  CHECK_FALSE(program_matches({gh}, program_files::held_by({copy}).get()));
  // A holder whose path reads as a listed one but runs another file (the path seen from another
  // mount namespace, where the session made its own).
  const client_identity impostor{{{1000, gh, id_of(copy)}}, true, session_writes::through({})};
  CHECK_FALSE(program_matches({gh}, &impostor));
  CHECK_FALSE(program_matches({files.path("usr/bin/g*")}, &impostor));
  // Unknown, incomplete, no holder, nothing known of what the session writes: no match.
  CHECK_FALSE(program_matches(entries, nullptr));
  CHECK_FALSE(program_matches(
      entries, program_files::held_by({git}, session_writes::through({}), false).get()));
  CHECK_FALSE(program_matches(entries, program_files::held_by({}).get()));
  CHECK_FALSE(program_matches(entries, program_files::held_by({git}, nullptr).get()));
  CHECK_FALSE(program_matches(entries, program_files::held_by({files.path("usr/bin/gone")}).get()));
}

TEST_CASE("a glob is a glob by its wildcards", "[config][programs]") {
  CHECK(broker::config::is_program_glob("*/gh"));
  CHECK(broker::config::is_program_glob("/usr/bin/python3.1?"));
  CHECK(broker::config::is_program_glob("/usr/bin/[gh]it"));
  CHECK_FALSE(broker::config::is_program_glob("/usr/bin/git"));
}
