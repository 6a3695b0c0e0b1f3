#include "brokers/coded_body_scan.hpp"

#include <catch2/catch.hpp>

#include "../http/coded_samples.hpp"

using namespace broker;
using brokers::coded_body_scan;
using http::content_coding;
using verdict = coded_body_scan::verdict;

namespace {

constexpr std::string_view value = "ghp_D0mmyT0kenForCodedBodyTests0123456789";
constexpr std::string_view other = "sk-other-value-that-is-never-sent-0000";
const std::vector<brokers::scrub_pattern> patterns{{other, other}, {value, value}};
constexpr http::decode_limits roomy{64 * 1024 * 1024, 1024 * 1024, 1000};

struct run_result {
  coded_body_scan::outcome last;
  std::string released;  // what went on, in order
};

// Feeds `coded` one piece at a time (`step` bytes each), stopping at the first verdict that is
// not a pass; finishes when all passed.
run_result run(const std::vector<content_coding>& applied, std::string_view coded, std::size_t step,
               std::size_t max_withheld = 1024 * 1024) {
  brokers::stream_scrubber scan(patterns);
  coded_body_scan s(applied, roomy, max_withheld, scan);
  run_result r;
  for (std::size_t i = 0; i < coded.size(); i += step) {
    r.last = s.feed(coded.substr(i, step), r.released);
    CHECK(r.released.size() + s.withheld() == std::min(coded.size(), i + step));
    if (r.last.what != verdict::pass) return r;
  }
  r.last = s.finish(r.released);
  return r;
}

}  // namespace

TEST_CASE("a coded body without a value goes on as it came", "[coded_body_scan]") {
  const std::string text = test::sample_text(200'000);
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    const std::string coded = test::encode(c, text);
    for (std::size_t step : {std::size_t{1}, std::size_t{777}, coded.size()}) {
      const auto r = run({c}, coded, step);
      CHECK(r.last.what == verdict::pass);
      CHECK(r.released == coded);
    }
  }
}

TEST_CASE("a value in a coded body is found before a byte of it goes", "[coded_body_scan]") {
  // Stored as it is (incompressible around it), the value's bytes sit in the coded body itself:
  // none of them may be released before the verdict, whatever the pieces.
  const std::string text =
      test::incompressible(150'000) + std::string(value) + test::incompressible(150'000, 11);
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    const std::string coded = test::encode(c, text);
    const auto at = coded.find(value);
    REQUIRE(at != std::string::npos);
    for (std::size_t step : {std::size_t{1}, std::size_t{13}, std::size_t{4096}, coded.size()}) {
      INFO(step);
      const auto r = run({c}, coded, step);
      CHECK(r.last.what == verdict::match);
      CHECK(r.last.pattern == 1);
      CHECK(r.released.size() <= at);
    }
  }
}

TEST_CASE("a value in compressed text is found under every coding and list", "[coded_body_scan]") {
  const std::string text = test::sample_text(40'000) + "\"token\":\"" + std::string(value) + "\"" +
                           test::sample_text(1000);
  const std::vector<std::vector<content_coding>> lists{
      {content_coding::gzip},
      {content_coding::deflate},
      {content_coding::br},
      {content_coding::zstd},
      {content_coding::gzip, content_coding::br},
      {content_coding::zstd, content_coding::deflate, content_coding::gzip}};
  for (const auto& applied : lists) {
    const std::string coded = test::encode_all(applied, text);
    for (std::size_t step : {std::size_t{1}, std::size_t{100}, coded.size()}) {
      const auto r = run(applied, coded, step);
      CHECK(r.last.what == verdict::match);
      // What went on decodes to text before the value only.
      CHECK(r.released.size() < coded.size());
    }
  }
}

TEST_CASE("a value at the very end is found when the body ends", "[coded_body_scan]") {
  const std::string text = test::sample_text(1000) + std::string(value.substr(0, 20));
  const std::string coded =
      test::encode(content_coding::gzip, text + std::string(value.substr(20)));
  CHECK(run({content_coding::gzip}, coded, 1).last.what == verdict::match);
  const std::string partial = test::encode(content_coding::gzip, text);
  CHECK(run({content_coding::gzip}, partial, 1).last.what == verdict::pass);
}

TEST_CASE("a coded body the decoder refuses stops the scan", "[coded_body_scan]") {
  CHECK(run({content_coding::zstd}, "not zstd at all", 4).last.what == verdict::corrupt);
  const std::string coded = test::encode(content_coding::br, test::sample_text(5000));
  const auto cut = run({content_coding::br}, coded.substr(0, coded.size() / 2), 64);
  CHECK(cut.last.what == verdict::corrupt);
  CHECK(cut.last.why.find("br") != std::string::npos);
  brokers::stream_scrubber scan(patterns);
  coded_body_scan bomb({content_coding::gzip}, {1000, 1000, 10}, 1024, scan);
  std::string out;
  CHECK(bomb.feed(test::encode(content_coding::gzip, std::string(100'000, 'x')), out).what ==
        verdict::too_large);
}

TEST_CASE("coded bytes held back past the limit stop the scan", "[coded_body_scan]") {
  // One zstd block of incompressible data waits whole before it is decoded.
  const std::string coded = test::encode(content_coding::zstd, test::incompressible(100'000));
  const auto r = run({content_coding::zstd}, coded, 1000, 50'000);
  CHECK(r.last.what == verdict::withholding);
  CHECK(run({content_coding::zstd}, coded, 1000, 200'000).released == coded);
}
