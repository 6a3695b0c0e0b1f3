#include "session/audit_log.hpp"
#include "base/digest.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "session/log_reader.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::session::audit_log;
using nlohmann::json;
using nlohmann::ordered_json;

using broker::test::temp_dir;

namespace {

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

broker::session::verify_result verify_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return broker::session::verify_log(in);
}

ordered_json request_fields(int n) {
  return {{"event", "request"}, {"method", "GET"},
          {"scheme", "https"},  {"host", "api.github.com"},
          {"port", 443},        {"path", "/r/" + std::to_string(n)},
          {"status", 200},      {"decision", "allow"}};
}

// "2026-11-29T20:15:06.053Z"
bool is_utc_millis(const std::string& ts) {
  const std::string shape = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (ts.size() != shape.size()) return false;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    bool ok = shape[i] == 'd' ? ts[i] >= '0' && ts[i] <= '9' : ts[i] == shape[i];
    if (!ok) return false;
  }
  return true;
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("sha256_hex and chain_hash", "[audit_log]") {
  using broker::base::sha256_hex;
  using broker::session::chain_hash;
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(chain_hash("a", "bc") == sha256_hex("abc"));
}

TEST_CASE("audit_log writes a verifiable chain in the documented layout", "[audit_log]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path / "a" / "b", "s-test");
  REQUIRE_FALSE(log->failed());
  CHECK(log->failure().empty());
  CHECK(log->path() == tmp.path / "a" / "b" / "s-test.jsonl");
  CHECK(log->session_id() == "s-test");

  REQUIRE(log->write({{"event", "session_start"}, {"version", "0.1.0"}}));
  REQUIRE(log->write(request_fields(1)));
  REQUIRE(log->write({{"event", "session_end"}, {"requests", 1}, {"denied", 0}, {"exit", 0}}));

  auto lines = read_lines(log->path());
  REQUIRE(lines.size() == 3);
  std::string prev(64, '0');
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    INFO(line);
    // {"ts":"2026-11-29T20:15:06.053Z","session":"s-test","seq":N,"event":...
    REQUIRE(line.starts_with("{\"ts\":\""));
    CHECK(is_utc_millis(line.substr(7, 24)));
    std::string head = "\",\"session\":\"s-test\",\"seq\":" + std::to_string(i + 1) + ",\"event\":";
    CHECK(line.compare(31, head.size(), head) == 0);
    // ...,"prev":"<64 hex>","hash":"<64 hex>"}
    std::string hash = json::parse(line)["hash"].get<std::string>();
    std::string tail = ",\"prev\":\"" + prev + "\",\"hash\":\"" + hash + "\"}";
    REQUIRE(line.ends_with(tail));
    std::string without_hash = line.substr(0, line.size() - 75) + "}";
    CHECK(hash == broker::session::chain_hash(prev, without_hash));
    prev = hash;
  }
  // Caller fields keep their order, between seq and prev.
  CHECK(lines[1].find(R"("seq":2,"event":"request","method":"GET","scheme":"https")") !=
        std::string::npos);

  auto result = verify_file(log->path());
  CHECK(result.ok);
  CHECK(result.records == 3);
  CHECK(result.has_end);
  CHECK(result.bad_line == 0);
}

TEST_CASE("audit_log creates private directories and file", "[audit_log]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path / "x" / "y", "s-1");
  REQUIRE_FALSE(log->failed());
  CHECK(mode_of(tmp.path / "x") == 0700);
  CHECK(mode_of(tmp.path / "x" / "y") == 0700);
  CHECK(mode_of(log->path()) == 0600);
  // An existing directory keeps its mode.
  fs::permissions(tmp.path / "x", fs::perms(0750));
  auto again = audit_log::open(tmp.path / "x", "s-2");
  REQUIRE_FALSE(again->failed());
  CHECK(mode_of(tmp.path / "x") == 0750);
}

TEST_CASE("audit_log continues the chain of a reused session id", "[audit_log]") {
  temp_dir tmp;
  {
    auto log = audit_log::open(tmp.path, "s-resume");
    REQUIRE(log->write({{"event", "session_start"}}));
    REQUIRE(log->write({{"event", "session_end"}, {"exit", 0}}));
  }
  auto log = audit_log::open(tmp.path, "s-resume");
  REQUIRE_FALSE(log->failed());
  REQUIRE(log->write({{"event", "session_start"}}));
  REQUIRE(log->write(request_fields(1)));
  auto lines = read_lines(log->path());
  REQUIRE(lines.size() == 4);
  CHECK(json::parse(lines[2])["seq"] == 3);
  CHECK(json::parse(lines[2])["prev"] == json::parse(lines[1])["hash"]);
  auto result = verify_file(log->path());
  CHECK(result.ok);
  CHECK(result.records == 4);
  CHECK_FALSE(result.has_end);
}

