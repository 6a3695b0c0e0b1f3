// redis_client against a real redis-server on loopback (tests/unit/gateway/redis/redis_server.hpp),
// and against a fake peer that sends bytes that are not RESP.
#include "gateway/redis/redis_client.hpp"

#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>
#include <optional>

#include "base/asio.hpp"
#include "tests/unit/gateway/redis/redis_server.hpp"
#include "tests/unit/gateway/run_coroutine.hpp"

using broker::gateway::redis_client;
using broker::gateway::redis_endpoint;
using broker::gateway::redis_error;
using broker::gateway::redis_reply;
using broker::gateway::redis_run;
using broker::gateway::redis_script;
using broker::gateway::redis_stats;
using broker::gateway::redis_unavailable;
using broker::test::redis_server;
using broker::test::redis_server_options;
using broker::test::run;
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// What redis_unavailable said when `work` threw it.
std::string unavailable(asio::io_context& io, asio::awaitable<redis_reply> work) {
  try {
    run(io, std::move(work));
  } catch (const redis_unavailable& e) {
    return e.what();
  }
  FAIL("no redis_unavailable");
  return {};
}

// The client's backoff clock, which only the test moves.
struct fake_clock {
  clock_type::time_point now = clock_type::now();
  redis_client::clock_fn fn() {
    return [this] { return now; };
  }
  void wait_out_backoff() { now += redis_client::reconnect_backoff; }
};

struct client_setup {
  asio::io_context io;
  std::shared_ptr<redis_stats> stats = std::make_shared<redis_stats>();
  fake_clock clock;
  redis_client client;
  client_setup(const std::string& url, std::chrono::milliseconds timeout = 2s)
      : client(io.get_executor(), redis_endpoint::parse(url), stats, timeout, clock.fn()) {}
  redis_reply call(std::vector<std::string> args) {
    return run(io, client.command(std::move(args)));
  }
};

}  // namespace

TEST_CASE("redis_client: strings, counters, nil, arrays and error replies", "[redis]") {
  redis_server server;
  client_setup c(server.url());
  CHECK_FALSE(c.client.connected());

  CHECK(c.call({"SET", "k", "v"}).text == "OK");
  CHECK(c.client.connected());
  const redis_reply value = c.call({"GET", "k"});
  CHECK(value.type == redis_reply::kind::string);
  CHECK(value.text == "v");
  CHECK(c.call({"GET", "missing"}).is_nil());
  CHECK(c.call({"INCR", "n"}).integer == 1);
  CHECK(c.call({"INCR", "n"}).integer == 2);
  const std::string binary("a\0\r\nb", 5);
  c.call({"SET", "bin", binary});
  CHECK(c.call({"GET", "bin"}).text == binary);

  c.call({"RPUSH", "list", "a", "b", "c"});
  const redis_reply list = c.call({"LRANGE", "list", "0", "-1"});
  REQUIRE(list.type == redis_reply::kind::array);
  REQUIRE(list.elements.size() == 3);
  CHECK(list.elements[2].text == "c");
  const redis_reply mixed = c.call({"MGET", "k", "missing"});
  REQUIRE(mixed.elements.size() == 2);
  CHECK(mixed.elements[0].text == "v");
  CHECK(mixed.elements[1].is_nil());

  // An error reply is an answer: the connection stays, and checked() turns it into redis_error.
  const redis_reply not_a_number = c.call({"INCR", "k"});
  CHECK(not_a_number.is_error("ERR"));
  CHECK_THROWS_AS(not_a_number.checked(), redis_error);
  CHECK(c.call({"NOSUCHCOMMAND"}).is_error());
  CHECK(c.client.connected());
  CHECK(c.call({"PING"}).text == "PONG");

  const auto stats = c.stats->read();
  CHECK(stats.connects == 1);
  CHECK(stats.errors == 2);
  CHECK(stats.commands == 13);
  CHECK(stats.round_trips == 13);
  CHECK(stats.latency_count == 13);
}

