#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "wrap/ask_notice.hpp"

TEST_CASE("an ask's line names the request, its program and how to answer, in one line",
          "[wrap][ask]") {
  nlohmann::ordered_json ask = {{"id", "s-1-3"},   {"session", "s-1"},
                                {"pid", 42},       {"exe", "/usr/bin/curl"},
                                {"method", "GET"}, {"url", "https://docs.test/a?q=<redacted>"},
                                {"timeout_s", 120}};
  const auto line = broker::wrap::ask_line(ask);
  CHECK(line ==
        "broker: ask s-1-3: GET https://docs.test/a?q=<redacted> (pid 42 /usr/bin/curl) is not "
        "in the policy; waiting 120 s: broker approve s-1-3 [--once|--always] [--path P]  |  "
        "broker deny s-1-3\n");
}

TEST_CASE("an ask's line never carries a control byte the child chose", "[wrap][ask]") {
  // A hostile child names its program (and could name a path) with terminal escapes.
  nlohmann::ordered_json ask = {{"id", "s-1-4"},
                                {"pid", 7},
                                {"exe", "/tmp/\x1b]0;owned\x07\x1b[2J"},
                                {"method", "GET"},
                                {"url", "https://docs.test/\r\nfake line"},
                                {"timeout_s", 120}};
  const auto line = broker::wrap::ask_line(ask);
  CHECK(line.find('\x1b') == std::string::npos);
  CHECK(line.find('\x07') == std::string::npos);
  CHECK(line.find('\r') == std::string::npos);
  CHECK(line.find('\n') == line.size() - 1);  // one line
  CHECK(line.find("/tmp/\\x1b]0;owned\\x07\\x1b[2J") != std::string::npos);
}
