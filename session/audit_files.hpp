// Where a session's audit records live on disk (docs/audit-log.md, docs/gateway.md), shared by the
// writer and the readers. Two layouts:
//
//   <dir>/<session>.jsonl                         a session with neither rotation nor a replica
//   <dir>/<session>/<replica>.<generation>.jsonl  rotated and/or per-replica files
//
// In the second, every replica (a gateway process; "local" when none is named) writes its own
// chain, one file per generation: 000001, 000002, ... (at least six digits, compared as
// numbers). All files of one session are the single file plus the entries of one directory, so
// they are found in one step. A session's single file, when it has one, is generation 0 of
// replica "local": a session first run without rotation and then with it is still one chain.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace broker::session {

// The replica of a log opened without a replica name.
inline constexpr std::string_view local_replica = "local";

// A replica name becomes part of a file name: 1..64 of [A-Za-z0-9._-].
bool valid_replica_name(std::string_view name);
// Session names become file and directory names too: the same, and no leading dot.
bool valid_session_name(std::string_view name);

// <dir>/<session>.jsonl
std::filesystem::path single_log_path(const std::filesystem::path& dir, std::string_view session);

// <dir>/<session>/<replica>.<generation, 6+ digits>.jsonl
std::filesystem::path generation_log_path(const std::filesystem::path& dir,
                                          std::string_view session, std::string_view replica,
                                          std::uint64_t generation);

// "<replica>.<digits>.jsonl" -> {replica, generation}; nullopt for any other name (generation 0
// or an invalid replica included).
std::optional<std::pair<std::string, std::uint64_t>> parse_generation_name(std::string_view name);

struct audit_file {
  std::filesystem::path path;
  std::uint64_t generation = 0;  // 0: the session's single file (or a file named by path)
};

// One replica's files, oldest generation first.
struct replica_files {
  std::string replica;
  std::vector<audit_file> files;
};

// Every file of `session` in `dir`, both layouts, replicas in name order. Only regular files
// count; an empty list when the session has none.
std::vector<replica_files> session_files(const std::filesystem::path& dir,
                                         std::string_view session);

// "<path>: <what errno `err` says>", the reason a log file could not be made, read or written.
std::string errno_reason(const std::filesystem::path& path, int err);

// The last line of the regular file `path` of `size` bytes, without its newline (a log's newest
// record, which a writer continues the chain from), or nullopt with the reason in `error`: the
// file ends in a partial record, its last line is implausibly long, or it cannot be read.
std::optional<std::string> read_last_line(const std::filesystem::path& path, off_t size,
                                          std::string& error);

// The ts of a file's first record (every record starts {"ts":"2026-11-29T20:15:06.053Z"); nullopt
// when the file does not start that way.
std::optional<std::chrono::system_clock::time_point> first_record_time(
    const std::filesystem::path& path);

// The ids of every session in `dir` (a <id>.jsonl file, or an <id>/ directory holding at least
// one generation file), sorted, each once.
std::vector<std::string> session_ids(const std::filesystem::path& dir);

}  // namespace broker::session
