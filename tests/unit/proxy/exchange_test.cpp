// One http_exchange driven through its client_side seam by a scripted client (as an HTTP/2
// stream would drive it: body pieces without HTTP/1.1 framing) against a loopback upstream, with
// faults on either side: pieces of one byte, a client that fails its Nth read or write, an
// upstream that resets after N bytes. Whatever fails, the exchange ends without hanging, writes
// exactly one record, never writes to a client side that failed, and never pools an upstream
// whose response it did not relay whole.
#include "proxy/http_exchange.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "brokers/credential_set.hpp"
#include "config/policy_set.hpp"
#include "live/refusal.hpp"
#include "proxy/relay_errors.hpp"
#include "session/audit_log.hpp"
#include "tests/unit/proxy/faults.hpp"
#include "tests/unit/temp_dir.hpp"

namespace broker::proxy {
namespace {

using test::faults;

// A client side that plays a request body and takes the response, failing as told. `here`: it
// says the whole body is here before it is read (as a small body that came with its head), so the
// exchange sends it before reading the response rather than beside it.
class scripted_client final : public client_side {
 public:
  scripted_client(std::string body, faults f, bool here = false)
      : body_(std::move(body)), f_(f), here_(here) {}

  bool keep_alive() const override { return true; }
  bool carries_wire() const override { return false; }
  bool flushes_records() const override { return false; }
  void record_staged() override {}

  asio::awaitable<body_piece> read_body(bool) override {
    step();
    if (++reads_ == f_.fail_read) {
      failed = true;  // as the seam says a side reports it
      throw client_gone("client closed the connection mid-body");
    }
    const std::size_t n = std::min(f_.piece ? f_.piece : body_.size(), body_.size() - at_);
    const std::string_view data = std::string_view(body_).substr(at_, n);
    at_ += n;
    co_return body_piece{data, {}, at_ == body_.size()};
  }
  bool body_here(std::size_t bytes) const override {
    asked_here = true;
    return here_ && at_ == 0 && body_.size() <= bytes;
  }
  asio::awaitable<void> send_interim(const http::message_head& head) override {
    write_step();
    interim.push_back(head.status);
    co_return;
  }
  asio::awaitable<void> send_head(const http::message_head& head, bool, bool complete) override {
    write_step();
    if (request) request_fields_at_response = request->headers.size();
    status = head.status;
    ended = complete;
    co_return;
  }
  asio::awaitable<void> send_body(std::string_view data, bool last) override {
    write_step();
    body.append(data);
    ended = last;
    co_return;
  }
  asio::awaitable<void> send_wire(std::string_view) override {
    FAIL("send_wire on a side that carries no wire");
    co_return;
  }
  asio::awaitable<void> send_trailers(const std::vector<http::header_field>& fields) override {
    write_step();
    trailers = fields;
    ended = true;
    co_return;
  }
  asio::awaitable<void> flush() override { co_return; }
  asio::awaitable<void> send_refusal(const live::refusal& r, std::string_view, std::string_view,
                                     bool) override {
    write_step();
    status = r.status;
    refused = r.code;
    ended = true;
    co_return;
  }
  asio::awaitable<std::optional<raw_connection>> accept_websocket(
      const http::message_head&) override {
    co_return std::nullopt;
  }

  int writes() const { return writes_; }

  std::vector<int> interim;
  std::vector<http::header_field> trailers;
  int status = 0;
  std::string body, refused;
  bool ended = false;
  bool failed = false;
  bool used_after_failure = false;
  mutable bool asked_here = false;
  // The request's head, and how many fields it still held when the response's head came down.
  const http::message_head* request = nullptr;
  std::optional<std::size_t> request_fields_at_response;

 private:
  void step() {
    if (failed) used_after_failure = true;
  }
  [[noreturn]] void fail() {  // a write
    failed = true;
    throw boost::system::system_error(asio::error::connection_reset);
  }
  void write_step() {
    step();
    if (++writes_ == f_.fail_write) fail();
  }

  std::string body_;
  faults f_;
  bool here_;
  std::size_t at_ = 0;
  int reads_ = 0, writes_ = 0;
};

// An upstream on loopback that reads one request whole, then answers `response` with faults.
struct fake_upstream {
  tcp::acceptor acceptor;
  std::string request_body;
  bool request_complete = false;

