#include "gateway/console/console_index.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "../../temp_dir.hpp"

using namespace broker::gateway;
namespace fs = std::filesystem;

namespace {

void append(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::app) << text;
}

std::string exchange(const std::string& ts, int seq, const std::string& decision,
                     const std::string& extra = "") {
  return R"({"ts":")" + ts + R"(","seq":)" + std::to_string(seq) +
         R"(,"event":"request","method":"GET","host":"h.test","path":"/p","status":200,)" +
         R"("bytes_out":10,"bytes_in":100,"decision":")" + decision + "\"" + extra + "}\n";
}

}  // namespace

TEST_CASE("console index: counters per session across replicas' files, read as they grow",
          "[console_index]") {
  broker::test::temp_dir dir;
  const auto r1 = dir.path / "g-1" / "r1.000001.jsonl";
  const auto r2 = dir.path / "g-1" / "r2.000001.jsonl";
  append(r1, R"({"ts":"2026-12-01T10:00:00.000Z","seq":1,"event":"session_start","user":"ana"})"
             "\n");
  append(r1,
         exchange("2026-12-01T10:00:01.000Z", 2, "allow", R"(,"llm_tokens":150,"cost_usd":0.25)"));
  append(r2, exchange("2026-12-02T09:00:00.000Z", 1, "deny", R"(,"error":"policy_denied")"));
  // A single-file session, a file that is no log, and a record still being written.
  append(dir.path / "s-2.jsonl", exchange("2026-12-02T11:00:00.000Z", 1, "allow"));
  append(dir.path / "notes.txt", "hello\n");
  append(r2, R"({"ts":"2026-12-02T09:00:01.000Z","seq":2,"event":"requ)");

  console_index index(dir.path);
  index.scan();
  auto one = index.usage("g-1");
  REQUIRE(one);
  CHECK(one->user == "ana");
  CHECK(one->requests == 2);
  CHECK(one->denied == 1);
  CHECK(one->bytes_out == 20);
  CHECK(one->bytes_in == 200);
  CHECK(one->llm_tokens == 150);
  CHECK(one->cost_usd == Approx(0.25));
  CHECK(one->last_ts == "2026-12-02T09:00:00.000Z");
  CHECK(index.usage("s-2")->requests == 1);
  CHECK_FALSE(index.usage("notes"));
  CHECK(index.statistics().files == 3);
  CHECK(index.statistics().records == 4);

  // The half-written record is taken once it is whole, and only the new bytes are read.
  append(r2, R"(est","decision":"deny","error":"budget_exhausted","host":"x.test"})"
             "\n");
  append(dir.path / "g-1" / "r1.000002.jsonl",
         exchange("2026-12-02T12:00:00.000Z", 3, "allow", R"(,"llm_tokens":50)"));
  index.scan();
  one = index.usage("g-1");
  CHECK(one->requests == 4);
  CHECK(one->denied == 2);
  CHECK(one->llm_tokens == 200);
  CHECK(index.statistics().records == 6);

  std::size_t total = 0;
  auto refused = index.refusals({}, 0, 10, total);
  REQUIRE(total == 2);
  CHECK(refused[0].code == "budget_exhausted");  // newest first
  CHECK(refused[0].replica == "r2");
  CHECK(refused[1].code == "policy_denied");
  CHECK(index.refusals({"policy_denied", "", ""}, 0, 10, total).size() == 1);
  CHECK(index.refusals({"", "s-2", ""}, 0, 10, total).empty());
  CHECK(index.refusals({"", "", "x.te"}, 0, 10, total).size() == 1);
  CHECK(index.refusals({}, 1, 10, total).size() == 1);

  const auto spend = index.spend("2026-12-02");
  REQUIRE(spend.size() == 1);
  CHECK(spend.at("2026-12-02").at("g-1").llm_tokens == 50);
  CHECK(index.spend("").at("2026-12-01").at("g-1").cost_usd == Approx(0.25));
  CHECK(index.users() == std::map<std::string, std::string>{{"g-1", "ana"}});
}

TEST_CASE("console index: keeps the latest refusals only, and survives damage", "[console_index]") {
  broker::test::temp_dir dir;
  const auto file = dir.path / "g-2" / "gw.000001.jsonl";
  std::string text =
      "not json\n[1,2]\n{\"event\":\"request\",\"decision\":\"deny\",\"seq\":\"x\"}\n";
  for (int i = 1; i <= 30; ++i)
    text +=
        exchange("2026-12-03T00:00:" + std::string(i < 10 ? "0" : "") + std::to_string(i) + ".000Z",
                 i, "deny", R"(,"error":"e)" + std::to_string(i) + "\"");
  append(file, text);
  console_index index(dir.path, 10);
  index.scan();
  std::size_t total = 0;
  const auto kept = index.refusals({}, 0, 100, total);
  CHECK(total == 10);
  CHECK(kept.front().code == "e30");
  CHECK(kept.back().code == "e21");
  CHECK(index.usage("g-2")->denied == 31);
  // A directory that is gone is no error: nothing more is read.
  fs::remove_all(dir.path);
  index.scan();
  CHECK(index.usage("g-2")->denied == 31);
}

TEST_CASE("console index: a stopped scan ends at once and the next goes on from there",
          "[console_index]") {
  broker::test::temp_dir dir;
  const auto file = dir.path / "g-1" / "r1.000001.jsonl";
  for (int i = 1; i <= 3; ++i) append(file, exchange("2026-12-01T10:00:00.000Z", i, "allow"));
  console_index index(dir.path);
  std::atomic<bool> stop{true};
  index.scan(&stop);  // a gateway stopping: nothing read, nothing to wait for
  CHECK_FALSE(index.usage("g-1"));
  CHECK(index.statistics().records == 0);
  stop = false;
  index.scan(&stop);
  REQUIRE(index.usage("g-1"));
  CHECK(index.usage("g-1")->requests == 3);
  CHECK(index.statistics().records == 3);
}

TEST_CASE("console scanner: its end does not wait for the scan under way", "[console_index]") {
  broker::test::temp_dir dir;
  // Enough records that a whole scan takes far longer than the end may.
  std::string lines;
  for (int i = 1; i <= 200'000; ++i) lines += exchange("2026-12-01T10:00:00.000Z", i, "allow");
  append(dir.path / "g-1" / "r1.000001.jsonl", lines);
  auto index = std::make_shared<console_index>(dir.path);
  auto scanner = std::make_unique<console_scanner>(index, std::chrono::milliseconds(10));
  scanner->wanted();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (index->statistics().records == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  const auto started = std::chrono::steady_clock::now();
  scanner.reset();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::milliseconds(500));
  CHECK(index->statistics().records < 200'000);  // stopped part-way
}
