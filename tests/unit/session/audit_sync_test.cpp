// When the audit log's records reach the disk (--audit-sync): fdatasync(2) is real unless a
// test counts it, through the log's file calls.
#include "session/audit_sync.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "session/audit_log.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::session::audit_log;
using broker::session::audit_log_options;
using broker::session::audit_sync_file;
using broker::session::audit_sync_mode;
using broker::session::batch_delay;
using broker::session::parse_audit_sync;
using broker::test::temp_dir;
using nlohmann::ordered_json;
using namespace std::chrono_literals;

namespace {

// Counts the syncs (and where and when they ran); fails each with `error` once it is set.
struct sync_counter {
  struct call {
    std::thread::id thread;
    std::chrono::steady_clock::time_point at;
  };
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<call>> calls = std::make_shared<std::vector<call>>();
  std::shared_ptr<std::atomic<int>> error = std::make_shared<std::atomic<int>>(0);

  broker::session::sync_call fake() const {
    return [mutex = mutex, calls = calls, error = error](int fd) {
      {
        std::lock_guard lock(*mutex);
        calls->push_back({std::this_thread::get_id(), std::chrono::steady_clock::now()});
      }
      if (const int e = *error) {
        errno = e;
        return -1;
      }
      return ::fdatasync(fd);
    };
  }
  std::vector<call> taken() const {
    std::lock_guard lock(*mutex);
    return *calls;
  }
};

ordered_json request(int n) {
  return {{"event", "request"}, {"path", "/k/" + std::to_string(n)}, {"status", 200}};
}

audit_log_options with(audit_sync_mode mode, const sync_counter& counter) {
  audit_log_options options;
  options.sync = mode;
  options.calls.fdatasync = counter.fake();
  return options;
}

}  // namespace

TEST_CASE("parse_audit_sync reads the three modes", "[audit_sync]") {
  CHECK(parse_audit_sync("every") == audit_sync_mode::every);
  CHECK(parse_audit_sync("batch") == audit_sync_mode::batch);
  CHECK(parse_audit_sync("none") == audit_sync_mode::none);
  CHECK_FALSE(parse_audit_sync("always"));
  CHECK_FALSE(parse_audit_sync(""));
  CHECK(to_string(audit_sync_mode::batch) == "batch");
  CHECK(audit_log_options{}.sync == audit_sync_mode::batch);  // the default
}

TEST_CASE("audit sync every: one fdatasync per write, on the writer's thread", "[audit_sync]") {
  temp_dir tmp;
  sync_counter counter;
  auto log = audit_log::open(tmp.path, "s-every", with(audit_sync_mode::every, counter));
  REQUIRE(log->write({{"event", "session_start"}}));
  for (int i = 0; i < 5; ++i) REQUIRE(log->write(request(i)));
  const auto calls = counter.taken();
  REQUIRE(calls.size() == 6);
  for (const auto& c : calls) CHECK(c.thread == std::this_thread::get_id());
}

TEST_CASE("audit sync batch: records written together share one sync, off the writer's thread",
          "[audit_sync]") {
  temp_dir tmp;
  sync_counter counter;
  auto log = audit_log::open(tmp.path, "s-batch", with(audit_sync_mode::batch, counter));
  const auto first = std::chrono::steady_clock::now();
  REQUIRE(log->write({{"event", "session_start"}}));
  for (int i = 0; i < 200; ++i) REQUIRE(log->write(request(i)));
  CHECK(counter.taken().empty());  // no request waited for one

  // Within 100 ms of the first write (docs/audit-log.md), with margin for a loaded machine.
  for (int i = 0; i < 100 && counter.taken().empty(); ++i) std::this_thread::sleep_for(5ms);
  auto calls = counter.taken();
  REQUIRE(!calls.empty());
  CHECK(calls.front().thread != std::this_thread::get_id());
  CHECK(calls.front().at - first >= batch_delay - 5ms);
  CHECK(calls.front().at - first < 400ms);
  CHECK(calls.size() <= 2);  // the 201 records, at most split by a round boundary

  // Nothing written since: no more syncs.
  std::this_thread::sleep_for(3 * batch_delay);
  const auto settled = counter.taken().size();
  std::this_thread::sleep_for(3 * batch_delay);
  CHECK(counter.taken().size() == settled);

  // The session_end is synced before end() returns.
  REQUIRE(log->end({{"event", "session_end"}}));
  calls = counter.taken();
  CHECK(calls.size() == settled + 1);
  CHECK(calls.back().thread == std::this_thread::get_id());
}