  explicit fake_upstream(asio::io_context& io)
      : acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}
  std::uint16_t port() const { return acceptor.local_endpoint().port(); }

  asio::awaitable<void> serve(std::string response, faults f) {
    auto [aec, s] = co_await acceptor.async_accept(use_tuple);
    if (aec) co_return;
    http::parser request(http::parser::kind::request);
    std::string buf(4096, '\0');
    while (!request_complete) {
      auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_tuple);
      if (ec) co_return;  // the exchange gave up on its request
      std::string_view got(buf.data(), n);
      while (!got.empty() && !request_complete) {  // a feed stops at the head's end
        const auto r = request.feed(got, &request_body);
        REQUIRE(r.status != http::parse_status::error);
        got.remove_prefix(r.consumed);
        request_complete = r.status == http::parse_status::message_complete;
      }
    }
    int writes = 0;
    if (co_await test::write_with_faults(s, response, f, writes)) {
      // Lingers until the broker is done with it (a reset would race its last read).
      co_await s.async_read_some(asio::buffer(buf), use_tuple);
    }
  }
};

struct outcome {
  std::optional<next_step> next;  // unset when forward() threw (the connection then ends)
  std::string thrown;
  std::vector<session::audit_entry> records;
  bool pooled = false;  // the upstream connection was kept for another request
};

// The request POSTs `body` to api.test (mapped onto the fake upstream); `response` is what the
// upstream answers.
outcome run_exchange(scripted_client& client, const std::string& body, const std::string& response,
                     faults upstream_faults) {
  asio::io_context io;
  fake_upstream up(io);
  test::temp_dir dir;
  live::session_options options;
  options.session_id = "s-test";
  options.connect_to.push_back({"api.test", 80, "127.0.0.1", up.port()});
  std::vector<config::policy> layers;
  layers.push_back(config::parse_policy(R"({"allow": [{"host": "api.test"}]})", "p.json"));
  outcome out;
  live::session_attachments attached;
  attached.observer = [&](const std::string&, const session::audit_entry& e) {
    out.records.push_back(e);
  };
  auto ctx = std::make_shared<live::live_session>(
      options, std::make_shared<const config::policy_set>(std::move(layers)),
      session::audit_log::open(dir.path, "s-test"), std::make_shared<brokers::credential_set>(),
      nullptr, std::move(attached));
  upstream_pool pool;
  live::connection_deadline timer(io.get_executor());
  const session::log_tag tag("s-test", 1);

  http::message_head head;
  head.method = "POST";
  head.target = "/v1/things";
  head.headers = {{"Host", "api.test"}, {"Content-Length", std::to_string(body.size())}};
  head.has_body = !body.empty();
  head.content_length = body.size();
  client.request = &head;
  const request_target to{config::destination{"api.test", std::nullopt, 80}, "http", "/v1/things",
                          false};
  bool done = false;
  asio::co_spawn(io, up.serve(response, upstream_faults), asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        http_exchange ex({client, timer, *ctx, pool, tag}, "POST", nullptr);
        ex.entry().host = "api.test";
        ex.entry().port = 80;
        ex.entry().scheme = "http";
        try {
          out.next = co_await ex.forward(head, to);
        } catch (const std::exception& e) {
          out.thrown = e.what();
        }
        // As the connection does when its exchange ends by an exception.
        if (ex.active()) ex.finish(ex.entry().status, true, "aborted");
        out.pooled = pool.take("http://api.test:80") != nullptr;
        done = true;
      },
      asio::detached);
  io.run_for(std::chrono::seconds(20));
  REQUIRE(done);  // it ended by itself: no fault left it waiting
  return out;
}

const std::string kBody(64, 'b');

std::string chunked_response() {
  return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
         "a\r\n0123456789\r\n10\r\nabcdefghijklmnop\r\n0\r\n\r\n";
}

}  // namespace

