#include <catch2/catch.hpp>

#include "config/units.hpp"

using namespace std::chrono_literals;
using broker::config::format_duration;
using broker::config::parse_duration;
using broker::config::parse_rate;
using broker::config::parse_size;

TEST_CASE("parse_size", "[config][units]") {
  CHECK(parse_size("512") == 512u);
  CHECK(parse_size("0") == 0u);
  CHECK(parse_size("100KB") == 100'000u);
  CHECK(parse_size("100MB") == 100'000'000u);
  CHECK(parse_size("1GB") == 1'000'000'000u);
  CHECK(parse_size("2TB") == 2'000'000'000'000u);
  CHECK(parse_size("1KiB") == 1024u);
  CHECK(parse_size("1.5GiB") == 1610612736u);
  CHECK(parse_size("1.5GB") == 1'500'000'000u);
  CHECK(parse_size("100 mb") == 100'000'000u);
  CHECK(parse_size("3tib") == 3ull << 40);
  CHECK(parse_size("10B") == 10u);
  CHECK(parse_size("0.5B") == 0u);  // fractions of a byte round down
  CHECK(parse_size("18446744073709551615") == 18446744073709551615ull);

  for (const char* bad : {"", "MB", "-1MB", "1.MB", ".5MB", "1  MB", "1MB ", " 1MB", "1XB", "1e6",
                          "1.1234567GB", "18446744073709551616", "20000000TB", "1 "})
    CHECK_FALSE(parse_size(bad));
}

TEST_CASE("parse_duration", "[config][units]") {
  CHECK(parse_duration("90s") == 90s);
  CHECK(parse_duration("30m") == 30min);
  CHECK(parse_duration("2h") == 2h);
  CHECK(parse_duration("1d") == 24h);
  CHECK(parse_duration("1h30m") == 90min);
  CHECK(parse_duration("500ms") == 500ms);
  CHECK(parse_duration("1m30s250ms") == 90250ms);
  CHECK(parse_duration("45") == 45s);  // bare number: seconds
  CHECK(parse_duration("2H") == 2h);

  for (const char* bad : {"", "h", "1x", "30m1h", "1h1h", "1.5h", "-1s", "1h 30m", "1s500",
                          "99999999999999999999s", "9999999999999999d"})
    CHECK_FALSE(parse_duration(bad));
}

TEST_CASE("format_duration is the inverse of parse_duration", "[config][units]") {
  CHECK(format_duration(90min) == "1h30m");
  CHECK(format_duration(500ms) == "500ms");
  CHECK(format_duration(0ms) == "0s");
  CHECK(format_duration(24h) == "1d");
  for (const char* text : {"2h", "1d2h3m4s5ms", "90s"})
    CHECK(parse_duration(format_duration(*parse_duration(text))) == parse_duration(text));
}

TEST_CASE("parse_rate", "[config][units]") {
  auto r = parse_rate("20/s");
  REQUIRE(r);
  CHECK(r->per_second == Approx(20));
  CHECK(r->burst == Approx(20));

  auto m = parse_rate("100/m");
  REQUIRE(m);
  CHECK(m->per_second == Approx(100.0 / 60));
  CHECK(m->burst == Approx(100));

  CHECK(parse_rate("1000/h")->per_second == Approx(1000.0 / 3600));
  auto slow = parse_rate("5/10s");
  REQUIRE(slow);
  CHECK(slow->per_second == Approx(0.5));
  CHECK(slow->burst == Approx(5));

  for (const char* bad :
       {"", "20", "20/", "/s", "0/s", "20/x", "20/10", "1.5/s", "20/0s", "-1/s", "20/s/s"})
    CHECK_FALSE(parse_rate(bad));
}
