// Human texts of budget limits and usage.
#include <catch2/catch.hpp>

#include "config/units.hpp"
#include "session/budget_text.hpp"

using broker::session::format_rate;
using broker::session::format_size;
using broker::session::format_usd;

TEST_CASE("sizes read in the unit that states them", "[session][budget]") {
  CHECK(format_size(0) == "0 B");
  CHECK(format_size(999) == "999 B");
  CHECK(format_size(1000) == "1 KB");
  CHECK(format_size(100'000'000) == "100 MB");
  CHECK(format_size(1'500'000'000) == "1.5 GB");
  CHECK(format_size(1'250'000) == "1.25 MB");
  CHECK(format_size(1024) == "1 KiB");
  CHECK(format_size(1536) == "1.5 KiB");
  CHECK(format_size(1ULL << 30) == "1 GiB");
  CHECK(format_size(2'000'000'000'000ULL) == "2 TB");
  // Not exact in any unit: decimal, truncated, so used never reads as more than it is.
  CHECK(format_size(123'456'789) == "123.45 MB");
  CHECK(format_size(99'999'999) == "99.99 MB");
  CHECK(format_size(1001) == "1 KB");
  CHECK(format_size(18'446'744'073'709'551'615ULL) == "18446744.07 TB");
  // Every limit a policy can write reads back as the same number of bytes.
  for (const char* text : {"100MB", "1GB", "1KiB", "5MiB", "1.5GB", "2TiB"})
    CHECK(broker::config::parse_size(format_size(*broker::config::parse_size(text))) ==
          broker::config::parse_size(text));
}

TEST_CASE("costs read in dollars and cents", "[session][budget]") {
  CHECK(format_usd(25) == "$25.00");
  CHECK(format_usd(0) == "$0.00");
  CHECK(format_usd(1.23) == "$1.23");
  CHECK(format_usd(0.1 + 0.2) == "$0.30");
  CHECK(format_usd(0.0015) == "$0.0015");
  CHECK(format_usd(24.999) == "$24.999");
  CHECK(format_usd(24.99999) == "$24.9999");  // truncated, never rounded up to the limit
  CHECK(format_usd(0.00001) == "$0.00");
  CHECK(format_usd(1e13) == "$10000000000000");
}

TEST_CASE("rates read as count per period", "[session][budget]") {
  using broker::config::parse_rate;
  for (const char* text : {"20/s", "100/m", "1000/h", "5/d", "5/10s", "3/1m30s", "1/500ms"})
    CHECK(format_rate(*parse_rate(text)) == text);
  CHECK(format_rate({20.0 / 12, 20}) == "20/12s");  // a bucket merged from two layers
}