TEST_CASE("audit sync none: never an fdatasync", "[audit_sync]") {
  temp_dir tmp;
  sync_counter counter;
  auto log = audit_log::open(tmp.path, "s-none", with(audit_sync_mode::none, counter));
  REQUIRE(log->write({{"event", "session_start"}}));
  REQUIRE(log->write(request(1)));
  REQUIRE(log->end({{"event", "session_end"}}));
  std::this_thread::sleep_for(2 * batch_delay);
  CHECK(counter.taken().empty());
}

TEST_CASE("audit sync: a failed fdatasync fails the log for good", "[audit_sync]") {
  temp_dir tmp;
  sync_counter counter;
  SECTION("batch: from the next record or availability check") {
    auto log = audit_log::open(tmp.path, "s-eio", with(audit_sync_mode::batch, counter));
    REQUIRE(log->write({{"event", "session_start"}}));
    *counter.error = EIO;
    REQUIRE(log->write(request(1)));  // written; its sync fails later
    for (int i = 0; i < 100 && counter.taken().empty(); ++i) std::this_thread::sleep_for(5ms);
    REQUIRE(!counter.taken().empty());
    CHECK_FALSE(log->available());
    CHECK(log->failure().find("fdatasync") != std::string::npos);
    CHECK_FALSE(log->write(request(2)));
    *counter.error = 0;
    std::this_thread::sleep_for(audit_log::retry_interval + 30ms);
    CHECK_FALSE(log->available());
  }
  SECTION("every: at the write") {
    auto log = audit_log::open(tmp.path, "s-eio", with(audit_sync_mode::every, counter));
    REQUIRE(log->write({{"event", "session_start"}}));
    *counter.error = EIO;
    CHECK_FALSE(log->write(request(1)));
    CHECK(log->failed());
    CHECK(log->failure().find("fdatasync") != std::string::npos);
    *counter.error = 0;
    std::this_thread::sleep_for(audit_log::retry_interval + 30ms);
    CHECK_FALSE(log->available());
  }
}

TEST_CASE("audit sync batch: a rotated-out file is synced once more", "[audit_sync]") {
  temp_dir tmp;
  sync_counter counter;
  auto options = with(audit_sync_mode::batch, counter);
  options.rotation.max_bytes = 600;
  auto log = audit_log::open(tmp.path, "s-rot", options);
  REQUIRE(log->write({{"event", "session_start"}}));
  const fs::path first = log->path();
  for (int i = 0; i < 10; ++i) REQUIRE(log->write(request(i)));
  REQUIRE(log->path() != first);
  REQUIRE(log->end({{"event", "session_end"}}));
  // Each file the session wrote was synced: the files left and the last one, at end().
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(tmp.path / "s-rot"))
    files += entry.is_regular_file();
  CHECK(files >= 2);
  CHECK(counter.taken().size() >= files);
}

TEST_CASE("audit_sync_file syncs the file it follows and those it followed before",
          "[audit_sync]") {
  temp_dir tmp;
  sync_counter counter;
  auto file = std::make_shared<audit_sync_file>(counter.fake());
  CHECK(file->sync_now() == 0);  // nothing to sync yet
  CHECK(counter.taken().empty());
  const auto a = tmp.path / "a";
  const auto b = tmp.path / "b";
  const int fa = ::open(a.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  const int fb = ::open(b.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(file->follow(fa) == 0);
  ::close(fa);  // the file keeps its own descriptor
  REQUIRE(file->follow(fb) == 0);
  ::close(fb);
  CHECK(file->sync_now() == 0);
  CHECK(counter.taken().size() == 2);
  CHECK(file->sync_now() == 0);
  CHECK(counter.taken().size() == 3);  // the one it left is closed now
  *counter.error = EIO;
  CHECK(file->sync_now() == EIO);
  CHECK(file->error() == EIO);
  CHECK(file->follow(-1) == EBADF);
}
