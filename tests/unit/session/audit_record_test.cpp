#include "session/audit_record.hpp"

#include <catch2/catch.hpp>

using namespace broker::session;

namespace {

std::string no_scrub(std::string_view s) {
  return std::string(s);
}

std::vector<std::string> keys(const nlohmann::ordered_json& j) {
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items()) out.push_back(k);
  return out;
}

nlohmann::ordered_json as_json(const broker::base::json_members& fields) {
  return nlohmann::ordered_json::parse("{" + fields.text() + "}");
}

}  // namespace

TEST_CASE("an exchange record has every docs/audit-log.md field, null where unknown",
          "[audit_record]") {
  audit_entry e;
  e.event = "tunnel";
  e.host = "api.example.test";
  e.port = 443;
  const auto j = as_json(exchange_record(e, no_scrub));
  CHECK(keys(j) == std::vector<std::string>{"event", "pid", "exe", "method", "scheme", "host",
                                            "port", "path", "status", "bytes_out", "bytes_in", "ms",
                                            "decision", "rule", "credential", "llm_tokens"});
  CHECK(j["pid"].is_null());
  CHECK(j["exe"].is_null());
  CHECK(j["method"].is_null());
  CHECK(j["path"].is_null());
  CHECK(j["status"].is_null());
  CHECK(j["decision"] == "allow");
}

TEST_CASE("an exchange record scrubs and redacts what the client chose", "[audit_record]") {
  audit_entry e;
  e.event = "refused";
  e.method = "GET";
  e.host = "SECRET.example.test";
  e.target = "/x/SECRET?token=SECRET&page=2";
  e.allowed = false;
  e.error = "credential_not_bound";
  e.pid = 42;
  e.exe = "/usr/bin/curl";
  e.ms = 1.26;
  e.llm_tokens = 7;
  e.llm_estimated = true;
  auto scrub = [](std::string_view s) {
    std::string out(s);
    for (auto at = out.find("SECRET"); at != std::string::npos; at = out.find("SECRET"))
      out.replace(at, 6, "DUMMY0");
    return out;
  };
  const auto j = as_json(exchange_record(e, scrub));
  CHECK(j["host"] == "DUMMY0.example.test");
  CHECK(j["path"].get<std::string>().find("SECRET") == std::string::npos);
  CHECK(j["path"].get<std::string>().rfind("/x/DUMMY0?", 0) == 0);
  CHECK(j["decision"] == "deny");
  CHECK(j["error"] == "credential_not_bound");
  CHECK(j["pid"] == 42);
  CHECK(j["exe"] == "/usr/bin/curl");
  CHECK(j["ms"] == 1.3);
  CHECK(j["llm_tokens"] == 7);
  CHECK(j["estimated"] == true);
}

TEST_CASE("a connection several processes hold names every one, after pid and exe",
          "[audit_record][programs]") {
  audit_entry e;
  e.event = "refused";
  e.method = "GET";
  e.host = "github.com";
  e.port = 443;
  e.pid = 51;
  e.exe = "/usr/bin/git";
  auto client = std::make_shared<broker::config::client_identity>();
  client->holders = {{51, "/usr/bin/git", std::nullopt},
                     {50, "/usr/bin/python3", std::nullopt},
                     {49, "", std::nullopt}};
  client->complete = true;
  e.client = client;
  auto j = as_json(exchange_record(e, no_scrub));
  const auto k = keys(j);
  REQUIRE(k.size() > 3);
  CHECK(std::vector<std::string>(k.begin(), k.begin() + 4) ==
        std::vector<std::string>{"event", "pid", "exe", "holders"});
  CHECK(j["pid"] == 51);
  CHECK(j["exe"] == "/usr/bin/git");
  CHECK(j["holders"] == nlohmann::ordered_json::parse(
                            R"([{"pid": 51, "exe": "/usr/bin/git"},
                               {"pid": 50, "exe": "/usr/bin/python3"},
                               {"pid": 49, "exe": null}])"));
  // One holder: the record is as it always was.
  client->holders.resize(1);
  j = as_json(exchange_record(e, no_scrub));
  CHECK_FALSE(j.contains("holders"));
  CHECK(j["exe"] == "/usr/bin/git");
}

TEST_CASE("session records name what serve and wrap each have", "[audit_record]") {
  session_start serve;
  serve.mode = "serve";
  serve.listen = "http://127.0.0.1:1";
  serve.policy = nlohmann::ordered_json::array();
  serve.credentials = {"github"};
  CHECK(keys(start_record(serve)) ==
        std::vector<std::string>{"event", "version", "mode", "listen", "policy", "credentials"});
  session_start wrap;
  wrap.mode = "wrap";
  wrap.isolation = "netns";
  wrap.command = "curl";
  wrap.pid = 9;
  CHECK(keys(start_record(wrap)) == std::vector<std::string>{"event", "version", "mode",
                                                             "isolation", "command", "pid",
                                                             "credentials"});
  CHECK(start_record(wrap)["credentials"].is_array());

  session_end end;
  end.requests = 3;
  end.denied = 1;
  CHECK(end_record(end)["exit"].is_null());
  end.exit = 0;
  CHECK(end_record(end)["exit"] == 0);
  CHECK(keys(end_record(end)) ==
        std::vector<std::string>{"event", "requests", "denied", "would_deny", "usage", "exit"});
  CHECK(policy_reload_record(nlohmann::ordered_json::array())["event"] == "policy_reload");
}

TEST_CASE("an upgraded connection's record counts its messages each way", "[audit_record]") {
  audit_entry e;
  e.event = "request";
  e.method = "GET";
  e.status = 101;
  e.bytes_out = 300;
  e.bytes_in = 200;
  e.ws_messages_out = 3;
  e.ws_messages_in = 0;
  const auto j = as_json(exchange_record(e, no_scrub));
  CHECK(keys(j) == std::vector<std::string>{"event", "pid", "exe", "method", "scheme", "host",
                                            "port", "path", "status", "bytes_out", "bytes_in",
                                            "ws_messages_out", "ws_messages_in", "ms", "decision",
                                            "rule", "credential", "llm_tokens"});
  CHECK(j["ws_messages_out"] == 3);
  CHECK(j["ws_messages_in"] == 0);
}

TEST_CASE("an ask record names the held request, its id and timeout, and no outcome",
          "[audit_record]") {
  audit_entry e;
  e.event = "refused";
  e.method = "POST";
  e.scheme = "https";
  e.host = "api.example.test";
  e.port = 443;
  e.target = "/v1/x";
  e.allowed = false;
  e.rule = "default";
  e.status = 403;
  e.credential = "github";
  const auto j = as_json(ask_record("a-1", e, 120, no_scrub));
  CHECK(keys(j) == std::vector<std::string>{"event", "pid", "exe", "method", "scheme", "host",
                                            "port", "path", "decision", "rule", "id", "timeout_s"});
  CHECK(j["event"] == "ask");
  CHECK(j["decision"] == "ask");
  CHECK(j["rule"] == "default");
  CHECK(j["id"] == "a-1");
  CHECK(j["timeout_s"] == 120);
}
