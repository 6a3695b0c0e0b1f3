#include "gateway/admin/admin_listener.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "tests/unit/proxy/loopback_connection.hpp"

using namespace broker::gateway;
using broker::test::fd_guard;

namespace {

using namespace std::chrono_literals;

// A client on a real loopback connection, with blocking reads bounded by a poll timeout.
struct client {
  fd_guard socket;

  explicit client(std::uint16_t port)
      : socket(broker::test::make_socket(AF_INET, "127.0.0.1", port, false)) {
    REQUIRE(socket.fd >= 0);
  }

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto n = ::send(socket.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      REQUIRE(n > 0);
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  // Reads what arrives within `timeout`; an empty string once the listener has closed.
  std::optional<std::string> read_some(std::chrono::milliseconds timeout = 5s) {
    pollfd p{socket.fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return std::nullopt;
    char chunk[4096];
    const auto n = ::recv(socket.fd, chunk, sizeof chunk, 0);
    return std::string(chunk, n > 0 ? static_cast<std::size_t>(n) : 0);
  }

  // True when the listener closes the connection within `timeout`.
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto got = read_some(timeout);
    return got && got->empty();
  }

  struct reply {
    int status = 0;
    std::string head;  // status line and fields
    std::string body;
    std::string field(std::string_view name) const {
      const auto at = head.find("\r\n" + std::string(name) + ": ");
      if (at == std::string::npos) return {};
      const auto start = at + name.size() + 4;
      return head.substr(start, head.find("\r\n", start) - start);
    }
  };

  // One response, framed by its Content-Length; `head_only` for the answer to HEAD.
  reply read_reply(bool head_only = false) {
    reply r;
    while (pending.find("\r\n\r\n") == std::string::npos) {
      const auto got = read_some();
      REQUIRE(got);
      REQUIRE(!got->empty());
      pending += *got;
    }
    const auto end = pending.find("\r\n\r\n") + 4;
    r.head = pending.substr(0, end);
    pending.erase(0, end);
    r.status = std::stoi(r.head.substr(9, 3));
    const auto length = static_cast<std::size_t>(std::stoul(r.field("Content-Length")));
    if (head_only) return r;
    while (pending.size() < length) {
      const auto got = read_some();
      REQUIRE(got);
      REQUIRE(!got->empty());
      pending += *got;
    }
    r.body = pending.substr(0, length);
    pending.erase(0, length);
    return r;
  }

  reply get(std::string_view path) {
    send("GET " + std::string(path) + " HTTP/1.1\r\nHost: admin\r\n\r\n");
    return read_reply();
  }

  std::string pending;
};

std::shared_ptr<metrics> some_metrics() {
  auto m = std::make_shared<metrics>();
  broker::session::audit_entry e;
  e.event = "request";
  e.bytes_out = 42;
  m->exchange("s-admin", e);
  return m;
}

}  // namespace

TEST_CASE("admin listener: GET /metrics answers the exposition", "[admin_listener]") {
  auto m = some_metrics();
  admin_listener admin("127.0.0.1", 0, m);
  REQUIRE(admin.port() != 0);
  client c(admin.port());
  const auto r = c.get("/metrics");
  CHECK(r.status == 200);
  CHECK(r.field("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(r.body == m->render());
  CHECK(r.body.find("broker_bytes_total{session=\"s-admin\",direction=\"out\"} 42\n") !=
        std::string::npos);
}

TEST_CASE("admin listener: /healthz, 404, 405 and HEAD", "[admin_listener]") {
  admin_listener admin("127.0.0.1", 0, some_metrics());
  client c(admin.port());
  const auto health = c.get("/healthz");
  CHECK(health.status == 200);
  CHECK(health.body == "ok");
  CHECK(health.field("Content-Length") == "2");

  const auto missing = c.get("/nowhere");
  CHECK(missing.status == 404);
  CHECK(!missing.body.empty());

  c.send("DELETE /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
  const auto wrong = c.read_reply();
  CHECK(wrong.status == 405);
  CHECK(wrong.field("Allow") == "GET, HEAD");
  CHECK(!wrong.body.empty());

  c.send("HEAD /healthz HTTP/1.1\r\nHost: admin\r\n\r\n");
  const auto head = c.read_reply(true);
  CHECK(head.status == 200);
  CHECK(head.field("Content-Length") == "2");
  // Nothing follows the head: the next answer on the connection is the next request's.
  CHECK(c.get("/healthz").body == "ok");
  CHECK(c.pending.empty());
}

TEST_CASE("admin listener: keep-alive serves requests in turn on one connection, pipelined too",
          "[admin_listener]") {
  admin_listener admin("127.0.0.1", 0, some_metrics());
  client c(admin.port());
  CHECK(c.get("/healthz").status == 200);
  CHECK(c.get("/metrics").status == 200);
  c.send(
      "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n"
      "GET /nowhere HTTP/1.1\r\nHost: admin\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
  CHECK(c.read_reply().status == 200);
  CHECK(c.read_reply().status == 404);
  const auto last = c.read_reply();
  CHECK(last.status == 200);
  CHECK(last.field("Connection") == "close");
  CHECK(c.closed_within(2s));
}

TEST_CASE("admin listener: garbage gets 400 and the listener keeps serving", "[admin_listener]") {
  admin_listener admin("127.0.0.1", 0, some_metrics());
  {
    client bad(admin.port());
    bad.send(std::string("\x16\x03\x01\x02\x00garbage\r\n\r\n", 16));
    const auto r = bad.read_reply();
    CHECK(r.status == 400);
    CHECK(r.field("Connection") == "close");
    CHECK(bad.closed_within(2s));
  }
  {
    client smuggler(admin.port());
    smuggler.send(
        "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    CHECK(smuggler.read_reply().status == 400);
  }
  {
    client huge(admin.port());
    huge.send("GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a') + "\r\n\r\n");
    CHECK(huge.read_reply().status == 431);
  }
  {
    client big_body(admin.port());
    big_body.send("POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n");
    CHECK(big_body.read_reply().status == 413);
  }
  {
    client early_close(admin.port());
    early_close.send("GET /metr");
  }
  client good(admin.port());
  CHECK(good.get("/healthz").status == 200);
}

TEST_CASE("admin listener: a silent client is dropped after the deadline, others are served",
          "[admin_listener]") {
  admin_limits limits;
  limits.request_timeout = 400ms;
  admin_listener admin("127.0.0.1", 0, some_metrics(), limits);
  const auto start = std::chrono::steady_clock::now();
  client silent(admin.port());
  client half(admin.port());
  half.send("GET /metrics HTTP/1.1\r\nHost: ad");
  client busy(admin.port());
  for (int i = 0; i < 3; ++i) CHECK(busy.get("/healthz").status == 200);
  CHECK(std::chrono::steady_clock::now() - start < 400ms);
  CHECK(silent.closed_within(3s));
  CHECK(half.closed_within(3s));
  CHECK(std::chrono::steady_clock::now() - start >= 350ms);
  // A kept-alive connection idle past the deadline goes too.
  CHECK(busy.closed_within(3s));
  client later(admin.port());
  CHECK(later.get("/healthz").status == 200);
}

TEST_CASE("admin listener: routes the broker adds, with bodies, and a failing handler",
          "[admin_listener]") {
  admin_listener admin("127.0.0.1", 0, some_metrics());
  admin.route("POST", "/echo", [](const admin_request& r) {
    return admin_response{201, "application/json", r.method + " " + r.query + " " + r.body, {}};
  });
  admin.route("GET", "/fails",
              [](const admin_request&) -> admin_response { throw std::runtime_error("boom"); });
  client c(admin.port());
  c.send("POST /echo?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
  auto r = c.read_reply();
  CHECK(r.status == 201);
  CHECK(r.field("Content-Type") == "application/json");
  CHECK(r.body == "POST x=1 hello");
  c.send(
      "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
      "Expect: 100-continue\r\n\r\n");
  const auto go_on = c.read_some();
  REQUIRE(go_on);
  CHECK(*go_on == "HTTP/1.1 100 Continue\r\n\r\n");
  c.send("3\r\nabc\r\n0\r\n\r\n");
  CHECK(c.read_reply().body == "POST  abc");
  c.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n");
  r = c.read_reply();
  CHECK(r.status == 405);
  CHECK(r.field("Allow") == "POST");
  r = c.get("/fails");
  CHECK(r.status == 500);
  CHECK(r.body.find("boom") == std::string::npos);
  // A route replaced while serving.
  admin.route("GET", "/healthz", [](const admin_request&) {
    return admin_response{200, "text/plain; charset=utf-8", "degraded", {}};
  });
  CHECK(c.get("/healthz").body == "degraded");
}

TEST_CASE("admin listener: a scrape whose collector throws gets 500, the next one works",
          "[admin_listener]") {
  auto m = some_metrics();
  std::atomic<bool> fail = true;
  m->add_collector([&fail](exposition&) {
    if (fail) throw std::runtime_error("no stats");
  });
  admin_listener admin("127.0.0.1", 0, m);
  client c(admin.port());
  CHECK(c.get("/metrics").status == 500);
  fail = false;
  CHECK(c.get("/metrics").status == 200);
}

TEST_CASE("admin listener: a busy address or a bad host throws naming it", "[admin_listener]") {
  admin_listener first("127.0.0.1", 0, some_metrics());
  const auto address = "127.0.0.1:" + std::to_string(first.port());
  CHECK_THROWS_WITH(admin_listener("127.0.0.1", first.port(), some_metrics()),
                    Catch::Contains(address));
  CHECK_THROWS_WITH(admin_listener("not-an-ip", 9, some_metrics()), Catch::Contains("not-an-ip:9"));
}

TEST_CASE("admin listener: over the connection limit a client gets 503, and stopping cuts the rest",
          "[admin_listener]") {
  admin_limits limits;
  limits.max_connections = 2;
  auto admin = std::make_unique<admin_listener>("127.0.0.1", 0, some_metrics(), limits);
  client a(admin->port());
  client b(admin->port());
  CHECK(a.get("/healthz").status == 200);  // both are accepted by now
  CHECK(b.get("/healthz").status == 200);
  client c(admin->port());
  CHECK(c.read_reply().status == 503);
  a.send("GET /metr");  // mid-request when the listener stops
  admin.reset();
  CHECK(a.closed_within(2s));
  CHECK(b.closed_within(2s));
}

TEST_CASE("admin listener: a PREFIX/* route answers the paths under it, with its own fields",
          "[admin_listener]") {
  admin_listener admin("127.0.0.1", 0, some_metrics());
  admin.route("POST", "/api/asks/*", [](const admin_request& r) {
    return admin_response{200, "text/plain", r.path + " from " + r.peer, {{"X-Seen", "yes"}}};
  });
  admin.route("POST", "/api/asks/all", [](const admin_request&) {
    return admin_response{200, "text/plain", "exact", {}};
  });
  client c(admin.port());
  c.send("POST /api/asks/g-1-2/approve HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  auto r = c.read_reply();
  CHECK(r.status == 200);
  CHECK(r.field("X-Seen") == "yes");
  CHECK(r.body.starts_with("/api/asks/g-1-2/approve from 127.0.0.1:"));
  c.send("POST /api/asks/all HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  CHECK(c.read_reply().body == "exact");
  // Above the prefix, or beside it: not the route's.
  CHECK(c.get("/api/asks").status == 404);
  CHECK(c.get("/api/asksx/1").status == 404);
  c.send("GET /api/asks/1 HTTP/1.1\r\nHost: a\r\n\r\n");
  r = c.read_reply();
  CHECK(r.status == 405);
  CHECK(r.field("Allow") == "POST");
}

TEST_CASE("admin listener: a slow route runs on the worker while the others answer",
          "[admin_listener]") {
  admin_listener admin("127.0.0.1", 0, some_metrics());
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> started{false};
  admin.route(
      "GET", "/slow",
      [released, &started](const admin_request& request) {
        started = true;
        released.wait();  // until the test has been answered elsewhere
        return admin_response{200, "text/plain", "slow " + request.query, {}};
      },
      true);
  admin.route(
      "GET", "/slow-throws",
      [](const admin_request&) -> admin_response { throw std::runtime_error("disk gone"); }, true);
  client slow(admin.port());
  slow.send("GET /slow?x=1 HTTP/1.1\r\nHost: admin\r\n\r\n");
  while (!started) std::this_thread::sleep_for(1ms);
  // The slow handler holds the worker; the listener's own thread still answers.
  client other(admin.port());
  CHECK(other.get("/healthz").status == 200);
  CHECK(other.get("/metrics").status == 200);
  CHECK_FALSE(slow.read_some(50ms));
  release.set_value();
  const auto r = slow.read_reply();
  CHECK(r.status == 200);
  CHECK(r.body == "slow x=1");
  CHECK(slow.get("/slow-throws").status == 500);
  CHECK(slow.get("/healthz").status == 200);
}
