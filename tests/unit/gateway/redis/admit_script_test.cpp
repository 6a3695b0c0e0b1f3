// The admission script's wire format without Redis: the arguments it is sent, how its answer is
// read, and the refusal each reason stands for (docs/cli.md, docs/gateway.md).
#include "gateway/redis/admit_script.hpp"

#include <catch2/catch.hpp>

#include "session/budget_text.hpp"

using broker::gateway::admit_args;
using broker::gateway::admit_call;
using broker::gateway::admit_refusal;
using broker::gateway::read_admit_answer;
using broker::gateway::redis_reply;
using broker::gateway::usage_batch;

namespace {

redis_reply integer(long long v) {
  redis_reply r;
  r.type = redis_reply::kind::integer;
  r.integer = v;
  return r;
}

redis_reply text(std::string v) {
  redis_reply r;
  r.type = redis_reply::kind::string;
  r.text = std::move(v);
  return r;
}

}  // namespace

TEST_CASE("admit_script: a batch, the limits and the ask become the script's arguments",
          "[admit_script]") {
  broker::session::budget_limits limits;
  limits.requests = 100;
  limits.bytes_in = 2048;
  limits.request_rate = broker::config::rate{20, 40};
  usage_batch b;
  b.number = 7;
  b.delta.bytes_out = 10;
  b.delta.llm_tokens = 150;
  b.returned = 3;
  const auto args = admit_args(admit_call{"r1:abc", b, 2, 64}, limits);
  REQUIRE(args.size() == 16);
  CHECK(args[0] == "r1:abc");
  CHECK(args[1] == "7");
  CHECK(args[2] == "10");
  CHECK(args[4] == "150");
  CHECK(args[6] == "3");
  CHECK(args[7] == "100");
  CHECK(args[8] == "-1");  // no bytes_out budget
  CHECK(args[9] == "2048");
  CHECK(std::stod(args[12]) == 20);
  CHECK(std::stod(args[13]) == 40);
  CHECK(args[14] == "2");
  CHECK(args[15] == "64");
  // No batch: no writer, nothing to apply.
  const auto bare = admit_args(admit_call{"r1:abc", std::nullopt, 1, 0}, limits);
  CHECK(bare[0].empty());
  CHECK(bare[1] == "0");
}

TEST_CASE("admit_script: an answer is read, and anything else is not taken for one",
          "[admit_script]") {
  redis_reply answer;
  answer.type = redis_reply::kind::array;
  answer.elements = {integer(1), integer(62),  text("63"),    text("100"),      text("2000"),
                     text("0"),  text("0.25"), text("spent"), text("requests"), text("10")};
  const auto a = read_admit_answer(answer);
  REQUIRE(a);
  CHECK(a->admitted == 1);
  CHECK(a->leased == 62);
  CHECK(a->totals.requests == 63);
  CHECK(a->totals.bytes_in == 2000);
  CHECK(a->totals.cost_usd == 0.25);
  CHECK(a->why == std::vector<std::string>{"spent", "requests", "10"});

  CHECK_FALSE(read_admit_answer(text("OK")));
  redis_reply error;
  error.type = redis_reply::kind::error;
  error.text = "ERR script failed";
  CHECK_FALSE(read_admit_answer(error));
  answer.elements.resize(3);  // an older script's shape
  CHECK_FALSE(read_admit_answer(answer));
}

TEST_CASE("admit_script: each reason is the refusal of docs/cli.md", "[admit_script]") {
  broker::session::budget_limits limits;
  limits.bytes_out = 4096;
  limits.cost_usd = 2.5;
  limits.request_rate = broker::config::rate{1, 4};

  const auto revoked = admit_refusal({"revoked"}, limits, "g-1");
  CHECK(revoked.status == 407);
  CHECK(revoked.code == "proxy_auth_required");
  CHECK(revoked.message.find("g-1 was revoked") != std::string::npos);
  CHECK(admit_refusal({"unknown"}, limits, "g-1").status == 407);

  const auto bytes = admit_refusal({"spent", "bytes_out", "5000"}, limits, "g-1");
  CHECK(bytes.status == 429);
  CHECK(bytes.budget == "bytes_out");
  CHECK(bytes.limit == broker::session::format_size(4096));
  CHECK(bytes.used == broker::session::format_size(5000) + " on all replicas");
  const auto cost = admit_refusal({"spent", "cost_usd", "2.75"}, limits, "g-1");
  CHECK(cost.used == broker::session::format_usd(2.75) + " on all replicas");

  const auto rate = admit_refusal({"rate", "1500"}, limits, "g-1");
  CHECK(rate.budget == "rate");
  CHECK(rate.retry_after_s == 2);  // rounded up to whole seconds

  const auto odd = admit_refusal({"something new"}, limits, "g-1");
  CHECK(odd.status == 503);
  CHECK(odd.code == "state_unavailable");
}
