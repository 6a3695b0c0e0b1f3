// The audit log on a disk that fills and empties again. The file's system calls are the real
// ones, through a fake that runs out of room.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "session/audit_files.hpp"
#include "session/audit_log.hpp"
#include "session/log_reader.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::session::audit_file_calls;
using broker::session::audit_log;
using broker::session::audit_log_options;
using broker::test::temp_dir;
using nlohmann::json;
using nlohmann::ordered_json;
using namespace std::chrono_literals;

namespace {

// A disk with `room` bytes left (negative: plenty): a write takes what fits and then fails with
// ENOSPC, as write(2) does on a filling file system.
struct fake_disk {
  std::shared_ptr<std::atomic<long>> room = std::make_shared<std::atomic<long>>(-1);

  audit_file_calls calls() const {
    audit_file_calls c;
    c.write = [room = room](int fd, const char* data, std::size_t size) -> ssize_t {
      const long left = room->load();
      if (left == 0) {
        errno = ENOSPC;
        return -1;
      }
      const std::size_t n = left < 0 ? size : std::min<std::size_t>(size, left);
      const ssize_t written = ::write(fd, data, n);
      if (written > 0 && left > 0) *room -= written;
      return written;
    };
    return c;
  }
};

ordered_json request(int n) {
  return {{"event", "request"}, {"path", "/k/" + std::to_string(n)}, {"status", 200}};
}

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

broker::session::verify_result verify_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return broker::session::verify_log(in);
}

// Waits out the log's pause between tries.
void after_retry_interval() {
  std::this_thread::sleep_for(audit_log::retry_interval + 30ms);
}

}  // namespace

TEST_CASE("a full disk cuts a torn record off, and the log recovers when room returns",
          "[audit_durability]") {
  temp_dir tmp;
  fake_disk disk;
  audit_log_options options;
  options.calls = disk.calls();
  auto log = audit_log::open(tmp.path, "s-full", options);
  std::vector<std::string> sunk;
  log->set_sink([&](std::string_view line) { sunk.emplace_back(line); });
  REQUIRE(log->write({{"event", "session_start"}}));
  REQUIRE(log->write(request(1)));
  const std::string before = read_text(log->path());

  // Room for 30 bytes: the record's first 30 reach the file, then the disk is full.
  *disk.room = 30;
  CHECK_FALSE(log->write(request(2)));
  CHECK(log->failed());
  CHECK(log->failure().find("No space left on device") != std::string::npos);
  CHECK(read_text(log->path()) == before);  // no torn line at the end
  CHECK(verify_file(log->path()).ok);
  CHECK(sunk.size() == 2);

  // Unavailable: no new request until a try succeeds; none before retry_interval has passed.
  CHECK_FALSE(log->available());
  *disk.room = -1;
  CHECK_FALSE(log->available());
  // The record of an exchange already under way waits with the one that failed.
  CHECK_FALSE(log->write(request(3)));
  after_retry_interval();
  CHECK(log->available());
  CHECK_FALSE(log->failed());
  CHECK(log->failure().empty());
  REQUIRE(log->write(request(4)));
  REQUIRE(log->end({{"event", "session_end"}}));

  const auto lines = read_lines(log->path());
  REQUIRE(lines.size() == 6);
  for (int i = 1; i <= 4; ++i) CHECK(json::parse(lines[i])["path"] == "/k/" + std::to_string(i));
  const auto result = verify_file(log->path());
  CHECK(result.ok);
  CHECK(result.records == 6);
  CHECK(sunk == lines);  // the sink heard each once, when written
}

TEST_CASE("a full disk: staged records wait whole, and the session_end tries at once",
          "[audit_durability]") {
  temp_dir tmp;
  fake_disk disk;
  audit_log_options options;
  options.calls = disk.calls();
  auto log = audit_log::open(tmp.path, "s-staged", options);
  REQUIRE(log->write({{"event", "session_start"}}));
  broker::base::json_members staged;
  staged.add("event", "request").add("path", "/staged").add("status", 200);
  REQUIRE(log->stage(staged));
  REQUIRE(log->stage(staged));
  *disk.room = 100;  // the first staged record fits, the second does not
  CHECK_FALSE(log->flush());
  CHECK(read_lines(log->path()).size() == 1);
  CHECK_FALSE(log->flush());  // too soon to try again
  *disk.room = -1;
  REQUIRE(log->end({{"event", "session_end"}}));
  const auto result = verify_file(log->path());
  CHECK(result.ok);
  CHECK(result.records == 4);
  CHECK(result.has_end);
}

TEST_CASE("a full disk keeps at most pending_limit bytes of records waiting",
          "[audit_durability]") {
  temp_dir tmp;
  fake_disk disk;
  audit_log_options options;
  options.calls = disk.calls();
  auto log = audit_log::open(tmp.path, "s-bound", options);
  REQUIRE(log->write({{"event", "session_start"}}));
  *disk.room = 0;
  const std::string path(1000, 'p');
  int tried = 0;
  while (tried * 1000 < static_cast<int>(2 * audit_log::pending_limit))
    CHECK_FALSE(log->write({{"event", "request"}, {"path", path + std::to_string(tried++)}}));
  *disk.room = -1;
  after_retry_interval();
  REQUIRE(log->available());
  const auto result = verify_file(log->path());
  CHECK(result.ok);  // those dropped were never chained
  const auto lines = read_lines(log->path());
  std::size_t kept_bytes = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) kept_bytes += lines[i].size() + 1;
  CHECK(kept_bytes >= audit_log::pending_limit);
  CHECK(kept_bytes < audit_log::pending_limit + 2000);  // the one that passed the bound
  CHECK(lines.size() - 1 < static_cast<std::size_t>(tried));
}
