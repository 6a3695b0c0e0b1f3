#include "session/log_reader.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include <catch2/catch.hpp>

#include "session/audit_files.hpp"
#include "session/audit_log.hpp"
#include "session/audit_record.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::session::audit_log;
using broker::session::audit_log_options;
using broker::session::format_record;
using broker::session::session_files;
using broker::session::verify_log;
using broker::session::verify_replica;
using nlohmann::json;
using nlohmann::ordered_json;

using broker::test::temp_dir;

namespace {

// Restores an environment variable at scope exit.
struct env_guard {
  std::string name;
  std::optional<std::string> saved;
  explicit env_guard(std::string n) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) saved = v;
  }
  ~env_guard() {
    if (saved) {
      ::setenv(name.c_str(), saved->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
};

// A complete session written by the real writer: start, 4 requests, end. Returns its lines.
std::vector<std::string> written_session(const fs::path& dir, const std::string& id) {
  auto log = audit_log::open(dir, id);
  REQUIRE(log->write({{"event", "session_start"}, {"version", "0.1.0"}}));
  for (int i = 0; i < 4; ++i) {
    REQUIRE(log->write({{"event", "request"},
                        {"method", "GET"},
                        {"host", "example.com"},
                        {"path", "/" + std::to_string(i)},
                        {"decision", "allow"}}));
  }
  REQUIRE(log->write({{"event", "session_end"}, {"exit", 0}}));
  std::ifstream in(log->path());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

broker::session::verify_result verify_text(const std::string& text) {
  std::istringstream in(text);
  return verify_log(in);
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

void write_file(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("verify_log accepts an intact log", "[log_reader]") {
  temp_dir tmp;
  auto lines = written_session(tmp.path, "s-ok");
  auto result = verify_text(join(lines));
  CHECK(result.ok);
  CHECK(result.records == 6);
  CHECK(result.has_end);
  CHECK(result.error.empty());

  lines.pop_back();  // cut at a record boundary: still a valid chain, but not ended
  result = verify_text(join(lines));
  CHECK(result.ok);
  CHECK_FALSE(result.has_end);
}

TEST_CASE("verify_log detects tampering", "[log_reader]") {
  temp_dir tmp;
  auto lines = written_session(tmp.path, "s-tamper");
  auto expect_bad = [](const std::string& text, std::size_t line, const std::string& error) {
    auto result = verify_text(text);
    INFO(result.error);
    CHECK_FALSE(result.ok);
    CHECK(result.bad_line == line);
    CHECK(result.records == line - 1);
    CHECK(result.error.find(error) != std::string::npos);
    CHECK(result.truncated == (error == "partial"));
  };

  SECTION("a modified field") {
    auto pos = lines[2].find("\"/1\"");
    REQUIRE(pos != std::string::npos);
    lines[2].replace(pos, 4, "\"/x\"");
    expect_bad(join(lines), 3, "hash mismatch");
  }
  SECTION("a modified field with its hash recomputed breaks the next link") {
    auto record = lines[2].substr(0, lines[2].size() - 75);
    auto pos = record.find("\"/1\"");
    record.replace(pos, 4, "\"/x\"");
    auto prev = json::parse(lines[1])["hash"].get<std::string>();
    lines[2] = record + ",\"hash\":\"" + broker::session::chain_hash(prev, record + "}") + "\"}";
    expect_bad(join(lines), 4, "prev");
  }
  SECTION("a deleted line") {
    lines.erase(lines.begin() + 2);
    expect_bad(join(lines), 3, "seq 4 where 3 was expected");
  }
  SECTION("the first line deleted") {
    lines.erase(lines.begin());
    expect_bad(join(lines), 1, "seq 2 where 1 was expected");
  }
  SECTION("two lines swapped") {
    std::swap(lines[1], lines[2]);
    expect_bad(join(lines), 2, "seq");
  }
  SECTION("an edited hash") {
    char& c = lines[3][lines[3].size() - 3];
    c = c == '0' ? '1' : '0';
    expect_bad(join(lines), 4, "hash mismatch");
  }
  SECTION("an upper-cased hash") {
    auto& line = lines[1];
    for (std::size_t i = line.size() - 66; i < line.size() - 2; ++i) {
      line[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(line[i])));
    }
    expect_bad(join(lines), 2, "does not end with a \"hash\" field");
  }
  SECTION("a last line cut short is a cut, not an edit") {
    std::string text = join(lines);
    text.resize(text.size() - 20);
    expect_bad(text, 6, "partial");
  }
  SECTION("a complete last line without its newline is a cut too") {
    std::string text = join(lines);
    text.pop_back();
    expect_bad(text, 6, "partial");
  }
  SECTION("a line cut short before others is an edit") {
    lines[2].resize(lines[2].size() - 20);
    expect_bad(join(lines), 3, "does not end with a \"hash\" field");
  }
  SECTION("an inserted garbage line") {
    lines.insert(lines.begin() + 1, "hello");
    expect_bad(join(lines), 2, "hash");
  }
  SECTION("an empty line") {
    lines.insert(lines.begin() + 3, "");
    expect_bad(join(lines), 4, "empty line");
  }
  SECTION("a hash suffix on something that is not JSON") {
    lines[0] = "{not json" + lines[0].substr(lines[0].size() - 75);
    expect_bad(join(lines), 1, "not a JSON object");
  }
}

TEST_CASE("verify_log on an empty log", "[log_reader]") {
  auto result = verify_text("");
  CHECK_FALSE(result.ok);
  CHECK(result.error == "empty log");
  CHECK(result.records == 0);
  CHECK_FALSE(result.has_end);
}

TEST_CASE("format_record shows a request on one line", "[log_reader]") {
  auto record = json::parse(R"({"ts":"2026-11-29T20:15:06.053Z","session":"s-7f3a","seq":12,
    "event":"request","pid":4242,"exe":"/usr/bin/git","method":"GET","scheme":"https",
    "host":"api.github.com","port":443,"path":"/repos/o/r?per_page=<redacted>","status":200,
    "bytes_out":512,"bytes_in":20311,"ms":41.2,"decision":"allow","rule":"allow[0]",
    "credential":"github","llm_tokens":null,"prev":"00","hash":"11"})");
  auto line = format_record(record);
  INFO(line);
  CHECK(
      line.starts_with("20:15:06.053  request  allow  GET "
                       "https://api.github.com/repos/o/r?per_page=<redacted>  200  "));
  CHECK(line.find("512B> 20311B<") != std::string::npos);
  CHECK(line.find("41.2ms") != std::string::npos);
  CHECK(line.find("rule=allow[0]") != std::string::npos);
  CHECK(line.find("credential=github") != std::string::npos);
  CHECK(line.find("error=") == std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
}

TEST_CASE("format_record shows an MCP call", "[log_reader][mcp]") {
  auto refused = json::parse(R"({"ts":"2026-11-29T20:15:06.053Z","event":"refused",
    "method":"POST","scheme":"https","host":"mcp.example.com","port":443,"path":"/mcp",
    "status":200,"bytes_out":90,"bytes_in":200,"ms":1.5,"decision":"deny",
    "rule":"allow[0].mcp.tools.deny[0]","error":"mcp_tool_denied",
    "mcp":{"method":"tools/call","tool":"delete_repo","arguments_sha256":"ab"}})");
  auto line = format_record(refused);
  INFO(line);
  CHECK(line.find("mcp tools/call delete_repo") != std::string::npos);
  CHECK(line.find("rule=allow[0].mcp.tools.deny[0]") != std::string::npos);
  CHECK(line.find("error=mcp_tool_denied") != std::string::npos);
  auto list = json::parse(R"({"ts":"2026-11-29T20:15:06.053Z","event":"request",
    "method":"POST","host":"mcp.example.com","path":"/mcp","status":200,"decision":"allow",
    "mcp":{"method":"tools/list","tools_hidden":2}})");
  line = format_record(list);
  CHECK(line.find("mcp tools/list  tools_hidden=2") != std::string::npos);
  // A hostile name cannot break the line.
  auto hostile = json::parse(R"({"ts":"2026-11-29T20:15:06.053Z","event":"request",
    "mcp":{"method":"tools/call","tool":"x\ny\u001b[31m"}})");
  CHECK(format_record(hostile).find('\n') == std::string::npos);
  CHECK(format_record(hostile).find('\x1b') == std::string::npos);
  // A person's decision about a held call names it.
  auto approval = json::parse(R"({"ts":"2026-11-29T20:15:07.000Z","event":"approval",
    "id":"s1-2","decision":"approve","who":"uid 0","scope":"session","rule":"approved:session",
    "host":"mcp.example.com","port":443,"path_prefix":null,"call":"tools/call create_issue",
    "released":["s1-2"]})");
  line = format_record(approval);
  INFO(line);
  CHECK(line.find("mcp tools/call create_issue  rule=approved:session") != std::string::npos);
}

