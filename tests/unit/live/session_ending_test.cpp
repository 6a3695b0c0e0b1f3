#include "live/session_ending.hpp"

#include <chrono>

#include <catch2/catch.hpp>

using broker::live::session_end;
using broker::live::session_ending;
using namespace std::chrono_literals;

TEST_CASE("a session asked to end keeps the first reason", "[live]") {
  session_ending ending("s-1", std::nullopt);
  CHECK_FALSE(ending.asked());
  ending.ask({session_end::cause::kill, {}});
  ending.ask({session_end::cause::budget, {}});
  REQUIRE(ending.asked());
  CHECK(ending.asked()->why == session_end::cause::kill);
}

TEST_CASE("a gateway session ends for its clients when revoked or past its expiry", "[live]") {
  const auto now = std::chrono::system_clock::now();
  session_ending lasting("s-2", now + 1h);
  CHECK_FALSE(lasting.why(now));
  CHECK(lasting.why(now + 2h) == "the session s-2 has expired");
  lasting.revoke();
  CHECK(lasting.why(now) == "the session s-2 was revoked");
  session_ending forever("s-3", std::nullopt);
  CHECK_FALSE(forever.why(now + 24h * 365));
}
