// Reading audit logs back: hash-chain verification, human formatting, session summaries.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "session/audit_files.hpp"

namespace broker::session {

struct verify_result {
  bool ok = false;           // every record parses, chains, is in seq order, signatures hold
  std::size_t records = 0;   // records checked (up to the first bad one)
  std::size_t bad_line = 0;  // 1-based line of the first bad record, 0 when ok or not a line's
  std::string error;         // what is wrong there ("hash mismatch", "prev does not...")
  bool has_end = false;      // the last record is session_end (else: running or cut)
  // The bad line is the last one and has no newline: the writer was stopped in the middle of it
  // (killed, the machine stopped, the disk full), a cut rather than an edit (docs/audit-log.md).
  // Every record before it verified. Only ever at the end of the newest file of a replica.
  bool truncated = false;
  std::string signer;  // the last record's signature's key (hex), "" when it has none
  // verify_replica only: the file the problem is in (or the missing one), and files checked.
  std::filesystem::path bad_file;
  std::size_t files = 0;
};
// Records must start at seq 1 with prev = 64 zeros and end with a newline (a last line without
// one is a cut: truncated); the first record that does not parse, chain or follow in order, or
// whose "signature" (docs/audit-log.md) does not sign its chain head with the key it names, stops
// the check. Whether that key is the right one is the caller's to decide.
verify_result verify_log(std::istream& in);

// One replica's chain across its files, in generation order, as verify_log checks one stream:
// seq and prev continue from each file's last record into the next file's first. Also a gap in
// the generations (a removed file, named in bad_file) and an empty file that is not the newest.
// bad_line is the line within bad_file. A partial last line is a cut (truncated) only in the
// newest file: in an older one the writer went on after it, which it never does. Setting `stop`
// (from another thread) ends the check early, as a failure ("stopped before the end").
verify_result verify_replica(const replica_files& replica, const std::atomic<bool>* stop = nullptr);

// Field access that tolerates any JSON: a reader of a damaged or foreign log must not throw.
// null for a missing or null member (or a record that is no object).
const nlohmann::json* field(const nlohmann::json& record, const char* key);
// "" unless the member is a string.
std::string string_field(const nlohmann::json& record, const char* key);
// nullopt unless the member is an integer that fits.
std::optional<long long> integer_field(const nlohmann::json& record, const char* key);

// One line for people (exact layout is ours; it must show event, decision, method, URL/host,
// status, rule, error code). The time is ts's UTC HH:MM:SS.mmm; control bytes print as \xNN:
//   20:15:06.053  request  allow  GET https://api.github.com/x  200  512B> 20311B<  41.2ms
//       rule=allow[0]  credential=github  error=CODE                        (all on one line)
//   20:15:07.000  tunnel   allow  pinned.example.com:443  10B> 20B<  1500.0ms
//   20:15:00.000  session_start  version 0.1.0  listen 127.0.0.1:41234  policy a.json, b.json
//   20:16:00.000  session_end  requests=5  denied=1  exit=0
// Never throws, whatever the JSON holds.
std::string format_record(const nlohmann::json& record);

struct session_summary {
  std::string id;                // the session id (a file's name without .jsonl)
  std::string start;             // ts of session_start, "" when missing
  std::string end;               // ts of session_end, "" while running / cut
  std::uint64_t requests = 0;    // request/tunnel/refusal records
  std::uint64_t denied = 0;      // of those, decision "deny"
  std::uint64_t would_deny = 0;  // of those, allowed but an audit-only layer would have refused
  std::optional<int> exit_code;  // from session_end's "exit", when present
  // Spend: bytes and LLM tokens summed over the records (so a running session shows them too),
  // cost from session_end's usage (it needs the policy's prices).
  std::uint64_t bytes = 0;
  std::uint64_t llm_tokens = 0;
  std::optional<double> cost_usd;
};
session_summary summarize_log(const std::filesystem::path& file);

// A session across all its files (both layouts, every replica): each replica summarized over its
// files in order, then combined: the earliest start; ended (the latest end, and its exit) only
// when every replica's last start was followed by an end; counts, bytes, tokens and cost summed.
session_summary summarize_session(const std::filesystem::path& dir, const std::string& id);

// Every session in dir (session_ids), oldest start first (sessions without a session_start
// first; ties by id). Tolerant: lines that are not JSON objects are skipped, a missing dir gives
// an empty list.
std::vector<session_summary> list_sessions(const std::filesystem::path& dir);

// Default log dir: $XDG_STATE_HOME/broker/sessions, else $HOME/.local/state/broker/sessions.
// Relative values are ignored (XDG spec); empty when neither variable gives an absolute path.
std::filesystem::path default_log_dir();

// What `broker log` reads: a session's files, or one file named by path.
struct log_selection {
  std::string session;               // "" for a file named by path
  std::vector<replica_files> files;  // a path: one replica "" with that one file
  // The session's single <id>.jsonl, or a file named by path: shown and verified as one file.
  bool single_file() const;
};

// Resolves `broker log`'s argument: empty -> the newest session in dir (the last one
// list_sessions returns); an id without '/' that has files in dir -> that session; an existing
// non-directory path -> that file alone. nullopt when nothing is found.
std::optional<log_selection> find_log(const std::filesystem::path& dir, const std::string& arg);

// A fresh random session id: "s-" + 8 lower-case hex digits.
std::string new_session_id();

}  // namespace broker::session
