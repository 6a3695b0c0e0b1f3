#include "brokers/secret_source.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>

#include "tests/unit/temp_dir.hpp"

using broker::brokers::load_secret;
using broker::brokers::load_secret_untrimmed;
using broker::brokers::source_error;
using broker::brokers::source_limits;
using broker::test::temp_dir;

namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The error's message, for checks on what it names and what it must not contain.
std::string error_of(const std::string& source, const source_limits& limits = {}) {
  try {
    (void)load_secret(source, limits);
  } catch (const source_error& e) {
    return e.what();
  }
  return {};
}

// Sets HOME for one test and restores it afterwards.
struct scoped_env {
  std::string name;
  std::optional<std::string> old;
  scoped_env(std::string n, const std::string& value) : name(std::move(n)) {
    if (const char* v = ::getenv(name.c_str())) old = v;
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~scoped_env() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("env: source reads a variable, unset or empty is absent", "[brokers][source]") {
  scoped_env set("BROKER_TEST_TOKEN", "  tok-from-env\n");
  auto value = load_secret("env:BROKER_TEST_TOKEN");
  REQUIRE(value);
  CHECK(value->expose() == "tok-from-env");

  scoped_env empty("BROKER_TEST_EMPTY", "");
  CHECK_FALSE(load_secret("env:BROKER_TEST_EMPTY"));
  ::unsetenv("BROKER_TEST_UNSET_FOR_SURE");
  CHECK_FALSE(load_secret("env:BROKER_TEST_UNSET_FOR_SURE"));
}

TEST_CASE("file: source trims whitespace and expands ~/", "[brokers][source]") {
  temp_dir tmp;
  std::filesystem::create_directories(tmp.path / ".config" / "acme");
  write_file(tmp.path / ".config" / "acme" / "token", "\n  acme-token-123 \r\n\n");
  scoped_env home("HOME", tmp.path.string());

  auto value = load_secret("file:~/.config/acme/token");
  REQUIRE(value);
  CHECK(value->expose() == "acme-token-123");

  auto absolute = load_secret("file:" + (tmp.path / ".config/acme/token").string());
  REQUIRE(absolute);
  CHECK(absolute->expose() == "acme-token-123");
}

TEST_CASE("file: source: missing or empty is absent, unreadable is an error", "[brokers][source]") {
  temp_dir tmp;
  CHECK_FALSE(load_secret("file:" + (tmp.path / "nope").string()));
  CHECK_FALSE(load_secret("file:" + (tmp.path / "nodir" / "nope").string()));
  write_file(tmp.path / "blank", " \n\t\n");
  CHECK_FALSE(load_secret("file:" + (tmp.path / "blank").string()));

  // A directory cannot be read as a token.
  std::string dir_error = error_of("file:" + tmp.path.string());
  CHECK(dir_error.find("file:" + tmp.path.string()) != std::string::npos);

  if (::geteuid() != 0) {  // root reads mode-000 files
    write_file(tmp.path / "locked", "locked-token-value");
    ::chmod((tmp.path / "locked").c_str(), 0);
    std::string locked = error_of("file:" + (tmp.path / "locked").string());
    CHECK(locked.find("cannot open") != std::string::npos);
    CHECK(locked.find("locked-token-value") == std::string::npos);
  }
}

TEST_CASE("file: source refuses relative paths", "[brokers][source]") {
  CHECK(error_of("file:token.txt").find("must be absolute") != std::string::npos);
  CHECK(error_of("file:~token").find("must be absolute") != std::string::npos);
}

TEST_CASE("file: source over the size limit is an error", "[brokers][source]") {
  temp_dir tmp;
  write_file(tmp.path / "big", std::string(100, 'a'));
  source_limits limits;
  limits.max_bytes = 99;
  std::string error = error_of("file:" + (tmp.path / "big").string(), limits);
  CHECK(error.find("larger than 99 bytes") != std::string::npos);
  limits.max_bytes = 100;
  auto value = load_secret("file:" + (tmp.path / "big").string(), limits);
  REQUIRE(value);
  CHECK(value->size() == 100);
}

TEST_CASE("cmd: source runs through /bin/sh and trims stdout", "[brokers][source]") {
  auto value = load_secret("cmd:printf '  cmd-token-%s\\n\\n' 42; echo ignored-by-stderr >&2");
  REQUIRE(value);
  CHECK(value->expose() == "cmd-token-42");

  // stdin is /dev/null: a command that reads it sees EOF at once.
  auto from_stdin = load_secret("cmd:cat; echo after-eof");
  REQUIRE(from_stdin);
  CHECK(from_stdin->expose() == "after-eof");
}

TEST_CASE("cmd: a failing command names the command and status, never its output",
          "[brokers][source]") {
  // The command prints "leaked-value", a string its own text does not contain.
  std::string error = error_of("cmd:printf 'leaked%s' -value; exit 3");
  CHECK(error.find("cmd:printf") != std::string::npos);
  CHECK(error.find("status 3") != std::string::npos);
  CHECK(error.find("leaked-value") == std::string::npos);

  std::string quiet = error_of("cmd:true");
  CHECK(quiet.find("printed nothing") != std::string::npos);

  std::string killed = error_of("cmd:kill -9 $$");
  CHECK(killed.find("signal 9") != std::string::npos);
}

TEST_CASE("cmd: output that the command does not name is not in the error", "[brokers][source]") {
  temp_dir tmp;
  write_file(tmp.path / "script.sh", "echo secret-printed-by-script; exit 1\n");
  std::string error = error_of("cmd:sh " + (tmp.path / "script.sh").string());
  CHECK(error.find("status 1") != std::string::npos);
  CHECK(error.find("secret-printed-by-script") == std::string::npos);
}

TEST_CASE("cmd: a command past its timeout is killed", "[brokers][source]") {
  source_limits limits;
  limits.timeout = std::chrono::milliseconds(200);
  auto start = std::chrono::steady_clock::now();
  std::string error = error_of("cmd:sleep 5; echo late", limits);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(error.find("timed out after 200 ms") != std::string::npos);
  CHECK(took < std::chrono::seconds(2));

  // Output then a hang (stdout closed, process still running) is bounded too.
  start = std::chrono::steady_clock::now();
  error = error_of("cmd:echo tok-early; exec >&-; sleep 5", limits);
  took = std::chrono::steady_clock::now() - start;
  CHECK(error.find("timed out") != std::string::npos);
  CHECK(took < std::chrono::seconds(2));
}

TEST_CASE("cmd: output over the limit is an error", "[brokers][source]") {
  source_limits limits;
  limits.max_bytes = 1000;
  std::string error = error_of("cmd:head -c 5000 /dev/zero | tr '\\0' a", limits);
  CHECK(error.find("more than 1000 bytes") != std::string::npos);
  auto fits = load_secret("cmd:head -c 1000 /dev/zero | tr '\\0' b", limits);
  REQUIRE(fits);
  CHECK(fits->size() == 1000);

  // An endless writer is cut off at the limit, not at the timeout.
  limits.timeout = std::chrono::seconds(20);
  auto start = std::chrono::steady_clock::now();
  CHECK(error_of("cmd:yes", limits).find("more than") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("load_secret_untrimmed keeps the bytes as read", "[brokers][source]") {
  temp_dir tmp;
  write_file(tmp.path / "ini", "\n\n[default]\nkey = value \n");
  auto value = load_secret_untrimmed("file:" + (tmp.path / "ini").string());
  REQUIRE(value);
  CHECK(value->expose() == "\n\n[default]\nkey = value \n");

  // An existing empty file is a value; a missing one is still absent.
  write_file(tmp.path / "empty", "");
  auto empty = load_secret_untrimmed("file:" + (tmp.path / "empty").string());
  REQUIRE(empty);
  CHECK(empty->empty());
  CHECK_FALSE(load_secret_untrimmed("file:" + (tmp.path / "nope").string()));

  auto output = load_secret_untrimmed("cmd:printf ' out\\n'");
  REQUIRE(output);
  CHECK(output->expose() == " out\n");
  CHECK_THROWS_AS(load_secret_untrimmed("cmd:true"), source_error);
}

TEST_CASE("an unknown source kind is an error", "[brokers][source]") {
  CHECK(error_of("vault:thing").find("unknown source") != std::string::npos);
}
