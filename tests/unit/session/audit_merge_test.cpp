#include "session/audit_merge.hpp"

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "session/audit_log.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::session::audit_log;
using broker::session::audit_log_options;
using broker::session::merged_log;
using broker::session::session_files;
using broker::test::temp_dir;
using nlohmann::json;

namespace {

using time_point = std::chrono::system_clock::time_point;

// A writer for one replica whose clock the test sets before each record.
struct replica_writer {
  time_point now = std::chrono::system_clock::from_time_t(1'800'000'000);
  std::unique_ptr<audit_log> log;
  replica_writer(const fs::path& dir, const std::string& replica, std::uint64_t max_bytes = 0) {
    audit_log_options options;
    options.replica = replica;
    options.rotation.max_bytes = max_bytes;
    options.clock = [this] { return now; };
    log = audit_log::open(dir, "s-merge", options);
  }
  void write_at(int ms, const std::string& path) {
    now = std::chrono::system_clock::from_time_t(1'800'000'000) + std::chrono::milliseconds(ms);
    REQUIRE(log->write({{"event", "request"}, {"path", path}}));
  }
};

std::vector<std::string> drain(merged_log& log, const char* key) {
  std::vector<std::string> out;
  while (auto line = log.next()) out.push_back(json::parse(*line)[key].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("merged_log orders two replicas' records by ts", "[audit_merge]") {
  temp_dir tmp;
  replica_writer a(tmp.path, "gw-a", 400);  // rotating: a's records span several files
  replica_writer b(tmp.path, "gw-b");
  a.write_at(10, "a1");
  b.write_at(5, "b1");
  b.write_at(20, "b2");
  a.write_at(20, "a2");  // the same ts as b2: replica name decides
  a.write_at(30, "a3");
  b.write_at(40, "b3");
  a.write_at(50, "a4");
  REQUIRE(session_files(tmp.path, "s-merge").size() == 2);
  REQUIRE(session_files(tmp.path, "s-merge")[0].files.size() > 1);

  merged_log log(session_files(tmp.path, "s-merge"));
  CHECK(drain(log, "path") == std::vector<std::string>{"b1", "a1", "a2", "b2", "a3", "b3", "a4"});
  CHECK_FALSE(log.next());
}

TEST_CASE("merged_log keeps a replica's own order when its clock steps back", "[audit_merge]") {
  temp_dir tmp;
  replica_writer a(tmp.path, "gw-a");
  replica_writer b(tmp.path, "gw-b");
  a.write_at(100, "a1");
  a.write_at(50, "a2");  // the clock stepped back: a2 still follows a1
  b.write_at(60, "b1");
  merged_log log(session_files(tmp.path, "s-merge"));
  CHECK(drain(log, "path") == std::vector<std::string>{"b1", "a1", "a2"});
}

TEST_CASE("merged_log follows new generations and replicas as they appear", "[audit_merge]") {
  temp_dir tmp;
  replica_writer a(tmp.path, "gw-a", 300);
  a.write_at(1, "a1");
  merged_log log(session_files(tmp.path, "s-merge"));
  CHECK(drain(log, "path") == std::vector<std::string>{"a1"});
  CHECK_FALSE(log.ended());

  a.write_at(2, "a2");
  a.write_at(3, "a3");  // into the next generation
  REQUIRE(session_files(tmp.path, "s-merge")[0].files.size() >= 2);
  replica_writer b(tmp.path, "gw-b");
  b.write_at(4, "b1");
  log.update(session_files(tmp.path, "s-merge"));
  CHECK(drain(log, "path") == std::vector<std::string>{"a2", "a3", "b1"});

  // A line still being written is held back until its newline comes.
  const auto newest_b = b.log->path();
  std::ofstream(newest_b, std::ios::app) << R"({"ts":"2027-01-15T08:00:00.005Z","path":"b)";
  CHECK_FALSE(log.next());
  std::ofstream(newest_b, std::ios::app) << R"(2","event":"session_end"})"
                                         << "\n";
  CHECK(drain(log, "path") == std::vector<std::string>{"b2"});
  CHECK_FALSE(log.ended());  // gw-a has not ended
  a.now += std::chrono::seconds(1);
  REQUIRE(a.log->write({{"event", "session_end"}, {"path", "a-end"}}));
  log.update(session_files(tmp.path, "s-merge"));
  CHECK(drain(log, "path") == std::vector<std::string>{"a-end"});
  CHECK(log.ended());
}

TEST_CASE("a replica's older file ending mid-line still shows that line", "[audit_merge]") {
  temp_dir tmp;
  fs::create_directory(tmp.path / "s-cut");
  std::ofstream(tmp.path / "s-cut" / "local.000001.jsonl") << "{\"ts\":\"1\"}\n{\"ts\":\"2";
  std::ofstream(tmp.path / "s-cut" / "local.000002.jsonl") << "{\"ts\":\"3\"}\n";
  merged_log log(session_files(tmp.path, "s-cut"));
  std::vector<std::string> lines;
  while (auto line = log.next()) lines.push_back(*line);
  CHECK(lines == std::vector<std::string>{"{\"ts\":\"1\"}", "{\"ts\":\"2", "{\"ts\":\"3\"}"});
}

TEST_CASE("the end of a merged session, read from the files' ends, is the merge's end",
          "[audit_merge]") {
  temp_dir tmp;
  replica_writer a(tmp.path, "gw-a", 400);  // rotating: its end spans several files
  replica_writer b(tmp.path, "gw-b");
  std::vector<std::string> all;
  for (int i = 0; i < 40; ++i) {
    auto& w = i % 3 == 0 ? b : a;
    w.write_at(i * 10, "p" + std::to_string(i));
  }
  const auto files = session_files(tmp.path, "s-merge");
  REQUIRE(files[0].files.size() > 3);
  merged_log log(files);
  const auto merged = drain(log, "path");
  REQUIRE(merged.size() == 40);
  CHECK(broker::session::count_lines(files[0]) + broker::session::count_lines(files[1]) == 40);
  for (std::size_t k :
       {std::size_t{1}, std::size_t{7}, std::size_t{26}, std::size_t{40}, std::size_t{100}}) {
    std::vector<std::string> tail;
    for (const auto& line : broker::session::merged_tail(files, k))
      tail.push_back(json::parse(line)["path"].get<std::string>());
    const auto expected = std::vector<std::string>(
        merged.end() - static_cast<std::ptrdiff_t>(std::min<std::size_t>(k, 40)), merged.end());
    CHECK(tail == expected);
  }
  // A record still being written is not part of the end.
  std::ofstream(b.log->path(), std::ios::app) << R"({"ts":"2027-01-15T09:00:00.000Z","pa)";
  CHECK(broker::session::last_lines(files[1], 1).size() == 1);
  CHECK(json::parse(broker::session::last_lines(files[1], 1)[0])["path"] == "p39");
  CHECK(broker::session::count_lines(files[1]) == 14);
}

TEST_CASE("a replica's last lines across long lines and an empty first line", "[audit_merge]") {
  temp_dir tmp;
  fs::create_directory(tmp.path / "s-long");
  const std::string long_line(200'000, 'x');  // longer than a read
  std::ofstream(tmp.path / "s-long" / "local.000001.jsonl") << "\nfirst\n" << long_line << "\n";
  std::ofstream(tmp.path / "s-long" / "local.000002.jsonl") << "last\n";
  const auto files = session_files(tmp.path, "s-long");
  using v = std::vector<std::string>;
  CHECK(broker::session::last_lines(files[0], 2) == v{long_line, "last"});
  CHECK(broker::session::last_lines(files[0], 9) == v{"", "first", long_line, "last"});
  CHECK(broker::session::count_lines(files[0]) == 4);
}