TEST_CASE("format_record ports, tunnels, refusals and session events", "[log_reader]") {
  auto line = format_record({{"event", "request"},
                             {"method", "POST"},
                             {"scheme", "http"},
                             {"host", "localhost"},
                             {"port", 8080},
                             {"path", "/x"}});
  CHECK(line.find("POST http://localhost:8080/x") != std::string::npos);
  line = format_record(
      {{"event", "request"}, {"scheme", "http"}, {"host", "h"}, {"port", 80}, {"path", "/"}});
  CHECK(line.find("http://h/") != std::string::npos);
  line = format_record(
      {{"event", "request"}, {"scheme", "https"}, {"host", "::1"}, {"port", 443}, {"path", "/"}});
  CHECK(line.find("https://[::1]/") != std::string::npos);

  line = format_record({{"ts", "2026-11-29T20:15:06.053Z"},
                        {"event", "tunnel"},
                        {"decision", "allow"},
                        {"host", "pinned.example.com"},
                        {"port", 443},
                        {"bytes_out", 10},
                        {"bytes_in", 20},
                        {"ms", 1500}});
  CHECK(line == "20:15:06.053  tunnel   allow  pinned.example.com:443  10B> 20B<  1500.0ms");

  line = format_record({{"event", "refused"},
                        {"decision", "deny"},
                        {"method", "CONNECT"},
                        {"host", "evil.example"},
                        {"port", 443},
                        {"status", 403},
                        {"rule", "deny[0]"},
                        {"error", "policy_denied"}});
  CHECK(line.find("refused  deny  CONNECT evil.example:443  403") != std::string::npos);
  CHECK(line.find("error=policy_denied") != std::string::npos);
  CHECK(line.find("rule=deny[0]") != std::string::npos);

  line = format_record(json::parse(
      R"({"ts":"2026-11-29T20:15:00.000Z","event":"session_start","version":"0.1.0",
          "policy":[{"source":"/etc/broker/policy.json","sha256":"ab"},{"source":"p.json"}],
          "listen":"127.0.0.1:41234"})"));
  CHECK(line ==
        "20:15:00.000  session_start  version 0.1.0  listen 127.0.0.1:41234  "
        "policy /etc/broker/policy.json, p.json");

  line = format_record(json::parse(
      R"({"ts":"2026-11-29T20:15:30.000Z","event":"policy_reload","policy":[{"source":"p.json"}]})"));
  CHECK(line == "20:15:30.000  policy_reload  policy p.json");

  line = format_record({{"ts", "2026-11-29T20:16:00.000Z"},
                        {"event", "session_end"},
                        {"requests", 5},
                        {"denied", 1},
                        {"exit", nullptr}});
  CHECK(line == "20:16:00.000  session_end  requests=5  denied=1  exit=-");
}