TEST_CASE("redis_client: concurrent commands share round trips and get their own replies",
          "[redis]") {
  redis_server server;
  client_setup c(server.url());
  c.call({"PING"});  // connected
  const auto before = c.stats->read();

  constexpr int callers = 200;
  std::vector<std::string> echoed(callers);
  std::vector<long long> counted(callers);
  int finished = 0;
  for (int i = 0; i < callers; ++i) {
    asio::co_spawn(
        c.io,
        [&, i]() -> asio::awaitable<void> {
          // Two commands in a row: the second is queued behind other callers' round trips.
          echoed[i] = (co_await c.client.command("ECHO", "caller " + std::to_string(i))).text;
          counted[i] = (co_await c.client.command("INCR", "count")).integer;
          ++finished;
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
  }
  c.io.restart();
  c.io.run_for(20s);
  REQUIRE(finished == callers);
  for (int i = 0; i < callers; ++i) CHECK(echoed[i] == "caller " + std::to_string(i));
  std::sort(counted.begin(), counted.end());
  for (int i = 0; i < callers; ++i) CHECK(counted[i] == i + 1);

  const auto after = c.stats->read();
  CHECK(after.commands - before.commands == 2 * callers);
  CHECK(after.round_trips - before.round_trips <= 4);
  CHECK(after.latency_count - before.latency_count == after.round_trips - before.round_trips);
}

TEST_CASE("redis_client: pipeline() sends its commands in one write", "[redis]") {
  redis_server server;
  client_setup c(server.url());
  c.call({"PING"});
  const auto before = c.stats->read();
  const auto replies = run(c.io, c.client.pipeline({{"SET", "a", "1"},
                                                    {"INCR", "a"},
                                                    {"GET", "a"},
                                                    {"HGET", "a", "field"},
                                                    {"GET", "nothing"}}));
  REQUIRE(replies.size() == 5);
  CHECK(replies[0].text == "OK");
  CHECK(replies[1].integer == 2);
  CHECK(replies[2].text == "2");
  CHECK(replies[3].is_error("WRONGTYPE"));
  CHECK(replies[4].is_nil());
  const auto after = c.stats->read();
  CHECK(after.round_trips - before.round_trips == 1);
  CHECK(after.commands - before.commands == 5);
  CHECK(after.errors - before.errors == 1);
  CHECK(run(c.io, c.client.pipeline({})).empty());
}

TEST_CASE("redis_client: eval() uses EVALSHA, and EVAL once the script cache is flushed",
          "[redis]") {
  redis_server server;
  client_setup c(server.url());
  const redis_script script("return redis.call('INCRBY', KEYS[1], ARGV[1])");
  CHECK(c.call({"SCRIPT", "LOAD", script.text}).text == script.sha1());
  CHECK(script.sha1().size() == 40);

  auto eval = [&](const char* by) { return run(c.io, c.client.eval(script, {"counter"}, {by})); };
  auto delta = [&](auto before) {
    const auto after = c.stats->read();
    return std::pair(after.commands - before.commands, after.errors - before.errors);
  };

  auto before = c.stats->read();
  CHECK(eval("5").integer == 5);
  CHECK(delta(before) == std::pair<std::uint64_t, std::uint64_t>(1, 0));  // EVALSHA alone

  c.call({"SCRIPT", "FLUSH"});  // as after a restart
  before = c.stats->read();
  CHECK(eval("2").integer == 7);
  CHECK(delta(before) == std::pair<std::uint64_t, std::uint64_t>(2, 1));  // NOSCRIPT, then EVAL

  before = c.stats->read();
  CHECK(eval("3").integer == 10);  // EVAL loaded it again
  CHECK(delta(before) == std::pair<std::uint64_t, std::uint64_t>(1, 0));

  // A script's own error is its reply, not a NOSCRIPT retry.
  const redis_script failing("return redis.error_reply('BUDGET exhausted')");
  c.call({"SCRIPT", "LOAD", failing.text});
  CHECK(run(c.io, c.client.eval(failing, {}, {})).is_error("BUDGET"));
}

TEST_CASE("redis_client: requirepass - the right password, a wrong one, none", "[redis]") {
  redis_server server(redis_server_options{"pa55 w@rd"});
  const std::string address = "127.0.0.1:" + std::to_string(server.port());

  client_setup right("redis://:pa55%20w%40rd@" + address);
  CHECK(right.call({"PING"}).text == "PONG");
  CHECK(right.stats->read().connects == 1);

  client_setup wrong("redis://:not-it@" + address);
  const std::string why = unavailable(wrong.io, wrong.client.command("PING"));
  CHECK_THAT(why, Catch::Contains("AUTH failed") && Catch::Contains("WRONGPASS"));
  CHECK_THAT(why, Catch::Contains("redis://127.0.0.1:"));
  CHECK(why.find("not-it") == std::string::npos);
  CHECK_FALSE(wrong.client.connected());
  CHECK(wrong.stats->read().connects == 0);

  client_setup wrong_user("redis://nobody:pa55%20w%40rd@" + address);
  CHECK_THAT(unavailable(wrong_user.io, wrong_user.client.command("PING")),
             Catch::Contains("AUTH failed"));

  // Without a password, the server answers every command with NOAUTH: an error reply.
  client_setup none("redis://" + address);
  const redis_reply refused = none.call({"GET", "k"});
  CHECK(refused.is_error("NOAUTH"));
  CHECK_THROWS_WITH(refused.checked(), Catch::Contains("Authentication required"));
}

TEST_CASE("redis_client: the URL's db is SELECTed on connect", "[redis]") {
  redis_server server;
  client_setup db3(server.url() + "/3");
  client_setup db0(server.url());
  db3.call({"SET", "where", "three"});
  CHECK(db3.call({"GET", "where"}).text == "three");
  CHECK(db0.call({"GET", "where"}).is_nil());
  CHECK(db0.call({"SELECT", "3"}).text == "OK");
  CHECK(db0.call({"GET", "where"}).text == "three");

  client_setup out_of_range(server.url() + "/99");
  CHECK_THAT(unavailable(out_of_range.io, out_of_range.client.command("PING")),
             Catch::Contains("SELECT 99 failed") && Catch::Contains("out of range"));
}

TEST_CASE("redis_client: over a unix socket", "[redis]") {
  redis_server server;
  client_setup c("unix://" + server.socket_path() + "?db=2");
  CHECK(c.call({"SET", "k", "unix"}).text == "OK");
  CHECK(c.client.connected());
  client_setup tcp(server.url() + "/2");
  CHECK(tcp.call({"GET", "k"}).text == "unix");

  client_setup missing("unix://" + server.socket_path() + ".nothere");
  CHECK_THAT(unavailable(missing.io, missing.client.command("PING")),
             Catch::Contains("cannot connect"));
}

TEST_CASE(
    "redis_client: a killed Redis fails the outstanding command at once, and reconnects "
    "are spaced by the backoff",
    "[redis]") {
  redis_server server;
  client_setup c(server.url(), 5s);
  c.call({"PING"});

  // A command waiting on the server when it dies.
  asio::steady_timer killer(c.io, 100ms);
  killer.async_wait([&](auto) { server.kill(); });
  auto started = clock_type::now();
  CHECK_THAT(unavailable(c.io, c.client.command("BLPOP", "nothing", "10")),
             Catch::Contains("closed the connection"));
  CHECK(clock_type::now() - started < 1s);
  CHECK_FALSE(c.client.connected());

  // Until the backoff has passed, no connect attempt: an answer at once.
  c.clock.now += redis_client::reconnect_backoff - 1ms;
  CHECK_THAT(unavailable(c.io, c.client.command("PING")), Catch::Contains("next attempt in 1 ms"));
  c.clock.now += 1ms;
  CHECK_THAT(unavailable(c.io, c.client.command("PING")),
             Catch::Contains("cannot connect") && Catch::Contains("refused"));
  // Inside the backoff: no connect attempt, an answer at once.
  started = clock_type::now();
  CHECK_THAT(unavailable(c.io, c.client.command("PING")),
             Catch::Contains("not connected") && Catch::Contains("next attempt"));
  CHECK(clock_type::now() - started < 200ms);
  CHECK(c.stats->read().connects == 1);
  CHECK(c.stats->read().errors == 4);
}

TEST_CASE("redis_client: after Redis restarts, the next command reconnects", "[redis]") {
  redis_server server;
  client_setup c(server.url());
  c.call({"SET", "k", "before"});
  server.restart();  // the idle connection is closed by the old server; nothing was saved
  c.clock.wait_out_backoff();
  CHECK(c.call({"GET", "k"}).is_nil());
  CHECK(c.call({"SET", "k", "after"}).text == "OK");
  CHECK(c.stats->read().connects == 2);
  CHECK(c.stats->read().errors == 0);
}

TEST_CASE(
    "redis_client: a stopped Redis fails commands after the timeout, and a resumed one "
    "serves them again",
    "[redis]") {
  redis_server server;
  client_setup c(server.url(), 300ms);
  c.call({"PING"});

  server.pause();
  const auto started = clock_type::now();
  CHECK_THAT(unavailable(c.io, c.client.command("PING")),
             Catch::Contains("no answer within 300 ms"));
  const auto waited = clock_type::now() - started;
  CHECK(waited >= 290ms);
  CHECK(waited < 2s);
  CHECK_FALSE(c.client.connected());

  server.resume();
  c.clock.wait_out_backoff();
  CHECK(c.call({"PING"}).text == "PONG");
  CHECK(c.stats->read().connects == 2);
}

TEST_CASE("redis_client: a cancelled caller's reply is dropped, and later replies still match",
          "[redis]") {
  using namespace boost::asio::experimental::awaitable_operators;
  redis_server server;
  client_setup c(server.url(), 3s);
  c.call({"PING"});
  auto give_up = [&]() -> asio::awaitable<bool> {
    asio::steady_timer t(co_await asio::this_coro::executor, 50ms);
    auto outcome =
        co_await (c.client.command("BLPOP", "nothing", "0.3") || t.async_wait(asio::use_awaitable));
    co_return outcome.index() == 1;
  };
  CHECK(run(c.io, give_up()));
  CHECK(c.call({"ECHO", "after"}).text == "after");
  CHECK(c.client.connected());
}

TEST_CASE("redis_client: close() fails what is outstanding and everything after", "[redis]") {
  redis_server server;
  client_setup c(server.url());
  c.call({"PING"});
  asio::steady_timer closer(c.io, 50ms);
  closer.async_wait([&](auto) { c.client.close(); });
  CHECK_THAT(unavailable(c.io, c.client.command("BLPOP", "nothing", "5")),
             Catch::Contains("closed"));
  CHECK_FALSE(c.client.connected());
  CHECK_THAT(unavailable(c.io, c.client.command("PING")), Catch::Contains("closed"));
}

TEST_CASE("redis_client: a client destroyed mid-round-trip fails its callers", "[redis]") {
  redis_server server;
  asio::io_context io;
  auto client = std::make_unique<redis_client>(
      io.get_executor(), redis_endpoint::parse(server.url()), std::make_shared<redis_stats>(), 2s);
  run(io, client->command("PING"));
  asio::steady_timer destroyer(io, 50ms);
  destroyer.async_wait([&](auto) { client.reset(); });
  CHECK_THAT(unavailable(io, client->command("BLPOP", "nothing", "5")), Catch::Contains("closed"));
  CHECK(client == nullptr);
}

TEST_CASE("redis_client: the queue and the reply size are bounded", "[redis]") {
  redis_server server;
  client_setup c(server.url());
  std::vector<std::vector<std::string>> many(redis_client::max_queued_commands,
                                             std::vector<std::string>{"PING"});
  std::size_t answered = 0;
  std::string refused;
  asio::co_spawn(c.io, c.client.pipeline(std::move(many)),
                 [&](std::exception_ptr e, std::vector<redis_reply> r) {
                   if (!e) answered = r.size();
                 });
  asio::co_spawn(c.io, c.client.command("PING"), [&](std::exception_ptr e, redis_reply) {
    try {
      if (e) std::rethrow_exception(e);
    } catch (const redis_unavailable& u) {
      refused = u.what();
    }
  });
  c.io.restart();
  c.io.run_for(20s);
  CHECK(answered == redis_client::max_queued_commands);
  CHECK_THAT(refused, Catch::Contains("commands waiting"));

  c.call({"SET", "big", std::string(redis_client::max_reply_bytes + 1, 'x')});
  CHECK_THAT(unavailable(c.io, c.client.command("GET", "big")), Catch::Contains("larger than"));
  c.clock.wait_out_backoff();
  CHECK(c.call({"STRLEN", "big"}).integer ==
        static_cast<long long>(redis_client::max_reply_bytes + 1));
}

TEST_CASE("redis_client: a peer that does not speak RESP is a lost connection", "[redis]") {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  // Answers its first connection with an HTTP error, its second with two replies for one
  // command; each is held until the client drops it.
  const std::array<std::string, 2> answers = {"HTTP/1.1 400 Bad Request\r\n\r\n",
                                              "+ONE\r\n+TWO\r\n"};
  auto peer = [&]() -> asio::awaitable<void> {
    for (const std::string& answer : answers) {
      auto socket = co_await acceptor.async_accept(asio::use_awaitable);
      std::array<char, 256> buffer;
      co_await socket.async_read_some(asio::buffer(buffer), asio::use_awaitable);
      co_await asio::async_write(socket, asio::buffer(answer), asio::use_awaitable);
      co_await socket.async_read_some(asio::buffer(buffer), broker::use_tuple);
    }
  };
  asio::co_spawn(io, peer, asio::detached);
  const std::string url = "redis://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  fake_clock clock;
  redis_client client(io.get_executor(), redis_endpoint::parse(url),
                      std::make_shared<redis_stats>(), 500ms, clock.fn());
  CHECK_THAT(unavailable(io, client.command("PING")), Catch::Contains("not RESP"));
  CHECK_FALSE(client.connected());

  clock.wait_out_backoff();
  // The first reply is this command's; the extra one cannot be matched, so the connection goes.
  CHECK(run(io, client.command("PING")).text == "ONE");
  CHECK_FALSE(client.connected());
}

TEST_CASE("redis_run: one-shot commands for the CLI, and a clear error when Redis is down",
          "[redis]") {
  redis_server server;
  const auto endpoint = redis_endpoint::parse(server.url() + "/1");
  const auto replies = redis_run(endpoint, {{"SET", "cli", "yes"}, {"GET", "cli"}}, 2s);
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].text == "OK");
  CHECK(replies[1].text == "yes");

  const auto down =
      redis_endpoint::parse("redis://:SeCrEt@127.0.0.1:" + std::to_string(server.port()) + "/1");
  server.kill();
  try {
    redis_run(down, {{"PING"}}, 2s);
    FAIL("redis_run did not throw");
  } catch (const redis_unavailable& e) {
    const std::string why = e.what();
    CHECK_THAT(why, Catch::Contains("redis://127.0.0.1:") && Catch::Contains("cannot connect"));
    CHECK(why.find("SeCrEt") == std::string::npos);
  }
}