TEST_CASE("audit_log refuses to continue a damaged file", "[audit_log]") {
  temp_dir tmp;
  SECTION("partial last line") {
    {
      auto log = audit_log::open(tmp.path, "s-cut");
      REQUIRE(log->write({{"event", "session_start"}}));
    }
    std::ofstream(tmp.path / "s-cut.jsonl", std::ios::app) << R"({"ts":"2026-)";
    auto log = audit_log::open(tmp.path, "s-cut");
    CHECK(log->failed());
    CHECK(log->failure().find("partial") != std::string::npos);
    CHECK_FALSE(log->write({{"event", "request"}}));
  }
  SECTION("last line without a hash") {
    std::ofstream(tmp.path / "s-junk.jsonl") << "{\"seq\":1}\n";
    auto log = audit_log::open(tmp.path, "s-junk");
    CHECK(log->failed());
  }
  SECTION("a long last record spanning several read chunks") {
    {
      auto log = audit_log::open(tmp.path, "s-long");
      REQUIRE(log->write({{"event", "request"}, {"path", std::string(200000, 'a')}}));
      REQUIRE(log->write({{"event", "request"}, {"path", std::string(150000, 'b')}}));
    }
    auto log = audit_log::open(tmp.path, "s-long");
    REQUIRE_FALSE(log->failed());
    REQUIRE(log->write({{"event", "session_end"}}));
    auto result = verify_file(log->path());
    CHECK(result.ok);
    CHECK(result.records == 3);
  }
}

TEST_CASE("audit_log open failures leave it failed", "[audit_log]") {
  temp_dir tmp;
  SECTION("directory path is a regular file") {
    std::ofstream(tmp.path / "file") << "x";
    auto log = audit_log::open(tmp.path / "file" / "sub", "s-1");
    CHECK(log->failed());
    CHECK(log->failure().find("Not a directory") != std::string::npos);
    CHECK_FALSE(log->write({{"event", "session_start"}}));
  }
  SECTION("session ids that would escape the directory") {
    for (std::string id : {"", ".", "..", "../evil", "a/b"}) {
      INFO(id);
      auto log = audit_log::open(tmp.path, id);
      CHECK(log->failed());
    }
    CHECK_FALSE(fs::exists(tmp.path.parent_path() / "evil.jsonl"));
  }
}

TEST_CASE("audit_log on a device that is always full stays unavailable", "[audit_log]") {
  temp_dir tmp;
  fs::create_symlink("/dev/full", tmp.path / "s-full.jsonl");
  auto log = audit_log::open(tmp.path, "s-full");
  REQUIRE_FALSE(log->failed());
  CHECK_FALSE(log->write({{"event", "session_start"}}));
  CHECK(log->failed());
  CHECK(log->failure().find("No space left on device") != std::string::npos);
  CHECK_FALSE(log->available());
  std::this_thread::sleep_for(audit_log::retry_interval + std::chrono::milliseconds(50));
  CHECK_FALSE(log->available());  // tried again, and full again
  CHECK_FALSE(log->end({{"event", "session_end"}}));
}

TEST_CASE("audit_log write failure other than a full disk is permanent", "[audit_log]") {
  temp_dir tmp;
  broker::session::audit_log_options options;
  auto broken = std::make_shared<std::atomic<bool>>(false);
  options.calls.write = [broken](int fd, const char* data, std::size_t size) -> ssize_t {
    if (!*broken) return ::write(fd, data, size);
    errno = EIO;
    return -1;
  };
  auto log = audit_log::open(tmp.path, "s-eio", options);
  REQUIRE(log->write({{"event", "session_start"}}));
  *broken = true;
  CHECK_FALSE(log->write(request_fields(1)));
  CHECK(log->failure().find("Input/output error") != std::string::npos);
  *broken = false;
  std::this_thread::sleep_for(audit_log::retry_interval + std::chrono::milliseconds(50));
  CHECK_FALSE(log->available());
  CHECK_FALSE(log->end({{"event", "session_end"}}));
  CHECK(read_lines(log->path()).size() == 1);
}