TEST_CASE("format_record never throws on odd input", "[log_reader]") {
  std::vector<json> odd = {
      json::parse(R"({"ts":5,"event":[],"host":{},"port":"x","status":null,"ms":"fast",
                      "bytes_out":true,"rule":{"a":1},"error":[1]})"),
      json::parse(R"({"event":"session_start","policy":"nope","version":{}})"),
      json::parse(R"({"event":"session_start","policy":[1,null,{"source":2}]})"),
      json::parse(R"({"event":"session_end","exit":"x"})"),
      json::parse(R"({"host":"h","port":-1,"scheme":7})"),
      json::parse(R"({"ts":"2026"})"),
      json::array(),
      json(42),
      json(),
      json::object(),
  };
  for (const auto& record : odd) {
    INFO(record.dump());
    CHECK_NOTHROW(format_record(record));
  }
  CHECK(format_record(json::object()).starts_with("??:??:??.???  ?"));
}

TEST_CASE("format_record escapes control characters", "[log_reader]") {
  auto line = format_record({{"event", "request"},
                             {"scheme", "http"},
                             {"host", "h"},
                             {"path", "/\x1b[31mred\n"},
                             {"error", "\x07"}});
  CHECK(line.find('\x1b') == std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(line.find("/\\x1b[31mred\\x0a") != std::string::npos);
  CHECK(line.find("error=\\x07") != std::string::npos);
}

TEST_CASE("summarize_log counts a written session", "[log_reader]") {
  temp_dir tmp;
  auto log = audit_log::open(tmp.path, "s-sum");
  REQUIRE(log->write({{"event", "session_start"}, {"version", "0.1.0"}}));
  REQUIRE(log->write({{"event", "request"}, {"decision", "allow"}}));
  REQUIRE(
      log->write({{"event", "request"}, {"decision", "deny"}, {"error", "real_secret_blocked"}}));
  REQUIRE(log->write({{"event", "tunnel"}, {"decision", "allow"}}));
  REQUIRE(log->write({{"event", "refused"}, {"decision", "deny"}, {"error", "policy_denied"}}));
  REQUIRE(log->write({{"event", "exfiltration_blocked"}, {"decision", "deny"}}));

  SECTION("running") {
    auto s = broker::session::summarize_log(log->path());
    CHECK(s.id == "s-sum");
    CHECK_FALSE(s.start.empty());
    CHECK(s.end.empty());
    CHECK(s.requests == 4);
    CHECK(s.denied == 2);
    CHECK_FALSE(s.exit_code.has_value());
  }
  SECTION("ended, with garbage appended") {
    REQUIRE(log->write({{"event", "session_end"}, {"requests", 4}, {"denied", 2}, {"exit", 3}}));
    std::ofstream(log->path(), std::ios::app) << "garbage\n[1,2]\n{\"event\":\"request\"";
    auto s = broker::session::summarize_log(log->path());
    CHECK_FALSE(s.end.empty());
    CHECK(s.start <= s.end);
    CHECK(s.requests == 4);
    CHECK(s.denied == 2);
    CHECK(s.exit_code == 3);
  }
  SECTION("ended by a signal-less exit of null") {
    REQUIRE(log->write({{"event", "session_end"}, {"exit", nullptr}}));
    auto s = broker::session::summarize_log(log->path());
    CHECK_FALSE(s.end.empty());
    CHECK_FALSE(s.exit_code.has_value());
  }
  SECTION("resumed after an end") {
    REQUIRE(log->write({{"event", "session_end"}, {"exit", 0}}));
    REQUIRE(log->write({{"event", "session_start"}}));
    auto s = broker::session::summarize_log(log->path());
    CHECK(s.end.empty());
    CHECK_FALSE(s.exit_code.has_value());
  }
}

TEST_CASE("list_sessions and find_log", "[log_reader]") {
  temp_dir tmp;
  write_file(tmp.path / "s-b.jsonl",
             R"({"ts":"2026-01-02T00:00:00.000Z","event":"session_start"})"
             "\n"
             R"({"ts":"2026-01-02T00:01:00.000Z","event":"session_end","exit":0})"
             "\n");
  write_file(tmp.path / "s-a.jsonl", R"({"ts":"2026-01-03T00:00:00.000Z","event":"session_start"})"
                                     "\n"
                                     R"({"event":"request","decision":"allow"})"
                                     "\n");
  write_file(tmp.path / "s-c.jsonl", R"({"ts":"2025-12-31T23:59:59.999Z","event":"session_start"})"
                                     "\n");
  write_file(tmp.path / "notes.txt", "not a log\n");
  fs::create_directory(tmp.path / "sub.jsonl");

  auto sessions = broker::session::list_sessions(tmp.path);
  REQUIRE(sessions.size() == 3);
  CHECK(sessions[0].id == "s-c");
  CHECK(sessions[1].id == "s-b");
  CHECK(sessions[1].exit_code == 0);
  CHECK(sessions[1].end == "2026-01-02T00:01:00.000Z");
  CHECK(sessions[2].id == "s-a");
  CHECK(sessions[2].requests == 1);

  CHECK(broker::session::list_sessions(tmp.path / "missing").empty());

  using broker::session::find_log;
  auto only_file = [](const std::optional<broker::session::log_selection>& found) {
    REQUIRE(found);
    CHECK(found->single_file());
    return found->files.at(0).files.at(0).path;
  };
  CHECK(only_file(find_log(tmp.path, "")) == tmp.path / "s-a.jsonl");
  CHECK(find_log(tmp.path, "")->session == "s-a");
  CHECK(only_file(find_log(tmp.path, "s-b")) == tmp.path / "s-b.jsonl");
  CHECK(only_file(find_log(tmp.path, (tmp.path / "notes.txt").string())) == tmp.path / "notes.txt");
  CHECK(find_log(tmp.path, (tmp.path / "notes.txt").string())->session.empty());
  CHECK_FALSE(find_log(tmp.path, "s-missing").has_value());
  CHECK_FALSE(find_log(tmp.path, (tmp.path / "nope.jsonl").string()).has_value());
  CHECK_FALSE(find_log(tmp.path, tmp.path.string()).has_value());  // a directory
  CHECK_FALSE(find_log(tmp.path / "empty", "").has_value());
}

TEST_CASE("default_log_dir follows XDG", "[log_reader]") {
  env_guard state("XDG_STATE_HOME");
  env_guard home("HOME");
  ::setenv("XDG_STATE_HOME", "/xdg/state", 1);
  ::setenv("HOME", "/home/u", 1);
  CHECK(broker::session::default_log_dir() == fs::path("/xdg/state/broker/sessions"));
  ::setenv("XDG_STATE_HOME", "relative", 1);
  CHECK(broker::session::default_log_dir() == fs::path("/home/u/.local/state/broker/sessions"));
  ::unsetenv("XDG_STATE_HOME");
  CHECK(broker::session::default_log_dir() == fs::path("/home/u/.local/state/broker/sessions"));
  ::unsetenv("HOME");
  CHECK(broker::session::default_log_dir().empty());
}

TEST_CASE("new_session_id is random and well-formed", "[log_reader]") {
  auto well_formed = [](const std::string& id) {
    return id.size() == 10 && id.starts_with("s-") &&
           id.find_first_not_of("0123456789abcdef", 2) == std::string::npos;
  };
  auto a = broker::session::new_session_id();
  auto b = broker::session::new_session_id();
  CHECK(well_formed(a));
  CHECK(well_formed(b));
  CHECK(a != b);
}

namespace {

// A rotated session: start, 12 requests, end, ~3 records a file. Returns replica local's files.
std::vector<fs::path> rotated_session(const fs::path& dir, const std::string& id) {
  audit_log_options options;
  options.rotation.max_bytes = 800;
  auto log = audit_log::open(dir, id, options);
  REQUIRE(log->write({{"event", "session_start"}}));
  for (int i = 0; i < 12; ++i) {
    REQUIRE(log->write({{"event", "request"},
                        {"method", "GET"},
                        {"host", "example.com"},
                        {"path", "/" + std::to_string(i)},
                        {"decision", i == 3 ? "deny" : "allow"},
                        {"bytes_in", 10}}));
  }
  REQUIRE(log->write({{"event", "session_end"}, {"exit", 0}}));
  std::vector<fs::path> files;
  const auto replicas = session_files(dir, id);
  for (const auto& f : replicas.at(0).files) files.push_back(f.path);
  REQUIRE(files.size() >= 4);
  return files;
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("verify_replica checks one chain across files", "[log_reader]") {
  temp_dir tmp;
  const auto files = rotated_session(tmp.path, "s-rot");
  auto verify = [&] { return verify_replica(session_files(tmp.path, "s-rot").at(0)); };
  auto expect_bad = [&](const fs::path& file, std::size_t line, const std::string& error) {
    const auto result = verify();
    INFO(result.error);
    CHECK_FALSE(result.ok);
    CHECK(result.bad_file == file);
    CHECK(result.bad_line == line);
    CHECK(result.error.find(error) != std::string::npos);
  };

  SECTION("intact") {
    const auto result = verify();
    CHECK(result.ok);
    CHECK(result.records == 14);
    CHECK(result.files == files.size());
    CHECK(result.has_end);
  }
  SECTION("a deleted middle file is named") {
    fs::remove(files[1]);
    expect_bad(files[1], 0, "file missing");
  }
  SECTION("a deleted first file is named") {
    fs::remove(files[0]);
    expect_bad(files[0], 0, "file missing");
  }
  SECTION("an edited line is named by file and line") {
    std::string text = read_file(files[2]);
    const auto at = text.find("\"GET\"");
    REQUIRE(at != std::string::npos);
    text.replace(at, 5, "\"PUT\"");
    write_file(files[2], text);
    const std::size_t line = std::count(text.begin(), text.begin() + at, '\n') + 1;
    expect_bad(files[2], line, "hash mismatch");
  }
  SECTION("a middle file cut mid-record is named, and not taken for a cut") {
    std::string text = read_file(files[1]);
    write_file(files[1], text.substr(0, text.size() - 30));
    expect_bad(files[1], std::count(text.begin(), text.end(), '\n'), "a newer file follows it");
    CHECK_FALSE(verify().truncated);
  }
  SECTION("the newest file cut mid-record is truncated") {
    std::string text = read_file(files.back());
    write_file(files.back(), text.substr(0, text.size() - 30));
    const std::size_t lines = std::count(text.begin(), text.end(), '\n');
    expect_bad(files.back(), lines, "partial");
    const auto result = verify();
    CHECK(result.truncated);
    CHECK(result.records == 13);
  }
  SECTION("a middle file cut at a record boundary names the next file and the one before") {
    std::string text = read_file(files[1]);
    text.pop_back();
    write_file(files[1], text.substr(0, text.rfind('\n') + 1));
    expect_bad(files[2], 1, files[1].filename().string());
  }
  SECTION("a middle file emptied") {
    write_file(files[1], "");
    expect_bad(files[1], 0, "empty file");
  }
  SECTION("the newest file removed leaves an intact chain without its end") {
    fs::remove(files.back());
    const auto result = verify();
    CHECK(result.ok);
    CHECK_FALSE(result.has_end);
  }
}

TEST_CASE("sessions of both layouts are listed, a session's replicas combined", "[log_reader]") {
  temp_dir tmp;
  written_session(tmp.path, "s-flat");
  rotated_session(tmp.path, "s-rot");
  // Two replicas of one session: one ended, one still running.
  for (const std::string replica : {"gw-a", "gw-b"}) {
    audit_log_options options;
    options.replica = replica;
    auto log = audit_log::open(tmp.path, "s-team", options);
    REQUIRE(log->write({{"event", "session_start"}}));
    REQUIRE(log->write({{"event", "request"}, {"decision", "allow"}, {"bytes_out", 5}}));
    if (replica == "gw-a") REQUIRE(log->write({{"event", "session_end"}, {"exit", 0}}));
  }
  fs::create_directory(tmp.path / "unrelated");
  write_file(tmp.path / "unrelated" / "notes.txt", "x");

  const auto sessions = broker::session::list_sessions(tmp.path);
  std::vector<std::string> ids;
  for (const auto& s : sessions) ids.push_back(s.id);
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::string>{"s-flat", "s-rot", "s-team"});

  const auto rot = broker::session::summarize_session(tmp.path, "s-rot");
  CHECK(rot.requests == 12);
  CHECK(rot.denied == 1);
  CHECK(rot.bytes == 120);
  CHECK(rot.exit_code == 0);
  CHECK_FALSE(rot.end.empty());

  auto team = broker::session::summarize_session(tmp.path, "s-team");
  CHECK(team.requests == 2);
  CHECK(team.bytes == 10);
  CHECK(team.end.empty());  // gw-b is still running
  {
    audit_log_options options;
    options.replica = "gw-b";
    REQUIRE(audit_log::open(tmp.path, "s-team", options)->write({{"event", "session_end"}}));
  }
  team = broker::session::summarize_session(tmp.path, "s-team");
  CHECK_FALSE(team.end.empty());
  CHECK(team.start <= team.end);

  const auto found = broker::session::find_log(tmp.path, "s-team");
  REQUIRE(found);
  CHECK(found->session == "s-team");
  CHECK_FALSE(found->single_file());
  REQUIRE(found->files.size() == 2);
  CHECK(found->files[0].replica == "gw-a");
}

TEST_CASE("format_record shows the gateway's admin records", "[log_reader]") {
  broker::session::admin_action refused;
  refused.decision = "deny";
  refused.status = 401;
  refused.method = "GET";
  refused.path = "/api/asks";
  refused.peer = "127.0.0.1:5000";
  refused.reason = "no Authorization field";
  auto line = format_record(broker::session::admin_record(refused));
  CHECK(line.find("admin    deny  GET  401") != std::string::npos);
  CHECK(line.find("path=/api/asks  peer=127.0.0.1:5000  reason=no Authorization field") !=
        std::string::npos);
  CHECK(line.find("who=") == std::string::npos);
  broker::session::admin_action made;
  made.decision = "token_create";
  made.who = "uid 0";
  made.token_id = "a-1";
  made.token_name = "ana";
  line = format_record(broker::session::admin_record(made));
  CHECK(line.find("token_create") != std::string::npos);
  CHECK(line.find("who=uid 0  token=a-1  name=ana") != std::string::npos);
}
