// shared_budget against a real redis-server (tests/unit/gateway/redis/redis_server.hpp): leases
// keep Redis off the path far from a limit, near one every request asks, an unused lease goes back,
// and Redis away or a revoked session refuses.
#include "gateway/redis/shared_budget.hpp"

#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "tests/unit/gateway/redis/redis_server.hpp"
#include "tests/unit/gateway/run_coroutine.hpp"

using broker::gateway::redis_endpoint;
using broker::gateway::redis_run;
using broker::gateway::redis_stats;
using broker::gateway::redis_store;
using broker::gateway::shared_budget;
using broker::test::redis_server;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

const std::string session = "g-0123456789ab";

// One replica's view of the session: its store (own clients), local budget and shared budget.
struct replica {
  asio::io_context io;  // the worker thread, run by the test
  std::shared_ptr<redis_stats> stats = std::make_shared<redis_stats>();
  std::shared_ptr<redis_store> store;
  std::shared_ptr<broker::session::session_budget> local;
  std::shared_ptr<shared_budget> shared;

  replica(const redis_server& server, const std::string& name,
          broker::session::budget_limits limits)
      : store(std::make_shared<redis_store>(redis_endpoint::parse(server.url()), stats,
                                            std::make_shared<redis_stats>(), 1000ms)),
        local(std::make_shared<broker::session::session_budget>(std::move(limits),
                                                                std::chrono::steady_clock::now())),
        shared(std::make_shared<shared_budget>(store, session, name, local)) {}
  ~replica() {
    shared.reset();
    store->close();
  }

  std::optional<broker::live::refusal> admit() {
    return broker::test::run(io, shared->admit("api.example.com"));
  }
  std::uint64_t round_trips() const { return stats->read().round_trips; }
};

std::string redis_field(const redis_server& server, const std::string& key,
                        const std::string& field) {
  return redis_run(redis_endpoint::parse(server.url()), {{"HGET", key, field}}, 1000ms).at(0).text;
}

void make_session(const redis_server& server, const std::string& revoked = "0") {
  redis_run(redis_endpoint::parse(server.url()),
            {{"HSET", redis_store::session_key(session), "revoked", revoked}}, 1000ms);
}

// A redis-server holding the session (not revoked).
struct one_session {
  redis_server server;
  one_session() { make_session(server); }
};

broker::session::budget_limits requests(std::uint64_t n) {
  broker::session::budget_limits l;
  l.requests = n;
  return l;
}

}  // namespace

TEST_CASE_METHOD(one_session,
                 "shared_budget: far from its limit a lease lets requests go without a round trip",
                 "[shared_budget][redis]") {
  replica r(server, "r1", requests(1000));
  CHECK_FALSE(r.admit());
  // The one call counted this request and leased 1/16 of what is left (at most 64).
  CHECK(r.shared->leased() == 62);
  CHECK(redis_field(server, redis_store::usage_key(session), "requests") == "63");
  const auto trips = r.round_trips();
  for (int i = 0; i < 20; ++i) CHECK_FALSE(r.admit());
  CHECK(r.round_trips() == trips);
  CHECK(r.shared->leased() == 42);
  // At shutdown the unused lease goes back: Redis counts what was served.
  r.shared->flush();
  CHECK(r.shared->leased() == 0);
  CHECK(redis_field(server, redis_store::usage_key(session), "requests") == "21");
}

TEST_CASE_METHOD(
    one_session,
    "shared_budget: near its limit every request asks, and two replicas never overspend",
    "[shared_budget][redis]") {
  replica a(server, "r1", requests(10));
  replica b(server, "r2", requests(10));
  int admitted = 0;
  for (int i = 0; i < 12; ++i) {
    auto& r = i % 2 ? b : a;
    const auto trips = r.round_trips();
    const auto refused = r.admit();
    CHECK(r.round_trips() > trips);
    CHECK(r.shared->leased() == 0);  // 10 left: less than 16, so no lease
    if (!refused) {
      ++admitted;
      continue;
    }
    CHECK(refused->code == "budget_exhausted");
    CHECK(refused->budget == "requests");
    CHECK(refused->used.find("on all replicas") != std::string::npos);
  }
  CHECK(admitted == 10);
}

TEST_CASE_METHOD(one_session, "shared_budget: a lease left unused goes back once it is stale",
                 "[shared_budget][redis]") {
  replica r(server, "r1", requests(1000));
  CHECK_FALSE(r.admit());
  CHECK(r.shared->leased() == 62);
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (redis_field(server, redis_store::usage_key(session), "requests") != "1") {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(20ms);
  }
  CHECK(r.shared->leased() == 0);
  // The next request asks again (and is counted), as the first did.
  const auto trips = r.round_trips();
  CHECK_FALSE(r.admit());
  CHECK(r.round_trips() == trips + 1);
}

TEST_CASE_METHOD(one_session,
                 "shared_budget: a lease does not outlast a byte budget this replica spent",
                 "[shared_budget][redis]") {
  broker::session::budget_limits limits;
  limits.bytes_out = 1000;
  replica r(server, "r1", limits);
  CHECK_FALSE(r.admit());
  REQUIRE(r.shared->leased() > 0);
  r.local->add_bytes("api.example.com", 5000, 0);
  const auto refused = r.admit();
  REQUIRE(refused);
  CHECK(refused->code == "budget_exhausted");
  CHECK(refused->budget == "bytes_out");
}

TEST_CASE("shared_budget: a revoked session is refused 407, and stays refused without asking",
          "[shared_budget][redis]") {
  redis_server server;
  make_session(server, "1");
  replica r(server, "r1", requests(1000));
  const auto refused = r.admit();
  REQUIRE(refused);
  CHECK(refused->code == "proxy_auth_required");
  CHECK(refused->message.find("revoked") != std::string::npos);
  const auto trips = r.round_trips();
  CHECK(r.admit()->code == "proxy_auth_required");
  CHECK(r.round_trips() == trips);
}

TEST_CASE_METHOD(one_session,
                 "shared_budget: Redis away refuses 503, or admits when the policy allows",
                 "[shared_budget][redis]") {
  auto limits = requests(10);
  replica closed(server, "r1", limits);
  limits.allow_without_state = true;
  replica open(server, "r2", limits);
  server.kill();
  const auto refused = closed.admit();
  REQUIRE(refused);
  CHECK(refused->code == "state_unavailable");
  CHECK(refused->status == 503);
  CHECK_FALSE(open.admit());
}

TEST_CASE_METHOD(one_session, "shared_budget: near the end of a byte budget no lease is granted",
                 "[shared_budget][redis]") {
  broker::session::budget_limits limits;
  limits.bytes_in = 16000;
  replica a(server, "r1", limits);
  replica b(server, "r2", limits);
  CHECK_FALSE(a.admit());
  CHECK(a.shared->leased() == shared_budget::lease);
  // r2 spends 15/16 of it and says so: from then on every request of either replica asks.
  b.local->add_bytes("api.example.com", 0, 15000);
  b.shared->flush();
  CHECK(redis_field(server, redis_store::usage_key(session), "bytes_in") == "15000");
  std::this_thread::sleep_for(shared_budget::fresh_for);  // r1's lease is stale
  const auto trips = a.round_trips();
  CHECK_FALSE(a.admit());
  CHECK(a.round_trips() == trips + 1);
  CHECK(a.shared->leased() == 0);
}
