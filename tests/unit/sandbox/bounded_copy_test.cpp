#include "sandbox/bounded_copy.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/temp_dir.hpp"

using broker::sandbox::copy_budget;
using broker::sandbox::copy_file;
using broker::sandbox::copy_result;

namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("copy_file: a sparse file keeps its holes and its mode", "[wrap][copy]") {
  broker::test::temp_dir t;
  const auto from = t.path / "sparse", to = t.path / "copy";
  {
    const int fd = ::open(from.c_str(), O_WRONLY | O_CREAT, 0640);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, "head", 4, 0) == 4);
    REQUIRE(::pwrite(fd, "tail", 4, 64 << 20) == 4);
    ::close(fd);
  }
  auto budget = copy_budget::starting_now();
  REQUIRE(copy_file(from, to, budget) == copy_result::done);
  struct stat st {};
  REQUIRE(::stat(to.c_str(), &st) == 0);
  CHECK(st.st_size == (64 << 20) + 4);
  CHECK(st.st_blocks * 512 < (1 << 20));  // the 64 MiB hole was not written
  CHECK((st.st_mode & 0777) == 0640);
  const std::string bytes = read_all(to);
  CHECK(bytes.substr(0, 4) == "head");
  CHECK(bytes.substr(64 << 20) == "tail");
  CHECK(budget.total_bytes > (1ull << 30) - (1 << 20));  // only data counted
}

TEST_CASE("copy_file: past the bounds, and what is no regular file", "[wrap][copy]") {
  broker::test::temp_dir t;
  const auto big = t.path / "big", to = t.path / "to";
  { std::ofstream(big) << "0123456789"; }
  auto budget = copy_budget::starting_now();
  budget.file_bytes = 5;
  CHECK(copy_file(big, to, budget) == copy_result::too_large);
  budget = copy_budget::starting_now();
  budget.total_bytes = 5;
  CHECK(copy_file(big, to, budget) == copy_result::too_large);
  budget = copy_budget::starting_now(std::chrono::milliseconds(-1));
  CHECK(copy_file(big, to, budget) == copy_result::too_slow);
  CHECK_FALSE(std::filesystem::exists(to));  // no temp file or partial copy left
  CHECK(std::distance(std::filesystem::directory_iterator(t.path), {}) == 1);

  budget = copy_budget::starting_now();
  REQUIRE(::mkfifo((t.path / "fifo").c_str(), 0600) == 0);
  CHECK(copy_file(t.path / "fifo", to, budget) == copy_result::not_regular);  // and no hang
  std::filesystem::create_symlink(big, t.path / "link");
  CHECK(copy_file(t.path / "link", to, budget) == copy_result::not_regular);
}
