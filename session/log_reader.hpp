// Reading audit logs back: hash-chain verification, human formatting, session summaries.
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace broker::session {

struct verify_result {
  bool ok = false;                      // every record parses, chains and is in seq order
  std::size_t records = 0;              // records checked (up to the first bad one)
  std::size_t bad_line = 0;             // 1-based line of the first bad record, 0 when ok
  std::string error;                    // what is wrong there ("hash mismatch", "prev does not...")
  bool has_end = false;                 // the last record is session_end (else: running or cut)
};
verify_result verify_log(std::istream& in);

// One line for people: "20:15:06.053  request  GET https://api.github.com/x  200  512B>  20311B<  41.2ms  allow allow[0]"
// (exact layout is ours; it must show event, decision, method, URL/host, status, rule, error code).
std::string format_record(const nlohmann::json& record);

struct session_summary {
  std::string id;
  std::string start;                    // ts of session_start, "" when missing
  std::string end;                      // ts of session_end, "" while running / cut
  std::uint64_t requests = 0;           // request/tunnel/refusal records
  std::uint64_t denied = 0;             // of those, decision != "allow"
  std::optional<int> exit_code;         // from session_end's "exit", when present
};
session_summary summarize_log(const std::filesystem::path& file);

// Every <dir>/*.jsonl, oldest start first.
std::vector<session_summary> list_sessions(const std::filesystem::path& dir);

// Default log dir: $XDG_STATE_HOME/broker/sessions, else $HOME/.local/state/broker/sessions.
std::filesystem::path default_log_dir();

// Resolves `broker log`'s argument: empty -> the newest session in dir; an existing file path ->
// itself; otherwise a session id -> <dir>/<id>.jsonl. nullopt when nothing is found.
std::optional<std::filesystem::path> find_log(const std::filesystem::path& dir, const std::string& arg);

// A fresh random session id: "s-" + 8 lower-case hex digits.
std::string new_session_id();

}  // namespace broker::session
