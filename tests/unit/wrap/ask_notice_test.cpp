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

TEST_CASE("on a terminal an ask takes one row, its URL shortened to fit", "[wrap][ask]") {
  nlohmann::ordered_json ask = {{"id", "s-1-5"},
                                {"pid", 42},
                                {"exe", "/opt/agent/bin/claude.exe"},
                                {"method", "GET"},
                                {"url", "https://d.test/" + std::string(200, 'p')},
                                {"timeout_s", 120}};
  auto line = broker::wrap::terminal_ask_line(ask, 100);
  CHECK(line.size() == 99);
  CHECK(line.starts_with("broker: ask s-1-5: GET https://d.test/ppp"));
  CHECK(line.ends_with("ppp... (claude.exe) - broker approve|deny s-1-5"));
  // Short enough: whole.
  ask["url"] = "https://docs.test/a";
  line = broker::wrap::terminal_ask_line(ask, 100);
  CHECK(line ==
        "broker: ask s-1-5: GET https://docs.test/a (claude.exe) - broker approve|deny s-1-5");
  // Narrower than the rest: cut, never more than the row.
  CHECK(broker::wrap::terminal_ask_line(ask, 30).size() == 29);
  CHECK(broker::wrap::terminal_ask_line(ask, 0).empty());
  // Escaped as the line for a pipe is.
  ask["exe"] = "/tmp/\x1b[2J";
  CHECK(broker::wrap::terminal_ask_line(ask, 200).find('\x1b') == std::string::npos);
}

TEST_CASE("an MCP call's ask names the call, then its arguments, each line escaped",
          "[wrap][ask][mcp]") {
  nlohmann::ordered_json ask = {
      {"id", "s-1-6"},
      {"pid", 42},
      {"exe", "/usr/bin/node"},
      {"method", "POST"},
      {"url", "https://mcp.test/mcp"},
      {"timeout_s", 120},
      {"mcp",
       {{"server", "mcp.test:443"},
        {"method", "tools/call"},
        {"tool", "create_issue"},
        {"arguments", "{\n  \"title\": \"a\\u001b[2J\x1b[2J\"\n}"},
        {"why", "the tool \"create_issue\" is not allowed by allow[0]"}}}};
  const auto line = broker::wrap::ask_line(ask);
  INFO(line);
  CHECK(
      line.starts_with("broker: ask s-1-6: MCP tools/call create_issue on mcp.test:443 (pid 42 "
                       "/usr/bin/node): the tool \"create_issue\" is not allowed by allow[0]; "
                       "waiting 120 s: broker approve s-1-6 [--once]  |  broker deny s-1-6\n"
                       "  arguments:\n    {\n"));
  CHECK(line.find('\x1b') == std::string::npos);
  CHECK(line.ends_with("    }\n"));
  const auto row = broker::wrap::terminal_ask_line(ask, 200);
  CHECK(row.find("MCP tools/call create_issue on mcp.test:443") != std::string::npos);
  CHECK(row.find('\n') == std::string::npos);
}
