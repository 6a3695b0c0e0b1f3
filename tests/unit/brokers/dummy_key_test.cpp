#include "brokers/dummy_key.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "brokers/dummy.hpp"
#include "tests/unit/temp_dir.hpp"

namespace base = broker::base;

using broker::base::secret;
using broker::brokers::keyed_dummy;
using broker::brokers::load_or_create_dummy_key;
using broker::brokers::stable_dummies;
namespace fs = std::filesystem;

namespace {

const std::string real_token =
    "ghp_"
    "St4bleDummyRealT0kenAbCdEf0123456789xY";

std::string read(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write(const fs::path& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

}  // namespace

TEST_CASE("dummy key: made once, private, 32 bytes, the same key for every later session",
          "[dummy_key]") {
  broker::test::temp_dir t;
  const auto path = t.path / "config" / "broker" / "dummy-key";
  const base::secret first = load_or_create_dummy_key(path);
  CHECK(first.size() == 32);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(path.parent_path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  const std::string text = read(path);
  CHECK(text.size() == 65);
  CHECK(text.find_first_not_of("0123456789abcdef\n") == std::string::npos);
  CHECK(load_or_create_dummy_key(path).expose() == first.expose());
  // Only the key: no temp file left behind.
  CHECK(std::distance(fs::directory_iterator(path.parent_path()), fs::directory_iterator()) == 1);
}

TEST_CASE("dummy key: sessions starting at once end up with one key", "[dummy_key]") {
  broker::test::temp_dir t;
  const auto path = t.path / "dummy-key";
  std::vector<std::future<std::string>> made;
  for (int i = 0; i < 8; ++i)
    made.push_back(std::async(
        std::launch::async, [&] { return std::string(load_or_create_dummy_key(path).expose()); }));
  const std::string first = made[0].get();
  for (std::size_t i = 1; i < made.size(); ++i) CHECK(made[i].get() == first);
  CHECK(std::distance(fs::directory_iterator(t.path), fs::directory_iterator()) == 1);
}

TEST_CASE("dummy key: a key others can read, a link, or not a key is an error naming the file",
          "[dummy_key]") {
  broker::test::temp_dir t;
  const auto path = t.path / "dummy-key";
  load_or_create_dummy_key(path);
  ::chmod(path.c_str(), 0644);
  CHECK_THROWS_WITH(load_or_create_dummy_key(path),
                    Catch::Contains(path.string()) && Catch::Contains("chmod 600"));

  write(t.path / "short", "abcdef\n", 0600);
  CHECK_THROWS_WITH(load_or_create_dummy_key(t.path / "short"),
                    Catch::Contains("short") && Catch::Contains("64 hex digits"));
  write(t.path / "not-hex", std::string(64, 'g') + "\n", 0600);
  CHECK_THROWS_WITH(load_or_create_dummy_key(t.path / "not-hex"), Catch::Contains("64 hex"));
  write(t.path / "long", std::string(66, 'a'), 0600);
  CHECK_THROWS_WITH(load_or_create_dummy_key(t.path / "long"), Catch::Contains("64 hex"));

  // A link is not followed (a planted link would choose the key), a directory is no key.
  fs::create_symlink(path, t.path / "link");
  CHECK_THROWS_WITH(load_or_create_dummy_key(t.path / "link"), Catch::Contains("link"));
  fs::create_directory(t.path / "dir");
  CHECK_THROWS_WITH(load_or_create_dummy_key(t.path / "dir"),
                    Catch::Contains("not a regular file"));
  // A directory that cannot be written: no key, and an error rather than a random stand-in.
  if (::geteuid() != 0) {
    fs::create_directory(t.path / "ro");
    ::chmod((t.path / "ro").c_str(), 0500);
    CHECK_THROWS_WITH(load_or_create_dummy_key(t.path / "ro" / "dummy-key"), Catch::Contains("ro"));
  }
}

TEST_CASE("stable dummies: read the key on first use, derive the user's dummies from it",
          "[dummy_key]") {
  broker::test::temp_dir t;
  const auto path = t.path / "dummy-key";
  const stable_dummies from_file(path);
  CHECK_FALSE(fs::exists(path));  // nothing asked for yet: no key made
  const base::secret real{std::string(real_token)};
  const std::string dummy = from_file.dummy(real, "github", "value");
  REQUIRE(fs::exists(path));
  CHECK(dummy == keyed_dummy(load_or_create_dummy_key(path), real, "github", "value"));
  CHECK(dummy == stable_dummies(load_or_create_dummy_key(path)).dummy(real, "github", "value"));
  CHECK(dummy.starts_with("ghp_"));
  CHECK(dummy.size() == real_token.size());
  CHECK(dummy != real_token);

  // No HOME: a clear error, never a random dummy.
  const stable_dummies homeless{fs::path()};
  CHECK_THROWS_WITH(homeless.dummy(real, "github", "value"), Catch::Contains("HOME is not set"));
  // An unusable key file is the same error every time it is asked.
  ::chmod(path.c_str(), 0640);
  const stable_dummies exposed(path);
  CHECK_THROWS_WITH(exposed.dummy(real, "github", "value"), Catch::Contains("chmod 600"));
  CHECK_THROWS_WITH(exposed.dummy(real, "github", "value"), Catch::Contains("chmod 600"));
}
