#include "base/deadline.hpp"

#include <chrono>
#include <memory>

#include <catch2/catch.hpp>

using broker::base::deadline;
using namespace std::chrono_literals;

namespace {

struct owner {
  explicit owner(boost::asio::io_context& io) : d(io.get_executor()) {}
  deadline<> d;
  int expired = 0;
};

}  // namespace

TEST_CASE("deadline::start calls back once when the expiry passes", "[deadline]") {
  boost::asio::io_context io;
  auto o = std::make_shared<owner>(io);
  o->d.arm(20ms);
  o->d.start(o, [&o = *o] { ++o.expired; });
  const auto t0 = std::chrono::steady_clock::now();
  io.run();
  CHECK(o->expired == 1);
  CHECK(std::chrono::steady_clock::now() - t0 >= 20ms);
  CHECK(o.use_count() == 1);  // the wait let go of its owner
}

TEST_CASE("deadline::start never calls back after stop, and lets its owner go", "[deadline]") {
  boost::asio::io_context io;
  auto o = std::make_shared<owner>(io);
  o->d.arm(10ms);
  o->d.start(o, [&o = *o] { ++o.expired; });
  o->d.stop();
  io.run_for(50ms);
  CHECK(o->expired == 0);
  CHECK(o.use_count() == 1);
}

TEST_CASE("deadline::start follows arm: earlier wakes it, later defers it", "[deadline]") {
  boost::asio::io_context io;
  auto o = std::make_shared<owner>(io);
  o->d.arm(10s);
  o->d.start(o, [&o = *o] { ++o.expired; });
  o->d.arm(10ms);  // earlier: the wait is moved up
  const auto t0 = std::chrono::steady_clock::now();
  io.run_for(2s);
  CHECK(o->expired == 1);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);

  io.restart();
  auto later = std::make_shared<owner>(io);
  later->d.arm(10ms);
  later->d.start(later, [&o = *later] { ++o.expired; });
  later->d.arm(100ms);  // later: woken at 10 ms, it waits on
  io.run_for(50ms);
  CHECK(later->expired == 0);
  io.run_for(200ms);
  CHECK(later->expired == 1);
}
