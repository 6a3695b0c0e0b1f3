// audit_log's rotated and per-replica layout (audit_files.hpp), its rotation policy and its sink.
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "session/audit_files.hpp"
#include "session/audit_log.hpp"
#include "session/log_reader.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::session::audit_log;
using broker::session::audit_log_options;
using broker::session::session_files;
using broker::session::verify_replica;
using broker::test::temp_dir;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A clock the test moves by hand.
struct fake_clock {
  std::chrono::system_clock::time_point now = std::chrono::system_clock::from_time_t(1'800'000'000);
  std::function<std::chrono::system_clock::time_point()> fn() {
    return [this] { return now; };
  }
};

ordered_json request(int n) {
  return {{"event", "request"},
          {"method", "GET"},
          {"host", "example.com"},
          {"path", "/" + std::to_string(n)},
          {"decision", "allow"}};
}

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::uintmax_t size_of(const fs::path& file) {
  return fs::file_size(file);
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("audit_log without rotation or replica keeps the single file", "[audit_rotation]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path, "s-one", {});
  REQUIRE(log->write(request(1)));
  CHECK(log->path() == tmp.path / "s-one.jsonl");
  CHECK_FALSE(fs::exists(tmp.path / "s-one"));
}

TEST_CASE("audit_log rotates by size and the chain goes on across files", "[audit_rotation]") {
  temp_dir tmp;
  audit_log_options options;
  options.rotation.max_bytes = 1000;
  auto log = audit_log::open(tmp.path, "s-size", options);
  REQUIRE_FALSE(log->failed());
  CHECK(log->path() == tmp.path / "s-size" / "local.000001.jsonl");
  CHECK(mode_of(tmp.path / "s-size") == 0700);
  REQUIRE(log->write({{"event", "session_start"}}));
  for (int i = 0; i < 40; ++i) REQUIRE(log->write(request(i)));
  REQUIRE(log->write({{"event", "session_end"}, {"exit", 0}}));

  const auto replicas = session_files(tmp.path, "s-size");
  REQUIRE(replicas.size() == 1);
  CHECK(replicas[0].replica == "local");
  const auto& files = replicas[0].files;
  REQUIRE(files.size() >= 4);
  std::string previous_hash(64, '0');
  std::uint64_t seq = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    INFO(files[i].path);
    CHECK(files[i].generation == i + 1);
    CHECK(mode_of(files[i].path) == 0600);
    CHECK(size_of(files[i].path) <= 1000);  // a record never pushes a file past the limit
    const auto lines = read_lines(files[i].path);
    REQUIRE_FALSE(lines.empty());
    for (const auto& line : lines) {  // each file's first prev is the last hash of the one before
      const auto record = json::parse(line);
      CHECK(record["seq"] == ++seq);
      CHECK(record["prev"] == previous_hash);
      previous_hash = record["hash"];
    }
  }
  CHECK(seq == 42);
  CHECK(log->path() == files.back().path);
  const auto result = verify_replica(replicas[0]);
  INFO(result.error);
  CHECK(result.ok);
  CHECK(result.records == 42);
  CHECK(result.files == files.size());
  CHECK(result.has_end);
}

TEST_CASE("audit_log gives a record larger than the limit a file of its own", "[audit_rotation]") {
  temp_dir tmp;
  audit_log_options options;
  options.rotation.max_bytes = 300;
  auto log = audit_log::open(tmp.path, "s-big", options);
  REQUIRE(log->write(request(1)));
  REQUIRE(log->write({{"event", "request"}, {"path", std::string(1000, 'a')}}));
  REQUIRE(log->write(request(2)));
  const auto files = session_files(tmp.path, "s-big")[0].files;
  REQUIRE(files.size() == 3);
  CHECK(read_lines(files[1].path).size() == 1);
  CHECK(verify_replica(session_files(tmp.path, "s-big")[0]).ok);
}

TEST_CASE("audit_log rotates by age, measured from a file's first record", "[audit_rotation]") {
  temp_dir tmp;
  fake_clock clock;
  audit_log_options options;
  options.rotation.max_age = std::chrono::hours(1);
  options.clock = clock.fn();
  auto log = audit_log::open(tmp.path, "s-age", options);
  REQUIRE(log->write(request(1)));
  clock.now += std::chrono::minutes(59);
  REQUIRE(log->write(request(2)));
  CHECK(log->path().filename() == "local.000001.jsonl");
  clock.now += std::chrono::minutes(1);
  REQUIRE(log->write(request(3)));  // the first file's first record is an hour old
  CHECK(log->path().filename() == "local.000002.jsonl");
  clock.now += std::chrono::minutes(30);
  REQUIRE(log->write(request(4)));
  CHECK(log->path().filename() == "local.000002.jsonl");
  // A quiet spell starts no file by itself: the next record does, when it comes.
  clock.now += std::chrono::hours(5);
  CHECK(session_files(tmp.path, "s-age")[0].files.size() == 2);
  REQUIRE(log->write(request(5)));
  CHECK(log->path().filename() == "local.000003.jsonl");

  const auto replica = session_files(tmp.path, "s-age")[0];
  CHECK(read_lines(replica.files[0].path).size() == 2);
  CHECK(read_lines(replica.files[1].path).size() == 2);
  CHECK(read_lines(replica.files[2].path).size() == 1);
  CHECK(json::parse(read_lines(replica.files[0].path)[0])["ts"] == "2027-01-15T08:00:00.000Z");
  CHECK(verify_replica(replica).ok);
}

TEST_CASE("a reopened rotated log continues its newest file", "[audit_rotation]") {
  temp_dir tmp;
  fake_clock clock;
  audit_log_options options;
  options.rotation.max_bytes = 600;
  options.rotation.max_age = std::chrono::hours(1);
  options.clock = clock.fn();
  fs::path newest;
  {
    auto log = audit_log::open(tmp.path, "s-again", options);
    REQUIRE(log->write({{"event", "session_start"}}));
    for (int i = 0; i < 6; ++i) REQUIRE(log->write(request(i)));
    REQUIRE(log->write({{"event", "session_end"}}));
    newest = log->path();
  }
  const auto before = session_files(tmp.path, "s-again")[0].files.size();
  REQUIRE(before >= 2);
  const auto lines_before = read_lines(newest).size();

  SECTION("appending to the newest file, seq and prev going on") {
    auto no_size_limit = options;  // so that the next record surely fits
    no_size_limit.rotation.max_bytes = 0;
    auto log = audit_log::open(tmp.path, "s-again", no_size_limit);
    REQUIRE_FALSE(log->failed());
    CHECK(log->path() == newest);
    REQUIRE(log->write({{"event", "session_start"}}));
    const auto lines = read_lines(newest);
    REQUIRE(lines.size() == lines_before + 1);
    CHECK(json::parse(lines.back())["seq"] == 9);
    CHECK(json::parse(lines.back())["prev"] == json::parse(lines[lines.size() - 2])["hash"]);
    CHECK(verify_replica(session_files(tmp.path, "s-again")[0]).ok);
  }
  SECTION("the file's age counts from its first record, not from the reopening") {
    clock.now += std::chrono::hours(2);
    auto log = audit_log::open(tmp.path, "s-again", options);
    REQUIRE(log->write({{"event", "session_start"}}));
    CHECK(session_files(tmp.path, "s-again")[0].files.size() == before + 1);
    CHECK(verify_replica(session_files(tmp.path, "s-again")[0]).ok);
  }
  SECTION("an empty newest file continues the chain of the one before") {
    const auto empty =
        broker::session::generation_log_path(tmp.path, "s-again", "local", before + 1);
    std::ofstream{empty};
    auto log = audit_log::open(tmp.path, "s-again", options);
    REQUIRE_FALSE(log->failed());
    CHECK(log->path() == empty);
    REQUIRE(log->write({{"event", "session_start"}}));
    CHECK(json::parse(read_lines(log->path())[0])["seq"] == 9);
    CHECK(verify_replica(session_files(tmp.path, "s-again")[0]).ok);
  }
  SECTION("without rotation options, the same session continues the rotated files") {
    auto log = audit_log::open(tmp.path, "s-again", {});
    CHECK(log->path() == newest);
    REQUIRE(log->write({{"event", "session_start"}}));
    CHECK_FALSE(fs::exists(tmp.path / "s-again.jsonl"));
  }
}

TEST_CASE("a session's single file is generation 0 of replica local", "[audit_rotation]") {
  temp_dir tmp;
  {
    auto log = audit_log::open(tmp.path, "s-mixed", {});
    REQUIRE(log->write({{"event", "session_start"}}));
    REQUIRE(log->write({{"event", "session_end"}}));
  }
  audit_log_options options;
  options.rotation.max_bytes = 10'000;
  auto log = audit_log::open(tmp.path, "s-mixed", options);
  REQUIRE(log->write({{"event", "session_start"}}));
  CHECK(log->path() == tmp.path / "s-mixed" / "local.000001.jsonl");
  CHECK(json::parse(read_lines(log->path())[0])["seq"] == 3);
  const auto replicas = session_files(tmp.path, "s-mixed");
  REQUIRE(replicas.size() == 1);
  REQUIRE(replicas[0].files.size() == 2);
  CHECK(replicas[0].files[0].generation == 0);
  CHECK(verify_replica(replicas[0]).ok);
}

TEST_CASE("audit_log replicas write their own chains side by side", "[audit_rotation]") {
  temp_dir tmp;
  audit_log_options a, b;
  a.replica = "gw-a";
  b.replica = "gw.b_2";
  auto log_a = audit_log::open(tmp.path, "s-team", a);
  auto log_b = audit_log::open(tmp.path, "s-team", b);
  REQUIRE(log_a->write(request(1)));
  REQUIRE(log_b->write(request(2)));
  REQUIRE(log_a->write(request(3)));
  CHECK(log_a->path() == tmp.path / "s-team" / "gw-a.000001.jsonl");
  CHECK(log_b->path() == tmp.path / "s-team" / "gw.b_2.000001.jsonl");
  CHECK(json::parse(read_lines(log_b->path())[0])["seq"] == 1);
  const auto replicas = session_files(tmp.path, "s-team");
  REQUIRE(replicas.size() == 2);
  CHECK(verify_replica(replicas[0]).records == 2);
  CHECK(verify_replica(replicas[1]).records == 1);

  for (std::string bad :
       {std::string("a/b"), std::string("../x"), std::string(65, 'r'), std::string("sp ace")}) {
    INFO(bad);
    audit_log_options o;
    o.replica = bad;
    CHECK(audit_log::open(tmp.path, "s-team", o)->failed());
  }
}

TEST_CASE("audit_log fails closed when the next generation is someone else's", "[audit_rotation]") {
  temp_dir tmp;
  audit_log_options options;
  options.rotation.max_bytes = 200;
  auto log = audit_log::open(tmp.path, "s-clash", options);
  REQUIRE(log->write(request(1)));
  std::ofstream(tmp.path / "s-clash" / "local.000002.jsonl") << "";
  CHECK_FALSE(log->write(request(2)));
  CHECK(log->failed());
  CHECK(log->failure().find("local.000002.jsonl: File exists") != std::string::npos);
}

TEST_CASE("audit_log's sink sees every line, in order, as written", "[audit_rotation]") {
  temp_dir tmp;
  audit_log_options options;
  options.rotation.max_bytes = 700;
  auto log = audit_log::open(tmp.path, "s-sink", options);
  std::vector<std::string> seen;
  log->set_sink([&](std::string_view line) { seen.emplace_back(line); });
  REQUIRE(log->write({{"event", "session_start"}}));
  for (int i = 0; i < 10; ++i) REQUIRE(log->write(request(i)));
  REQUIRE(log->end({{"event", "session_end"}}));

  std::vector<std::string> on_disk;
  const auto replicas = session_files(tmp.path, "s-sink");
  for (const auto& file : replicas.at(0).files)
    for (const auto& line : read_lines(file.path)) on_disk.push_back(line);
  CHECK(replicas.at(0).files.size() > 1);
  CHECK(seen == on_disk);
  for (const auto& line : seen) CHECK(line.find('\n') == std::string::npos);
}

TEST_CASE("a throwing sink does not fail the log", "[audit_rotation]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path, "s-bad-sink", {});
  int calls = 0;
  log->set_sink([&](std::string_view) {
    ++calls;
    throw std::runtime_error("pipeline down");
  });
  REQUIRE(log->write(request(1)));
  REQUIRE(log->write(request(2)));
  CHECK_FALSE(log->failed());
  CHECK(calls == 2);
  log->set_sink({});
  REQUIRE(log->write(request(3)));
  CHECK(calls == 2);
  CHECK(read_lines(log->path()).size() == 3);
}

TEST_CASE("audit_log rotating with records staged keeps each in the file it was counted in",
          "[audit_rotation]") {
  temp_dir tmp;
  audit_log_options options;
  options.rotation.max_bytes = 1000;
  auto log = audit_log::open(tmp.path, "s-staged", options);
  for (int i = 0; i < 30; ++i) {
    broker::base::json_members m;
    m.add("event", "request").add("path", "/" + std::to_string(i));
    REQUIRE(log->stage(m));
  }
  REQUIRE(log->flush());
  const auto replicas = session_files(tmp.path, "s-staged");
  REQUIRE(replicas.size() == 1);
  REQUIRE(replicas[0].files.size() >= 3);
  for (const auto& f : replicas[0].files) CHECK(size_of(f.path) <= 1000);
  const auto result = verify_replica(replicas[0]);
  INFO(result.error);
  CHECK(result.ok);
  CHECK(result.records == 30);
}