TEST_CASE("audit_log sanitizes caller fields", "[audit_log]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path, "s-utf8");
  // Invalid UTF-8 from the child must not throw or drop the record.
  REQUIRE(log->write({{"event", "request"}, {"path", "/a\xff\xfe"}, {"exe", "\xc3"}}));
  // Reserved keys from a caller are dropped, not duplicated.
  REQUIRE(log->write({{"seq", 99}, {"event", "request"}, {"hash", "x"}, {"prev", "y"}}));
  REQUIRE(log->write(ordered_json::array({1, 2})));
  auto lines = read_lines(log->path());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].find("/a\xef\xbf\xbd\xef\xbf\xbd") != std::string::npos);
  auto second = json::parse(lines[1]);
  CHECK(second["seq"] == 2);
  CHECK(second["event"] == "request");
  CHECK(lines[1].find("\"seq\":99") == std::string::npos);
  CHECK(verify_file(log->path()).ok);
}

TEST_CASE("audit_log is safe to share between threads", "[audit_log]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path, "s-threads");
  constexpr int threads = 6;
  constexpr int per_thread = 150;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        if (!log->write(request_fields(t * 1000 + i))) ++failures;
      }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(failures == 0);
  auto result = verify_file(log->path());
  CHECK(result.ok);
  CHECK(result.records == threads * per_thread);

  std::set<std::uint64_t> seqs;
  std::set<std::string> paths;
  for (const auto& line : read_lines(log->path())) {
    auto record = json::parse(line);
    seqs.insert(record["seq"].get<std::uint64_t>());
    paths.insert(record["path"].get<std::string>());
  }
  CHECK(seqs.size() == threads * per_thread);
  CHECK(paths.size() == threads * per_thread);
}

namespace {

broker::base::json_members staged_request(int n) {
  broker::base::json_members m;
  m.add("event", "request").add("path", "/staged/" + std::to_string(n)).add("status", 200);
  return m;
}

}  // namespace

TEST_CASE("audit_log stages records and writes them together at the flush", "[audit_log]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path, "s-staged");
  std::vector<std::string> sunk;
  log->set_sink([&](std::string_view line) { sunk.emplace_back(line); });
  REQUIRE(log->write({{"event", "session_start"}}));
  REQUIRE(log->stage(staged_request(1)));
  REQUIRE(log->stage(staged_request(2)));
  // Chained, numbered, not yet in the file nor told to the sink.
  CHECK(read_lines(log->path()).size() == 1);
  CHECK(sunk.size() == 1);
  REQUIRE(log->flush());
  auto lines = read_lines(log->path());
  REQUIRE(lines.size() == 3);
  CHECK(json::parse(lines[1])["path"] == "/staged/1");
  CHECK(json::parse(lines[2])["seq"] == 3);
  CHECK(sunk == std::vector<std::string>(lines.begin(), lines.end()));
  CHECK(log->flush());  // nothing staged: nothing written
  CHECK(read_lines(log->path()).size() == 3);

  // A record written at once takes what is staged before it, in seq order.
  REQUIRE(log->stage(staged_request(3)));
  REQUIRE(log->write({{"event", "session_end"}}));
  lines = read_lines(log->path());
  REQUIRE(lines.size() == 5);
  CHECK(json::parse(lines[3])["path"] == "/staged/3");
  CHECK(json::parse(lines[4])["event"] == "session_end");
  const auto result = verify_file(log->path());
  CHECK(result.ok);
  CHECK(result.records == 5);
}

TEST_CASE("audit_log writes staged records once they pass the bound", "[audit_log]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path, "s-bound");
  int staged = 0;
  while (fs::file_size(log->path()) == 0) {
    REQUIRE(staged < 10000);
    REQUIRE(log->stage(staged_request(staged++)));
  }
  // All of them at once, when the one that passed the bound was staged.
  const auto lines = read_lines(log->path());
  CHECK(lines.size() == static_cast<std::size_t>(staged));
  CHECK(fs::file_size(log->path()) >= audit_log::staged_limit);
  CHECK(fs::file_size(log->path()) - lines.back().size() - 1 < audit_log::staged_limit);
  CHECK(verify_file(log->path()).ok);
}

TEST_CASE("audit_log staging on a full device fails at the flush", "[audit_log]") {
  temp_dir tmp;
  fs::create_symlink("/dev/full", tmp.path / "s-full.jsonl");
  auto log = audit_log::open(tmp.path, "s-full");
  REQUIRE(log->stage(staged_request(1)));
  CHECK_FALSE(log->failed());
  CHECK_FALSE(log->flush());
  CHECK(log->failed());
  CHECK_FALSE(log->stage(staged_request(2)));
  CHECK_FALSE(log->flush());
}