TEST_CASE("an exchange reads and relays bodies handed over one byte at a time",
          "[proxy][exchange][faults]") {
  const auto response =
      GENERATE(chunked_response(), std::string("HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n"
                                               "0123456789abcdefghijklmnop"));
  const bool here = GENERATE(false, true);
  scripted_client client(kBody, faults{1, 0, 0}, here);
  const auto out = run_exchange(client, kBody, response, faults{1, 0, 0});
  CHECK(client.asked_here);
  CHECK(out.thrown.empty());
  CHECK(out.next == next_step::keep_alive);
  CHECK(client.status == 200);
  // A request wholly up (its small body sent first) holds no fields while the response streams.
  REQUIRE(client.request_fields_at_response);
  CHECK((*client.request_fields_at_response == 0) == here);
  CHECK(client.body == "0123456789abcdefghijklmnop");  // decoded: this side frames it itself
  CHECK(client.ended);
  REQUIRE(out.records.size() == 1);
  CHECK(out.records[0].status == 200);
  CHECK(out.records[0].error.empty());
  CHECK(out.records[0].bytes_out > kBody.size());
  CHECK(out.pooled);
}

TEST_CASE("a client that fails a read mid-body ends its exchange with one record",
          "[proxy][exchange][faults]") {
  // The request went up as far as the client sent it: an allowed exchange cut short, not a
  // refusal (the record said "refused", decision deny, for a request that had reached the
  // upstream with its credential), and nothing is written to the client that went away.
  const int fail_read = GENERATE(1, 2, 5, 8);
  const bool here = GENERATE(false, true);
  scripted_client client(kBody, faults{8, fail_read, 0}, here);
  const auto out = run_exchange(client, kBody, chunked_response(), faults{});
  CHECK_FALSE(out.pooled);
  CHECK_FALSE(out.thrown.empty());  // the connection ends
  REQUIRE(out.records.size() == 1);
  CHECK(out.records[0].event == "request");
  CHECK(out.records[0].allowed);
  CHECK(out.records[0].error == "aborted");
  CHECK(client.refused.empty());
  CHECK_FALSE(client.used_after_failure);
}

TEST_CASE("a client that fails a write gets nothing more, and the exchange is recorded once",
          "[proxy][exchange][faults]") {
  // The upstream's answer in pieces, so the client side is written to several times; each of
  // those writes fails in turn.
  const faults upstream{20, 0, 0};
  const bool here = GENERATE(false, true);
  scripted_client clean(kBody, faults{}, here);
  run_exchange(clean, kBody, chunked_response(), upstream);
  REQUIRE(clean.writes() >= 3);
  for (int fail_write = 1; fail_write <= clean.writes(); ++fail_write) {
    INFO("the write that fails: " << fail_write);
    scripted_client client(kBody, faults{0, 0, fail_write}, here);
    const auto out = run_exchange(client, kBody, chunked_response(), upstream);
    CHECK_FALSE(client.used_after_failure);
    CHECK_FALSE(out.thrown.empty());  // the connection ends
    CHECK_FALSE(out.next);
    CHECK_FALSE(out.pooled);
    REQUIRE(out.records.size() == 1);
    CHECK(out.records[0].status == 200);
  }
}

TEST_CASE("an upstream that resets mid-response never leaves a short body looking whole",
          "[proxy][exchange][faults]") {
  // Written 20 bytes at a time, reset in place of the Nth write: inside the head (N = 1..3),
  // then inside the body.
  const int fail_write = GENERATE(1, 2, 3, 4, 5, 6);
  const bool here = GENERATE(false, true);
  scripted_client client(kBody, faults{}, here);
  const auto out = run_exchange(client, kBody, chunked_response(), faults{20, 0, fail_write});
  CHECK_FALSE(out.pooled);
  REQUIRE(out.records.size() == 1);
  if (client.status == 200) {
    // The head went out: the client's stream is cut (forward threw), never ended cleanly.
    CHECK_FALSE(out.thrown.empty());
    CHECK_FALSE(client.ended);
    CHECK(client.body.size() < 26);
    CHECK_FALSE(out.records[0].error.empty());
  } else {
    CHECK(client.status == 502);
    CHECK(client.refused == "upstream_unreachable");
    CHECK(out.records[0].error == "upstream_unreachable");
    CHECK(out.next == next_step::close);
  }
}

}  // namespace broker::proxy
