#include "gateway/redis/redis_endpoint.hpp"

#include <catch2/catch.hpp>

using broker::gateway::redis_endpoint;
using transport = redis_endpoint::transport;

namespace {

// The message of the std::invalid_argument that parsing `url` throws.
std::string parse_error(const std::string& url) {
  try {
    (void)redis_endpoint::parse(url);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("parsed: " << url);
  return {};
}

}  // namespace

TEST_CASE("redis:// URLs: host, port, db, user and password", "[redis]") {
  const auto plain = redis_endpoint::parse("redis://localhost");
  CHECK(plain.kind == transport::tcp);
  CHECK(plain.host == "localhost");
  CHECK(plain.port == 6379);
  CHECK(plain.db == 0);
  CHECK(plain.password == nullptr);
  CHECK(plain.user.empty());
  CHECK(plain.display() == "redis://localhost:6379/0");

  const auto full = redis_endpoint::parse("redis://gw:s3cr%40t@10.0.0.5:6380/4");
  CHECK(full.host == "10.0.0.5");
  CHECK(full.port == 6380);
  CHECK(full.db == 4);
  CHECK(full.user == "gw");
  REQUIRE(full.password != nullptr);
  CHECK(full.password->expose() == "s3cr@t");
  CHECK(full.display() == "redis://gw@10.0.0.5:6380/4");

  const auto password_only = redis_endpoint::parse("redis://:hunter2@redis.internal/");
  CHECK(password_only.user.empty());
  REQUIRE(password_only.password != nullptr);
  CHECK(password_only.password->expose() == "hunter2");
  CHECK(password_only.db == 0);
  CHECK(password_only.display() == "redis://redis.internal:6379/0");

  const auto v6 = redis_endpoint::parse("redis://[::1]:7000/2");
  CHECK(v6.host == "::1");
  CHECK(v6.port == 7000);
  CHECK(v6.display() == "redis://[::1]:7000/2");

  // Copies share the one password.
  const redis_endpoint copy = full;
  CHECK(copy.password == full.password);
}

TEST_CASE("unix:// and redis+unix:// URLs: a socket path, a db, a password", "[redis]") {
  const auto sock = redis_endpoint::parse("unix:///run/redis/redis.sock");
  CHECK(sock.kind == transport::unix_socket);
  CHECK(sock.path == "/run/redis/redis.sock");
  CHECK(sock.db == 0);
  CHECK(sock.display() == "unix:///run/redis/redis.sock");

  const auto with_db = redis_endpoint::parse("redis+unix:///tmp/r%20s.sock?db=3");
  CHECK(with_db.kind == transport::unix_socket);
  CHECK(with_db.path == "/tmp/r s.sock");
  CHECK(with_db.db == 3);
  CHECK(with_db.display() == "unix:///tmp/r s.sock?db=3");

  const auto with_password = redis_endpoint::parse("unix://:pw@/tmp/redis.sock?db=1");
  REQUIRE(with_password.password != nullptr);
  CHECK(with_password.password->expose() == "pw");
  CHECK(with_password.path == "/tmp/redis.sock");
  CHECK(with_password.display().find("pw") == std::string::npos);
}

TEST_CASE("bad redis URLs say what is wrong, and never quote the password", "[redis]") {
  CHECK_THAT(parse_error("http://localhost"), Catch::Contains("scheme"));
  CHECK_THAT(parse_error("rediss://localhost"), Catch::Contains("TLS"));
  CHECK_THAT(parse_error("redis://"), Catch::Contains("no host"));
  CHECK_THAT(parse_error("redis://:6379"), Catch::Contains("no host"));
  CHECK_THAT(parse_error("redis://host:port"), Catch::Contains("the port"));
  CHECK_THAT(parse_error("redis://host:70000"), Catch::Contains("the port"));
  CHECK_THAT(parse_error("redis://host:0"), Catch::Contains("the port"));
  CHECK_THAT(parse_error("redis://host:"), Catch::Contains("port"));
  CHECK_THAT(parse_error("redis://host/zero"), Catch::Contains("the db"));
  CHECK_THAT(parse_error("redis://host/1/2"), Catch::Contains("the db"));
  CHECK_THAT(parse_error("redis://host?db=1"), Catch::Contains("query"));
  CHECK_THAT(parse_error("redis://::1:6379"), Catch::Contains("brackets"));
  CHECK_THAT(parse_error("redis://[::1"), Catch::Contains("']'"));
  CHECK_THAT(parse_error("redis://user@host"), Catch::Contains("user:password"));
  CHECK_THAT(parse_error("redis://user:@host"), Catch::Contains("empty"));
  CHECK_THAT(parse_error("unix://relative.sock"), Catch::Contains("absolute"));
  CHECK_THAT(parse_error("unix://"), Catch::Contains("absolute"));
  CHECK_THAT(parse_error("unix:///tmp/r.sock?timeout=3"), Catch::Contains("db"));
  CHECK_THAT(parse_error("unix:///tmp/r.sock?db=x"), Catch::Contains("the db"));

  const std::string bad_escape = parse_error("redis://:TopSecret%zz@host");
  CHECK_THAT(bad_escape, Catch::Contains("percent-escape in the password"));
  CHECK(bad_escape.find("TopSecret") == std::string::npos);
  // An unencoded '/' in a password puts part of it where the db goes: still not quoted.
  const std::string slash = parse_error("redis://:Top/Secret@host");
  CHECK(slash.find("Secret") == std::string::npos);
}
